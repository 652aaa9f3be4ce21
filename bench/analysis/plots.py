"""Figures from the stored records (seaborn): for any results folder, every method of a setting (accuracy
against bytes sent, workers and training time, with error bars over seeds; loss curves; throughput); with
``--paper`` also what the papers plot, redrawn from the runs of their experiments.

A figure is one experiment: it sweeps a few settings (the x-axis and the lines) and holds every other setting
fixed, so runs of different lengths, batches or data never share a figure. Each figure declares the settings
that must be equal across it (``fixed``); the records are split on them, and the file is named after the
figure, the task and those settings (``bytes-accuracy_lenet-mnist_fashion-mnist_w8_sim_b128_s1000_momentum``),
so a name always means the same experiment whatever else is in the results folder. Where runs of one method
differ in other method parameters (TernGrad without clipping beside TernGrad), each variant is its own line.

Accuracy is a fraction of the test set (0-1), as in the records and tables. Accuracy figures leave out
synthetic-data runs (their accuracy means nothing); throughput figures take only
real processes (``dist``), since simulated workers share one process. Each figure is written as PNG and PDF,
byte-for-byte reproducible: no timestamps in the files, runs sorted before plotting.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd

from commbench.store.safe_io import ensure_folder, write_with
from commbench.store.records import Status, iter_records, timed_on_one_device

THRESHOLD_METHODS = ("wgt", "bgt", "qgt")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
TOP1 = "top-1 accuracy (fraction of the test set)"  # one unit everywhere: the records' own
# how a fixed setting appears in a file name: column -> prefix (in this order)
NAME_PARTS = (("dataset", ""), ("workers", "w"), ("backend", ""), ("global_batch", "b"), ("batch_per_worker", "pw"),
              ("steps", "s"), ("optimizer", ""), ("recipe", ""), ("net", ""))


def runs_frame(results: Path) -> pd.DataFrame:
    """One row per done run: the configuration columns the figures group by, and the metrics."""
    rows = []
    for r in iter_records(results):
        cfg, m, data = r.get("config") or {}, r.get("metrics") or {}, r.get("data") or {}
        if r.get("status") != Status.DONE or m.get("top1") is None:
            continue
        params = cfg.get("method_params") or {}
        rows.append({
            "run_id": r["run_id"], "task": cfg.get("task"), "method": cfg.get("method"),
            "dataset": data.get("dataset") or cfg.get("dataset"), "synthetic": bool(data.get("synthetic")),
            "workers": cfg.get("workers"), "backend": cfg.get("backend"), "seed": cfg.get("seed"),
            "tier": cfg.get("tier"), "steps": cfg.get("steps"), "global_batch": cfg.get("global_batch"),
            "batch_per_worker": cfg.get("batch_per_worker"), "recipe": cfg.get("recipe"),
            "optimizer": (cfg.get("optimizer") or {}).get("name"), "params": json.dumps(params, sort_keys=True),
            "threshold": params.get("threshold"), "k": params.get("k"), "warmup": params.get("warmup"),
            "local_rule": params.get("local_rule"), "net": (r.get("env") or {}).get("net") or "",
            "top1": m["top1"], "gb_sent": (m.get("bytes_sent") or 0) / 1e9,
            "gb_paper": (m["paper_bytes"] / 1e9) if m.get("paper_bytes") is not None else None,
            "images_per_s": m.get("images_per_s"), "history": r.get("history") or [],
            "one_device": timed_on_one_device(r),  # its train_s can put its evaluations on a time axis
            "eval_target": cfg.get("eval_target"),
        })
    frame = pd.DataFrame(rows)
    return frame.sort_values("run_id", ignore_index=True) if not frame.empty else frame


def variant_labels(frame: pd.DataFrame) -> pd.Series:
    """Each run's line label: its method, plus every method parameter whose value varies among that method's runs
    in the figure (``bgt (threshold=0.001)``, ``terngrad (clip=0.0)``): different settings are different lines,
    never one point averaged over them; seeds of one setting share a label."""
    labels = {}
    for method, runs in frame.groupby("method", sort=True):
        params = {idx: json.loads(text) for idx, text in runs["params"].items()}
        keys = sorted({k for p in params.values() for k in p})
        varying = [k for k in keys if len({json.dumps(p.get(k), sort_keys=True) for p in params.values()}) > 1]
        for idx, p in params.items():
            shown = ", ".join(f"{k}={p.get(k)}" for k in varying)
            labels[idx] = method + (f" ({shown})" if shown else "")
    return pd.Series(labels).reindex(frame.index)


@dataclass(frozen=True)
class Figure:
    name: str                # file stem prefix: what the figure shows
    title: str
    fixed: tuple[str, ...]   # settings equal across one figure
    select: Callable         # frame -> the rows this figure may use
    draw: Callable           # (axes, frame of one experiment) -> bool (False: nothing worth drawing)


def _baseline_line(ax, frame: pd.DataFrame, y: str = "top1") -> None:
    base = frame[frame["method"] == "baseline"]
    if not base.empty:
        ax.axhline(base[y].mean(), color="black", ls="--", lw=1, label=f"baseline (n={len(base)})")


def _accuracy_vs_bytes(ax, frame: pd.DataFrame) -> bool:
    import seaborn as sns

    swept = frame[frame["method"].isin(THRESHOLD_METHODS)].sort_values(["method", "threshold"])
    if len(swept) < 2:
        return False
    sns.lineplot(data=swept, x="gb_sent", y="top1", hue="method", style="method", markers=True, dashes=False,
                 errorbar=None, estimator="mean", ax=ax)
    base = frame[frame["method"] == "baseline"]
    if not base.empty:  # the fp32 reference point
        ax.scatter(base["gb_sent"].mean(), base["top1"].mean(), marker="*", s=90, color="black", zorder=3,
                   label=f"baseline, fp32 (n={len(base)})")
    ax.legend(fontsize=7)
    for _, row in swept.drop_duplicates(["method", "threshold"]).dropna(subset=["threshold"]).iterrows():
        ax.annotate(f"{row['threshold']:g}", (row["gb_sent"], row["top1"]), fontsize=6, alpha=0.7,
                    textcoords="offset points", xytext=(3, 3))
    ax.set_xscale("log")
    _readable_log_ticks(ax)
    ax.set(xlabel="GB sent by all workers, on the wire (log)", ylabel=TOP1)
    return True


def _accuracy_vs_workers(ax, frame: pd.DataFrame) -> bool:
    import seaborn as sns

    data = frame.assign(line=variant_labels(frame))
    data = data[data.groupby("line")["workers"].transform("nunique") >= 2]  # lines, not lone points
    if data["workers"].nunique() < 2:
        return False
    sns.lineplot(data=data, x="workers", y="top1", hue="line", marker="o", errorbar="sd", ax=ax)
    ax.set_xscale("log", base=2)
    ax.legend(fontsize=7)
    backends = "; ".join(f"{b} at {', '.join(str(int(w)) for w in sorted(g['workers'].unique()))}"
                         for b, g in data.groupby("backend", sort=True))
    ax.set(xlabel=f"workers (log2; {backends})", ylabel=TOP1)
    return True


def _accuracy_vs_delay(ax, frame: pd.DataFrame) -> bool:
    import seaborn as sns

    ssd = frame[frame["method"] == "ssdsgd"].dropna(subset=["k"])
    # Table 2's runs: for each k its longest warm-up (499 or 500); Figure 4's shorter warm-ups are not delays
    warmup = ssd["warmup"].fillna(0)
    ssd = ssd[warmup >= warmup.groupby(ssd["k"]).transform("max") - 1]
    if ssd["k"].nunique() < 2:
        return False
    sns.lineplot(data=ssd, x="k", y="top1", hue="local_rule", style="local_rule", markers=True, errorbar="sd",
                 hue_order=sorted(ssd["local_rule"].unique()), style_order=sorted(ssd["local_rule"].unique()), ax=ax)
    _baseline_line(ax, frame)
    ax.legend(fontsize=7)
    ax.set(xlabel="delay steps k", ylabel=TOP1)
    return True


def _accuracy_vs_warmup(ax, frame: pd.DataFrame) -> bool:
    import seaborn as sns

    ssd = frame[frame["method"] == "ssdsgd"].dropna(subset=["k", "warmup"])
    if ssd.empty:
        return False
    counts = ssd.groupby("k")["warmup"].nunique()
    k = counts.idxmax()
    swept = ssd[ssd["k"] == k]
    if swept["warmup"].nunique() < 2:
        return False
    rules = sorted(swept["local_rule"].unique())
    sns.lineplot(data=swept, x="warmup", y="top1", hue="local_rule", style="local_rule", markers=True,
                 errorbar="sd", hue_order=rules, style_order=rules, ax=ax)
    _baseline_line(ax, frame)
    ax.legend(fontsize=7)
    ax.set(xlabel=f"warm-up iterations (synchronous SGD before the delay; k = {k:g})", ylabel=TOP1)
    return True


def _training_curves(ax, frame: pd.DataFrame) -> bool:
    import seaborn as sns

    labels = variant_labels(frame)
    points = [{"step": h["step"], "train loss": h["train_loss"], "line": labels[i], "run": row["run_id"]}
              for i, row in frame.iterrows() for h in row["history"] if h.get("train_loss") is not None]
    if len(frame) < 2 or len({p["step"] for p in points}) < 3:
        return False
    sns.lineplot(data=pd.DataFrame(points), x="step", y="train loss", hue="line", units="run", estimator=None,
                 lw=0.8, alpha=0.8, ax=ax)
    ax.legend(fontsize=6)
    ax.set_yscale("log")
    return True


def _throughput_vs_workers(ax, frame: pd.DataFrame, model: Callable | None = None) -> bool:
    import seaborn as sns

    data = frame.dropna(subset=["images_per_s"])
    if data["workers"].nunique() < 2:
        return False
    data = data.assign(source="measured", line=variant_labels(data))
    if model is not None:
        modelled = model(data)
        if modelled is not None and not modelled.empty:
            data = pd.concat([data, modelled.assign(source="modelled")], ignore_index=True)
    # the performance model's predictions for the same runs (bench.perfmodel.measured)
    for column, source in (("modelled_images_per_s", "model, 1-worker profile"),
                           ("loopback_modelled_images_per_s", "model, loopback profile")):
        if column in data and data[column].notna().any():
            modelled = data.dropna(subset=[column]).assign(images_per_s=lambda f, c=column: f[c], source=source)
            data = pd.concat([data, modelled], ignore_index=True)
    sns.lineplot(data=data, x="workers", y="images_per_s", hue="line", style="source", markers=True,
                 errorbar=None, ax=ax)
    ax.legend(fontsize=6)
    ax.set_xticks(sorted(int(w) for w in data["workers"].unique()))
    ax.set(xlabel="workers (one process each)", ylabel="images/s (training)")
    return True


def _real_data(f: pd.DataFrame) -> pd.DataFrame:
    return f[~f["synthetic"]]


def _history_curve(group: pd.DataFrame) -> pd.DataFrame:
    """Top-1 against GB sent at each evaluation step, the mean over a variant's seeds at the steps all of them
    evaluated (the seeds of a threshold method send different bytes by the same step)."""
    points = [{"step": h.get("step"), "gb": h["bytes_sent"] / 1e9, "top1": h["top1"]}
              for _, row in group.iterrows() for h in row["history"]
              if isinstance(h.get("top1"), (int, float)) and isinstance(h.get("bytes_sent"), (int, float))]
    if not points:
        return pd.DataFrame(columns=["gb", "top1"])
    by_step = pd.DataFrame(points).groupby("step")
    curve = by_step[["gb", "top1"]].mean().assign(count=by_step.size())
    return curve[curve["count"] == len(group)]


def _coincident_offsets(ends: dict[str, tuple[float, float]]) -> dict[str, int]:
    """How many places (0, 1, 2, ...) to shift each variant's end point sideways so that points which coincide
    (within 1% of their bytes and 0.001 of top-1) stay visible: same bytes and accuracy is a finding, not a
    reason for one method to vanish behind another."""
    shifts, placed = {}, []
    for label, (gb, top1) in ends.items():
        same = [other for other, (g, t) in placed if abs(g - gb) <= 0.01 * max(g, gb) and abs(t - top1) <= 1e-3]
        shifts[label] = len(same)
        placed.append((label, (gb, top1)))
    return shifts


def _readable_log_ticks(ax) -> None:
    """Labels at 1, 2 and 5 per decade over up to two decades, 1 and 3 up to four, powers of ten beyond; no
    minor labels: matplotlib labels every minor tick of an axis under a decade (2.925x10^0, 2.95x10^0, ...) and
    those labels run into each other."""
    import math

    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.autoscale_view()
    lo, hi = sorted(ax.get_xlim())
    decades = math.log10(hi / lo) if lo > 0 else 9
    subs = (1.0, 2.0, 5.0) if decades <= 2 else (1.0, 3.0) if decades <= 4 else (1.0,)
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=subs, numticks=12))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def _all_methods_vs_bytes(ax, frame: pd.DataFrame) -> bool:
    """Every method (and parameter choice) of one setting: its training curve (top-1 at each evaluation against
    the bytes sent so far, mean over seeds), ending in the final point with error bars of one standard deviation
    over its seeds (where it has 2 or more). End points that coincide are shifted sideways and say so."""
    from matplotlib.transforms import ScaledTranslation

    data = frame.assign(line=variant_labels(frame))
    if data["line"].nunique() < 2:
        return False
    groups = dict(list(data.groupby("line", sort=True)))
    shifts = _coincident_offsets({label: (g["gb_sent"].mean(), g["top1"].mean()) for label, g in groups.items()})
    methods = sorted(data["method"].unique())
    for i, (label, group) in enumerate(groups.items()):
        # one colour per method, one marker per setting of it
        method = group["method"].iloc[0]
        n, color = len(group), f"C{methods.index(method) % 10}"
        marker = MARKERS[sum(1 for other in list(groups)[:i] if groups[other]["method"].iloc[0] == method) % 8]
        curve = _history_curve(group)
        if len(curve) > 1:
            ax.plot(curve["gb"], curve["top1"], color=color, lw=0.9, alpha=0.6)
        note = f", drawn {5 * shifts[label]} pt right: same point as another" if shifts[label] else ""
        bars = ax.errorbar(group["gb_sent"].mean(), group["top1"].mean(),
                           xerr=group["gb_sent"].std() if n > 1 else None,
                           yerr=group["top1"].std() if n > 1 else None,
                           fmt=marker, capsize=3, color=color, label=f"{label} (n={n}{note})")
        if shifts[label]:  # moved on the screen only: the axis limits stay those of the data
            sideways = ScaledTranslation(5 * shifts[label] / 72, 0, ax.figure.dpi_scale_trans)
            for artist in bars.get_children():
                artist.set_transform(artist.get_transform() + sideways)
    if (data["gb_sent"] > 0).all():
        ax.set_xscale("log")
        _readable_log_ticks(ax)
    ax.legend(fontsize=6)
    ax.set(xlabel="GB sent by all workers (log)\nlines: top-1 during training; points: the end, 1 std over seeds",
           ylabel=TOP1)
    return True


def _accuracy_vs_time(ax, frame: pd.DataFrame) -> bool:
    """Top-1 against the training time elapsed, one line per method (and parameter choice): the mean over its
    seeds, each seed's top-1 at a time being its last evaluation by then, and a band from the lowest to the
    highest seed; a method with one run is its own line. The dotted line is the runs' declared target."""
    import numpy as np

    labels = variant_labels(frame)
    curves: dict[str, list[tuple[list, list]]] = {}
    for i, row in frame.iterrows():
        timed = [(h["train_s"], h["top1"]) for h in (row["history"] if row["one_device"] else [])
                 if isinstance(h.get("train_s"), (int, float)) and isinstance(h.get("top1"), (int, float))]
        if len(timed) >= 2:
            curves.setdefault(labels[i], []).append(([t for t, _ in timed], [a for _, a in timed]))
    if sum(len(runs) for runs in curves.values()) < 2:
        return False
    for i, (label, runs) in enumerate(sorted(curves.items())):
        end = min(times[-1] for times, _ in runs)
        grid = np.linspace(min(times[0] for times, _ in runs), end, 60)
        # each seed's top-1 at each time: its last evaluation at or before it (a step, not an interpolation)
        held = np.array([[acc[max(0, np.searchsorted(times, t, side="right") - 1)] for t in grid]
                         for times, acc in runs])
        color = f"C{i % 10}"
        ax.plot(grid, held.mean(axis=0), color=color, lw=1.1, label=f"{label} (n={len(runs)})")
        if len(runs) > 1:
            ax.fill_between(grid, held.min(axis=0), held.max(axis=0), color=color, alpha=0.15, lw=0)
    targets = frame["eval_target"].dropna().unique() if "eval_target" in frame else []
    if len(targets) == 1:
        ax.axhline(targets[0], color="black", ls=":", lw=0.9, label=f"declared target {targets[0]:g}")
    ax.legend(fontsize=6)
    ax.set(xlabel="training time (s); band: lowest to highest seed", ylabel=TOP1)
    return True


