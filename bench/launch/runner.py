"""Execute one resolved run on the transport it names and store its record, whatever happens."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from commbench.methods.comm import SimCommunicator
from commbench.tasks import TASKS

from commbench.run.checkpoint import Checkpoints, UntrustedCheckpoint, stop_signals
from commbench.config import ConfigError, RunConfig, never_acts
from commbench.launch.local import launch_local
from commbench.launch.owner import Claimed, claim, unwind_on_sigterm
from commbench.launch.preflight import check_machine, under_outside_launcher
from commbench.launch.progress import Progress, ProgressFile
from commbench.store.provenance import code_changed_since, code_loaded, collect_env, now
from commbench.store.safe_io import remove_stale_temporaries, write_with
from commbench.store.signals import STOP_AND_END, signals_deferred
from commbench.store.records import (EMPTY_METRICS, FINISHED, Status, UnreadableRecord, make_record,
                                     read_or_set_aside, read_record, write_record)
from commbench.store.results_folder import ResultsFolder
from commbench.run.devices import dist_backend
from commbench.run.rank import run_rank
from commbench.config.resolve import server_count
from commbench.run.train import Outcome, train


@dataclass
class RunResult:
    record: dict
    path: Path | None  # None on a dist rank other than 0 under an outside launcher, or when interrupted
    skipped: bool = False
    interrupted: Outcome | None = None  # stopped by a signal, checkpoint saved, and requeued (see execute)


class RecordNotWritten(RuntimeError):
    """The run finished but its record could not be written (a full disk, a folder gone); one line."""


class RankFailed(RuntimeError):
    """A process of a run under an outside launcher (torchrun, srun) failed. ``record``: the failed record it
    wrote, or None when a peer of the same attempt had written one first."""

    def __init__(self, message: str, record: dict | None):
        super().__init__(message)
        self.record = record


def _rank_name(cfg: RunConfig, rank: int) -> str:
    return f"worker {rank}" if rank < cfg.workers else f"server {rank - cfg.workers}"


def _failed_since(out: Path, run_id: str, started_at: str) -> bool:
    """A failed record of this attempt exists (written by a peer process at or after our start)."""
    try:
        record = read_record(out, run_id)
    except UnreadableRecord:
        return False
    return bool(record and record.get("status") == Status.FAILED
                and (record.get("env", {}).get("finished_at") or "") >= started_at)


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


class CodeChanged(RuntimeError):
    """The checkout's code moved on since this process started: a run now would not be the code its record names."""


def code_of_this_process() -> tuple[str | None, bool | None]:
    """(SHA, dirty) of the code a run of this process runs: the checkout as the process found it, since its modules
    were imported then. Once the checkout's code has changed (a commit or an edit outside results/), a sim run
    would run the old code and a dist run's new worker processes the new, so the run is refused: its record
    could name neither. A job told its code (COMMBENCH_GIT_SHA, a snapshot) runs that copy, which does not move."""
    sha, dirty = code_loaded()
    if sha and not dirty and "COMMBENCH_GIT_SHA" not in os.environ and code_changed_since(sha):
        raise CodeChanged(f"the code changed since this process started at {sha[:12]} (a commit or an edit "
                          f"outside results/): a run now would not be the code its record names; start it again")
    return sha, dirty


class RunningElsewhere(RuntimeError):
    """The run is being trained by another live process on this results folder (another sweep's lane)."""


def execute(cfg: RunConfig, out: Path, *, force: bool = False, save_weights: bool = False,
            show_progress: bool = True, requeue: Callable[[Outcome], str | None] | None = None) -> RunResult:
    """:func:`run_unclaimed`, while holding the run's claim in ``OUT/claims/`` (launched here, not by torchrun or
    Slurm, whose processes are the run's own): raises :class:`RunningElsewhere` if another process holds it."""
    if cfg.backend == "dist" and under_outside_launcher():
        return run_unclaimed(cfg, out, force=force, save_weights=save_weights, show_progress=show_progress,
                             requeue=requeue)
    try:
        folder = ResultsFolder(out)
        with claim(folder.claims, cfg.run_id):
            pace = ProgressFile(folder.progress(cfg.run_id), cfg.steps)
            try:
                return run_unclaimed(cfg, out, force=force, save_weights=save_weights, show_progress=show_progress,
                                     requeue=requeue, also_report=pace)
            finally:
                pace.remove()
    except Claimed as exc:
        raise RunningElsewhere(f"{cfg.run_id}: being run by {exc}") from None


