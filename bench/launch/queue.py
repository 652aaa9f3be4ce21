"""What became of submitted runs: the submission notes, the Slurm queue, and failed records for jobs that died.

Each submitted run leaves ``OUT/slurm/jobs/<run_id>.json`` (its job id, submission time, log path and config).
A run's state is its record if the record is newer than its submission; otherwise the job's state in the
queue (``squeue``, then ``sacct`` for jobs that left it). A job that ended without writing a record (cancelled,
timed out, killed for memory, a lost node) gets a failed record here that says so, whoever looks first:
``sweep --wait``, ``status`` or a new ``sweep``.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from commbench.store.safe_io import read_small_text, tail_lines
from commbench.store.schema import CONFIG, problem as config_problem
from commbench.store.records import (EMPTY_METRICS, SAFE_NAME, STATUSES, Status, atomic_write, check_name,
                                     make_record, read_or_set_aside, write_record)
from commbench.store.results_folder import ResultsFolder

ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
         "DEADLINE", "REVOKED", "SPECIAL_EXIT"}
FINAL_STATUSES = STATUSES


def note_submission(out: Path, note: dict) -> None:
    # never through a link below the results folder, never over a special file (store/safe_io.py)
    atomic_write(ResultsFolder(out).job_note(check_name('run_id', note['run_id'])),
                 json.dumps(note, indent=1) + "\n", root=out)


MAX_NOTE_BYTES = 2 ** 20  # a note is a config and a few ids: kilobytes


_JOB_ID = re.compile(r"^[0-9]+(_[0-9]+)?$")


def _note_problem(path: Path, note) -> str | None:
    """Why a job note cannot be trusted: its run id becomes a file path and its job id a Slurm argument."""
    if not isinstance(note, dict):
        return "not a JSON object"
    if not isinstance(note.get("run_id"), str) or not SAFE_NAME.match(note["run_id"]) or note["run_id"] != path.stem:
        return f"run_id {note.get('run_id')!r} is not the file's safe name"
    if not isinstance(note.get("job_id"), str) or not _JOB_ID.match(note["job_id"]):
        return f"job_id {note.get('job_id')!r} is not a Slurm job id"
    if not isinstance(note.get("config"), dict):
        return "config is missing"
    # the config becomes a failed record and a status line: the record's own types, checked as a record's are
    return config_problem(note["config"], CONFIG, "config") or _missing_config(note["config"])


def _missing_config(config: dict) -> str | None:
    for key in ("task", "method", "workers", "steps"):
        if key not in config:
            return f"config.{key} is missing"
    return None


def submissions(out: Path) -> dict[str, dict]:
    """The job notes of ``out``; a note that is unreadable or not one is named in one line and skipped."""
    notes = {}
    for path in sorted(ResultsFolder(out).slurm_jobs.glob("*.json")):
        try:  # bounded: a FIFO there must not hang status, nor a link to /dev/zero exhaust its memory
            text = read_small_text(path, MAX_NOTE_BYTES, ValueError)
        except ValueError as exc:
            print(f"commbench: skip {exc}", file=sys.stderr)
            continue
        try:
            note = json.loads(text)
        except (ValueError, RecursionError) as exc:
            print(f"commbench: skip {path}: unreadable job note ({type(exc).__name__})", file=sys.stderr)
            continue
        why = _note_problem(path, note)
        if why is not None:
            print(f"commbench: skip {path}: {why}", file=sys.stderr)
            continue
        notes[note["run_id"]] = note
    return notes


@dataclass(frozen=True)
class JobState:
    state: str          # PENDING, RUNNING, COMPLETED, CANCELLED, ... or UNKNOWN
    detail: str = ""    # sacct's full state ("CANCELLED by 0"), exit code, squeue's reason

    @property
    def ended(self) -> bool:
        return self.state in ENDED


def _run(cmd: list[str]) -> str | None:
    if shutil.which(cmd[0]) is None:
        return None
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def _expand(job_id: str) -> list[str]:
    """``12_[0-3,5%2]`` (a pending array, as squeue and sacct print it) -> 12_0 ... 12_3, 12_5."""
    m = re.fullmatch(r"(\d+)_\[([^\]]+)\]", job_id)
    if not m:
        return [job_id]
    ids = []
    for part in m.group(2).split("%")[0].split(","):
        lo, _, hi = part.partition("-")
        ids += [f"{m.group(1)}_{i}" for i in range(int(lo), int(hi or lo) + 1)]
    return ids


def queue_states(job_ids: list[str]) -> dict[str, JobState] | None:
    """Each job's state; None when Slurm's commands are not here. Jobs that neither squeue nor sacct know
    are left out."""
    if not job_ids:
        return {}
    wanted = sorted({j.split("_")[0] for j in job_ids})
    queued = _run(["squeue", "-h", "-r", "-j", ",".join(wanted), "-o", "%i|%T|%r"])
    if queued is None and shutil.which("squeue") is None:
        return None
    states: dict[str, JobState] = {}
    for line in (queued or "").splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3:
            for jid in _expand(parts[0]):
                states[jid] = JobState(parts[1], parts[2] if parts[2] not in ("None", "") else "")
    missing = [j for j in job_ids if j not in states]
    if missing:
        acct = _run(["sacct", "-X", "-n", "-P", "-j", ",".join(sorted({j.split("_")[0] for j in missing})),
                     "--format=JobID,State,ExitCode"]) or ""
        for line in acct.splitlines():
            parts = line.strip().split("|")
            if len(parts) == 3:
                for jid in _expand(parts[0]):
                    if jid in missing:
                        states[jid] = JobState(parts[1].split()[0], f"{parts[1]}, exit {parts[2]}")
    return states


def _last_line(path: str | None) -> str:
    lines = tail_lines(Path(path)) if isinstance(path, str) else []
    # the launchers' own lines (submitit's, srun's, slurmstepd's) are not the reason; the last other line is
    lines = [ln for ln in lines if not ln.startswith(("submitit ", "srun:", "slurmstepd"))]
    return lines[-1] if lines else ""


def failure_reason(note: dict, job: JobState) -> str:
    jid, log = note["job_id"], note.get("stderr")
    if job.state == "CANCELLED":
        return f"cancelled: slurm job {jid} {job.detail or job.state}"
    if job.state == "TIMEOUT":
        return (f"slurm job {jid} reached its time limit without a checkpoint-and-requeue ({job.detail}); "
                f"resubmit to resume from the last checkpoint")
    if job.state == "OUT_OF_MEMORY":
        return f"slurm job {jid} ran out of memory ({job.detail})"
    if job.state == "NODE_FAIL":
        return f"slurm job {jid} lost its node ({job.detail}); resubmit to resume from the last checkpoint"
    tail = _last_line(log)
    return f"slurm job {jid} {job.state} ({job.detail}) without a record" + (f": {tail}" if tail else "") + (
        f" (log: {log})" if log else "")


def record_is_current(record: dict | None, note: dict | None) -> bool:
    """The record is the outcome of the latest submission (or there was no submission)."""
    if record is None or record.get("status") not in FINAL_STATUSES:
        return False
    if note is None:
        return True
    return (record.get("env", {}).get("finished_at") or "") >= note["submitted_at"]


def record_failure(out: Path, note: dict, reason: str) -> dict:
    """The failed record of a job that could not write its own."""
    from commbench.store.provenance import now

    env = {"git_sha": note.get("code", {}).get("git_sha"), "git_dirty": note.get("code", {}).get("git_dirty"),
           "slurm_job_id": note["job_id"], "started_at": None, "finished_at": now(),
           "world_size": note["config"].get("workers"), "hostname": None, "recorded_by": "commbench (job ended)"}
    record = make_record(note["run_id"], Status.FAILED, reason, note["config"], env, dict(EMPTY_METRICS), [])
    write_record(out, record)
    return record


class Shown:
    """The states ``commbench status`` shows beside a record's :class:`Status`: a run trained now, a job in the
    queue (Slurm's own state, lower case), a run not started, a job whose state cannot be known."""

    RUNNING, PENDING, REQUEUED, TO_DO = "running", "pending", "requeued", "to do"
    SUBMITTED, UNKNOWN = "submitted", "unknown"


def reconcile(out: Path, notes: dict[str, dict], states: dict[str, JobState] | None,
              records: dict[str, dict] | None = None) -> dict[str, str]:
    """Each submitted run's current state: a record status, or the job's queue state. Writes a failed record
    for every job that ended without one (and puts it in ``records``, the records already read, where given:
    a run's record is then read from the folder only when its job has ended)."""
    current = {}
    for run_id, note in notes.items():
        record = records.get(run_id) if records is not None else read_or_set_aside(out, run_id)
        if record_is_current(record, note):
            current[run_id] = record["status"]
            continue
        job = (states or {}).get(note["job_id"])
        if job is None:
            current[run_id] = Shown.UNKNOWN if states is None else Shown.SUBMITTED
        elif job.ended:
            record = read_or_set_aside(out, run_id)  # the job may have written it since
            if not record_is_current(record, note):
                record = record_failure(out, note, failure_reason(note, job))
            current[run_id] = record["status"]
            if records is not None:
                records[run_id] = record
        else:
            current[run_id] = job.state.lower()
    return current
