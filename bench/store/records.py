"""The results store: one immutable JSON record per run, ``OUT/runs/<run_id>.json`` (docs/record-format.md, schema 1).

Records are strict JSON: a non-finite number (a diverged run's loss) is written as ``null``; a reader accepts
both. A record that cannot be read (truncated, not JSON, a key of the wrong type) is never a crash: readers
name it in one line and go on; a run or sweep moves it aside (never deleting it) and runs the run again.
"""
from __future__ import annotations

import datetime
import json
import math
import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, TypedDict

from commbench.store.results_folder import ResultsFolder
from commbench.store.safe_io import read_small_text, write_text
# the statuses, names and version a record has are declared with its fields (store/schema.py), and kept here by
# their old names: every reader imports them from this module
from commbench.store.schema import (FINISHED, RECORDED_METRIC_NAMES, SAFE_NAME, SCHEMA_VERSION, STATUSES, Status,
                                    record_problem)

EXIT_INTERRUPTED = 75  # EX_TEMPFAIL: a command whose run a checkpoint signal interrupted (resumable)


class UnreadableRecord(ValueError):
    """A record file that is not a record: ``str(err)`` names the file and says why, in one line."""


def check_name(what: str, value: Any) -> str:
    """A name or id that becomes a file name or a line of a batch script: letters, digits, ``._-`` only."""
    if not isinstance(value, str) or not SAFE_NAME.match(value):
        raise ValueError(f"{what}: {value!r} is not a safe name (letters, digits, '.', '_', '-'; at most 200)")
    return value


def atomic_write(path: Path, text: str, root: Path | None = None) -> None:
    """Write to a random temporary file beside ``path``, then rename: readers never see half a file. Never through
    a link below ``root`` (a results folder), never over anything but a regular file (store/safe_io.py)."""
    write_text(Path(path), text, root)


class Record(TypedDict):
    """A run's record as stored (docs/record-format.md describes every field, nested ones too)."""

    schema_version: int
    run_id: str
    status: str            # one of STATUSES
    error: str | None      # failed: why, in one line
    config: dict           # the resolved RunConfig (commbench.config), as a dict
    env: dict              # where and how it ran: versions, git state, host, Slurm job, emulated network
    metrics: dict          # accuracy, bytes, time and its breakdown
    history: list[dict]    # the log points: step, train loss, bytes so far, top-1 where evaluated, lr, time
    data: dict | None      # the data's provenance (source, checksums, what it stands in for)


def make_record(run_id: str, status: str, error: str | None, config: dict, env: dict, metrics: dict,
                history: list[dict], data: dict | None = None) -> Record:
    assert status in STATUSES, status
    return {"schema_version": SCHEMA_VERSION, "run_id": run_id, "status": status, "error": error,
            "config": config, "env": env, "metrics": metrics, "history": history, "data": data}


