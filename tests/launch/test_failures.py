"""Runs that go wrong: a worker dies, a worker raises, training diverges. Records say what happened."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ..helpers import alive, record_of
from ..conftest import REPO, commbench

TINY = ["run", "--task", "lenet-mnist", "--dataset", "synthetic", "--method", "baseline", "--workers", "2",
        "--quiet"]




def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def rank_of(pid: int) -> int:
    env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return int(next(e for e in env if e.startswith(b"RANK=")).split(b"=")[1])




def default_sigint() -> None:
    # A shell's background job inherits SIGINT ignored, and Python then never raises KeyboardInterrupt.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def long_runs():
    """Start 100K-step runs; whatever a test leaves running is killed with its workers."""
    started: list[subprocess.Popen] = []

    def start(out: Path, *extra: str) -> tuple[subprocess.Popen, list[str]]:
        proc, lines = start_long_run(out, *extra)
        started.append(proc)
        return proc, lines

    yield start
    for proc in started:
        if proc.poll() is None:
            for pid in children(proc.pid):
                os.kill(pid, signal.SIGKILL)
            proc.kill()
            proc.wait()


def start_long_run(out: Path, *extra: str) -> tuple[subprocess.Popen, list[str]]:
    proc = subprocess.Popen([sys.executable, "-m", "commbench", "run", "--task", "lenet-mnist", "--dataset",
                             "synthetic", "--method", "baseline", "--workers", "2", "--steps", "100000",
                             "--out", str(out), *extra], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=default_sigint)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True).start()
    deadline = time.monotonic() + 120
    while not any("steps" in ln for ln in lines):  # the first progress line: training is under way
        assert proc.poll() is None and time.monotonic() < deadline, lines
        time.sleep(0.2)
    return proc, lines


def test_sigkilled_worker_fails_the_run_and_leaves_no_process(tmp_path, long_runs):
    proc, _ = long_runs(tmp_path)
    workers = children(proc.pid)
    assert len(workers) == 2
    victim = next(p for p in workers if rank_of(p) == 1)
    killed_at = time.monotonic()
    os.kill(victim, signal.SIGKILL)
    assert proc.wait(timeout=60) == 1
    assert time.monotonic() - killed_at < 60
    rec = record_of(tmp_path)
    assert rec["status"] == "failed" and "worker 1 was killed by SIGKILL" in rec["error"]
    assert not any(alive(p) for p in workers)


def test_sigkilled_parameter_server_fails_the_run_and_leaves_no_process(tmp_path, long_runs):
    proc, _ = long_runs(tmp_path, "--method", "ssdsgd", "--set", "method.warmup=5", "--set", "method.k=3")
    processes = children(proc.pid)
    assert len(processes) == 3  # 2 workers + 1 server
    victim = next(p for p in processes if rank_of(p) == 2)
    os.kill(victim, signal.SIGKILL)
    assert proc.wait(timeout=60) == 1
    rec = record_of(tmp_path)
    assert rec["status"] == "failed" and "server 0 was killed by SIGKILL" in rec["error"]
    assert not any(alive(p) for p in processes)


def test_killed_launcher_takes_its_workers_with_it(tmp_path, long_runs):
    proc, _ = long_runs(tmp_path)
    workers = children(proc.pid)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    deadline = time.monotonic() + 30
    while any(alive(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(alive(p) for p in workers)


def test_worker_exception_is_the_records_error(tmp_path):
    proc = commbench(*TINY, "--steps", "50", "--set", "fail_at_step=5", "--out", str(tmp_path))
    assert proc.returncode == 1
    rec = record_of(tmp_path)
    assert rec["status"] == "failed"
    assert "worker 1 exited with code 1" in rec["error"] and "fail_at_step=5" in rec["error"]
    assert "\n" not in rec["error"]


def test_sim_exception_is_the_records_error(tmp_path):
    proc = commbench(*TINY, "--backend", "sim", "--steps", "50", "--set", "fail_at_step=5", "--out", str(tmp_path))
    assert proc.returncode == 1
    assert record_of(tmp_path)["error"].startswith("RuntimeError: fail_at_step=5")


def test_divergence_stops_early_with_status_diverged(tmp_path):
    proc = commbench(*TINY, "--backend", "sim", "--steps", "200", "--set", "lr_schedule.base_lr=1e12",
                     "--set", "lr_schedule.kind=fixed", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    rec = record_of(tmp_path)
    assert rec["status"] == "diverged"
    assert rec["metrics"]["steps"] < 200 and rec["metrics"]["top1"] is None


def test_diverging_ps_run_stops_its_servers_too(tmp_path):
    """The servers meet the workers on the control channel, so they stop at the same log point."""
    proc = commbench(*TINY, "--method", "ssdsgd", "--set", "method.warmup=3", "--set", "method.k=2",
                     "--steps", "200", "--set", "lr_schedule.base_lr=1e12", "--set", "lr_schedule.kind=fixed",
                     "--out", str(tmp_path), timeout=120)
    assert proc.returncode == 0, proc.stderr
    rec = record_of(tmp_path)
    assert rec["status"] == "diverged" and rec["metrics"]["steps"] < 200


def test_ctrl_c_leaves_a_failed_record_and_no_worker(tmp_path, long_runs):
    proc, _ = long_runs(tmp_path)
    workers = children(proc.pid)
    os.kill(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=60) == 130
    rec = record_of(tmp_path)
    assert rec["status"] == "failed" and rec["error"].startswith("interrupted (Ctrl-C) at step ")
    assert not any(alive(p) for p in workers)


def test_a_local_dist_run_on_nccl_with_more_processes_than_gpus_is_refused_before_any_process_starts(
        tmp_path, monkeypatch):
    """NCCL takes one GPU per process: two workers on a one-GPU host fail inside NCCL ("invalid usage", seen on
    an H100). The launcher says so first, and starts nothing."""
    import dataclasses

    import torch

    from commbench.config import resolve
    from commbench.launch import local
    from commbench.launch.preflight import GpusTooFew
    from commbench.run.devices import dist_backend

    cfg = resolve({"task": "lenet-mnist", "dataset": "synthetic", "method": "baseline", "workers": 2,
                   "backend": "dist", "steps": 2})
    assert dist_backend(cfg) == ("nccl" if torch.cuda.is_available() else "gloo")
    assert dist_backend(dataclasses.replace(cfg, device="cpu")) == "gloo"
    assert dist_backend(dataclasses.replace(cfg, device="cuda")) == "nccl"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(local.subprocess, "Popen", lambda *a, **k: pytest.fail("a process was started"))
    with pytest.raises(GpusTooFew, match=r"one GPU per process: 2 processes, 1 GPU\(s\)"):
        local.launch_local(cfg, tmp_path / "results" / "logs" / cfg.run_id)
    assert not (tmp_path / "results").exists()
