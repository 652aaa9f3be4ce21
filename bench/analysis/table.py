"""Comparison tables, always regenerated from the stored records."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from commbench.store.records import Status, iter_records

COLUMNS = ["task", "dataset", "method", "params", "workers", "backend", "tier", "steps", "n", "status", "top1",
           "bytes/worker/step", "recv/worker/step", "fp32/sent", "images/s", "comm exposed", "time to target (s)"]
# time to accuracy: by default the first point at which a run reaches its setting's baseline's final top-1 minus this
TARGET_BELOW_BASELINE = 0.005


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
            "exposed": _exposed_share(m),
            "curve": [(h["train_s"], h["top1"]) for h in r.get("history", [])
                      if isinstance(h.get("train_s"), (int, float)) and isinstance(h.get("top1"), (int, float))],
        })
    return pd.DataFrame(rows)


def _exposed_share(metrics: dict) -> float | None:
    """The share of training time spent waiting for communication that computation did not hide."""
    breakdown, train_s = metrics.get("time_breakdown"), metrics.get("train_s")
    if not isinstance(breakdown, dict) or not train_s or not isinstance(breakdown.get("wait_s"), (int, float)):
        return None
    return breakdown["wait_s"] / train_s


def time_to(curve: list[tuple[float, float]], target: float) -> float | None:
    """Training seconds at the first evaluation whose top-1 reaches ``target``, or None if none does."""
    return next((t for t, top1 in curve if top1 >= target), None)


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


def comparison(frame: pd.DataFrame, target: float | None = None) -> pd.DataFrame:
    """Runs that differ only by seed share a row: mean ± std and n. Time to accuracy: training seconds until a
    run first reaches ``target`` top-1, or by default its setting's baseline's final top-1 minus 0.5 points."""
    if frame.empty:
        return pd.DataFrame(columns=COLUMNS)
    keys = ["task", "dataset", "method", "params", "workers", "backend", "tier", "steps"]
    setting = ["task", "dataset", "workers", "backend", "tier", "steps"]
    done_frame = frame[frame["status"] == Status.DONE]
    baseline_top1 = done_frame[done_frame["method"] == "baseline"].groupby(setting, dropna=False)["top1"].mean()
    rows = []
    for key, group in frame.groupby(keys, dropna=False, sort=True):
        row = dict(zip(keys, key))
        statuses = group["status"].value_counts()
        row["n"] = len(group)
        row["status"] = ", ".join(f"{s} {c}" if len(statuses) > 1 or c > 1 else s for s, c in statuses.items())
        done = group[group["status"] == Status.DONE]
        row["top1"] = _mean_std(done["top1"], ".4f")
        per_step = done["bytes_per_worker_step"].dropna()
        row["bytes/worker/step"] = f"{per_step.mean():,.0f}" if not per_step.empty else "—"
        received = done["received_per_worker_step"].dropna()
        row["recv/worker/step"] = f"{received.mean():,.0f}" if not received.empty else "—"
        ratio = done["compression"].dropna()
        row["fp32/sent"] = f"{ratio.mean():.2f}x" if not ratio.empty else "—"
        row["images/s"] = _mean_std(done["images_per_s"], ".0f")
        exposed = done["exposed"].dropna()
        row["comm exposed"] = f"{100 * exposed.mean():.0f}%" if not exposed.empty else "—"
        goal = target
        if goal is None:
            base = baseline_top1.get(tuple(row[k] for k in setting))
            goal = base - TARGET_BELOW_BASELINE if base is not None and pd.notna(base) else None
        times = [time_to(c, goal) for c in done["curve"]] if goal is not None else []
        reached = [t for t in times if t is not None]
        row["time to target (s)"] = ("—" if goal is None else f"not reached (top-1 {goal:.4f})" if not reached
                                     else f"{sum(reached) / len(reached):.1f}" + (f" ({len(reached)} of {len(times)})"
                                                                                 if len(reached) < len(times) else ""))
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
