"""The installed import names: one package, ``commbench``, so that a user's own ``methods`` or ``tasks`` package
is theirs, and commbench (its CLI and the dist workers it starts) still works beside it."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

COMMBENCH = Path(sys.executable).with_name("commbench")


@pytest.fixture
def users_project(tmp_path) -> Path:
    """A folder as a user's experiment might look: their own packages named methods and tasks."""
    for name in ("methods", "tasks"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"WHO = 'the user\\'s {name}'\n")
    return tmp_path


def test_only_commbench_is_installed_as_an_import_name(tmp_path):
    probe = ("import importlib.util as u; print([n for n in ('commbench', 'bench', 'methods', 'tasks') "
             "if u.find_spec(n)])")
    found = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "['commbench']"


def test_a_users_methods_package_is_theirs_and_commbench_still_runs(users_project):
    mine = subprocess.run([sys.executable, "-c", "import methods, tasks; print(methods.WHO, '|', tasks.WHO)"],
                          cwd=users_project, capture_output=True, text=True, check=True)
    assert mine.stdout.strip() == "the user's methods | the user's tasks"
    listed = subprocess.run([str(COMMBENCH), "list", "methods"], cwd=users_project, capture_output=True, text=True)
    assert listed.returncode == 0 and "terngrad" in listed.stdout, listed.stderr
    # a real dist run from that folder: its worker processes start with the folder on sys.path
    out = users_project / "out"
    run = subprocess.run([sys.executable, "-m", "commbench", "run", "--task", "lenet-mnist", "--dataset", "synthetic",
                          "--method", "terngrad", "--workers", "2", "--backend", "dist", "--steps", "3",
                          "--out", str(out)], cwd=users_project, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    (record,) = (out / "runs").glob("*.json")
    assert json.loads(record.read_text())["status"] == "done"