def finite(value: Any) -> Any:
    """``value`` with every non-finite float (NaN, infinities) replaced by None: strict JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def write_record(out: Path, record: dict) -> Path:
    path = ResultsFolder(out).record(check_name("run_id", record["run_id"]))
    atomic_write(path, json.dumps(finite(record), indent=1, default=str, allow_nan=False) + "\n", root=out)
    return path


UNKNOWN_CPU = "unknown CPU"


def cpu_of(record: dict) -> str:
    """The CPU a run was timed on (``env.cpu_model``; records from before it was recorded share one unknown)."""
    return (record.get("env") or {}).get("cpu_model") or UNKNOWN_CPU


def one_device(devices: list) -> bool:
    """Whether every stretch of a run trained on the same, known device (``env.devices_by_stretch``; a run never
    resumed lists none): seconds from two machines, or from one a checkpoint did not name, time neither."""
    return len(set(devices)) <= 1 and None not in devices


def timed_on_one_device(record: dict) -> bool:
    """A record whose seconds can time it (a step time, a time to accuracy): :func:`one_device`."""
    return one_device((record.get("env") or {}).get("devices_by_stretch") or [])


MAX_RECORD_BYTES = 64 * 2 ** 20  # a record is kilobytes (a few hundred with its history): more is not one


def load_record(path: Path) -> dict:
    """The record in ``path``; raises :class:`UnreadableRecord` (one line, naming the file) if it is not one."""
    text = read_small_text(Path(path), MAX_RECORD_BYTES, UnreadableRecord)
    try:
        # a bare NaN or Infinity (json.dumps writes them unless told not to) reads as null, as the record format
        # says a non-finite number is written
        record = json.loads(text, parse_constant=lambda _: None)
    except json.JSONDecodeError as exc:
        raise UnreadableRecord(f"{path}: not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    except (RecursionError, ValueError, MemoryError) as exc:  # nesting too deep, a 5,000-digit integer
        raise UnreadableRecord(f"{path}: not a record ({type(exc).__name__}: "
                               f"{str(exc).splitlines()[0][:120] if str(exc) else 'too large'})") from None
    why = record_problem(record)
    if why is not None:
        raise UnreadableRecord(f"{path}: {why}")
    if record["run_id"] != Path(path).stem:
        raise UnreadableRecord(f"{path}: its run_id is {record['run_id']!r}, not the file's name")
    return record


def read_record(out: Path, run_id: str) -> Record | None:
    """The record of ``run_id`` in ``out``, or None if there is none. Raises :class:`UnreadableRecord`."""
    path = ResultsFolder(out).record(check_name("run_id", run_id))
    if not path.exists():
        return None
    return load_record(path)


def set_aside(out: Path, run_id: str) -> Path:
    """Move an unreadable record out of the way (never deleting data): ``runs/<id>.json.unreadable-<time>``."""
    path = ResultsFolder(out).record(run_id)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    target = path.with_name(f"{path.name}.unreadable-{stamp}")
    os.replace(path, target)
    return target


def read_or_set_aside(out: Path, run_id: str, say: Callable[[str], None] | None = None) -> Record | None:
    """The record of ``run_id``, or None if there is none or it was unreadable (then moved aside, and said)."""
    try:
        return read_record(out, run_id)
    except UnreadableRecord as exc:
        target = set_aside(out, run_id)
        (say or _stderr)(f"commbench: {exc}; moved aside to {target.name}, the run will be run again")
        return None


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


_NAMED: set[str] = set()  # unreadable records already named by this process (a report reads the folder often)


def iter_records(root: Path, say: Callable[[str], None] | None = None) -> Iterator[Record]:
    """Every record below ``root`` (any ``runs/`` folder at any depth). Each file that is not a usable record
    is named in one line (``say``, stderr by default; once per process) and skipped."""
    for path in ResultsFolder(root).record_files():
        try:
            record = load_record(path)
        except UnreadableRecord as exc:
            if str(exc) not in _NAMED:
                _NAMED.add(str(exc))
                (say or _stderr)(f"commbench: skip {exc}")
            continue
        record["_path"] = str(path)
        yield record


def checkpointed_part_way(results: Path) -> list[tuple[str, int]]:
    """The runs checkpointed part-way below ``results`` (a ``checkpoints/`` folder at any depth, as records are
    found) with no finished record beside: (run id, step), by run id. The tables count a run only once it has
    finished, so they name these beside themselves."""
    found = []
    for latest in ResultsFolder(results).checkpoint_indexes():
        folder, run_id = ResultsFolder.holding(latest.parent), latest.parent.name
        try:  # a checkpoint's index is bytes; read as a record is (no FIFO hangs it, no link to /dev/zero)
            step = json.loads(read_small_text(latest, 2 ** 16, UnreadableRecord)).get("step")
        except (UnreadableRecord, ValueError, AttributeError):
            continue
        record = folder.record(run_id)
        if isinstance(step, int) and not (record.is_file() and _status_of(record) in FINISHED):
            found.append((run_id, step))
    return found


def _status_of(path: Path) -> str | None:
    try:
        return load_record(path).get("status")
    except UnreadableRecord:
        return None


def part_way_line(results: Path) -> str | None:
    """One line naming the runs checkpointed part-way (at most five by name), or None where there are none."""
    running = checkpointed_part_way(results)
    if not running:
        return None
    shown = ", ".join(f"{run_id} at step {step:,}" for run_id, step in running[:5])
    more = f" and {len(running) - 5} more" if len(running) > 5 else ""
    return (f"not in these tables yet, {len(running)} run{'s' * (len(running) > 1)} checkpointed part-way (a sweep "
            f"of its grid resumes it): {shown}{more}")


# a record written without an outcome (a failed run, a Slurm job that ended without one): every metric null
EMPTY_METRICS = dict.fromkeys(RECORDED_METRIC_NAMES)