def run_unclaimed(cfg: RunConfig, out: Path, *, force: bool = False, save_weights: bool = False,
                  show_progress: bool = True, requeue: Callable[[Outcome], str | None] | None = None,
                  also_report: Callable[[int], None] | None = None) -> RunResult:
    """Run ``cfg`` unless its record already says done or diverged (or ``force``); an unreadable record is moved
    aside and the run runs again. Always leaves a record, except when a
    stop signal interrupted the run and ``requeue`` (a Slurm job's) put it back in the queue.

    A run resumes from its checkpoint (``OUT/checkpoints/<run_id>``) if one is there; ``force`` starts over.
    ``requeue(outcome)`` is called by the process holding worker 0 when a stop signal interrupted the run
    (its checkpoint is saved): it returns None once the run is requeued, else why it was not, which becomes
    the failed record's error."""
    out = Path(out)
    finished = _check_before_start(cfg, out, force)
    if finished is not None:
        return finished
    attempt = Attempt(cfg, out, save_weights)
    progress = Progress(cfg.run_id, cfg.steps, enabled=show_progress and not attempt.quiet, also=also_report)
    status, error, outcome = Status.FAILED, None, None
    try:
        with stop_signals(), unwind_on_sigterm():
            TASKS[cfg.task].prepare_data(cfg.dataset, Path(cfg.data_root or "data"))
            outcome = _train_on_transport(attempt, progress)
        if outcome is None:  # a rank other than 0 under an outside launcher: rank 0 writes the record
            return RunResult({}, None)
        status = outcome.status
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (launch.owner.Terminated): the run's stop is recorded
        progress.close()
        reason = getattr(exc, "reason", "interrupted (Ctrl-C)")
        if progress.done:
            reason += f" at step {progress.done} of {cfg.steps}"
        attempt.store(Status.FAILED, reason, outcome)
        raise
    except RankFailed:  # recorded already; the outside launcher must see this process fail and stop the rest
        raise
    except Exception as exc:  # the run failed: say why in the record
        error = one_line(exc)
    progress.close()
    if status == Status.INTERRUPTED:
        stopped = f"stopped by {outcome.stopped_by} at step {outcome.metrics['steps']} of {cfg.steps}"
        why_not = requeue(outcome) if requeue else f"checkpoint saved in {attempt.ckpt_dir}: run it again to resume"
        if why_not is None:
            return RunResult({}, None, interrupted=outcome)
        error = f"{stopped}; {why_not}"  # the status stays interrupted: resumable
    result = attempt.store(status, error, outcome)
    if result.record["status"] in FINISHED:
        Checkpoints(attempt.ckpt_dir).remove()
    return result


def _check_before_start(cfg: RunConfig, out: Path, force: bool) -> RunResult | None:
    """Everything that must hold before anything runs or is written (bad input raises ConfigError: exit 2); the
    run's finished record where there is one and ``force`` does not ask for a rerun."""
    outside = cfg.backend == "dist" and under_outside_launcher()
    if cfg.net and under_outside_launcher():
        raise ConfigError(f"net: an emulated network ({cfg.net}) is built by the harness's own local launcher; "
                          f"under torchrun or Slurm the processes already have their network")
    # the launch room's door, as for a sweep's runs (preflight.check_runs): before anything is written, a
    # demand this machine cannot meet (root for --net, a CUDA device) is bad input (exit 2), not a failed run
    check_machine(cfg, local=not under_outside_launcher())
    folder = ResultsFolder(out)
    for left in (folder.record(cfg.run_id), folder.weights(cfg.run_id),
                 folder.checkpoint_index(cfg.run_id)):  # a killed writer's temporary files
        remove_stale_temporaries(left)
    existing = read_or_set_aside(out, cfg.run_id)
    if existing is not None and existing.get("status") in FINISHED and not force:
        return RunResult(existing, folder.record(cfg.run_id), skipped=True)
    servers = server_count(cfg)
    if outside and int(os.environ["WORLD_SIZE"]) != cfg.workers + servers:
        raise ConfigError(f"workers: {cfg.workers} (+ {servers} parameter servers), but the outside launcher "
                          f"started {os.environ['WORLD_SIZE']} processes")
    ckpt_dir = folder.checkpoints(cfg.run_id)
    if force and (not outside or os.environ["RANK"] == "0"):
        Checkpoints(ckpt_dir).remove()
    try:  # before anything runs: a checkpoint this harness did not write is refused, never unpickled
        Checkpoints(ckpt_dir).verify()
    except UntrustedCheckpoint as exc:
        raise ConfigError(f"{exc}; move {ckpt_dir} away, or pass --force to start the run over") from None
    return None


class Attempt:
    """One attempt at a run: when and from which code it started, the world it ran in, and its record."""

    def __init__(self, cfg: RunConfig, out: Path, save_weights: bool):
        self.cfg, self.out, self.save_weights = cfg, out, save_weights
        self.started_at, self.t0, self.code = now(), time.perf_counter(), code_of_this_process()
        self.outside = cfg.backend == "dist" and under_outside_launcher()
        self.quiet = self.outside and os.environ["RANK"] != "0"  # one progress line per run, from rank 0
        self.world = {"world_size": cfg.workers, "dist_backend": None}
        self.ckpt_dir = ResultsFolder(out).checkpoints(cfg.run_id)

    def store(self, status: str, error: str | None, outcome: Outcome | None) -> RunResult:
        return _store(self.cfg, self.out, status, error, outcome, self.world,
                      (self.started_at, self.t0, self.code), self.save_weights)


