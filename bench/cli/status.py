"""``commbench status``: each stored run and its state (done, running here, queued on Slurm, to do), and the
training time left, from the runs' own pace and the step times of done runs like them."""
from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Iterable

from commbench.cli.grids import grid_runs
from commbench.config import ConfigError, RunConfig
from commbench.store.records import FINISHED, UNKNOWN_CPU, Status, cpu_of


def run(args) -> int:
    from commbench.analysis.eta import describe, time_left
    from commbench.run.devices import auto_device_type
    from commbench.launch.owner import holders
    from commbench.launch.queue import queue_states, reconcile, submissions
    from commbench.launch.runner import claims_dir
    from commbench.store.records import iter_records

    out = Path(args.results)
    if not out.is_dir():
        raise ConfigError(f"--results {out}: no such folder")
    every = {r["run_id"]: r for r in iter_records(out)}  # each record read once: the lines and the estimate
    notes = submissions(out)
    states = queue_states([n["job_id"] for n in notes.values()]) if notes else {}
    current = reconcile(out, notes, states, every)  # writes failed records for jobs that died without one
    running = holders(claims_dir(out))  # runs a process on this host is training now (a sweep's lane)
    records, todo = dict(every), []
    if args.grid:  # only this grid's runs: those with a record or a job, then those still to do
        wanted = grid_runs(args.grid, args.set, args.only, max_runs=args.max_runs)[1]
        ids = {c.run_id for c in wanted}
        records = {k: v for k, v in records.items() if k in ids}
        notes = {k: v for k, v in notes.items() if k in ids}
        todo = [c for c in wanted if c.run_id not in notes and c.run_id not in records]
    # a run being trained with no record yet (its first attempt), outside any grid asked about
    unlisted = [] if args.grid else sorted(set(running) - set(records) - set(notes))
    if not records and not notes and not todo and not unlisted:
        print(f"no records under {args.results}")
        return 0
    counts: dict[str, int] = {}
    left: list[dict] = []  # what is not finished yet, for the time estimate
    lines = [_recorded_line(out, run_id, records.get(run_id), notes.get(run_id), current, running, left)
             for run_id in sorted(set(records) | set(notes))]
    lines += [_to_do_line(out, cfg, running, left) for cfg in todo]
    lines += [_unlisted_line(out, run_id, running) for run_id in unlisted]
    for state, line in lines:
        counts[state] = counts.get(state, 0) + 1
        print(line)
    if notes and states is None:
        print("(no Slurm commands here: the queue state of submitted runs is unknown)", file=sys.stderr)
    print(", ".join(f"{n} {s}" for s, n in sorted(counts.items())), file=sys.stderr)
    if line := describe(*time_left(left, every.values(), here=auto_device_type())):
        print(line, file=sys.stderr)
    if args.grid and any(c.net or c.node_link for c in wanted) and (line := _timed_on_other_cpus(records.values())):
        print(line, file=sys.stderr)
    return 0


def _timed_on_other_cpus(records: Iterable[dict]) -> str:
    """A speed grid's done CPU runs timed on another CPU than this machine's ("" if none): times compare only
    within one CPU (the tables pair a method with its baseline only there), so a run timed here pairs with none
    of them."""
    from commbench.store.provenance import cpu_identity

    here = cpu_identity()[0] or UNKNOWN_CPU
    other = Counter(cpu_of(r) for r in records if r.get("status") == Status.DONE
                    and (r.get("env") or {}).get("device", "cpu") == "cpu" and cpu_of(r) != here)
    if not other:
        return ""
    elsewhere = ", ".join(f"{n} done run{'s' * (n != 1)} on {cpu}" for cpu, n in other.most_common())
    return (f"timed on another CPU: {elsewhere}; this machine is {here}, and times compare only within one CPU: "
            "runs timed here pair with none of them")


