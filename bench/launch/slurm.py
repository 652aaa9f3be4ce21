"""Sweeps on Slurm through submitit: one job per run, runs of one resource shape in one job array.

Submission is non-blocking: the jobs go out, their ids are printed and noted under ``OUT/slurm/jobs/``, and
``commbench status`` follows them. ``--wait`` blocks with a progress bar until every run has a record.

In the job, :class:`SlurmRun` sets up torch.distributed from Slurm's variables (one task per process: the
run's workers, then its parameter servers), runs the configuration with :func:`commbench.launch.runner.execute` from
the frozen code copy, and on Slurm's warning signal (SIGUSR2 ``signal_delay_s`` before the time limit, or on
preemption) saves a checkpoint and requeues itself; the requeued job resumes from the checkpoint.
"""
from __future__ import annotations

import dataclasses
import importlib
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from commbench.config import RunConfig
from commbench.launch.progress import Progress
from commbench.store.provenance import now, slurm_job_id
from commbench.store.records import FINISHED, STATUSES, Status, read_or_set_aside
from commbench.store.results_folder import ResultsFolder
from commbench.launch.profile import Profile, Shape, executor_parameters, run_shape
from commbench.launch.queue import (note_submission, queue_states, reconcile, record_is_current, submissions)
from commbench.launch.preflight import no_control_characters
from commbench.launch.snapshot import NUMBA_CACHE_SHELL, CodeSnapshot, snapshot_code


class SubmitError(RuntimeError):
    """sbatch is missing or refused the jobs; nothing was noted as submitted."""


