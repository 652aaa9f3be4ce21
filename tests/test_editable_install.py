"""The checkout's editable install (the Makefile's): a module added under methods/, tasks/ or bench/ imports as
``commbench.methods.<new>`` (and the rest) at once, with no reinstall; the console script, ``python -m commbench``
and the dist workers see it.

On a copy of the checkout, never in it: the copy's code folders (bench/layout.py) and install files, installed by
the Makefile's own rule into a scratch venv whose dependencies are this environment's (a .pth file names its
site-packages: no dependency is downloaded, and this environment's own editable install is not loaded there).
Then files are added to the copy, and nothing is reinstalled."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import commbench
import commbench.methods
from commbench.layout import package_dirs

from .conftest import REPO

INSTALL_FILES = ("pyproject.toml", "setup.py", "README.md", "Makefile")
# a user's method in a module of its own, registered by naming the module in COMMBENCH_METHODS (methods/registry.py)
PROBE_METHOD = '''from commbench.methods.baseline import Baseline
from commbench.methods.registry import register


@register
class Probe(Baseline):
    name = "probe-added"
    summary = "a method added after the install"
'''


def env_without_make() -> dict[str, str]:
    """This process's environment less what would steer the child (a parent make's flags, PYTHONPATH)."""
    return {k: v for k, v in os.environ.items()
            if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}


def make(src: Path, venv: Path, *options: str) -> subprocess.CompletedProcess:
    """``make VENV/.installed`` in the copy, the venv ``venv``, built with this environment's interpreter."""
    target, python = f"{venv}/.installed", f"PYTHON={sys._base_executable}"
    return subprocess.run(["make", *options, target, f"VENV={venv}", python],
                          cwd=src, capture_output=True, text=True, timeout=600, env=env_without_make())


@pytest.fixture(scope="module")
def copy(tmp_path_factory) -> tuple[Path, Path]:
    """(the copy, its venv), installed by ``make VENV/.installed`` in the copy, then a module added to each code
    folder, and a method added and registered."""
    root = tmp_path_factory.mktemp("editable")
    src, venv = root / "src", root / "venv"
    src.mkdir()
    for f in INSTALL_FILES:
        shutil.copy2(REPO / f, src / f)
    for folder in package_dirs().values():
        shutil.copytree(REPO / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__"))
    # the venv beforehand, without pip, its dependencies this environment's; make's `python -m venv` keeps them
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    purelib = sysconfig.get_paths(vars={"base": str(venv), "platbase": str(venv)})["purelib"]
    (Path(purelib) / "_this_environments_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    made = make(src, venv)
    assert made.returncode == 0, made.stdout[-2000:] + made.stderr[-2000:]
    # added after the install
    (src / "methods" / "_probe_added.py").write_text("VALUE = 42\n")
    (src / "tasks" / "_probe_package").mkdir()
    (src / "tasks" / "_probe_package" / "__init__.py").write_text("VALUE = 43\n")
    (src / "bench" / "run" / "_probe_added.py").write_text("VALUE = 44\n")
    (src / "methods" / "_probe_method.py").write_text(PROBE_METHOD)
    return src, venv


def run(copy, *args: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
    src, venv = copy
    return subprocess.run([str(venv / "bin" / args[0]), *args[1:]], capture_output=True, text=True,
                          cwd=src.parent, timeout=timeout, env={**env_without_make(), **env})


def test_this_environment_imports_the_checkouts_folders():
    """The venv running the tests imports from the checkout's folders themselves, not from a tree of links made at
    install (strict mode's, whose folders hold only the files there were then)."""
    for module, folder in ((commbench, "bench"), (commbench.methods, "methods")):
        assert os.path.samefile(os.path.dirname(module.__file__), REPO / folder), module.__file__


def test_a_module_added_after_the_install_imports_at_once(copy):
    src, venv = copy
    probe = ("import commbench.methods._probe_added as m, commbench.tasks._probe_package as t, "
             "commbench.run._probe_added as b; print(m.VALUE, t.VALUE, b.VALUE, m.__file__)")
    imported = run(copy, "python", "-c", probe)
    assert imported.returncode == 0, imported.stderr[-2000:]
    assert imported.stdout.split() == ["42", "43", "44", str(src / "methods" / "_probe_added.py")]
    for command in (["commbench"], ["python", "-m", "commbench"]):  # the added method, registered: listed
        listed = run(copy, *command, "list", "methods", COMMBENCH_METHODS="commbench.methods._probe_method")
        assert listed.returncode == 0, listed.stderr[-2000:]
        assert "probe-added" in listed.stdout and "terngrad" in listed.stdout
    # and make has nothing to redo: new files are no reason to reinstall
    assert make(src, venv, "-q").returncode == 0


@pytest.mark.slow
def test_the_dist_workers_run_a_method_added_after_the_install(copy, tmp_path):
    trained = run(copy, "commbench", "run", "--task", "lenet-mnist", "--dataset", "synthetic", "--method",
                  "probe-added", "--workers", "2", "--backend", "dist", "--steps", "2", "--results", str(tmp_path),
                  "--quiet", timeout=300, COMMBENCH_METHODS="commbench.methods._probe_method")
    assert trained.returncode == 0 and ": done" in trained.stdout, trained.stderr[-2000:]