def _recorded_line(out: Path, run_id: str, record: dict | None, note: dict | None, current: dict, running: dict,
                   left: list[dict]) -> tuple[str, str]:
    """A run with a record or a Slurm job: its state and line (an unfinished one also joins ``left``)."""
    from commbench.launch.queue import Shown, record_is_current

    state = Shown.RUNNING if run_id in running else current.get(run_id) or record["status"]
    c = (record or {}).get("config") or note["config"]
    m = (record or {}).get("metrics", {}) if record_is_current(record, note) and run_id not in running else {}
    top1 = f"{m['top1']:.4f}" if m.get("top1") is not None else "—"
    job = f"  job {note['job_id']}" if note else ""
    live = _live(out, run_id) if run_id in running else None
    progress = _checkpoint_step(out, run_id) if state in (Shown.RUNNING, Shown.PENDING, Shown.REQUEUED) else None
    steps = (_pace(live, c) if live else f"{m.get('steps')}/{c.get('steps')}" if m else
             f"{progress}/{c.get('steps')} (checkpoint)" if progress else f"-/{c.get('steps')}")
    if state not in FINISHED:
        left.append(_unfinished(c, live, progress))
    error = record.get("error") if record is not None and record_is_current(record, note) else None
    said = running.get(run_id) or error  # a run trained again now: who has it, not how it went last time
    return state, (f"{state:9s} {run_id}  {c.get('task')} {c.get('method')} w={c.get('workers')} "
                   f"{c.get('backend')} steps={steps} top1={top1}{job}" + (f"  ({said})" if said else ""))


def _to_do_line(out: Path, cfg: RunConfig, running: dict, left: list[dict]) -> tuple[str, str]:
    """A grid's run with no record and no job: to do, or being trained here for the first time."""
    from commbench.launch.queue import Shown

    state = Shown.RUNNING if cfg.run_id in running else Shown.TO_DO
    by = f"  ({running[cfg.run_id]})" if cfg.run_id in running else ""
    live = _live(out, cfg.run_id) if cfg.run_id in running else None
    progress = None if live else _checkpoint_step(out, cfg.run_id)  # a checkpoint carried from elsewhere
    left.append(_unfinished(cfg.to_dict(), live, progress))
    steps = _pace(live, left[-1]) if live else f"{progress}/{cfg.steps} (checkpoint)" if progress else f"-/{cfg.steps}"
    return state, f"{state:9s} {cfg.run_id}  {cfg.task} {cfg.method} w={cfg.workers} {cfg.backend} steps={steps}{by}"


def _unlisted_line(out: Path, run_id: str, running: dict) -> tuple[str, str]:
    """A run being trained here that has no record yet and belongs to no grid asked about."""
    from commbench.launch.queue import Shown

    live = _live(out, run_id)
    steps = f"  steps={_pace(live, live)}" if live else ""
    return Shown.RUNNING, f"{Shown.RUNNING:9s} {run_id}{steps}  ({running[run_id]})"


def _live(out: Path, run_id: str) -> dict | None:
    """Where a run being trained here stands now (its ProgressFile), or None."""
    from commbench.launch.progress import read_progress
    from commbench.launch.runner import progress_path

    return read_progress(progress_path(out, run_id))


def _unfinished(cfg: dict, live: dict | None, checkpoint_step: int | None) -> dict:
    """A run still to train, for the time estimate: its steps done (a running attempt's, else its checkpoint's)
    and, while it trains, its own pace."""
    return {**cfg, "done_steps": live["step"] if live else checkpoint_step or 0,
            "live_step_s": (live or {}).get("step_s")}


def _pace(live: dict, cfg: dict) -> str:
    """``660/2000 (0.98 steps/s)``: a running run's step and its pace since this attempt began."""
    pace = f" ({1 / live['step_s']:.3g} steps/s)" if live.get("step_s") else ""
    return f"{live['step']}/{cfg.get('steps')}{pace}"


def _checkpoint_step(out: Path, run_id: str) -> int | None:
    from commbench.run.checkpoint import Checkpoints
    from commbench.launch.runner import checkpoint_dir

    latest = Checkpoints(checkpoint_dir(out, run_id)).latest()
    return latest["step"] if latest else None

