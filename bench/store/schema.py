"""What a record holds, declared once: every field a reader uses, with its type (docs/record-format.md documents
the same fields, and tests/store/test_schema.py holds the two together), and :func:`record_problem`, the one
check a record must pass to be read.

A type is a name (``str``, ``int``, ``number``, ``bool``, ``dict``, ``list``, ``scalars``: a dict of plain JSON
values), with ``?`` where null is allowed; a nested dict is itself a declaration. Numbers are finite, and some
types promise more, since readers divide by them, sum them or put them in sets: ``count`` (an int >= 1),
``int>=0``, ``number>=0``, ``fraction`` (a number in [0, 1]: an accuracy), ``rate`` (a link rate as tc writes
it, ``100mbit``), ``list[int]`` and ``list[str?]``. A field not present is allowed (records made before it
existed lack it), except the few every reader needs (:data:`REQUIRED`); a field present with another type makes
the record unreadable, named in one line. Fields not declared here are kept and not read.

The config part (:data:`CONFIG`) is the record types the settings declare (bench/config/settings.py,
``record_config_schema``). The store imports nothing from the rest of bench, so that any reader can check a
record with the store alone; it keeps this copy, and tests/config/test_record_schema.py holds it equal to the
one derived from the settings.
"""
from __future__ import annotations

import math
import re
from typing import Any

SCHEMA_VERSION = 1


class Status:
    """A record's status. ``INTERRUPTED``: a stop signal came, the checkpoint is saved, and running the same
    configuration again resumes from it (a Slurm job requeues itself instead and writes no record)."""

    DONE, DIVERGED, FAILED, INTERRUPTED = "done", "diverged", "failed", "interrupted"


STATUSES = (Status.DONE, Status.DIVERGED, Status.FAILED, Status.INTERRUPTED)
FINISHED = (Status.DONE, Status.DIVERGED)  # never run again without --force
# run ids and names the harness writes: safe as file names and inside a Slurm batch script
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")

# every type name a declaration may use (each also with ``?``: null allowed)
KINDS = ("str", "int", "number", "bool", "dict", "list", "scalars", "count", "int>=0", "number>=0", "fraction",
         "rate", "list[int]", "list[str?]")


def is_kind(kind: Any) -> bool:
    """Whether ``kind`` is a type name a declaration may use (:data:`KINDS`, with or without ``?``)."""
    return isinstance(kind, str) and (kind in KINDS or (kind.endswith("?") and kind[:-1] in KINDS))


TOP = {"schema_version": "int", "run_id": "str", "status": "str", "error": "str?", "config": "dict",
       "env": "dict", "metrics": "dict", "history": "list", "data": "dict?"}

# a copy of the settings' record types (see the module's docstring): a field of several dotted settings is an
# object of them by the name after the dot, the derived and bookkeeping fields follow the settings
CONFIG = {
    "task": "str", "method": "str", "dataset": "str", "recipe": "str", "data_root": "str?", "backend": "str",
    "workers": "count", "seed": "int", "tier": "str", "steps": "count", "global_batch": "count",
    "model_variant": "str", "model_options": {"dropout": "number", "timm": "str", "bn_batch": "count"},
    "optimizer": {"name": "str", "momentum": "number?", "momentum_form": "str?", "nesterov": "bool",
                  "beta1": "number?", "beta2": "number?", "eps": "number?"},
    "lr_schedule": {"kind": "str", "base_lr": "number", "power": "number?", "end_lr": "number?", "gamma": "number?",
                    "step_size": "int?", "milestones": "list?", "warmup_steps": "int?"},
    "weight_decay": "number", "ema": "number",
    "eval": {"every": "int>=0", "batch_size": "count", "bn_batches": "int>=0"},
    "eval_target": "number?", "device": "str", "threads": "count?", "fail_at_step": "int?", "deterministic": "bool",
    "checkpoint_every": "int", "step_sleep_s": "number", "net": "rate?", "node_link": "rate?", "exchange": "str",
    "bucket_mb": "number", "precision": "str",
    "batch_per_worker": "count", "method_params": "scalars", "method_version": "int",
    "sources": "dict", "overrides": "dict",
}

