"""Entry point of one dist process (a worker, or a parameter server): ``python -m commbench.run.worker RUN_DIR``.

The launcher writes ``RUN_DIR/config.json`` and sets the env:// variables; the process inherits the launcher's
environment, so a user's methods (``COMMBENCH_METHODS``, entry points) load here as they did there. Rank 0
reports progress in ``RUN_DIR/progress.json`` and leaves its outcome in ``RUN_DIR/result.json`` (+ ``weights.pt``).
"""
from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import traceback
from pathlib import Path

LAUNCHER_ENV = "COMMBENCH_LAUNCHER_PID"  # set by the local launcher: the process this worker must die with


def die_with_parent() -> None:
    """Linux: be killed when the launcher dies, so a crashed or killed launcher leaves no worker behind.

    PR_SET_PDEATHSIG only covers a parent that dies *after* it is set; a launcher killed between starting this
    process and this call has already gone, and this process has been handed to init (or a subreaper). So
    after setting it, check the parent is still the launcher, and leave at once if not."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass
    launcher = os.environ.get(LAUNCHER_ENV)
    if launcher and os.getppid() != int(launcher):
        os._exit(1)


def main(run_dir: str) -> int:
    die_with_parent()
    run = Path(run_dir)
    spec = json.loads((run / "config.json").read_text())
    from commbench.methods import registry
    from commbench.methods.comm import make_dist_communicator

    from commbench.run.checkpoint import STOP_SIGNALS, stop_signals
    from commbench.config import RunConfig
    from commbench.run.devices import dist_backend
    from commbench.run.rank import run_rank
    from commbench.config.resolve import server_count
    from commbench.store.records import atomic_write

    cfg = RunConfig.from_dict(spec["config"])
    # The method through the registry, as the launcher found it: a user's method comes from an entry point of an
    # installed distribution, or from a module of COMMBENCH_METHODS (inherited from the launcher's environment).
    # Looked up first, so that a method this process cannot load is the reason it gives.
    registry.get(cfg.method)

    def report(done: int, total: int, loss: float) -> None:
        atomic_write(run / "progress.json", json.dumps({"done": done, "total": total, "loss": loss}))

    # The local launcher started this process with the stop signals held (launch.local): they are taken from
    # here, once the handler that turns them into a checkpoint-and-stop is in, until the result is written; a
    # stop signal that comes later has nothing left to stop, and must not kill the process either.
    with stop_signals():
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        try:
            comm = make_dist_communicator(num_servers=server_count(cfg), backend=dist_backend(cfg))
            try:
                outcome = run_rank(cfg, comm, report=report, keep_weights=spec.get("save_weights", False),
                                   checkpoint_dir=Path(spec["checkpoint_dir"]) if spec.get("checkpoint_dir") else None)
                if outcome is not None:
                    write_result(run, outcome, comm)
            finally:
                comm.close()
        finally:
            signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    return 0


def write_result(run: Path, outcome, comm) -> None:
    """Worker 0's outcome, for the launcher: ``result.json`` (and ``weights.pt`` when asked for)."""
    from commbench.store.records import atomic_write

    if outcome.weights is not None:
        import torch

        from commbench.store.safe_io import write_with

        # the run's exchange folder: written like every other file, never through a link
        write_with(run / "weights.pt", lambda f: torch.save(outcome.weights, f))
    atomic_write(run / "result.json", json.dumps(
        {"status": outcome.status, "metrics": outcome.metrics, "history": outcome.history,
         "data": outcome.data, "world_size": comm.world_size, "dist_backend": comm.backend,
         "stopped_by": outcome.stopped_by, "resumed_at": outcome.resumed_at, "devices": outcome.devices}))


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1]))
    except Exception as exc:  # the last stderr line is what the launcher reports
        traceback.print_exc()
        print(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}", file=sys.stderr, flush=True)
        sys.exit(1)
