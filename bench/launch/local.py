"""Start the N worker processes (and S parameter servers) of a dist run on this machine and watch them.

Ranks 0..N-1 are the workers, N..N+S-1 the servers. If any process dies (an exception, a signal, SIGKILL from
outside), the rest are killed at once rather than left blocked in a collective until gloo's timeout, and the run
fails with the first worker's reason.
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

from commbench.store.results_folder import ResultsFolder
from commbench.store.safe_io import ensure_folder, open_new, tail_lines
from commbench.config import RunConfig
from commbench.run.checkpoint import STOP_SIGNALS, on_stop_signal, stop_signals_held
from commbench.config.resolve import server_count
from commbench.run.train import Outcome
from commbench.methods.comm.dist import free_port
from commbench.run.worker import LAUNCHER_ENV
from commbench.launch import owner
from commbench.launch.preflight import check_gpus


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


def launch_local(cfg: RunConfig, log_dir: Path, report: Callable[[int, int, float], None] | None = None,
                 save_weights: bool = False, poll_s: float = 0.1,
                 checkpoint_dir: Path | None = None) -> tuple[Outcome, dict]:
    """Run ``cfg`` as ``cfg.workers`` (+ servers) local processes. Returns (outcome, {world_size, dist_backend}).
    A stop signal (SIGUSR1/2) to this process is passed on to every one of them.

    With ``cfg.net`` (a link rate) every process runs in its own network namespace of an emulated network
    (:mod:`.netns`), built before they start and torn down after they end, and the outcome's metrics get
    ``wire_bytes_measured`` (what it counts: :meth:`.netns.Network.wire_bytes`)."""
    check_gpus(cfg)  # the preflight refused such a run already; this guards callers that come here directly
    total = cfg.workers + server_count(cfg)
    remove_stale_run_dirs()
    ensure_folder(log_dir, _results_root(log_dir))
    with contextlib.ExitStack() as stack:
        run = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=RUN_DIR_PREFIX)))
        (run / OWNER_FILE).write_text(json.dumps(owner.me()))
        net = None
        if cfg.net:
            from commbench.launch.netns import emulated_network

            net = stack.enter_context(emulated_network(total, cfg.net))
        _write_run_spec(run, cfg, save_weights, checkpoint_dir)
        wire_before = net.wire_bytes(range(cfg.workers)) if net else None
        _run_processes(cfg, run, log_dir, _process_env(cfg, total, net), net, report, poll_s)
        result = json.loads((run / "result.json").read_text())
        if net:
            # A resumed run's ledger counts every attempt since step 0, the links only this one: not comparable.
            measured = net.wire_bytes(range(cfg.workers)) - wire_before
            result["metrics"]["wire_bytes_measured"] = None if result.get("resumed_at") else measured
        weights = _saved_weights(run) if save_weights else None
    outcome = Outcome(result["status"], result["metrics"], result["history"], result["data"], weights,
                      result.get("stopped_by"), result.get("resumed_at", []), result.get("devices", []))
    return outcome, {"world_size": result["world_size"], "dist_backend": result["dist_backend"]}


def _results_root(log_dir: Path) -> Path:
    """ROOT of a run's ROOT/logs/<run_id>: nothing below it is written through a link."""
    return ResultsFolder.holding(log_dir).root


def _write_run_spec(run: Path, cfg: RunConfig, save_weights: bool, checkpoint_dir: Path | None) -> None:
    """What every process reads at its start (:mod:`commbench.run.worker`): the run and what to keep of it."""
    (run / "config.json").write_text(json.dumps({
        "config": cfg.to_dict(), "save_weights": save_weights,
        "checkpoint_dir": str(checkpoint_dir.resolve()) if checkpoint_dir else None}))


def _process_env(cfg: RunConfig, total: int, net) -> dict:
    """The environment the ``total`` processes share (each adds its RANK): where they meet, and how many."""
    # LOCAL_WORLD_SIZE counts the workers only: it sets each worker's share of the cores, which must be
    # what a sim run of the same configuration uses (servers do elementwise sums and need little).
    env = {**os.environ, "MASTER_ADDR": net.address(0) if net else "127.0.0.1",
           "MASTER_PORT": str(free_port()), "WORLD_SIZE": str(total), "LOCAL_WORLD_SIZE": str(cfg.workers),
           "COMMBENCH_WORKER": "1", LAUNCHER_ENV: str(os.getpid())}
    if net:
        # Every byte between processes must cross the emulated links: gloo and NCCL bind the namespace's
        # link (not whatever the host name resolves to), and NCCL may not take its shared-memory or
        # GPU-to-GPU shortcuts between processes of one host.
        env.update(GLOO_SOCKET_IFNAME=net.interface, NCCL_SOCKET_IFNAME=net.interface,
                   NCCL_SHM_DISABLE="1", NCCL_P2P_DISABLE="1", NCCL_IB_DISABLE="1")
    return env


def _run_processes(cfg: RunConfig, run: Path, log_dir: Path, env: dict, net, report, poll_s: float) -> None:
    """Start one process per rank, each writing its own log under ``log_dir``, and watch them to the end (or
    to the first failure); none of them outlives this call."""
    total = int(env["WORLD_SIZE"])
    names = [f"worker {r}" for r in range(cfg.workers)] + [f"server {s}" for s in range(total - cfg.workers)]
    logs = [log_dir / (f"rank{r}.log" if r < cfg.workers else f"server{r - cfg.workers}.log") for r in range(total)]
    command = [sys.executable, "-m", "commbench.run.worker", str(run)]
    procs = []
    try:
        # The processes start with the stop signals held (they take them once their handler is in), and
        # one that reaches this process while they start is passed on once they all exist.
        with _forward_stop_signals(procs):
            with stop_signals_held():
                for rank, log in enumerate(logs):
                    with open_new(log, _results_root(log_dir)) as fh:
                        procs.append(subprocess.Popen(
                            net.exec_prefix(rank) + command if net else command, stdout=fh,
                            stderr=subprocess.STDOUT, env={**env, "RANK": str(rank), "LOCAL_RANK": str(rank)}))
            _watch(procs, logs, names, run, report, poll_s)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        for p in procs:
            p.wait()


def _saved_weights(run: Path) -> dict | None:
    """Worker 0's final weights, where its process saved them."""
    if not (run / "weights.pt").exists():
        return None
    import torch

    return torch.load(run / "weights.pt", weights_only=True)


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
