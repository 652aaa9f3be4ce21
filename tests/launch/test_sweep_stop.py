"""A checkpoint signal (SIGUSR1, what ``make campaign-stop`` sends) stops a local sweep after its current run,
whenever it comes: while a dist run's processes are still starting, or during a run that ends some other way."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ..conftest import REPO


def children_running(parent: int, module: str) -> list[int]:
    """The pids of ``parent``'s child processes whose command line names ``module``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        ppid = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("PPid:"))
        if ppid == parent and module.encode() in cmdline:
            found.append(int(entry.name))
    return found


def test_a_signal_while_dist_processes_start_interrupts_the_run_and_stops_the_sweep(tmp_path):
    """SIGUSR1 ends a process that has no handler for it yet: passed on to a worker still importing, it once
    killed worker 0 (a failed run) and the sweep went on with its next runs. Now the workers start with the
    signal held, take it once their handler is in, and checkpoint; the sweep stops."""
    grid = tmp_path / "grid.yaml"
    grid.write_text("name: stop\nbase: {task: lenet-mnist, method: baseline, dataset: synthetic, backend: dist,\n"
                    "       workers: 2, steps: 300, global_batch: 16, eval.every: 300}\naxes: {seed: [1, 2]}\n")
    # 300 steps: the run stops at its first agreement after the signal (every 10 steps); on a loaded machine the
    # signal may reach the workers late, and a 30-step run had ended (done) past its last agreement
    out = tmp_path / "out"
    sweep = subprocess.Popen([sys.executable, "-m", "commbench", "sweep", str(grid), "--out", str(out), "--quiet"],
                             cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not children_running(sweep.pid, "commbench.run.worker"):
            assert sweep.poll() is None and time.monotonic() < deadline, "no worker process ever started"
            time.sleep(0.01)
        sweep.send_signal(signal.SIGUSR1)  # the workers are importing torch: seconds before any handler
        stdout, stderr = sweep.communicate(timeout=300)
    finally:
        sweep.kill()
    assert sweep.returncode == 75, stderr  # interrupted, resumable: neither failed (1) nor went on
    records = [json.loads(p.read_text()) for p in (out / "runs").glob("*.json")]
    assert len(records) == 1, [r["status"] for r in records]  # the second run never started
    [stopped] = records
    assert stopped["status"] == "interrupted" and "stopped by SIGUSR1 at step" in stopped["error"], stopped["error"]
    assert (out / "checkpoints" / stopped["run_id"] / "latest.json").exists()  # the same command resumes it
    # (a dist run resumed from its checkpoint computes what an uninterrupted one does: tests/run/test_checkpoint.py)


def test_a_signal_during_a_run_that_fails_stops_the_sweep_before_its_next_run(tmp_path, monkeypatch, capsys):
    """Whatever the run's outcome, a stop signal that reached the sweep during it stops the sweep."""
    from commbench.config.grid import expand, load_grid
    from commbench.launch import runner
    from commbench.launch.sweep import run_local_sweep

    grid = tmp_path / "three.yaml"
    grid.write_text("name: three\nbase: {task: lenet-mnist, dataset: synthetic, backend: sim, tier: smoke}\n"
                    "axes: {method: [baseline], seed: [1, 2, 3]}\n")
    runs = expand(load_grid(grid))
    started, handler_before = [], signal.getsignal(signal.SIGUSR1)

    def fails_after_a_signal(cfg, out, show_progress):
        started.append(cfg.run_id)
        os.kill(os.getpid(), signal.SIGUSR1)  # reaches the sweep's handler, as `make campaign-stop` would
        return runner.RunResult({"status": "failed", "error": "WorkerFailed: worker 0 was killed", "env": {},
                                 "metrics": {}}, None)

    monkeypatch.setattr(runner, "execute", fails_after_a_signal)
    monkeypatch.setattr(runner, "summary", lambda cfg, record: f"{cfg.run_id} failed")
    assert run_local_sweep(runs, tmp_path / "out", show_progress=False) == 75
    assert started == [runs[0].run_id]
    assert "sweep stopped by a checkpoint signal (SIGUSR1) before its next run" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGUSR1) == handler_before  # the sweep's handler is gone with it
