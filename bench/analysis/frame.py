"""The records of a results folder as one pandas DataFrame: the way a script reads commbench's results.

>>> import commbench
>>> runs = commbench.load_records("results/campaign")          # doctest: +SKIP
>>> runs.groupby(["config.method", "config.workers"])["metrics.top1"].mean()   # doctest: +SKIP

One row per record. Columns: ``run_id``, ``status``, ``error``; then every configuration field as
``config.<name>`` (nested ones dotted: ``config.optimizer.name``, ``config.lr_schedule.base_lr``,
``config.method_params.k``), every metric as ``metrics.<name>`` (``metrics.top1``, ``metrics.bytes_sent``,
``metrics.time_breakdown.wait_s``) and the data's provenance as ``data.<name>``. Units are the records' own
(docs/record-format.md): accuracy a fraction (0-1), bytes in bytes, times in seconds. Plain values only: a
list in a record (``config.lr_schedule.milestones``) stays a list; the history stays out (``history=True``
adds it as a column of lists).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from commbench.analysis.runs import read_runs
from commbench.config import flat_items


def load_records(results: str | Path, *, history: bool = False) -> pd.DataFrame:
    """Every readable record under ``results`` (its ``runs/``), one row each, sorted by run id. The configuration
    columns are the record's as stored (a field it predates stays empty): what the file says, for scripts."""
    rows = []
    for run in read_runs(Path(results)):
        row = {"run_id": run.run_id, "status": run.status, "error": run.error}
        for part, value in (("config", run.stored), ("metrics", run.metrics), ("data", run.data)):
            row.update(flat_items(value, f"{part}."))
        if history:
            row["history"] = list(run.history)
        rows.append(row)
    frame = pd.DataFrame(rows)
    return frame.sort_values("run_id", ignore_index=True) if not frame.empty else frame