class SlurmRun:
    """The callable each job runs (pickled by submitit; unpickled from the code copy)."""

    def __init__(self, config: dict, out: str, max_requeues: int):
        self.config, self.out, self.max_requeues = config, out, max_requeues

    def __call__(self) -> str:
        from commbench.run.checkpoint import stop_signals
        from commbench.launch.runner import RankFailed, execute

        # From the first moment: Slurm's warning signal sets the stop flag (submitit's own handler would end a
        # job it cannot checkpoint); the run checks the flag at its first sync point.
        with stop_signals():
            cfg = RunConfig.from_dict(self.config)
            cpus = int(os.environ.get("SLURM_CPUS_PER_TASK", "1"))
            if cfg.threads is None:  # the task's CPUs, split among the workers a sim run holds
                cfg = dataclasses.replace(cfg, threads=max(1, cpus // (cfg.workers if cfg.backend == "sim" else 1)))
            if cfg.backend == "dist":
                import submitit

                # CUDA_VISIBLE_DEVICES stays as Slurm set it: the communicator picks this task's GPU itself.
                submitit.helpers.TorchDistributedEnvironment().export(set_cuda_visible_devices=False,
                                                                      overwrite=True)
                os.environ.pop("COMMBENCH_WORKER", None)
            try:
                result = execute(cfg, Path(self.out), show_progress=True, requeue=self._requeue(cfg))
            except RankFailed as exc:  # a non-zero exit: srun --kill-on-bad-exit stops the other tasks
                raise RuntimeError(f"run {cfg.run_id} failed: {exc}") from None
        if result.interrupted is not None:
            sys.exit(3)  # requeued: no result for submitit; the requeued job produces the record
        return result.record.get("status", "")

    def _requeue(self, cfg: RunConfig):
        def requeue(outcome) -> str | None:
            from commbench.run.checkpoint import UntrustedCheckpoint, count_requeue

            ckpt = ResultsFolder(self.out).checkpoints(cfg.run_id)
            try:  # the count sits beside the checkpoint, in a folder others may write to
                requeues, job_id = count_requeue(ckpt), slurm_job_id()
            except (UntrustedCheckpoint, OSError) as exc:
                return f"not requeued: the requeue count could not be kept ({exc}); resubmit to resume"
            if job_id is None:
                return f"not a Slurm job, so not requeued; checkpoint kept in {ckpt}: resubmit to resume"
            if requeues > self.max_requeues:
                return (f"not requeued again after {requeues - 1} requeues (max_requeues {self.max_requeues}); "
                        f"checkpoint kept in {ckpt}: resubmit to resume")
            print(f"commbench: stopped by {outcome.stopped_by} at step {outcome.metrics['steps']}; checkpoint "
                  f"saved; requeue {requeues} of {self.max_requeues} (job {job_id})", file=sys.stderr, flush=True)
            subprocess.run(["scontrol", "requeue", job_id], check=True, timeout=60)
            return None
        return requeue


def prepare_for_jobs(cfg: RunConfig) -> RunConfig:
    """Jobs run elsewhere (another cwd, maybe another node): an absolute data root, provisioned here once, on
    the submitting host (login nodes usually have the network; compute nodes often do not)."""
    from commbench.tasks import TASKS

    root = Path(cfg.data_root or "data").resolve()
    TASKS[cfg.task].prepare_data(cfg.dataset, root)
    return dataclasses.replace(cfg, data_root=str(root))


def submit(runs: list[RunConfig], out: Path, profile: Profile, sweep_name: str) -> list[dict]:
    """Submit every run that is neither done nor queued; returns the submission notes (job ids)."""
    import submitit

    # the results folder's path becomes lines of the batch script: checked before anything is written (exit 2,
    # not a half-made submission), as preflight checks it (a profile's values are checked as it loads)
    no_control_characters("--results", str(Path(out).resolve()))
    out = Path(out).resolve()
    todo, queued, done = _sort_out(runs, out)
    print(f"sweep: {len(runs)} runs, {done} already finished, {len(queued)} already queued, {len(todo)} to submit",
          file=sys.stderr)
    for cfg, job_id in queued:
        print(f"queued: {cfg.run_id} is job {job_id}", file=sys.stderr)
    if not todo:
        return []
    if shutil.which("sbatch") is None:
        raise SubmitError("sbatch not found: this machine has no Slurm client (try --launcher local)")
    todo = [prepare_for_jobs(c) for c in todo]
    code = snapshot_code(ResultsFolder(out).slurm_code)
    batch = ResultsFolder(out).slurm_batch(f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
    groups: dict[Shape, list[RunConfig]] = defaultdict(list)
    for cfg in todo:
        groups[run_shape(cfg, profile)].append(cfg)

    submitted = []
    for shape, cfgs in groups.items():
        executor = submitit.SlurmExecutor(folder=batch / "%j", max_num_timeout=0)
        executor.update_parameters(**executor_parameters(profile, shape, f"commbench-{sweep_name}",
                                                         setup_lines(code), chdir=code.path))
        try:
            with executor.batch():
                jobs = [executor.submit(SlurmRun(c.to_dict(), str(out), profile.max_requeues)) for c in cfgs]
        except Exception as exc:  # submitit wraps sbatch's complaint; keep its last line
            text = str(exc).strip().splitlines()
            raise SubmitError(f"sbatch refused {len(cfgs)} runs ({shape.describe()}): "
                              f"{text[-1] if text else type(exc).__name__}") from None
        for cfg, job in zip(cfgs, jobs):
            note = {"run_id": cfg.run_id, "job_id": job.job_id, "submitted_at": now(), "profile": profile.name,
                    "shape": dataclasses.asdict(shape), "stdout": str(job.paths.stdout),
                    "stderr": str(job.paths.stderr), "folder": str(job.paths.folder),
                    "code": {"path": str(code.path), "git_sha": code.git_sha, "git_dirty": code.git_dirty},
                    "config": cfg.to_dict()}
            note_submission(out, note)
            submitted.append(note)
        array = jobs[0].job_id.split("_")[0]
        print(f"submitted {len(cfgs)} run{'s' * (len(cfgs) > 1)} as job {array} ({shape.describe()}, "
              f"profile {profile.name})", file=sys.stderr)
        for cfg, job in zip(cfgs, jobs):
            print(f"{job.job_id}  {cfg.run_id}")
    return submitted


def _sort_out(runs: list[RunConfig], out: Path) -> tuple[list[RunConfig], list[tuple[RunConfig, str]], int]:
    """(runs to submit, (run, job id) of those still queued, how many are finished)."""
    notes = submissions(out)
    states = queue_states([notes[c.run_id]["job_id"] for c in runs if c.run_id in notes]) or {}
    todo, queued, done = [], [], 0
    for cfg in runs:
        record, note = read_or_set_aside(out, cfg.run_id), notes.get(cfg.run_id)
        if record is not None and record.get("status") in FINISHED:
            done += 1
        elif note and note["job_id"] in states and not states[note["job_id"]].ended \
                and not record_is_current(record, note):
            queued.append((cfg, note["job_id"]))
        else:
            todo.append(cfg)
    return todo, queued, done


def setup_lines(code: CodeSnapshot) -> list[str]:
    """The frozen code comes first on the job's import path, the job knows its commit, and it writes nothing into
    its copy (no bytecode; numba's cache in its user's home). Every value is quoted for the shell: a results
    folder's path may hold spaces, quotes or ``$(...)`` (a line break is refused before: no quoting carries it).
    A user's methods load in the job as they did here (:func:`user_methods`)."""
    env, folders = user_methods()
    path = ":".join(shlex.quote(str(f)) for f in [code.path, *folders])
    return [f"export {k}={shlex.quote(str(v))}" for k, v in {**code.environment(), **env}.items()
            if k != "PYTHONPATH"] + [
        f"export NUMBA_CACHE_DIR={NUMBA_CACHE_SHELL}",
        f"export PYTHONPATH={path}${{PYTHONPATH:+:$PYTHONPATH}}"]


def user_methods() -> tuple[dict[str, str], list[Path]]:
    """What a job needs to load the user's methods this process loaded: ``COMMBENCH_METHODS`` as set here (a
    cluster may start jobs without the submitter's environment), and the folders its modules were imported from
    (the job runs in the code snapshot, where a relative PYTHONPATH entry finds nothing). Methods from entry
    points need nothing: the job runs this Python, with its installed distributions."""
    from commbench.methods.registry import ENV

    modules = [m.strip() for m in os.environ.get(ENV, "").split(",") if m.strip()]
    if not modules:
        return {}, []
    folders: list[Path] = []
    for name in modules:
        module = sys.modules.get(name) or importlib.import_module(name)  # loaded already, by the runs' resolve
        file = getattr(module, "__file__", None)
        if file:
            path = Path(file).resolve()
            root = path.parents[name.count(".") + (path.name == "__init__.py")]
            no_control_characters(f"{ENV} module {name} in", str(root))
            if root not in folders:
                folders.append(root)
    return {ENV: ",".join(modules)}, folders


def wait(out: Path, run_ids: list[str], poll_s: float = 2.0, show_progress: bool = True) -> int:
    """Block until every run has a record for its latest submission. Exit code 0, or 1 if any failed."""
    out = Path(out).resolve()
    bar = Progress("slurm", len(run_ids), unit="run", every_s=30.0, enabled=show_progress)
    try:
        while True:
            notes = {r: n for r, n in submissions(out).items() if r in run_ids}
            current = reconcile(out, notes, queue_states([n["job_id"] for n in notes.values()]))
            current.update({r: (read_or_set_aside(out, r) or {}).get("status", "unknown") for r in run_ids
                            if r not in notes})
            finished = [r for r in run_ids if current.get(r) in STATUSES]
            counts = defaultdict(int)
            for r in run_ids:
                counts[current.get(r, "unknown")] += 1
            bar.update(len(finished), note=", ".join(f"{n} {s}" for s, n in sorted(counts.items())) + " ")
            if len(finished) == len(run_ids):
                break
            time.sleep(poll_s)
    except KeyboardInterrupt:
        bar.close()
        print("commbench: stopped waiting; the jobs go on (commbench status follows them)", file=sys.stderr)
        raise
    bar.close()
    failed = [r for r in run_ids if current.get(r) == Status.FAILED]
    for r in run_ids:
        record = read_or_set_aside(out, r) or {}
        print(f"{current.get(r):8s} {r}" + (f"  error: {record['error']}" if record.get("error") else ""))
    return 1 if failed else 0
