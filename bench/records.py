"""The results store: one immutable JSON record per run, ``OUT/runs/<run_id>.json`` (CONTRACT.md, schema 1)."""
from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any, Iterator

SCHEMA_VERSION = 1
STATUSES = ("done", "diverged", "failed")


def record_path(out: Path, run_id: str) -> Path:
    return Path(out) / "runs" / f"{run_id}.json"


def atomic_write(path: Path, text: str) -> None:
    """Write to a temporary file in the same folder, then rename: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # Not mkstemp: it makes 0600 files, and results are shared; O_EXCL with mode 0o666 lets the umask decide.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def make_record(run_id: str, status: str, error: str | None, config: dict, env: dict, metrics: dict,
                history: list[dict], data: dict | None = None) -> dict[str, Any]:
    assert status in STATUSES, status
    return {"schema_version": SCHEMA_VERSION, "run_id": run_id, "status": status, "error": error,
            "config": config, "env": env, "metrics": metrics, "history": history, "data": data}


def write_record(out: Path, record: dict) -> Path:
    path = record_path(out, record["run_id"])
    atomic_write(path, json.dumps(record, indent=1, default=str) + "\n")
    return path


def read_record(out: Path, run_id: str) -> dict | None:
    path = record_path(out, run_id)
    if not path.exists():
        return None
    return json.loads(path.read_text())


def iter_records(root: Path) -> Iterator[dict]:
    """Every record below ``root`` (any ``runs/`` folder at any depth), skipping unreadable files."""
    for path in sorted(Path(root).rglob("runs/*.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(record, dict) and record.get("schema_version") == SCHEMA_VERSION:
            record["_path"] = str(path)
            yield record


EMPTY_METRICS = dict.fromkeys(
    ("top1", "top5", "final_train_loss", "steps", "samples_seen", "wall_s", "train_s", "images_per_s",
     "bytes_sent", "bytes_received", "bytes_fp32_equiv", "wire_bytes_measured"))
