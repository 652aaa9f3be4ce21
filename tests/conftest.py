from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from commbench.tasks.data import provision_fashion_mnist

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def data_root(tmp_path_factory) -> Path:
    """Fashion-MNIST provisioned once from Debian's package into a private root."""
    root = tmp_path_factory.mktemp("data")
    provision_fashion_mnist(root)
    return root


def commbench(*args: str, cwd: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """The real command line, in a child process: exit codes and stderr as a user sees them."""
    return subprocess.run([sys.executable, "-m", "commbench", *args], capture_output=True, text=True,
                          cwd=cwd or REPO, timeout=timeout)


def execute_and_load(cfg, out: Path) -> tuple[dict, dict]:
    """Run ``cfg`` in this process into ``out`` with its weights saved: its record (done) and its weights."""
    import torch

    from commbench.launch.runner import execute

    record = execute(cfg, out, save_weights=True, show_progress=False).record
    assert record["status"] == "done", record["error"]
    return record, torch.load(out / "weights" / f"{record['run_id']}.pt")


def run_and_load(*args: str) -> tuple[dict, dict]:
    """``commbench run ARGS --save-weights``: its record and its weights. A dist run goes through the real
    command line (launcher and worker processes); a sim run is the same command resolved and executed in this
    process. The tests that call this compare what the transports compute, and a child process would add only
    its start (some 5 s of imports) to each sim run: the command line's own behaviour has its own tests."""
    import json

    import torch

    from commbench.cli import build_parser, run_settings
    from commbench.config import resolve

    args = (*args, "--save-weights", "--quiet")
    parsed = build_parser().parse_args(["run", *args])
    cfg, out = resolve(run_settings(parsed)), Path(parsed.results)
    if cfg.backend != "dist":
        return execute_and_load(cfg, out)
    proc = commbench("run", *args)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split(":")[0].strip() == cfg.run_id
    record = json.loads((out / "runs" / f"{cfg.run_id}.json").read_text())
    return record, torch.load(out / "weights" / f"{cfg.run_id}.pt")
