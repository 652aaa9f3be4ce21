"""What a record holds, declared once: every field a reader uses, with its type (docs/record-format.md documents
the same fields, and tests/store/test_schema.py holds the two together).

A type is a name (``str``, ``int``, ``number``, ``bool``, ``dict``, ``list``, ``scalars``: a dict of plain JSON
values), with ``?`` where null is allowed; a nested dict is itself a declaration. A field not present is
allowed (records made before it existed lack it); a field present with another type makes the record
unreadable, named in one line. Fields not declared here are kept and not read.
"""
from __future__ import annotations

from typing import Any

TOP = {"schema_version": "int", "run_id": "str", "status": "str", "error": "str?", "config": "dict",
       "env": "dict", "metrics": "dict", "history": "list", "data": "dict?"}

CONFIG = {
    "task": "str", "method": "str", "dataset": "str", "workers": "int", "backend": "str", "seed": "int", "tier": "str",
    "recipe": "str", "steps": "int", "global_batch": "int", "batch_per_worker": "int", "model_variant": "str",
    "model_options": "scalars",
    "optimizer": {"name": "str", "momentum": "number?", "momentum_form": "str?", "beta1": "number?",
                  "beta2": "number?", "eps": "number?"},
    "lr_schedule": {"kind": "str", "base_lr": "number", "power": "number?", "end_lr": "number?", "gamma": "number?",
                    "step_size": "int?", "milestones": "list?", "warmup_steps": "int?"},
    "weight_decay": "number", "ema": "number",
    "eval": {"every": "int", "batch_size": "int", "bn_batches": "int"},
    "method_params": "scalars", "method_version": "int", "exchange": "str", "bucket_mb": "number", "net": "str?",
    "node_link": "str?", "device": "str", "threads": "int?", "deterministic": "bool", "fail_at_step": "int?",
    "data_root": "str?", "checkpoint_every": "int", "step_sleep_s": "number", "sources": "dict", "overrides": "dict",
    "precision": "str", "eval_target": "number?",
}

METRICS = {
    "top1": "number?", "top5": "number?", "top1_global": "number?", "top5_global": "number?",
    "final_train_loss": "number?", "final_weights": {"sha256": "str"}, "steps": "int?", "samples_seen": "int?",
    "wall_s": "number?", "train_s": "number?", "images_per_s": "number?", "bytes_sent": "number?",
    "bytes_received": "number?", "server_bytes_sent": "number?", "server_bytes_received": "number?",
    "bytes_fp32_equiv": "number?", "wire_bytes_measured": "number?", "parameters": "int?",
    "threads_per_worker": "int?",
    "time_breakdown": {"forward_backward_s": "number?", "encode_s": "number?", "wait_s": "number?",
                       "decode_s": "number?", "update_s": "number?", "other_s": "number?"},
    "paper_bytes": "number?", "zero_trits_largest": "number?", "trits_largest": "number?",
    "eval_correct": {"images": "int", "bits": "str"}, "top1_best": "number?", "top1_best_step": "int?",
    "eval_correct_best": {"images": "int", "bits": "str"},
}

HISTORY_POINT = {"step": "int", "train_loss": "number?", "top1": "number?", "top5": "number?",
                 "top1_global": "number?", "top5_global": "number?", "bytes_sent": "number?",
                 "bytes_received": "number?", "lr": "number?",
                 "train_s": "number?"}

ENV = {"python": "str?", "torch": "str?", "torchvision": "str?", "git_sha": "str?", "git_dirty": "bool?",
       "hostname": "str?", "device": "str?", "gpu_name": "str?", "world_size": "int?", "dist_backend": "str?",
       "parameter_servers": "int?", "slurm_job_id": "str?", "nodes": "list?", "slurm_tasks_per_node": "str?",
       "started_at": "str?", "finished_at": "str?", "argv": "list?", "cpu_count": "int?", "cpu_model": "str?",
       "cpu_flags": "list?", "load_average": "list?",
       "net": "str?", "resumed_at_steps": "list?", "devices_by_stretch": "list?", "recorded_by": "str?"}

DATA = {"dataset": "str?", "synthetic": "bool?", "substitute_for": "str?", "source": "str?", "root": "str?",
        "path": "str?", "format": "str?", "eval_split": "str?", "train_samples": "int?", "eval_samples": "int?"}

# claim and progress files beside a held run (bench/launch/owner.py, progress.py)
CLAIM = {"pid": "int", "pid_started": "str?", "host": "str?", "since": "str?"}
PROGRESS = {"step": "int", "steps": "int", "step_s": "number?", "updated": "str?"}

_SCALAR = (str, int, float, bool, type(None))


def _is(kind: str, value: Any) -> bool:
    if kind == "str":
        return isinstance(value, str)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "list":
        return isinstance(value, list)
    if kind == "dict":
        return isinstance(value, dict)
    if kind == "scalars":
        return isinstance(value, dict) and all(isinstance(v, _SCALAR) for v in value.values())
    raise ValueError(f"unknown type {kind!r}")


def problem(value: Any, declared: dict, where: str = "") -> str | None:
    """The first field of ``value`` (a dict) whose type is not the declared one, as a phrase; None if all are."""
    if not isinstance(value, dict):
        return f"{where or 'the file'} is not an object"
    for key, kind in declared.items():
        if key not in value:
            continue
        here = f"{where}.{key}" if where else key
        v = value[key]
        if isinstance(kind, dict):
            if v is None:
                continue
            if (why := problem(v, kind, here)) is not None:
                return why
            continue
        nullable = kind.endswith("?")
        if v is None and nullable:
            continue
        if not _is(kind.rstrip("?"), v):
            return f"{here} is {str(v)[:60]!r}, not {'a' if kind[0] not in 'i' else 'an'} {kind.rstrip('?')}"
    return None


def record_problem(record: Any) -> str | None:
    """Why a parsed record does not have the declared shape, or None."""
    for declared, where in ((TOP, ""),):
        if (why := problem(record, declared, where)) is not None:
            return why
    for section, declared in (("config", CONFIG), ("metrics", METRICS), ("env", ENV), ("data", DATA)):
        if isinstance(record.get(section), dict) and (why := problem(record[section], declared, section)):
            return why
    for i, point in enumerate(record.get("history") or []):
        if (why := problem(point, HISTORY_POINT, f"history[{i}]")) is not None:
            return why
    return None
