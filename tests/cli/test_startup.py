"""The command line starts at once: ``--help`` and a subcommand's ``--help`` import neither torch nor numpy nor
pandas, and ``status`` of a folder of finished runs no torch (torch alone takes seconds to import). Each command
that needs them imports them when it runs (issue 72). Checked in a fresh interpreter with ``-X importtime``, which
lists every module imported."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import REPO

HEAVY = ("torch", "numpy", "pandas")


def imported(*args: str, cwd: Path = REPO) -> tuple[subprocess.CompletedProcess, set[str]]:
    """The command's result and the names of every module its interpreter imported."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "commbench", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120)
    modules = set()
    for line in proc.stderr.splitlines():  # "import time: self [us] | cumulative | name", indented by depth
        if line.startswith("import time:") and line.count("|") == 2:
            modules.add(line.rsplit("|", 1)[1].strip())
    assert "commbench.cli" in modules, proc.stderr[-2000:]  # the listing was read: the check below means something
    return proc, modules


def heavy_in(modules: set[str]) -> list[str]:
    """The heavy packages among ``modules`` (torch, numpy, pandas), by their top-level names."""
    return sorted({m.split(".")[0] for m in modules} & set(HEAVY))


def subcommands() -> list[str]:
    """The subcommands as the parser declares them (building it imports no torch either: see the first test)."""
    from commbench.cli import build_parser

    (action,) = [a for a in build_parser()._actions if a.dest == "command"]
    return list(action.choices)


def test_help_imports_no_torch_and_lists_every_subcommand():
    proc, modules = imported("--help")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not heavy_in(modules), f"commbench --help imported {heavy_in(modules)}"
    names = subcommands()
    assert {"run", "sweep", "status", "table", "model", "list"} <= set(names)
    for name in names:
        assert name in proc.stdout, f"{name} missing from the help:\n{proc.stdout}"


@pytest.mark.parametrize("command", [["status", "--help"], ["run", "--help"], ["model", "terngrad", "--help"]])
def test_a_subcommands_help_imports_no_torch(command):
    proc, modules = imported(*command)
    assert proc.returncode == 0 and "usage: commbench" in proc.stdout, proc.stderr[-2000:]
    assert not heavy_in(modules), f"commbench {' '.join(command)} imported {heavy_in(modules)}"


def test_status_of_finished_runs_imports_no_torch(tmp_path):
    """A folder of done records: status reads JSON and needs no torch (only a run still to train asks what this
    machine trains on, and only a checkpoint's step needs the checkpoint code). pandas, and numpy under it, may
    serve the reading of the records: a fraction of torch's cost."""
    records = sorted((REPO / "results" / "campaign" / "runs").glob("lenet-mnist_*.json"))[:3]
    assert records, "no committed campaign records to read"
    (tmp_path / "runs").mkdir()
    for record in records:
        shutil.copy(record, tmp_path / "runs" / record.name)
    proc, modules = imported("status", "--results", str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sum(line.startswith("done ") for line in proc.stdout.splitlines()) == len(records), proc.stdout
    assert "torch" not in heavy_in(modules), f"commbench status imported {heavy_in(modules)}"
