"""Figures from the stored records (matplotlib, seaborn's theme): for any results folder, every method of a
setting (accuracy against bytes sent, workers and training time, with error bars over seeds; loss curves;
throughput); with ``--paper`` also what the papers plot, redrawn from the runs of their experiments.

A figure is one experiment: it sweeps a few settings (the x-axis and the lines) and holds every other setting
fixed, so runs of different lengths, batches or data never share a figure. Each figure declares the settings
that must be equal across it (``fixed``); the records are split on them, and the file is named after the
figure, the task and those settings (``bytes-accuracy_lenet-mnist_fashion-mnist_w8_sim_b128_s1000_momentum``),
so a name always means the same experiment whatever else is in the results folder. Where runs of one method
differ in other method parameters (TernGrad without clipping beside TernGrad), each variant is its own line.

A method has one colour in every figure (``figure_style.method_color``); the variants of a method share it and
differ in marker and line style. Legends sit right of the axes, never over the data; tick labels carry their units
(``300 MB``, ``1 Gbit/s``), never ``1e+07``: the look every figure shares is ``figure_style``'s.

Accuracy is a fraction of the test set (0-1), as in the records and tables. Accuracy figures leave out
synthetic-data runs (their accuracy means nothing); throughput figures take only
real processes (``dist``), since simulated workers share one process. Each figure is written as PNG and PDF,
byte-for-byte reproducible: no timestamps in the files, runs sorted before plotting.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd

from commbench.analysis.figure_style import (LINESTYLES, MARKERS, REFERENCE, freeze_limits, gigabytes_label,
                                             legend_key, legend_outside, method_color, place_labels,
                                             readable_log_ticks, value_ticks, variant_styles)
from commbench.analysis.table import not_timed_alone
from commbench.methods import registry
from commbench.store.safe_io import ensure_folder, output_root, write_with
from commbench.analysis.runs import read_runs, runs_frame as one_frame
from commbench.store.records import Status

TOP1 = "top-1 accuracy (fraction of the test set)"  # one unit everywhere: the records' own
# how a fixed setting appears in a file name: column -> prefix (in this order)
NAME_PARTS = (("dataset", ""), ("workers", "w"), ("backend", ""), ("global_batch", "b"), ("batch_per_worker", "pw"),
              ("steps", "s"), ("optimizer", ""), ("recipe", ""), ("net", ""))


def runs_frame(results: Path) -> pd.DataFrame:
    """One row per done run with a top-1: the configuration columns the figures group by, and the metrics (the
    one frame of the runs, :func:`commbench.analysis.runs.runs_frame`, in the figures' terms)."""
    frame = one_frame(read_runs(results))
    if frame.empty:
        return frame
    frame = frame[(frame["status"] == Status.DONE) & frame["top1"].notna()]
    frame = frame.assign(dataset=frame["data_dataset"], steps=frame["planned_steps"], params=frame["params_json"],
                         history=frame["full_history"], gb_sent=frame["bytes_sent"].fillna(0) / 1e9,
                         gb_paper=[b / 1e9 if b is not None and not pd.isna(b) else None for b in frame["paper_bytes"]])
    return frame[FIGURE_COLUMNS].sort_values("run_id", ignore_index=True)


FIGURE_COLUMNS = ["run_id", "task", "method", "dataset", "synthetic", "workers", "backend", "seed", "tier", "steps",
                  "global_batch", "batch_per_worker", "recipe", "optimizer", "params", "threshold", "k", "warmup",
                  "local_rule", "net", "top1", "gb_sent", "gb_paper", "images_per_s", "history", "one_device",
                  "eval_target"]


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
        ax.axhline(base[y].mean(), color=method_color("baseline"), ls="--", lw=1,
                   label=f"baseline, mean (n={len(base)})")


def _mean_lines(ax, data: pd.DataFrame, x: str, y: str, styles: dict, line: str = "line") -> str:
    """One line per value of ``line``: the mean of ``y`` at each ``x`` over the runs there, with a bar of one
    standard deviation where there are 2 or more. Returns what the axis label says of the bars ('' for none)."""
    bars = ""
    for label, runs in data.groupby(line, sort=True):
        stats = runs.groupby(x)[y].agg(["mean", "std", "count"])
        style = styles[label]
        ax.plot(stats.index, stats["mean"], lw=1.2, ms=5, label=label, **style)
        spread = stats[stats["count"] > 1]
        if not spread.empty:
            ax.errorbar(spread.index, spread["mean"], yerr=spread["std"], fmt="none", ecolor=style["color"],
                        capsize=3, lw=0.9)
            bars = "\nbars: 1 std over seeds"
    return bars


def _accuracy_vs_bytes(ax, frame: pd.DataFrame) -> bool:
    """The threshold sweeps: per method the mean of each threshold's runs, joined in order of bytes, each point
    labelled with its threshold (placed so that no label covers another), and the fp32 baseline's point."""
    threshold_methods = registry.members(registry.THRESHOLD)
    swept = frame[frame["method"].isin(threshold_methods)]
    if len(swept) < 2 or swept.groupby("method")["threshold"].nunique().max() < 2:  # one threshold is no sweep
        return False
    labels, lines = [], []
    for method, runs in swept.groupby("method", sort=True):
        points = runs.groupby("threshold", dropna=False)[["gb_sent", "top1"]].mean().sort_values("gb_sent")
        color = method_color(method)
        marker = MARKERS[threshold_methods.index(method) % len(MARKERS)]
        ax.plot(points["gb_sent"], points["top1"], color=color, marker=marker, lw=1.2, ms=5,
                label=f"{method} ({len(runs)} runs)")
        lines.append((points["gb_sent"].to_numpy(), points["top1"].to_numpy()))
        labels += [(row["gb_sent"], row["top1"], f"{threshold:g}", color)
                   for threshold, row in points.iterrows() if not pd.isna(threshold)]
    base = frame[frame["method"] == "baseline"]
    obstacles = []
    if not base.empty:  # the fp32 reference point
        obstacles.append((base["gb_sent"].mean(), base["top1"].mean()))
        ax.scatter(*obstacles[0], marker="*", s=90, color=method_color("baseline"), zorder=3,
                   label=f"baseline, fp32 (n={len(base)})")
    ax.set_xscale("log")
    readable_log_ticks(ax, gigabytes_label)
    ax.set(xlabel="bytes sent by all workers, on the wire (log)\nnumbers: each point's threshold", ylabel=TOP1)
    legend_outside(ax)
    ax.margins(y=0.08)  # room for the labels of the highest and lowest points
    freeze_limits(ax)
    place_labels(ax, labels, obstacles, lines)
    return True


def _accuracy_vs_workers(ax, frame: pd.DataFrame) -> bool:
    data = frame.assign(line=variant_labels(frame))
    data = data[data.groupby("line")["workers"].transform("nunique") >= 2]  # lines, not lone points
    if data["workers"].nunique() < 2:
        return False
    bars = _mean_lines(ax, data, "workers", "top1", variant_styles(data["line"]))
    ax.set_xscale("log", base=2)
    value_ticks(ax, data["workers"])
    legend_outside(ax)
    backends = "; ".join(f"{b} at {', '.join(str(int(w)) for w in sorted(g['workers'].unique()))}"
                         for b, g in data.groupby("backend", sort=True))
    ax.set(xlabel=f"workers (log2; {backends}){bars}", ylabel=TOP1)
    return True


def _ssdsgd_sweep(ax, runs: pd.DataFrame, frame: pd.DataFrame, x: str) -> str:
    """SSD-SGD's top-1 against ``x``, one line per local update rule in SSD-SGD's colour, beside the baseline;
    returns what the axis label says of the error bars."""
    rules = runs["local_rule"].fillna("default").astype(str)
    data = runs.assign(line=("ssdsgd, local rule " + rules) if rules.nunique() > 1 or rules.iloc[0] != "default"
                       else "ssdsgd")
    styles = {label: {"color": method_color("ssdsgd"), "marker": MARKERS[i % len(MARKERS)],
                      "ls": LINESTYLES[i % len(LINESTYLES)]}
              for i, label in enumerate(sorted(data["line"].unique()))}
    bars = _mean_lines(ax, data, x, "top1", styles)
    _baseline_line(ax, frame)
    value_ticks(ax, data[x])
    legend_outside(ax)
    return bars


def _accuracy_vs_delay(ax, frame: pd.DataFrame) -> bool:
    ssd = frame[frame["method"] == "ssdsgd"].dropna(subset=["k"])
    # Table 2's runs: for each k its longest warm-up (499 or 500); Figure 4's shorter warm-ups are not delays
    warmup = ssd["warmup"].fillna(0)
    ssd = ssd[warmup >= warmup.groupby(ssd["k"]).transform("max") - 1]
    if ssd["k"].nunique() < 2:
        return False
    ax.set(xlabel="delay steps k" + _ssdsgd_sweep(ax, ssd, frame, "k"), ylabel=TOP1)
    return True


def _accuracy_vs_warmup(ax, frame: pd.DataFrame) -> bool:
    ssd = frame[frame["method"] == "ssdsgd"].dropna(subset=["k", "warmup"])
    if ssd.empty:
        return False
    counts = ssd.groupby("k")["warmup"].nunique()
    k = counts.idxmax()
    swept = ssd[ssd["k"] == k]
    if swept["warmup"].nunique() < 2:
        return False
    bars = _ssdsgd_sweep(ax, swept, frame, "warmup")
    ax.set(xlabel=f"warm-up iterations (synchronous SGD before the delay; k = {k:g}){bars}", ylabel=TOP1)
    return True


def _training_curves(ax, frame: pd.DataFrame) -> bool:
    """Training loss against the step, one line per run; the runs of a variant share its colour and style."""
    from matplotlib.ticker import MaxNLocator

    labels = variant_labels(frame)
    curves = [(labels[i], [(h["step"], h["train_loss"]) for h in row["history"] if h.get("train_loss") is not None])
              for i, row in frame.iterrows()]
    if len(frame) < 2 or len({step for _, points in curves for step, _ in points}) < 3:
        return False
    styles, named = variant_styles(labels), set()
    for label, points in sorted(curves, key=lambda curve: curve[0]):  # the legend in the order of the labels
        if points:
            # a marker every few evaluations tells apart the variants of a method; one at each hides the line
            ax.plot([s for s, _ in points], [loss for _, loss in points], lw=0.8, alpha=0.8, ms=3,
                    markevery=max(1, len(points) // 6), label=label if label not in named else "_nolegend_",
                    **styles[label])
            named.add(label)
    ax.set_yscale("log")
    readable_log_ticks(ax, axis="y")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, steps=[1, 2, 2.5, 5, 10]))  # a 4-step run read step 2.5
    legend_outside(ax)
    ax.set(xlabel="step", ylabel="training loss (log)")
    return True


