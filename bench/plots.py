"""Figures from the stored records (seaborn): what the papers plot, redrawn from our runs.

Each figure is written as PNG and PDF, named after what it shows and the task it shows it for
(``accuracy-vs-bytes_lenet-mnist.png``). A figure is drawn only when the records hold something to draw.
Output is byte-for-byte reproducible: no timestamps in the files, runs sorted before plotting.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd

from .records import iter_records

THRESHOLD_METHODS = ("wgt", "bgt", "qgt")


def runs_frame(results: Path) -> pd.DataFrame:
    """One row per done run: the configuration columns the figures group by, and the metrics."""
    rows = []
    for r in iter_records(results):
        cfg, m, data = r.get("config") or {}, r.get("metrics") or {}, r.get("data") or {}
        if r.get("status") != "done" or m.get("top1") is None:
            continue
        params = cfg.get("method_params") or {}
        rows.append({
            "run_id": r["run_id"], "task": cfg.get("task"), "method": cfg.get("method"),
            "dataset": data.get("dataset") or cfg.get("dataset"), "workers": cfg.get("workers"),
            "backend": cfg.get("backend"), "seed": cfg.get("seed"), "tier": cfg.get("tier"),
            "steps": cfg.get("steps"), "optimizer": (cfg.get("optimizer") or {}).get("name"),
            "threshold": params.get("threshold"), "k": params.get("k"), "warmup": params.get("warmup"),
            "local_rule": params.get("local_rule"), "net": (r.get("env") or {}).get("net"),
            "top1": 100.0 * m["top1"], "gb_sent": (m.get("bytes_sent") or 0) / 1e9,
            "gb_paper": (m["paper_bytes"] / 1e9) if m.get("paper_bytes") is not None else None,
            "images_per_s": m.get("images_per_s"), "history": r.get("history") or [],
        })
    frame = pd.DataFrame(rows)
    return frame.sort_values("run_id", ignore_index=True) if not frame.empty else frame


@dataclass(frozen=True)
class Figure:
    name: str         # file stem prefix: what the figure shows
    title: str
    draw: Callable    # (axes, frame of one task) -> bool (False: nothing to draw)
    select: Callable  # frame -> the rows this figure uses


def _accuracy_vs_bytes(ax, frame: pd.DataFrame) -> bool:
    import seaborn as sns

    data = frame.sort_values(["method", "threshold"])
    swept = data[data["method"].isin(THRESHOLD_METHODS)]
    if not swept.empty:  # one line per method through its thresholds
        sns.lineplot(data=swept, x="gb_sent", y="top1", hue="method", style="method", markers=True, dashes=False,
                     errorbar=None, estimator="mean", ax=ax)
    for _, row in data[data["method"] == "baseline"].iterrows():  # fp32 reference points, no line
        ax.scatter(row["gb_sent"], row["top1"], marker="*", s=80, color="black", zorder=3)
    if (data["method"] == "baseline").any():
        ax.scatter([], [], marker="*", s=80, color="black", label="baseline (fp32)")
        ax.legend(fontsize=7)
    for _, row in data.drop_duplicates(["method", "threshold"]).dropna(subset=["threshold"]).iterrows():
        ax.annotate(f"{row['threshold']:g}", (row["gb_sent"], row["top1"]), fontsize=7, alpha=0.7,
                    textcoords="offset points", xytext=(3, 3))
    ax.set_xscale("log")
    ax.set(xlabel="GB sent by all workers (log)", ylabel="top-1 accuracy (%)")
    return True


def _accuracy_vs_workers(ax, frame: pd.DataFrame) -> bool:
    import seaborn as sns

    if frame["workers"].nunique() < 2:
        return False
    sns.lineplot(data=frame, x="workers", y="top1", hue="method", style="optimizer", markers=True,
                 errorbar="sd", ax=ax)
    ax.set_xscale("log", base=2)
    ax.set(xlabel="workers (log2)", ylabel="top-1 accuracy (%)")
    return True


def _accuracy_vs_delay(ax, frame: pd.DataFrame) -> bool:
    import seaborn as sns

    if frame["k"].nunique() < 2:
        return False
    sns.lineplot(data=frame, x="k", y="top1", hue="local_rule", style="local_rule", markers=True, errorbar="sd",
                 ax=ax)
    ax.set(xlabel="delay steps k", ylabel="top-1 accuracy (%)")
    return True


def _training_curves(ax, frame: pd.DataFrame) -> bool:
    import seaborn as sns

    points = [{"step": h["step"], "train loss": h["train_loss"], "method": row["method"], "run": row["run_id"]}
              for _, row in frame.iterrows() for h in row["history"] if h.get("train_loss") is not None]
    if not points:
        return False
    sns.lineplot(data=pd.DataFrame(points), x="step", y="train loss", hue="method", units="run", estimator=None,
                 lw=0.8, alpha=0.8, ax=ax)
    ax.set_yscale("log")
    return True


def _throughput_vs_workers(ax, frame: pd.DataFrame, model: Callable | None = None) -> bool:
    import seaborn as sns

    data = frame.dropna(subset=["images_per_s"])
    if data["workers"].nunique() < 2:
        return False
    data = data.assign(source="measured")
    if model is not None:
        modelled = model(data)
        if modelled is not None and not modelled.empty:
            data = pd.concat([data, modelled.assign(source="modelled")], ignore_index=True)
    if "modelled_images_per_s" in data and data["modelled_images_per_s"].notna().any():
        # the performance model's prediction for the same runs (bench.perfmodel.measured)
        modelled = data.dropna(subset=["modelled_images_per_s"]).assign(
            images_per_s=lambda f: f["modelled_images_per_s"], source="modelled (TernGrad Eq. 8-9)")
        data = pd.concat([data, modelled], ignore_index=True)
    sns.lineplot(data=data, x="workers", y="images_per_s", hue="method", style="source", markers=True,
                 errorbar=None, ax=ax)
    ax.set(xlabel="workers", ylabel="images/s (training)")
    return True


FIGURES = [
    Figure("accuracy-vs-bytes", "Accuracy vs bytes sent (threshold paper Figs. 3, 5, 7)", _accuracy_vs_bytes,
           lambda f: f[f["method"].isin(THRESHOLD_METHODS + ("baseline",))]),
    Figure("accuracy-vs-workers", "Accuracy vs workers (TernGrad Fig. 3)", _accuracy_vs_workers,
           lambda f: f[f["method"].isin(("baseline", "terngrad"))]),
    Figure("accuracy-vs-delay", "Accuracy vs delay steps (SSD-SGD Table 2)", _accuracy_vs_delay,
           lambda f: f[f["method"] == "ssdsgd"].dropna(subset=["k"])),
    Figure("training-curves", "Training loss", _training_curves, lambda f: f),
    Figure("throughput-vs-workers", "Throughput vs workers", _throughput_vs_workers, lambda f: f),
]


def plot_all(results: Path, out: Path, model: Callable | None = None, formats=("png", "pdf")) -> list[Path]:
    """Every figure the records support, per task; returns the files written (sorted)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="paper")
    frame = runs_frame(results)
    written: list[Path] = []
    if frame.empty:
        return written
    out.mkdir(parents=True, exist_ok=True)
    if frame["net"].notna().any():
        from .perfmodel.measured import comparison

        modelled = {row["run_id"]: row["modelled_images_per_s"] for row in comparison(results)}
        frame["modelled_images_per_s"] = frame["run_id"].map(modelled)
    for figure in FIGURES:
        # runs on an emulated network are their own figures, one per link rate
        selected = figure.select(frame).assign(net=lambda f: f["net"].fillna(""))
        for (task, net), group in selected.groupby(["task", "net"], sort=True):
            if group.empty:
                continue
            if net and figure.name == "throughput-vs-workers":
                group = pd.concat([group, selected[(selected["task"] == task) & (selected["workers"] == 1)
                                                   & (selected["net"] == "")]])  # the 1-worker point
            suffix = f"_{net}" if net else ""
            fig, ax = plt.subplots(figsize=(5.5, 3.8))
            kwargs = {"model": model} if figure.draw is _throughput_vs_workers else {}
            if figure.draw(ax, group.reset_index(drop=True), **kwargs):
                link = f", links {net}" if net else ""
                ax.set_title(f"{figure.title}\n{task} ({', '.join(sorted(group['dataset'].dropna().unique()))}"
                             f"{link})", fontsize=9)
                fig.tight_layout()
                for fmt in formats:
                    path = out / f"{figure.name}_{task}{suffix}.{fmt}"
                    # no creation date or software version in the files: the same records give the same bytes
                    meta = {"CreationDate": None, "Producer": None} if fmt == "pdf" else {"Software": None}
                    fig.savefig(path, dpi=120, metadata=meta)
                    written.append(path)
            plt.close(fig)
    return sorted(written)