def _train_on_transport(attempt: Attempt, progress: Progress) -> Outcome | None:
    """Train on the run's transport: all workers in this process (sim), this process as one rank of an outside
    launcher's (torchrun, srun; None on ranks other than 0), or one process per worker started here."""
    cfg, out = attempt.cfg, attempt.out
    if cfg.backend == "sim":
        return train(cfg, SimCommunicator(cfg.workers, num_servers=server_count(cfg)), report=progress.update,
                     keep_weights=attempt.save_weights,
                     checkpoints=Checkpoints(attempt.ckpt_dir, cfg.checkpoint_every, poll=1))
    if attempt.outside:
        return _run_outside_rank(attempt, progress)
    outcome, attempt.world = launch_local(cfg, ResultsFolder(out).logs(cfg.run_id), report=progress.update,
                                          save_weights=attempt.save_weights, checkpoint_dir=attempt.ckpt_dir)
    return outcome


def _run_outside_rank(attempt: Attempt, progress: Progress) -> Outcome | None:
    from commbench.methods.comm import make_dist_communicator

    cfg = attempt.cfg
    comm = make_dist_communicator(num_servers=server_count(cfg), backend=dist_backend(cfg))
    try:
        attempt.world = {"world_size": comm.world_size, "dist_backend": comm.backend}
        return run_rank(cfg, comm, report=progress.update, keep_weights=attempt.save_weights,
                        checkpoint_dir=attempt.ckpt_dir)
    except Exception as exc:
        # Record the failure while still in the process group: the peers fail only once this
        # process has left it, so the first record of this attempt names the cause, not its echo.
        progress.close()
        error = one_line(exc) if comm.rank == 0 else f"{_rank_name(cfg, comm.rank)}: {one_line(exc)}"
        record = None
        if not _failed_since(attempt.out, cfg.run_id, attempt.started_at):
            record = attempt.store(Status.FAILED, error, None).record
        raise RankFailed(error, record) from exc
    finally:
        comm.close()


def _store(cfg: RunConfig, out: Path, status: str, error: str | None, outcome: Outcome | None, world: dict,
           start: tuple, save_weights: bool) -> RunResult:
    """Write the run's record (and worker 0's weights on request). ``start``: (started_at, t0, code)."""
    started_at, t0, code = start
    wall_s = time.perf_counter() - t0
    device = "cuda" if (cfg.device == "cuda" or (cfg.device == "auto" and _cuda())) else "cpu"
    env = collect_env(world["world_size"], world["dist_backend"], device, started_at, server_count(cfg), code)
    if cfg.net:
        env["net"] = cfg.net  # every process in its own network namespace, each link limited to this rate
    if outcome is not None and outcome.resumed_at:
        env["resumed_at_steps"] = outcome.resumed_at
        env["devices_by_stretch"] = outcome.devices
    metrics = {**EMPTY_METRICS, **(outcome.metrics if outcome else {}), "wall_s": wall_s}
    kept = error is None or status == Status.INTERRUPTED  # an error otherwise makes the run a failed one
    record = make_record(cfg.run_id, status if kept else Status.FAILED, error, cfg.to_dict(), env,
                         metrics, outcome.history if outcome else [], outcome.data if outcome else None)
    with signals_deferred(STOP_AND_END):  # a stop signal now waits for the record: the run's outcome is kept
        try:
            path = write_record(out, record)
        except OSError as exc:
            raise RecordNotWritten(f"{cfg.run_id}: {record['status']}, but its record could not be written to "
                                   f"{out} ({exc.strerror or exc})") from None
        if save_weights and outcome is not None and outcome.weights is not None:
            _store_weights(out, cfg.run_id, record["status"], outcome.weights)
    return RunResult(record, path)


def _store_weights(out: Path, run_id: str, status: str, weights: dict) -> None:
    import torch

    target = ResultsFolder(out).weights(run_id)
    try:
        write_with(target, lambda f: torch.save(weights, f), root=out)
    except OSError as exc:
        raise RecordNotWritten(f"{run_id}: {status}, its record written, but its weights could not be written to "
                               f"{target} ({exc.strerror or exc})") from None


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def summary(cfg: RunConfig, record: dict) -> str:
    """The one line a finished run prints (run and sweep alike)."""
    m = record.get("metrics", {})
    top1 = f"{m['top1']:.4f}" if m.get("top1") is not None else "—"
    ips = f"{m['images_per_s']:.0f}" if m.get("images_per_s") else "—"
    sent = f"{m['bytes_sent'] / 1e9:.3g} GB" if isinstance(m.get("bytes_sent"), (int, float)) else "—"
    line = f"{cfg.run_id}: {record['status']}  top1 {top1}  sent {sent} (all workers)  images/s {ips}"
    if (idle := never_acts(cfg)) is not None:
        line += f"  note: {idle}"
    return line + (f"  error: {record['error']}" if record.get("error") else "")