# the throughput figure's line style says where a number comes from; its colour and marker, which run
SOURCE_STYLES = {"measured": "-", "model, 1-worker profile": "--", "model, loopback profile": ":", "modelled": "-."}


def _throughput_frame(frame: pd.DataFrame, model: Callable | None) -> pd.DataFrame:
    """The measured throughput of each run, and beside it every modelled one for the same runs."""
    data = frame.dropna(subset=["images_per_s"])
    data = data.assign(source="measured", line=variant_labels(data))
    if model is not None:
        modelled = model(data)
        if modelled is not None and not modelled.empty:
            data = pd.concat([data, modelled.assign(source="modelled")], ignore_index=True)
    # the performance model's predictions for the same runs (commbench.analysis.perfmodel.measured)
    for column, source in (("modelled_images_per_s", "model, 1-worker profile"),
                           ("loopback_modelled_images_per_s", "model, loopback profile")):
        if column in data and data[column].notna().any():
            modelled = data[data["source"] == "measured"].dropna(subset=[column])
            data = pd.concat([data, modelled.assign(images_per_s=modelled[column], source=source)],
                             ignore_index=True)
    return data


def _throughput_vs_workers(ax, frame: pd.DataFrame, model: Callable | None = None) -> bool:
    """Images/s against workers: a colour and marker per method variant, a line style per source (measured or
    a model's prediction); the legend names each once, not every pairing of them."""
    if frame.dropna(subset=["images_per_s"])["workers"].nunique() < 2:
        return False
    data = _throughput_frame(frame, model)
    styles = variant_styles(data["line"].dropna())
    for (label, source), runs in data.groupby(["line", "source"], sort=True):
        mean = runs.groupby("workers")["images_per_s"].mean()
        measured = source == "measured"
        ax.plot(mean.index, mean.values, color=styles[label]["color"], marker=styles[label]["marker"],
                ls=SOURCE_STYLES.get(source, "-."), lw=1.4 if measured else 0.9, ms=5 if measured else 3.5,
                alpha=1.0 if measured else 0.75)
    handles = [legend_key(label, color=s["color"], marker=s["marker"]) for label, s in styles.items()]
    handles += [legend_key(source, ls=SOURCE_STYLES.get(source, "-.")) for source in dict.fromkeys(data["source"])]
    legend_outside(ax, handles, [h.get_label() for h in handles])
    value_ticks(ax, data["workers"])
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


