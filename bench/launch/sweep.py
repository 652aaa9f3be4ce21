"""Run a grid's configurations one after another on this machine, skipping those already finished."""
from __future__ import annotations

import sys
from pathlib import Path

from commbench.config import RunConfig
from commbench.launch.progress import Progress
from commbench.store.records import EXIT_INTERRUPTED, FINISHED, Status, read_or_set_aside
from commbench.store.results_folder import ResultsFolder


def run_local_sweep(runs: list[RunConfig], out: Path, show_progress: bool = True) -> int:
    """Exit code: 0 when every run is done or diverged, 1 when any failed, 75 when a checkpoint signal stopped
    it (run it again to resume). A finished run (done or diverged)
    is not run again; an unreadable record is moved aside (said in one line) and its run runs again; a run
    another process is training (another sweep over the same folder) is left to it, so sweeps can run side by
    side over one grid, each taking the next run no one holds."""
    from commbench.launch.runner import CodeChanged, RecordNotWritten, RunningElsewhere, execute, summary
    from commbench.run.checkpoint import stop_requested, stop_signals
    from commbench.store.provenance import code_loaded

    code_loaded()  # the code this sweep imported: each run's record names it, and a run is refused once it moves

    todo = [c for c in runs if (read_or_set_aside(out, c.run_id) or {}).get("status") not in FINISHED]
    print(header(len(runs), todo, out), file=sys.stderr)
    bar = Progress("sweep", len(todo), unit="run", every_s=0.0, enabled=show_progress)
    failed, timed, timed_s = 0, 0, 0.0  # the whole runs this sweep trained, and their seconds
    # The outermost block: a stop signal that comes during a run (whatever that run's outcome: a dist run's
    # process can end before it could checkpoint) or between runs stays noted, and no next run starts.
    with stop_signals():
        for i, cfg in enumerate(todo):
            if stop_requested():
                bar.close()
                print(f"commbench: sweep stopped by a checkpoint signal ({stop_requested()}) before its next run; "
                      f"run it again to resume", file=sys.stderr)
                return EXIT_INTERRUPTED
            try:
                result = execute(cfg, out, show_progress=show_progress)
            except RunningElsewhere as exc:  # another lane has it: its record will say how it went
                print(f"skip: {exc}", flush=True)
                bar.update(i + 1)
                continue
            except (RecordNotWritten, CodeChanged) as exc:  # the disk is full or gone, or the code moved on: the
                # next runs would fail the same way
                bar.close()
                print(f"commbench: {exc}; sweep stopped", file=sys.stderr)
                return 1
            failed += result.record["status"] == Status.FAILED
            if result.skipped:  # finished since the sweep began (by another sweep on the same folder)
                print(f"skip: {cfg.run_id} already {result.record['status']}, since this sweep began", flush=True)
            else:
                print(summary(cfg, result.record), flush=True)
                if times_a_whole_run(result.record):
                    timed, timed_s = timed + 1, timed_s + result.record["metrics"]["wall_s"]
            if result.record["status"] == Status.INTERRUPTED:  # the stop signal was for the sweep: stop it too
                bar.close()  # not counted as one of the runs done: it resumes when the sweep runs again
                print("commbench: sweep stopped by a checkpoint signal; run it again to resume", file=sys.stderr)
                return EXIT_INTERRUPTED
            bar.update(i + 1, note=remaining_note(timed_s, timed, len(todo) - i - 1))
        bar.close()
        return 1 if failed else 0


def header(total: int, todo: list[RunConfig], out: Path) -> str:
    """The line a sweep prints before it runs: ``sweep: 12 runs, 3 already finished, 9 to run (2 resume from a
    checkpoint)``. A run resumes where ``OUT/checkpoints/<run_id>/latest.json`` names a step: an interrupted run,
    or one whose checkpoint was carried in from another machine; it trains only the rest of its steps."""
    resuming = sum(resumes_at(out, cfg.run_id) is not None for cfg in todo)
    return (f"sweep: {total} runs, {total - len(todo)} already finished, {len(todo)} to run "
            f"({resuming} resume{'s' * (resuming == 1)} from a checkpoint)")


def resumes_at(out: Path, run_id: str) -> int | None:
    """The step a run's checkpoint in force holds, or None where it has none. Its index is read as every
    checkpoint index is (``run.checkpoint.read_latest``: through ``store.safe_io.read_small_text``, so a FIFO or
    a link to /dev/zero planted at its name cannot hang or exhaust the sweep); one that cannot be read is none."""
    from commbench.run.checkpoint import Checkpoints

    step = (Checkpoints(ResultsFolder(out).checkpoints(run_id)).latest() or {}).get("step")
    return step if isinstance(step, int) and step > 0 else None


def times_a_whole_run(record: dict) -> bool:
    """Whether a run's seconds in this sweep stand for a whole run like the next ones: it finished, and trained
    from step 0 here. A run resumed from a checkpoint trained only its rest, and an interrupted one stopped part-way;
    counting either would make the next runs look shorter than they are (a GRACE run stopped at step 398 of 4,009
    once gave "about 4h 50m left" for runs of 17 hours each)."""
    return record.get("status") in FINISHED and not (record.get("env") or {}).get("resumed_at_steps")


def remaining_note(trained_s: float, trained: int, remaining: int) -> str:
    """The sweep's estimated time left, from the ``trained`` whole runs it trained so far in ``trained_s`` seconds
    (the next ones like them): "about 3h 20m left " (``commbench status --grid`` estimates from each run's own pace)."""
    if not trained or not remaining:
        return ""
    seconds = trained_s / trained * remaining
    hours, minutes = divmod(int(seconds // 60), 60)
    return f"about {f'{hours}h ' if hours else ''}{minutes}m left "
