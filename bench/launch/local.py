"""Start the N worker processes (and S parameter servers) of a dist run on this machine and watch them.

Ranks 0..N-1 are the workers, N..N+S-1 the servers. If any process dies (an exception, a signal, SIGKILL from outside), the rest are killed at once rather than
left blocked in a collective until gloo's timeout, and the run fails with the first worker's reason.
With ``--net RATE`` every process runs in its own network namespace of an emulated network (:mod:`.netns`).
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

from commbench.store.safe_io import ensure_folder, open_new, tail_lines
from commbench.config import RunConfig
from commbench.run.checkpoint import STOP_SIGNALS, on_stop_signal, stop_signals_held
from commbench.run.devices import dist_backend
from commbench.run.train import Outcome, server_count
from commbench.methods.comm.dist import free_port
from commbench.run.worker import LAUNCHER_ENV
from commbench.launch import owner


RUN_DIR_PREFIX = "commbench-"  # the launcher's temporary folder of a run: its config, progress and result
OWNER_FILE = "launcher.json"  # who made the folder (pid and start time): a folder whose owner died is stale


class WorkerFailed(RuntimeError):
    pass


def remove_stale_run_dirs(tmp: Path | None = None) -> list[Path]:
    """Remove the temporary run folders whose launcher died without removing them (SIGKILL). A folder without
    an owner file, or whose owner lives, is left alone. Returns the folders removed."""
    removed = []
    for folder in sorted(Path(tmp or tempfile.gettempdir()).glob(f"{RUN_DIR_PREFIX}*")):
        try:
            who = json.loads((folder / OWNER_FILE).read_text())
            pid, started = int(who["pid"]), who.get("pid_started")
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if not owner.alive(pid, started):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def _last_line(log: Path) -> str:
    lines = tail_lines(log)  # a worker's log may be long: its end says why it stopped
    return lines[-1] if lines else ""


def _describe(who: str, code: int, log: Path) -> str:
    if code < 0:
        return f"{who} was killed by {signal.Signals(-code).name}"
    return f"{who} exited with code {code}: {_last_line(log) or 'no message'} (log: {log})"


class GpusTooFew(RuntimeError):
    """A local dist run on NCCL with more processes than the host has GPUs."""


def launch_local(cfg: RunConfig, log_dir: Path, report: Callable[[int, int, float], None] | None = None,
                 save_weights: bool = False, poll_s: float = 0.1,
                 checkpoint_dir: Path | None = None) -> tuple[Outcome, dict]:
    """Run ``cfg`` as ``cfg.workers`` (+ servers) local processes. Returns (outcome, {world_size, dist_backend}).
    A stop signal (SIGUSR1/2) to this process is passed on to every one of them.

    With ``cfg.net`` (a link rate) every process runs in its own network namespace of an emulated network
    (:mod:`.netns`), built before they start and torn down after they end, and the outcome's metrics get
    ``wire_bytes_measured`` (what it counts: :meth:`.netns.Network.wire_bytes`)."""
    total = cfg.workers + server_count(cfg)
    if dist_backend(cfg) == "nccl":
        import torch

        if total > torch.cuda.device_count():  # NCCL refuses two processes on one GPU ("invalid usage")
            raise GpusTooFew(f"dist on NCCL takes one GPU per process: {total} processes, "
                             f"{torch.cuda.device_count()} GPU(s) on this host; run the workers in one process "
                             f"(--backend sim) or on gloo (--set device=cpu)")
    remove_stale_run_dirs()
    results = log_dir.parent.parent  # ROOT/logs/<run_id>: nothing below ROOT is written through a link
    ensure_folder(log_dir, results)
    with contextlib.ExitStack() as stack:
        run = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=RUN_DIR_PREFIX)))
        (run / OWNER_FILE).write_text(json.dumps(owner.me()))
        net = None
        if cfg.net:
            from commbench.launch.netns import emulated_network

            net = stack.enter_context(emulated_network(total, cfg.net))
        (run / "config.json").write_text(json.dumps({
            "config": cfg.to_dict(), "save_weights": save_weights,
            "checkpoint_dir": str(checkpoint_dir.resolve()) if checkpoint_dir else None}))
        # LOCAL_WORLD_SIZE counts the workers only: it sets each worker's share of the cores, which must be
        # what a sim run of the same configuration uses (servers do elementwise sums and need little).
        base_env = {**os.environ, "MASTER_ADDR": net.address(0) if net else "127.0.0.1",
                    "MASTER_PORT": str(free_port()), "WORLD_SIZE": str(total), "LOCAL_WORLD_SIZE": str(cfg.workers),
                    "COMMBENCH_WORKER": "1", LAUNCHER_ENV: str(os.getpid())}
        if net:
            # Every byte between processes must cross the emulated links: gloo and NCCL bind the namespace's
            # link (not whatever the host name resolves to), and NCCL may not take its shared-memory or
            # GPU-to-GPU shortcuts between processes of one host.
            base_env.update(GLOO_SOCKET_IFNAME=net.interface, NCCL_SOCKET_IFNAME=net.interface,
                            NCCL_SHM_DISABLE="1", NCCL_P2P_DISABLE="1", NCCL_IB_DISABLE="1")
        names = [f"worker {r}" for r in range(cfg.workers)] + [f"server {s}" for s in range(total - cfg.workers)]
        procs, logs = [], []
        wire_before = net.wire_bytes(range(cfg.workers)) if net else None
        try:
            # The processes start with the stop signals held (they take them once their handler is in), and
            # one that reaches this process while they start is passed on once they all exist.
            with _forward_stop_signals(procs):
                with stop_signals_held():
                    for rank in range(total):
                        log = log_dir / (f"rank{rank}.log" if rank < cfg.workers
                                         else f"server{rank - cfg.workers}.log")
                        logs.append(log)
                        command = [sys.executable, "-m", "commbench.run.worker", str(run)]
                        with open_new(log, results) as fh:
                            procs.append(subprocess.Popen(
                                net.exec_prefix(rank) + command if net else command, stdout=fh,
                                stderr=subprocess.STDOUT, env={**base_env, "RANK": str(rank), "LOCAL_RANK": str(rank)}))
                _watch(procs, logs, names, run, report, poll_s)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
            for p in procs:
                p.wait()
        result = json.loads((run / "result.json").read_text())
        if net:
            # A resumed run's ledger counts every attempt since step 0, the links only this one: not comparable.
            measured = net.wire_bytes(range(cfg.workers)) - wire_before
            result["metrics"]["wire_bytes_measured"] = None if result.get("resumed_at") else measured
        weights = None
        if save_weights and (run / "weights.pt").exists():
            import torch

            weights = torch.load(run / "weights.pt", weights_only=True)
    outcome = Outcome(result["status"], result["metrics"], result["history"], result["data"], weights,
                      result.get("stopped_by"), result.get("resumed_at", []), result.get("devices", []))
    return outcome, {"world_size": result["world_size"], "dist_backend": result["dist_backend"]}


@contextlib.contextmanager
def _forward_stop_signals(procs):
    """A stop signal to this process goes on to each of ``procs``, and is noted here too (a sweep stops after
    this run whatever its outcome)."""
    def forward(signum, _frame):
        on_stop_signal(signum)
        for p in procs:
            if p.poll() is None:
                p.send_signal(signum)

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, forward) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _watch(procs, logs, names, run: Path, report, poll_s: float) -> None:
    seen = -1
    while True:
        codes = [p.poll() for p in procs]
        if report is not None:
            try:
                progress = json.loads((run / "progress.json").read_text())
                if progress["done"] != seen:
                    seen = progress["done"]
                    report(progress["done"], progress["total"], progress["loss"])
            except (OSError, ValueError, KeyError):
                pass
        failed = [(r, c) for r, c in enumerate(codes) if c not in (None, 0)]
        if failed:
            # A worker killed by a signal is the cause; the others' connection errors are its echo.
            rank, code = min(failed, key=lambda rc: (rc[1] >= 0, rc[0]))
            for p in procs:
                if p.poll() is None:
                    p.kill()
            raise WorkerFailed(_describe(names[rank], code, logs[rank]))
        if all(c == 0 for c in codes):
            if not (run / "result.json").exists():
                raise WorkerFailed("all workers exited but worker 0 left no result")
            return
        time.sleep(poll_s)
