"""How long the runs still to do will take, from the step times of finished runs like them.

A campaign on a few cores is planned in CPU hours: ``commbench status --grid`` sums, for every run without a
finished record, its steps left times seconds per step: for a run being trained now, its own pace (``live_step_s``,
from its progress file: what the machine gives it today); else the mean of the done runs of the same kind in
the same results folder (``train_s / steps``: evaluation and start-up not counted); else the pace of a running run
of that kind. Runs with none of these have no estimate and are counted apart, never guessed.

A kind is whatever sets a step's cost: task, method, workers, backend, data set, total batch, emulated link (a step
over 100 Mbit/s is not timed by one over loopback), precision (bf16 autocast is about twice as fast on a CPU with
AMX), threads per worker, the model's options (BatchNorm over 32-image slices runs a layer's statistics 16 times
where a batch of 512 ran them once) and the device: a step on a GPU does not time one on the CPU here.
"""
from __future__ import annotations

import statistics
from typing import Iterable, Mapping

from commbench.analysis.runs import Run, as_run

PRECISION_BEFORE_RECORDED = "fp32"  # records from before the precision setting trained in fp32, its default


def _kind(cfg: Mapping, device: str | None) -> tuple:
    options = cfg.get("model_options") or {}  # records from before model options were recorded: none
    return (cfg.get("task"), cfg.get("method"), cfg.get("workers"), cfg.get("backend"), cfg.get("dataset"),
            cfg.get("global_batch"), cfg.get("net"), cfg.get("node_link"),
            cfg.get("precision") or PRECISION_BEFORE_RECORDED, cfg.get("threads"),
            tuple(sorted((k, repr(v)) for k, v in options.items())), device)


def _device_to_train_on(cfg: Mapping, here: str) -> str:
    """The device a run still to do trains on: its own setting, or for ``auto`` what this machine has."""
    return here if cfg.get("device", "auto") == "auto" else cfg["device"]


def step_seconds(records: Iterable[Run | dict]) -> dict[tuple, float]:
    """Mean seconds per training step of the done runs (or records, as ``commbench status`` reads them), by kind
    (the module's docstring)."""
    times: dict[tuple, list[float]] = {}
    for r in map(as_run, records):
        m = r.metrics
        if r.done and m.get("train_s") and m.get("steps") and r.timed_on_one_device:
            # keyed by the configuration as stored, as the runs still to do are: one kind for both
            times.setdefault(_kind(r.stored, r.env.get("device")), []).append(m["train_s"] / m["steps"])
    return {k: statistics.fmean(v) for k, v in times.items()}


def time_left(todo: Iterable[Mapping], records: Iterable[Run | dict], here: str = "cpu") -> tuple[float, int, int]:
    """(seconds, runs estimated, runs without an estimate) for the configurations in ``todo`` (each with
    ``steps``; ``done_steps`` where a checkpoint or a running attempt holds some of them; ``live_step_s`` where
    the run is being trained now), on a machine whose ``auto`` device is ``here`` ("cpu" or "cuda")."""
    todo = list(todo)
    per_step = step_seconds(records)
    kinds = [_kind(cfg, _device_to_train_on(cfg, here)) for cfg in todo]
    running: dict[tuple, list[float]] = {}
    for cfg, kind in zip(todo, kinds):
        if cfg.get("live_step_s"):
            running.setdefault(kind, []).append(cfg["live_step_s"])
    seconds, known, unknown = 0.0, 0, 0
    for cfg, kind in zip(todo, kinds):
        s = cfg.get("live_step_s") or per_step.get(kind)
        if s is None and kind in running:
            s = statistics.fmean(running[kind])
        if s is None:
            unknown += 1
        else:
            seconds += s * max(cfg["steps"] - (cfg.get("done_steps") or 0), 0)
            known += 1
    return seconds, known, unknown


HOW_ESTIMATED = ("from the pace of the runs being trained, and the step times of done runs of the same kind: task, "
                 "method, workers, batch, link, precision, threads, model and device")


def describe(seconds: float, known: int, unknown: int, how: bool = True) -> str:
    """One line for the status summary ("" when nothing is left); ``how=False`` leaves out how it was estimated
    (``HOW_ESTIMATED``, said once where several estimates are listed)."""
    if not known and not unknown:
        return ""
    hours = f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"
    said = f"about {hours} of training left for {known} run{'s' * (known != 1)}" if known else "no estimate"
    return said + (f"; {unknown} run{'s' * (unknown != 1)} without a finished or running run like them to time"
                   if unknown else "") + (f" ({HOW_ESTIMATED})" if how else "")