def _all_methods_vs_bytes(ax, frame: pd.DataFrame) -> bool:
    """Every method (and parameter choice) of one setting: its training curve (top-1 at each evaluation against
    the bytes sent so far, mean over seeds), ending in the final point with error bars of one standard deviation
    over its seeds (where it has 2 or more). End points that coincide are shifted sideways and say so."""
    from matplotlib.ticker import FuncFormatter
    from matplotlib.transforms import ScaledTranslation

    data = frame.assign(line=variant_labels(frame))
    if data["line"].nunique() < 2 or not (data["gb_sent"] > 0).any():  # one worker sends nothing: no x-axis
        return False
    groups = dict(list(data.groupby("line", sort=True)))
    shifts = _coincident_offsets({label: (g["gb_sent"].mean(), g["top1"].mean()) for label, g in groups.items()})
    styles = variant_styles(groups)
    for label, group in groups.items():
        n, style = len(group), styles[label]
        curve = _history_curve(group)
        if len(curve) > 1:
            ax.plot(curve["gb"], curve["top1"], color=style["color"], ls=style["ls"], lw=0.9, alpha=0.6)
        note = f"\n  drawn {5 * shifts[label]} pt right: same point as another" if shifts[label] else ""
        bars = ax.errorbar(group["gb_sent"].mean(), group["top1"].mean(),
                           xerr=group["gb_sent"].std() if n > 1 else None,
                           yerr=group["top1"].std() if n > 1 else None,
                           fmt=style["marker"], capsize=3, color=style["color"], label=f"{label} (n={n}){note}")
        if shifts[label]:  # moved on the screen only: the axis limits stay those of the data
            sideways = ScaledTranslation(5 * shifts[label] / 72, 0, ax.figure.dpi_scale_trans)
            for artist in bars.get_children():
                artist.set_transform(artist.get_transform() + sideways)
    if (data["gb_sent"] > 0).all():
        ax.set_xscale("log")
        readable_log_ticks(ax, gigabytes_label)
    else:  # a run that sent nothing has no place on a log axis
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: gigabytes_label(v)))
    legend_outside(ax)
    scale = " (log)" if ax.get_xscale() == "log" else ""
    ax.set(xlabel=f"bytes sent by all workers{scale}\nlines: top-1 during training; points: the end, 1 std over seeds",
           ylabel=TOP1)
    return True


