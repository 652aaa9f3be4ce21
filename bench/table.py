"""Comparison tables, always regenerated from the stored records."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from .records import iter_records

COLUMNS = ["task", "dataset", "method", "params", "workers", "backend", "tier", "steps", "n", "status", "top1",
           "bytes/worker/step", "recv/worker/step", "fp32/sent", "images/s"]


def records_frame(root: Path) -> pd.DataFrame:
    """One row per record with the columns the tables need (flattened from config and metrics)."""
    rows = []
    for r in iter_records(root):
        cfg, m = r.get("config", {}), r.get("metrics", {})
        workers, steps = cfg.get("workers"), m.get("steps") or 0
        sent = m.get("bytes_sent")
        rows.append({
            "run_id": r["run_id"], "status": r["status"], "task": cfg.get("task"), "dataset": cfg.get("dataset"),
            "method": cfg.get("method"), "params": chosen_params(cfg), "workers": workers, "backend": cfg.get("backend"),
            "tier": cfg.get("tier"), "seed": cfg.get("seed"), "steps": steps, "top1": m.get("top1"),
            "top5": m.get("top5"), "images_per_s": m.get("images_per_s"), "bytes_sent": sent,
            "bytes_fp32_equiv": m.get("bytes_fp32_equiv"),
            "bytes_per_worker_step": sent / (workers * steps) if sent is not None and workers and steps else None,
            "received_per_worker_step": (m["bytes_received"] / (workers * steps)
                                         if m.get("bytes_received") is not None and workers and steps else None),
            "compression": (m["bytes_fp32_equiv"] / sent) if sent else None,
            "substitute": (r.get("data") or {}).get("substitute_for"),
        })
    return pd.DataFrame(rows)


def chosen_params(cfg: dict) -> str:
    """The method parameters a run set itself (by --set or a grid axis), as ``k=v``: what tells its rows
    apart from other runs of the same method. Recipe and method defaults are left out."""
    sources = cfg.get("sources", {})
    return ", ".join(f"{k}={v}" for k, v in sorted(cfg.get("method_params", {}).items())
                     if sources.get(f"method.{k}", "").startswith("set by user"))


def _mean_std(series: pd.Series, fmt: str) -> str:
    values = series.dropna()
    if values.empty:
        return "—"
    if len(values) == 1:
        return format(values.iloc[0], fmt)
    return f"{format(values.mean(), fmt)} ± {format(values.std(), fmt)}"


def comparison(frame: pd.DataFrame) -> pd.DataFrame:
    """Runs that differ only by seed share a row: mean ± std and n."""
    if frame.empty:
        return pd.DataFrame(columns=COLUMNS)
    keys = ["task", "dataset", "method", "params", "workers", "backend", "tier", "steps"]
    rows = []
    for key, group in frame.groupby(keys, dropna=False, sort=True):
        row = dict(zip(keys, key))
        statuses = group["status"].value_counts()
        row["n"] = len(group)
        row["status"] = ", ".join(f"{s} {c}" if len(statuses) > 1 or c > 1 else s for s, c in statuses.items())
        done = group[group["status"] == "done"]
        row["top1"] = _mean_std(done["top1"], ".4f")
        per_step = done["bytes_per_worker_step"].dropna()
        row["bytes/worker/step"] = f"{per_step.mean():,.0f}" if not per_step.empty else "—"
        received = done["received_per_worker_step"].dropna()
        row["recv/worker/step"] = f"{received.mean():,.0f}" if not received.empty else "—"
        ratio = done["compression"].dropna()
        row["fp32/sent"] = f"{ratio.mean():.2f}x" if not ratio.empty else "—"
        row["images/s"] = _mean_std(done["images_per_s"], ".0f")
        if group["substitute"].notna().any():
            row["dataset"] = f"{row['dataset']} (for {group['substitute'].dropna().iloc[0]})"
        rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)


def render(table: pd.DataFrame, fmt: str) -> str:
    if fmt == "csv":
        return table.to_csv(index=False)
    if table.empty:
        return "(no records)\n"
    return table.to_markdown(index=False, disable_numparse=True) + "\n"