# The metrics every record holds, each named once here: the run writes them all (null where it has no value),
# a record written without an outcome holds them all null (records.EMPTY_METRICS), and readers may index them.
RECORDED_METRICS = {
    "top1": "fraction?", "top5": "fraction?", "final_train_loss": "number?", "steps": "int>=0?",
    "samples_seen": "int>=0?", "wall_s": "number>=0?", "train_s": "number>=0?", "images_per_s": "number>=0?",
    "bytes_sent": "number>=0?", "bytes_received": "number>=0?", "bytes_fp32_equiv": "number>=0?",
    "wire_bytes_measured": "number>=0?",
}
RECORDED_METRIC_NAMES = tuple(RECORDED_METRICS)

# every metric a reader uses: those above, and those only some runs have (a method's own, a parameter server's)
METRICS = {
    **RECORDED_METRICS,
    "top1_global": "fraction?", "top5_global": "fraction?", "final_weights": {"sha256": "str"},
    "server_bytes_sent": "number>=0?", "server_bytes_received": "number>=0?", "parameters": "int>=0?",
    "threads_per_worker": "count?",
    "time_breakdown": {"forward_backward_s": "number?", "encode_s": "number?", "wait_s": "number?",
                       "decode_s": "number?", "update_s": "number?", "other_s": "number?"},
    "paper_bytes": "number?", "zero_trits_largest": "number?", "trits_largest": "number?",
    "eval_correct": {"images": "int", "bits": "str"}, "top1_best": "fraction?", "top1_best_step": "int>=0?",
    "eval_correct_best": {"images": "int", "bits": "str"},
}

HISTORY_POINT = {"step": "int>=0", "train_loss": "number?", "top1": "fraction?", "top5": "fraction?",
                 "top1_global": "fraction?", "top5_global": "fraction?", "bytes_sent": "number>=0?",
                 "bytes_received": "number>=0?", "lr": "number?",
                 "train_s": "number>=0?"}

ENV = {"python": "str?", "torch": "str?", "torchvision": "str?", "git_sha": "str?", "git_dirty": "bool?",
       "hostname": "str?", "device": "str?", "gpu_name": "str?", "world_size": "int?", "dist_backend": "str?",
       "parameter_servers": "int?", "slurm_job_id": "str?", "nodes": "list?", "slurm_tasks_per_node": "str?",
       "started_at": "str?", "finished_at": "str?", "argv": "list?", "cpu_count": "int?", "cpu_model": "str?",
       "cpu_flags": "list?", "load_average": "list?",
       "net": "str?", "resumed_at_steps": "list[int]?", "devices_by_stretch": "list[str?]?", "recorded_by": "str?"}

DATA = {"dataset": "str?", "synthetic": "bool?", "substitute_for": "str?", "source": "str?", "root": "str?",
        "path": "str?", "format": "str?", "eval_split": "str?", "train_samples": "int?", "eval_samples": "int?"}

# claim and progress files beside a held run (bench/launch/owner.py, progress.py)
CLAIM = {"pid": "int", "pid_started": "str?", "host": "str?", "since": "str?"}
PROGRESS = {"step": "int", "steps": "int", "step_s": "number?", "updated": "str?"}

# What every reader needs, where a record has it at all: a record's run without its task, method, workers, steps,
# seed or backend cannot be named or grouped; a history point without its step cannot be drawn; a finished run
# (done or diverged) without its steps and bytes cannot be put in a table.
REQUIRED = {"config": ("task", "method", "workers", "steps", "seed", "backend"), "history": ("step",),
            "finished metrics": ("steps", "bytes_sent")}

_SCALAR = (str, int, float, bool, type(None))
LINK_RATE = re.compile(r"^(\d+(?:\.\d+)?)(kbit|mbit|gbit)$")  # as tc writes it (the net setting's spelling)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:  # finite: a 1e999 in a file reads as infinity, which no table can hold
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


_BOUNDED = {"count": (_is_int, 1, None), "int>=0": (_is_int, 0, None), "number>=0": (_is_number, 0, None),
            "fraction": (_is_number, 0, 1)}