def _timed_runs(frame: pd.DataFrame) -> dict[str, list[tuple]]:
    """Each variant's runs as (training seconds, top-1) arrays at their evaluations, runs timed on one device."""
    import numpy as np

    labels = variant_labels(frame)
    runs: dict[str, list[tuple]] = {}
    for i, row in frame.iterrows():
        timed = [(h["train_s"], h["top1"]) for h in (row["history"] if row["one_device"] else [])
                 if isinstance(h.get("train_s"), (int, float)) and isinstance(h.get("top1"), (int, float))]
        if len(timed) >= 2:
            runs.setdefault(labels[i], []).append((np.array([t for t, _ in timed]), np.array([a for _, a in timed])))
    return runs


def _held(times, top1, at):
    """A run's top-1 at each time of ``at`` (times from its first evaluation on): its last evaluation at or
    before it, a step, not an interpolation."""
    import numpy as np

    return top1[np.searchsorted(times, at, side="right") - 1]


def _time_curve(ax, runs: list[tuple], style: dict, label: str) -> None:
    """A variant's mean over its seeds (thick) where every seed has evaluated and none has ended yet, with a
    band from the lowest to the highest seed; before and beyond that, each seed's own line (thin), so that the
    figure ends where the longest seed ends, and shows where a mean turns into one seed."""
    import numpy as np

    start, end = max(t[0] for t, _ in runs), min(t[-1] for t, _ in runs)
    grid = np.unique(np.concatenate([t[(t >= start) & (t <= end)] for t, _ in runs]))
    line = {"color": style["color"], "ls": style["ls"], "drawstyle": "steps-post"}
    if len(grid) >= 2:
        held = np.array([_held(t, a, grid) for t, a in runs])
        ax.plot(grid, held.mean(axis=0), lw=1.6, label=f"{label} (n={len(runs)})", marker=style["marker"], ms=3.5,
                markevery=max(1, len(grid) // 6), **line)
        if len(runs) > 1:
            ax.fill_between(grid, held.min(axis=0), held.max(axis=0), step="post", color=style["color"],
                            alpha=0.15, lw=0)
    else:  # the seeds never ran at once (one ended before another began): no mean to draw
        start, end = math.inf, -math.inf
        ax.plot([], [], lw=1.6, label=f"{label} (n={len(runs)}, no common span)", **line)
    for times, top1 in runs:
        if len(grid) < 2:
            ax.plot(times, top1, lw=0.9, alpha=0.8, **line)
            continue
        if len(runs) == 1:  # the mean is the run
            continue
        head, tail = times < start, times > end  # before every seed has evaluated; after one has ended
        if head.any():
            ax.plot(np.append(times[head], start), np.append(top1[head], _held(times, top1, start)),
                    lw=0.7, alpha=0.7, **line)
        if tail.any():
            ax.plot(np.insert(times[tail], 0, end), np.insert(top1[tail], 0, _held(times, top1, end)),
                    lw=0.7, alpha=0.7, **line)


def _accuracy_vs_time(ax, frame: pd.DataFrame) -> bool:
    """Top-1 against the training time elapsed, one line per method (and parameter choice): the mean over its
    seeds where all of them are running, each seed's top-1 at a time being its last evaluation by then, with a
    band from the lowest to the highest seed; each seed's own thin line before and after, to its own end (a
    mean over the seeds present would change what it averages without saying so). A method with one run is its
    own line. The dotted line is the runs' declared target."""
    runs = _timed_runs(frame)
    if sum(len(seeds) for seeds in runs.values()) < 2:
        return False
    styles = variant_styles(runs)
    for label, seeds in sorted(runs.items()):
        _time_curve(ax, seeds, styles[label], label)
    handles, labels = ax.get_legend_handles_labels()
    if any(len(seeds) > 1 for seeds in runs.values()):
        handles += [legend_key("mean over seeds, all running", lw=1.6),
                    legend_key("each seed, where not all are running", lw=0.7, alpha=0.7),
                    legend_key("lowest to highest seed", patch=True, color=REFERENCE, alpha=0.15, lw=0)]
    targets = frame["eval_target"].dropna().unique() if "eval_target" in frame else []
    if len(targets) == 1:
        handles.append(ax.axhline(targets[0], color=REFERENCE, ls=":", lw=0.9, label=f"declared target {targets[0]:g}"))
    legend_outside(ax, handles, [h.get_label() for h in handles])
    first = min(times[0] for seeds in runs.values() for times, _ in seeds)
    last = max(times[-1] for seeds in runs.values() for times, _ in seeds)
    if first > 0 and last > 20 * first:  # a slow method's long run squeezed the fast ones into one corner
        ax.set_xscale("log")
        readable_log_ticks(ax)
    # the table withholds these runs' speeds (analysis.table.not_timed_alone): the figure says why its seconds
    # are no speed result either, where they are not
    untimed = sorted({not_timed_alone({"backend": b, "net": n}) for b, n in zip(frame["backend"], frame["net"])}
                     - {""})
    note = f"; {untimed[0]}, so no speed result" if untimed else ""
    ax.set(xlabel="training time (s" + (", log" if ax.get_xscale() == "log" else "") + note + ")", ylabel=TOP1)
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
           lambda f: _real_data(f)[lambda d: d["method"].isin(registry.members(registry.THRESHOLD) + ("baseline",))],
           _accuracy_vs_bytes),
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


def _with_lone_worker(figure: Figure, selected: pd.DataFrame, group: pd.DataFrame, key: dict) -> pd.DataFrame:
    """A throughput figure on a link gets the setting's 1-worker point, which has no link."""
    if not (key["net"] and figure.name == "throughput-vs-workers"):
        return group
    alone = selected[(selected["workers"] == 1) & (selected["net"] == "")]
    for column in set(figure.fixed) - {"net"}:
        alone = alone[(alone[column] == key[column]) | (alone[column].isna() & pd.isna(key[column]))]
    return pd.concat([group, alone])


def _draw_and_write(figure: Figure, group: pd.DataFrame, key: dict, out: Path, formats, model, root) -> list[Path]:
    """One figure into its files; none where the records do not support it."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=120)
    # the axes' place is set before drawing (not fitted after), since threshold labels are placed on the
    # screen; the files are cropped to what was drawn, the legend right of the axes included
    fig.subplots_adjust(left=0.12, right=0.96, bottom=0.16, top=0.88)
    written = []
    try:
        kwargs = {"model": model} if figure.draw is _throughput_vs_workers else {}
        if figure.draw(ax, group.reset_index(drop=True), **kwargs):
            ax.set_title(f"{figure.title}\n{_subtitle(key)}", fontsize=8)
            for fmt in formats:
                path = out / f"{experiment_name(figure, key)}.{fmt}"
                # no creation date or software version in the files: the same records give the same bytes
                meta = {"CreationDate": None, "Producer": None} if fmt == "pdf" else {"Software": None}
                write_with(path, lambda f: fig.savefig(f, format=fmt, dpi=120, metadata=meta, bbox_inches="tight",
                                                       pad_inches=0.08), root)
                written.append(path)
    finally:
        plt.close(fig)
    return written


def plot_all(results: Path, out: Path, model: Callable | None = None, formats=("png", "pdf"),
             paper: bool = False, root: Path | None = None) -> list[Path]:
    """Every figure the records support, one per setting; with ``paper`` the papers' figures too. Returns the
    files written (sorted). Below ``root`` (default: the results folder where ``out`` lies in it, else ``out``)
    nothing is written through a link, and only regular files are replaced."""
    import matplotlib

    matplotlib.use("Agg")
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="paper")
    frame = runs_frame(results)
    written: list[Path] = []
    if frame.empty:
        return written
    root = root or output_root(out, results)
    ensure_folder(out, root)
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
            group = _with_lone_worker(figure, selected, group, key)
            written += _draw_and_write(figure, group, key, out, formats, model, root)
    return sorted(written)
