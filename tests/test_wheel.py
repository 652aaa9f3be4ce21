"""The built wheel stands on its own: installed without dependencies into a scratch folder (reusing this
environment's torch and the rest, nothing downloaded), with the checkout off the path, from an empty folder it
rebuilds the paper tables from a results folder, lists a shipped grid's runs by name, and trains 3 steps."""
from __future__ import annotations

import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from commbench.layout import CODE, DATA

from .conftest import REPO


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                            "-w", str(out / "dist"), str(REPO)], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = (out / "dist").glob("commbench-*.whl")
    install = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                              "--target", str(out / "site"), str(wheel)], capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stderr[-2000:]
    return out


def scratch(installed: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """``python -S``: no site folder is processed, so the editable install's import hook (a .pth file) never
    runs; the scratch folder and this environment's packages are the whole path."""
    env = {"PYTHONPATH": f"{installed / 'site'}:{sysconfig.get_paths()['purelib']}", "PATH": "/usr/bin:/bin",
           "HOME": str(cwd)}
    return subprocess.run([sys.executable, "-S", "-m", "commbench", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=600)


def test_the_wheel_holds_every_package_and_its_data(installed):
    (wheel,) = (installed / "dist").glob("commbench-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for package, folder in CODE.items():  # every folder with an __init__.py: none left out
        for init in (REPO / folder).rglob("__init__.py"):
            if "__pycache__" not in init.parts:
                rel = init.relative_to(REPO / folder)
                assert f"{package.replace('.', '/')}/{rel.as_posix()}" in names, init
    assert "commbench/grids/tour.yaml" in names and "commbench/grids/campaign/ssdsgd-table2.yaml" in names
    assert "commbench/grids/zoo/zoo-resnet20.yaml" in names
    for package, (folder, _) in DATA.items():
        for f in (REPO / folder).iterdir():
            if f.suffix in (".csv", ".yaml"):
                assert f"{package.replace('.', '/')}/{f.name}" in names, f


def test_the_wheel_carries_its_licence(installed):
    """PEP 639: the licence text in the wheel's .dist-info/licenses/, and its SPDX expression in the metadata (no
    licence classifier beside it: the two would have to agree)."""
    (wheel,) = (installed / "dist").glob("commbench-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        licences = [n for n in names if n.split("/")[0].endswith(".dist-info") and n.endswith("/licenses/LICENSE")]
        assert licences, [n for n in names if ".dist-info/" in n]
        assert archive.read(licences[0]).decode() == (REPO / "LICENSE").read_text()
        (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        headers = archive.read(metadata).decode().split("\n\n", 1)[0].splitlines()
    assert "License-Expression: BSD-3-Clause" in headers
    assert "License-File: LICENSE" in headers
    assert not [h for h in headers if h.startswith("Classifier: License ::")]


def test_the_installed_package_works_from_an_empty_folder(installed, tmp_path):
    probe = subprocess.run([sys.executable, "-S", "-c", "import commbench; print(commbench.__file__)"],
                           capture_output=True, text=True, cwd=tmp_path,
                           env={"PYTHONPATH": f"{installed / 'site'}:{sysconfig.get_paths()['purelib']}"})
    assert probe.stdout.strip().startswith(str(installed / "site")), probe.stdout + probe.stderr
    table = scratch(installed, "table", "--paper", "all", "--results", str(REPO / "results"), cwd=tmp_path)
    assert table.returncode == 0, table.stderr[-2000:]
    assert "Totals over" in table.stdout.splitlines()[-1]
    tour = scratch(installed, "sweep", "tour", "--dry-run", cwd=tmp_path)
    assert tour.returncode == 0 and tour.stdout.count("lenet-mnist_") == 6, tour.stderr[-2000:]
    run = scratch(installed, "run", "--task", "lenet-mnist", "--dataset", "synthetic", "--method", "baseline",
                  "--backend", "sim", "--steps", "3", "--results", str(tmp_path / "r"), "--quiet", cwd=tmp_path)
    assert run.returncode == 0 and ": done" in run.stdout, run.stderr[-2000:]