def _is(kind: str, value: Any) -> bool:
    if kind in _BOUNDED:
        test, low, high = _BOUNDED[kind]
        return test(value) and value >= low and (high is None or value <= high)
    if kind == "list[int]":
        return isinstance(value, list) and all(_is_int(v) for v in value)
    if kind == "list[str?]":
        return isinstance(value, list) and all(v is None or isinstance(v, str) for v in value)
    if kind == "rate":
        match = LINK_RATE.match(value) if isinstance(value, str) else None
        return match is not None and float(match.group(1)) > 0
    if kind == "str":
        return isinstance(value, str)
    if kind == "int":
        return _is_int(value)
    if kind == "number":
        return _is_number(value)
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
            return f"{here} is {str(v)[:60]!r}, not {_described(kind.rstrip('?'))}"
    return None


_DESCRIBED = {"count": "an integer of at least 1", "int>=0": "an integer of at least 0", "int": "an integer",
              "number>=0": "a finite number of at least 0", "number": "a finite number",
              "fraction": "a fraction in [0, 1]", "rate": "a link rate such as 100mbit",
              "list[int]": "a list of integers", "list[str?]": "a list of strings (or nulls)"}


def _described(kind: str) -> str:
    return _DESCRIBED.get(kind, f"a {kind}")


def _missing(value: dict, keys: tuple[str, ...], where: str) -> str | None:
    for key in keys:
        if value.get(key) is None:
            return f"{where}.{key} is missing, and every reader needs it"
    return None


def record_problem(record: Any) -> str | None:
    """Why a parsed record is not one a reader can use, or None: the one check every record passes before it is
    read. Its envelope (version, run id, status, a config and metrics), every declared field by its declared type,
    numbers where metrics belong (a string there would crash a table), and what every reader needs."""
    return (_envelope_problem(record) or _declared_problem(record) or _metric_values_problem(record["metrics"])
            or _required_problem(record))


def _envelope_problem(record: Any) -> str | None:
    if not isinstance(record, dict):
        return "not a JSON object"
    if record.get("schema_version") != SCHEMA_VERSION:
        return f"schema_version {record.get('schema_version')!r}, not {SCHEMA_VERSION}"
    if not isinstance(record.get("run_id"), str) or not SAFE_NAME.match(record["run_id"]):
        return f"run_id {record.get('run_id')!r} is not a run id"
    if record.get("status") not in STATUSES:
        return f"status {record.get('status')!r} is not one of {', '.join(STATUSES)}"
    for key in ("config", "metrics"):
        if not isinstance(record.get(key), dict):
            return f"{key} is missing or not an object"
    return None


def _declared_problem(record: dict) -> str | None:
    if (why := problem(record, TOP)) is not None:
        return why
    for section, declared in (("config", CONFIG), ("metrics", METRICS), ("env", ENV), ("data", DATA)):
        if isinstance(record.get(section), dict) and (why := problem(record[section], declared, section)):
            return why
    for i, point in enumerate(record.get("history") or []):
        if (why := problem(point, HISTORY_POINT, f"history[{i}]")) is not None:
            return why
    return None


def _metric_values_problem(metrics: dict) -> str | None:
    """A metric not declared is kept, but must still be what readers take metrics for: a number, an object, a
    list or null."""
    for key, value in metrics.items():
        if isinstance(value, (bool, str)) or not (value is None or isinstance(value, (int, float, dict, list))):
            return f"metrics.{key} is {str(value)[:60]!r}, not a number"
    return None


def _required_problem(record: dict) -> str | None:
    if (why := _missing(record["config"], REQUIRED["config"], "config")) is not None:
        return why
    if record["status"] in FINISHED:
        if (why := _missing(record["metrics"], REQUIRED["finished metrics"], "metrics")) is not None:
            return why
        if record["metrics"]["steps"] < 1:  # a finished run trained: a rate per step is read from every one
            return f"metrics.steps is {record['metrics']['steps']} in a {record['status']} run, not at least 1"
    for i, point in enumerate(record.get("history") or []):
        if (why := _missing(point, REQUIRED["history"], f"history[{i}]")) is not None:
            return why
    return None
