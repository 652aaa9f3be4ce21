"""The records of a results folder, read once, as typed runs; and the one DataFrame the tables, the figures and
``commbench.load_records`` are built from.

A :class:`Run` is one record: its configuration as a :class:`~commbench.config.RunConfig` (through
``RunConfig.from_dict``, so every value a record made before its setting existed reads as the value it had then,
filled here and nowhere else), its metrics, history, environment and data provenance. :func:`runs_frame` turns
runs into one row each: the configuration and metric columns both readers use, and the derived ones (the eval
target, the run's setting and its baseline's, whether its seconds time it) computed in one place.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from commbench.config import RunConfig, flat_items, setting_of
from commbench.store.records import Status, cpu_of, iter_records, timed_on_one_device

# what a run's baseline shares with it: its setting less the method's own choices
METHOD_FIELDS = ("method", "method_params", "method_version", "exchange", "bucket_mb")


@dataclass(frozen=True)
class Run:
    run_id: str
    status: str
    error: str | None
    config: RunConfig                       # implicit values filled
    stored: Mapping[str, Any]               # the configuration as the record stores it (load_records shows it so)
    metrics: Mapping[str, Any] = field(default_factory=dict)
    history: tuple = ()
    env: Mapping[str, Any] = field(default_factory=dict)
    data: Mapping[str, Any] = field(default_factory=dict)
    record: Mapping[str, Any] = field(default_factory=dict, repr=False)  # for the store's own helpers

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> "Run":
        stored = record.get("config") or {}
        return cls(record["run_id"], record["status"], record.get("error"), config_of(stored), stored,
                   record.get("metrics") or {}, tuple(record.get("history") or ()), record.get("env") or {},
                   record.get("data") or {}, record)

    @property
    def done(self) -> bool:
        return self.status == Status.DONE

    @property
    def timed_on_one_device(self) -> bool:
        return timed_on_one_device(self.record)

    @property
    def cpu(self) -> str:
        return cpu_of(self.record)

    @property
    def params(self) -> dict:
        return dict(self.config.method_params or {})

    def setting(self) -> dict:
        """What the run computes, less its seed (its seeds and reruns share it)."""
        stored = self.stored
        return setting_of(stored) if stored.get("task") and stored.get("method") else dict(stored)


def config_of(stored: Mapping[str, Any]) -> RunConfig:
    """A stored configuration as a RunConfig: the fields it predates at the value they had then (``from_dict``),
    and a field without such a value that it lacks as None (a partial record, as scripts and tests write)."""
    missing = {f.name: None for f in dataclasses.fields(RunConfig)
               if f.name not in stored and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING}
    return RunConfig.from_dict({**missing, **stored})


def read_runs(results: str | Path, say: Callable[[str], None] | None = None) -> Iterator[Run]:
    """Every readable record below ``results`` (any ``runs/`` folder), as a run, in path order."""
    for record in iter_records(Path(results), say):
        yield Run.of(record)


def as_run(run: Run | Mapping[str, Any]) -> Run:
    """``run`` as a Run. Callers that read the store themselves still pass record dicts, and a partial one (a
    test's, a run's outcome before it is stored) may lack its id and status: those read as None, as a raw
    ``.get`` read them."""
    return run if isinstance(run, Run) else Run.of({"run_id": None, "status": None, **run})


def _key(value: dict) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _curve(history) -> list[tuple]:
    return [(h["train_s"], h["top1"]) for h in history
            if isinstance(h.get("train_s"), (int, float)) and isinstance(h.get("top1"), (int, float))]


def _timed(history) -> bool:
    """Whether its evaluations say when they happened: a history without train_s cannot time the target."""
    return any(isinstance(h.get("train_s"), (int, float)) for h in history
               if isinstance(h, dict) and isinstance(h.get("top1"), (int, float)))


def run_row(run: Run) -> dict:
    """The one frame's row of ``run``: configuration, metrics and the derived columns."""
    c, m = run.config, run.metrics
    setting = run.setting()
    history = run.history if run.timed_on_one_device else ()  # for the clock only
    params = run.params
    return {
        "run_id": run.run_id, "status": run.status, "task": c.task, "dataset": c.dataset,
        "data_dataset": run.data.get("dataset") or c.dataset, "synthetic": bool(run.data.get("synthetic")),
        "substitute": run.data.get("substitute_for"), "method": c.method, "workers": c.workers,
        "backend": c.backend, "tier": c.tier, "seed": c.seed, "planned_steps": c.steps,
        "steps": m.get("steps") or 0, "global_batch": c.global_batch, "batch_per_worker": c.batch_per_worker,
        "recipe": c.recipe, "optimizer": (c.optimizer or {}).get("name"),
        "params_json": json.dumps(params, sort_keys=True), "threshold": params.get("threshold"),
        "k": params.get("k"), "warmup": params.get("warmup"), "local_rule": params.get("local_rule"),
        "net": run.env.get("net") or "", "eval_target": c.eval_target,
        "top1": m.get("top1"), "top5": m.get("top5"), "images_per_s": m.get("images_per_s"),
        "bytes_sent": m.get("bytes_sent"), "bytes_received": m.get("bytes_received"),
        "bytes_fp32_equiv": m.get("bytes_fp32_equiv"), "paper_bytes": m.get("paper_bytes"),
        "full_history": list(run.history), "one_device": run.timed_on_one_device,
        "curve": _curve(history), "timed": _timed(history), "cpu": run.cpu,
        "setting": _key(setting), "setting_flat": flat_items(setting),
        "baseline_setting": _key({k: v for k, v in setting.items() if k not in METHOD_FIELDS}),
    }


def runs_frame(runs):
    """One row per run (:func:`run_row`), in the order given, as a pandas DataFrame (pandas imported here: the
    commands that only read runs, ``status``, start without it)."""
    import pandas as pd

    return pd.DataFrame([run_row(run) for run in runs])
