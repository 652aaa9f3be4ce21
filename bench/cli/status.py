"""``commbench status``: each stored run and its state (done, running here, queued on Slurm, to do), and the
training time left, from the runs' own pace and the step times of done runs like them."""
from __future__ import annotations

import sys
from collections import Counter
from typing import Iterable

from commbench.analysis.runs import as_run
from commbench.cli.grids import grid_runs
from commbench.config import ConfigError, RunConfig
from commbench.config.parsers import existing_results_folder
from commbench.store.records import FINISHED, UNKNOWN_CPU, Status, cpu_of
from commbench.store.results_folder import ResultsFolder


def run(args) -> int:
    from commbench.launch.owner import holders
    from commbench.launch.queue import queue_states, reconcile, submissions
    from commbench.store.records import iter_records

    folder = existing_results_folder(args.results)
    out = folder.root
    for option, given in (("--only", args.only), ("--set", args.set), ("--max-runs", args.max_runs is not None)):
        if given and not args.grid:  # they choose among a grid's runs: without one they would be ignored
            raise ConfigError(f"{option}: only with --grid (it chooses among a grid's runs)")
    # every grid's runs first: a bad grid or --only stops the command before it prints or writes anything
    grids = [(grid, grid_runs(grid, args.set, args.only, max_runs=args.max_runs)[1]) for grid in args.grid]
    every = {r["run_id"]: r for r in iter_records(out)}  # each record read once: the lines and the estimates
    notes = submissions(out)
    states = queue_states([n["job_id"] for n in notes.values()]) if notes else {}
    current = reconcile(out, notes, states, every)  # writes failed records for jobs that died without one
    running = holders(folder.claims)  # runs a process on this host is training now (a sweep's lane)
    recorded = _Folder(folder, every, notes, current, running)
    several = len(grids) > 1
    # the lines of the runs go to stdout and the summary to stderr, unless --summary, which prints only the summary
    summary_to = sys.stdout if args.summary else sys.stderr
    left: dict[str, dict] = {}  # every grid's unfinished runs, once each, for the estimate over all of them
    for grid, wanted in grids or [(None, None)]:
        lines, summary = recorded.report(wanted, left, how=not several)
        if wanted is not None and any(c.net or c.node_link for c in wanted) and (line := _timed_on_other_cpus(
                every[c.run_id] for c in wanted if c.run_id in every)):
            summary.append(line)
        if grid and (several or args.summary):
            print(f"{grid}:", flush=True)
        if not args.summary:
            for _, line in lines:
                print(line, flush=True)
        # under --summary, indented below the grid's name; else on stderr, named where there are several grids
        prefix = "  " if args.summary and grid else f"{grid}: " if several else ""
        for line in summary:
            print(prefix + line, file=summary_to, flush=True)
    if several and (line := _estimate(left.values(), every.values())):
        print(f"all {len(grids)} grids: {line}", file=summary_to)
    if notes and states is None:
        print("(no Slurm commands here: the queue state of submitted runs is unknown)", file=sys.stderr)
    if not grids and not lines:  # the whole folder, and nothing in it
        print(f"no records under {args.results}")
    return 0


def _estimate(left: Iterable[dict], records: Iterable[dict], how: bool = True) -> str:
    from commbench.analysis.eta import describe, time_left

    left = list(left)
    # what this machine trains on matters only for runs left to estimate; asking imports torch (a folder of
    # finished runs is read without it)
    here = "cpu"
    if left:
        from commbench.run.devices import auto_device_type

        here = auto_device_type()
    return describe(*time_left(left, records, here=here), how=how)


class _Folder:
    """A results folder's records, Slurm jobs and running claims, read once and reported per grid."""

    def __init__(self, folder: ResultsFolder, every: dict, notes: dict, current: dict, running: dict):
        self.folder, self.every, self.notes, self.current, self.running = folder, every, notes, current, running

    def report(self, wanted: list[RunConfig] | None, left: dict[str, dict],
               how: bool = True) -> tuple[list[tuple[str, str]], list[str]]:
        """The lines of a grid's runs (``wanted``; None: every run of the folder) and its summary: the count of
        each state and the estimate of the training left (saying how it was estimated unless ``how`` is False).
        Each unfinished run joins ``left``."""
        records, notes, todo = dict(self.every), dict(self.notes), []
        if wanted is not None:  # only this grid's runs: those with a record or a job, then those still to do
            ids = {c.run_id for c in wanted}
            records = {k: v for k, v in records.items() if k in ids}
            notes = {k: v for k, v in notes.items() if k in ids}
            todo = [c for c in wanted if c.run_id not in notes and c.run_id not in records]
        # a run being trained with no record yet (its first attempt), outside any grid asked about
        unlisted = [] if wanted is not None else sorted(set(self.running) - set(records) - set(notes))
        mine: dict[str, dict] = {}
        lines = [_recorded_line(self.folder, run_id, records.get(run_id), notes.get(run_id), self.current,
                                self.running, mine) for run_id in sorted(set(records) | set(notes))]
        lines += [_to_do_line(self.folder, cfg, self.running, mine) for cfg in todo]
        lines += [_unlisted_line(self.folder, run_id, self.running) for run_id in unlisted]
        left.update(mine)
        counts = Counter(state for state, _ in lines)
        summary = [", ".join(f"{n} {s}" for s, n in sorted(counts.items()))] if lines else []
        if line := _estimate(mine.values(), self.every.values(), how):
            summary.append(line)
        return lines, summary


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