SETTING = ("task", "dataset", "workers", "backend", "steps", "global_batch", "optimizer", "recipe", "net")
# the figures of any results folder: every method of a setting
FIGURES = [
    Figure("bytes-accuracy", "Accuracy vs bytes sent, every method",
           SETTING, _real_data, _all_methods_vs_bytes),
    Figure("workers-accuracy", "Accuracy vs workers, every method",
           ("task", "dataset", "steps", "global_batch", "optimizer", "recipe", "net"), _real_data,
           _accuracy_vs_workers),
    Figure("time-accuracy", "Accuracy vs training time",
           SETTING, _real_data, _accuracy_vs_time),
    Figure("training-curves", "Training loss",
           ("task", "dataset", "workers", "backend", "steps", "global_batch", "optimizer", "net"),
           lambda f: f, _training_curves),
    Figure("throughput-vs-workers", "Throughput vs workers",
           ("task", "dataset", "steps", "batch_per_worker", "optimizer", "net"),
           lambda f: f[f["backend"] == "dist"], _throughput_vs_workers),
]
# the papers' own figures, redrawn from the runs of their experiments (commbench plot --paper)
PAPER_FIGURES = [
    Figure("accuracy-vs-bytes", "Accuracy vs bytes sent (threshold paper Figs. 3, 5, 7)",
           ("task", "dataset", "workers", "backend", "steps", "global_batch", "optimizer", "net"),
           lambda f: _real_data(f)[lambda d: d["method"].isin(THRESHOLD_METHODS + ("baseline",))], _accuracy_vs_bytes),
    Figure("accuracy-vs-workers", "Accuracy vs workers (TernGrad Fig. 3)",
           ("task", "dataset", "steps", "global_batch", "optimizer", "recipe", "net"),
           lambda f: _real_data(f)[lambda d: d["method"].isin(("baseline", "terngrad"))], _accuracy_vs_workers),
    Figure("accuracy-vs-delay", "Accuracy vs delay steps (SSD-SGD Table 2)",
           ("task", "dataset", "workers", "steps", "global_batch", "optimizer", "net"),
           lambda f: _real_data(f)[lambda d: d["method"].isin(("baseline", "ssdsgd"))], _accuracy_vs_delay),
    Figure("accuracy-vs-warmup", "Accuracy vs warm-up length (SSD-SGD Fig. 4)",
           ("task", "dataset", "workers", "steps", "global_batch", "optimizer", "net"),
           lambda f: _real_data(f)[lambda d: d["method"].isin(("baseline", "ssdsgd"))], _accuracy_vs_warmup),
]


