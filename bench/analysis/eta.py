"""How long the runs still to do will take, from the step times of finished runs like them.

A campaign on a few cores is planned in CPU hours: ``commbench status --grid`` sums, for every run without a
finished record, its steps left times seconds per step: for a run being trained now, its own pace (``live_step_s``,
from its progress file: what the machine gives it today); else the mean of the done runs of the same task, method,
workers, backend, data set, total batch and emulated link in the same results folder (``train_s / steps``:
evaluation and start-up not counted; a step over a 100 Mbit/s link is not timed by one over loopback); else the
pace of a running run of that kind. Runs with none of these have no estimate and are counted apart, never guessed.
"""
from __future__ import annotations

import statistics
from typing import Iterable, Mapping

from commbench.store.records import Status, timed_on_one_device


def _kind(cfg: Mapping) -> tuple:
    return (cfg.get("task"), cfg.get("method"), cfg.get("workers"), cfg.get("backend"), cfg.get("dataset"),
            cfg.get("global_batch"), cfg.get("net"), cfg.get("node_link"))


def step_seconds(records: Iterable[dict]) -> dict[tuple, float]:
    """Mean seconds per training step of the done runs, by (task, method, workers, backend, data set, batch,
    link)."""
    times: dict[tuple, list[float]] = {}
    for r in records:
        m, cfg = r.get("metrics") or {}, r.get("config")
        if (r.get("status") == Status.DONE and isinstance(cfg, dict) and m.get("train_s") and m.get("steps")
                and timed_on_one_device(r)):
            times.setdefault(_kind(cfg), []).append(m["train_s"] / m["steps"])
    return {k: statistics.fmean(v) for k, v in times.items()}


def time_left(todo: Iterable[Mapping], records: Iterable[dict]) -> tuple[float, int, int]:
    """(seconds, runs estimated, runs without an estimate) for the configurations in ``todo`` (each with
    ``steps``; ``done_steps`` where a checkpoint or a running attempt holds some of them; ``live_step_s`` where
    the run is being trained now)."""
    todo = list(todo)
    per_step = step_seconds(records)
    running: dict[tuple, list[float]] = {}
    for cfg in todo:
        if cfg.get("live_step_s"):
            running.setdefault(_kind(cfg), []).append(cfg["live_step_s"])
    seconds, known, unknown = 0.0, 0, 0
    for cfg in todo:
        s = cfg.get("live_step_s") or per_step.get(_kind(cfg))
        if s is None and _kind(cfg) in running:
            s = statistics.fmean(running[_kind(cfg)])
        if s is None:
            unknown += 1
        else:
            seconds += s * max(cfg["steps"] - (cfg.get("done_steps") or 0), 0)
            known += 1
    return seconds, known, unknown


def describe(seconds: float, known: int, unknown: int) -> str:
    """One line for the status summary ("" when nothing is left)."""
    if not known and not unknown:
        return ""
    hours = f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"
    said = f"about {hours} of training left for {known} run{'s' * (known != 1)}" if known else "no estimate"
    return said + (f"; {unknown} run{'s' * (unknown != 1)} without a finished or running run like them to time"
                   if unknown else "") + (" (from the pace of the runs being trained, and the step times of done runs "
                                          "of the same task, method, workers, batch and link)")