def _recorded_line(folder: ResultsFolder, run_id: str, record: dict | None, note: dict | None, current: dict,
                   running: dict, left: dict[str, dict]) -> tuple[str, str]:
    """A run with a record or a Slurm job: its state and line (an unfinished one also joins ``left``)."""
    from commbench.launch.queue import Shown, record_is_current

    state = Shown.RUNNING if run_id in running else current.get(run_id) or record["status"]
    # the configuration as stored (a job's note holds the one it was submitted with): its lines show it as is
    c = (as_run(record).stored if record else {}) or as_run(note or {}).stored
    m = as_run(record).metrics if record_is_current(record, note) and run_id not in running else {}
    top1 = f"{m['top1']:.4f}" if m.get("top1") is not None else "—"
    job = f"  job {note['job_id']}" if note else ""
    live = _live(folder, run_id) if run_id in running else None
    reached = _recorded_steps(record) if m else None
    # where the record does not say how far the run got (one stopped before it could write its metrics), or the
    # run is queued or training: its checkpoint does
    asks_checkpoint = state in (Shown.RUNNING, Shown.PENDING, Shown.REQUEUED) or (m and reached is None)
    progress = _checkpoint_step(folder, run_id) if asks_checkpoint else None
    steps = (_pace(live, c) if live else f"{reached}/{c.get('steps')}" if reached is not None else
             f"{progress}/{c.get('steps')} (checkpoint)" if progress else f"-/{c.get('steps')}")
    if state not in FINISHED:
        left[run_id] = _unfinished(c, live, progress)
    error = record.get("error") if record is not None and record_is_current(record, note) else None
    said = running.get(run_id) or error  # a run trained again now: who has it, not how it went last time
    return state, (f"{state:9s} {run_id}  {c.get('task')} {_method(c)} w={c.get('workers')} "
                   f"{c.get('backend')} steps={steps} top1={top1}{job}" + (f"  ({said})" if said else ""))


def _recorded_steps(record: dict) -> int | None:
    """The steps a recorded run reached: its metrics', else its history's last point's (a record written when a
    run stopped part-way may carry no metrics), else None."""
    run = as_run(record)
    steps = run.metrics.get("steps")
    if isinstance(steps, int):
        return steps
    points = [p.get("step") for p in run.history if isinstance(p, dict)]
    return max((p for p in points if isinstance(p, int)), default=None)


def _method(cfg: dict) -> str:
    """The method with the parameters that tell its runs apart, compactly: ``wgt(threshold=0.005)``. Those the run
    set itself (a grid axis or base, --set), as the table's params column; where the configuration does not say
    (no sources), those other than the method's defaults."""
    from commbench.methods import registry
    from commbench.methods.registry import UnknownMethod

    method, params = cfg.get("method"), cfg.get("method_params") or {}
    sources = cfg.get("sources")
    if isinstance(sources, dict) and sources:
        chosen = {k: v for k, v in params.items() if str(sources.get(f"method.{k}", "")).startswith("set by user")}
    else:
        try:
            defaults = vars(registry.get(method).Params())
        except (UnknownMethod, TypeError):  # a method this code no longer knows: every parameter
            defaults = {}
        chosen = {k: v for k, v in params.items() if k not in defaults or defaults[k] != v}
    return f"{method}({','.join(f'{k}={v}' for k, v in sorted(chosen.items()))})" if chosen else str(method)


def _to_do_line(folder: ResultsFolder, cfg: RunConfig, running: dict, left: dict[str, dict]) -> tuple[str, str]:
    """A grid's run with no record and no job: to do, or being trained here for the first time."""
    from commbench.launch.queue import Shown

    state = Shown.RUNNING if cfg.run_id in running else Shown.TO_DO
    by = f"  ({running[cfg.run_id]})" if cfg.run_id in running else ""
    live = _live(folder, cfg.run_id) if cfg.run_id in running else None
    progress = None if live else _checkpoint_step(folder, cfg.run_id)  # a checkpoint carried from elsewhere
    left[cfg.run_id] = _unfinished(cfg.to_dict(), live, progress)
    steps = _pace(live, left[cfg.run_id]) if live else f"{progress}/{cfg.steps} (checkpoint)" if progress else f"-/{cfg.steps}"
    return state, (f"{state:9s} {cfg.run_id}  {cfg.task} {_method(cfg.to_dict())} w={cfg.workers} {cfg.backend} "
                   f"steps={steps}{by}")


def _unlisted_line(folder: ResultsFolder, run_id: str, running: dict) -> tuple[str, str]:
    """A run being trained here that has no record yet and belongs to no grid asked about."""
    from commbench.launch.queue import Shown

    live = _live(folder, run_id)
    steps = f"  steps={_pace(live, live)}" if live else ""
    return Shown.RUNNING, f"{Shown.RUNNING:9s} {run_id}{steps}  ({running[run_id]})"


def _live(folder: ResultsFolder, run_id: str) -> dict | None:
    """Where a run being trained here stands now (its ProgressFile), or None."""
    from commbench.launch.progress import read_progress

    return read_progress(folder.progress(run_id))


def _unfinished(cfg: dict, live: dict | None, checkpoint_step: int | None) -> dict:
    """A run still to train, for the time estimate: its steps done (a running attempt's, else its checkpoint's)
    and, while it trains, its own pace."""
    return {**cfg, "done_steps": live["step"] if live else checkpoint_step or 0,
            "live_step_s": (live or {}).get("step_s")}


def _pace(live: dict, cfg: dict) -> str:
    """``660/2000 (0.98 steps/s)``: a running run's step and its pace since this attempt began."""
    pace = f" ({1 / live['step_s']:.3g} steps/s)" if live.get("step_s") else ""
    return f"{live['step']}/{cfg.get('steps')}{pace}"


def _checkpoint_step(folder: ResultsFolder, run_id: str) -> int | None:
    from commbench.run.checkpoint import Checkpoints

    latest = Checkpoints(folder.checkpoints(run_id)).latest()
    return latest.get("step") if latest else None