def experiment_name(figure: Figure, key: dict) -> str:
    parts = [figure.name, str(key["task"])]
    for column, prefix in NAME_PARTS:
        value = key.get(column)
        if column in figure.fixed and value not in (None, "") and not pd.isna(value):
            part = f"{prefix}{int(value) if isinstance(value, float) and value.is_integer() else value}"
            if part != parts[-1]:  # a recipe named after its optimizer ("momentum") once
                parts.append(part)
    return "_".join(parts)


def _subtitle(key: dict) -> str:
    words = {"workers": "{} workers", "global_batch": "batch {}", "batch_per_worker": "{}/worker", "steps": "{} steps",
             "net": "links {}"}
    shown = [str(key["task"]), f"({key['dataset']})" if key.get("dataset") else ""]
    shown += [words.get(c, "{}").format(int(v) if isinstance(v, float) and v.is_integer() else v)
              for c, v in key.items() if c not in ("task", "dataset") and v not in (None, "") and not pd.isna(v)]
    rest = list(dict.fromkeys(shown[2:]))  # a recipe named after its optimizer once
    return " ".join(s for s in shown[:2] if s) + (", " + ", ".join(rest) if rest else "")


def plot_all(results: Path, out: Path, model: Callable | None = None, formats=("png", "pdf"),
             paper: bool = False) -> list[Path]:
    """Every figure the records support, one per setting; with ``paper`` the papers' figures too. Returns the
    files written (sorted)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="paper")
    frame = runs_frame(results)
    written: list[Path] = []
    if frame.empty:
        return written
    ensure_folder(out)
    if (frame["net"] != "").any():
        from commbench.analysis.perfmodel.measured import comparison

        rows = comparison(results)
        for column in ("modelled_images_per_s", "loopback_modelled_images_per_s"):
            frame[column] = frame["run_id"].map({row["run_id"]: row[column] for row in rows})
    for figure in FIGURES + (PAPER_FIGURES if paper else []):
        selected = figure.select(frame)
        if selected.empty:
            continue
        keys = list(figure.fixed)
        for values, group in selected.groupby(keys, sort=True, dropna=False):
            key = dict(zip(keys, values))
            if key["net"] and figure.name == "throughput-vs-workers":  # the 1-worker point, which has no link
                alone = selected[(selected["workers"] == 1) & (selected["net"] == "")]
                for column in set(keys) - {"net"}:
                    alone = alone[(alone[column] == key[column]) | (alone[column].isna() & pd.isna(key[column]))]
                group = pd.concat([group, alone])
            fig, ax = plt.subplots(figsize=(6, 4))
            kwargs = {"model": model} if figure.draw is _throughput_vs_workers else {}
            if figure.draw(ax, group.reset_index(drop=True), **kwargs):
                ax.set_title(f"{figure.title}\n{_subtitle(key)}", fontsize=8)
                fig.tight_layout()
                for fmt in formats:
                    path = out / f"{experiment_name(figure, key)}.{fmt}"
                    # no creation date or software version in the files: the same records give the same bytes
                    meta = {"CreationDate": None, "Producer": None} if fmt == "pdf" else {"Software": None}
                    write_with(path, lambda f: fig.savefig(f, format=fmt, dpi=120, metadata=meta))
                    written.append(path)
            plt.close(fig)
    return sorted(written)
