"""Figures a reader can trust: curves drawn to each seed's end, one colour per method in every figure, legends
beside the data rather than over it, no label over another, and tick labels with their units."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import matplotlib
import pytest
from matplotlib.colors import to_hex
from matplotlib.text import Text

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from commbench.analysis import figure_style, plots  # noqa: E402
from commbench.analysis.perfmodel.tta_tables import _crossover_axes  # noqa: E402
from commbench.methods import METHODS  # noqa: E402

from ..helpers import write_record  # noqa: E402


def _put(root, run_id, history, **fields):
    """A record with the given history (its points as the runs write them: step, top1, train_s, ...)."""
    record = write_record(root, run_id, **fields)
    record["history"] = history
    (root / "runs" / f"{run_id}.json").write_text(json.dumps(record))


def _drawn(draw, frame, **kwargs):
    fig, ax = plt.subplots()
    assert draw(ax, frame, **kwargs)
    fig.canvas.draw()
    return fig, ax


def _lines_of(ax, color):
    return [line for line in ax.get_lines() if line.get_color() == color and len(line.get_xdata())]


def test_time_accuracy_curves_run_to_the_end_of_the_longest_seed(tmp_path):
    """TernGrad's seed 1 stops at 10 s (top-1 0.775), seed 2 runs on to 20 s (0.83): the figure must reach 0.83
    at 20 s, the mean must stop where seed 1 stopped, and what lies beyond is drawn thinner (one seed alone)."""
    _put(tmp_path, "tern-1", [{"step": s, "top1": 0.075 * s + 0.025, "train_s": float(s)} for s in range(1, 11)],
         method="terngrad", seed=1)
    _put(tmp_path, "tern-2", [{"step": s, "top1": 0.083 * s, "train_s": 2.0 * s} for s in range(1, 11)],
         method="terngrad", seed=2)
    _put(tmp_path, "base-1", [{"step": s, "top1": 0.09 * s, "train_s": 1.5 * s} for s in range(1, 11)], seed=1)
    fig, ax = _drawn(plots._accuracy_vs_time, plots.runs_frame(tmp_path))
    terngrad = _lines_of(ax, figure_style.method_color("terngrad"))
    end = max(terngrad, key=lambda line: line.get_xdata()[-1])
    assert end.get_xdata()[-1] == pytest.approx(20.0) and end.get_ydata()[-1] == pytest.approx(0.83)
    [mean] = [line for line in terngrad if line.get_label() == "terngrad (n=2)"]
    assert mean.get_xdata()[-1] == pytest.approx(10.0)  # the mean stops where the shorter seed stopped
    assert mean.get_ydata()[-1] == pytest.approx((0.775 + 0.415) / 2)  # seed 2 at 10 s: its 5th evaluation
    assert end.get_linewidth() < mean.get_linewidth()  # beyond it: one seed, drawn thin
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "each seed, where not all are running" in labels and "mean over seeds, all running" in labels
    # the lone baseline run is drawn whole, to its last evaluation
    [base] = _lines_of(ax, figure_style.method_color("baseline"))
    assert base.get_xdata()[-1] == pytest.approx(15.0) and base.get_ydata()[-1] == pytest.approx(0.9)
    plt.close(fig)


def test_seeds_that_never_ran_at_the_same_time_are_each_drawn_whole(tmp_path):
    _put(tmp_path, "b1", [{"step": s, "top1": 0.1 * s, "train_s": float(s)} for s in range(1, 4)], seed=1)
    _put(tmp_path, "b2", [{"step": s, "top1": 0.2 * s, "train_s": 10.0 + s} for s in range(1, 4)], seed=2)
    fig, ax = _drawn(plots._accuracy_vs_time, plots.runs_frame(tmp_path))
    ends = sorted(line.get_xdata()[-1] for line in _lines_of(ax, figure_style.method_color("baseline")))
    assert ends == pytest.approx([3.0, 13.0])
    plt.close(fig)


def _every_figure_frame(root):
    """Nine methods, two seeds each, at 1, 2 and 4 workers, with histories: enough lines to crowd any legend."""
    for method in sorted(METHODS):
        for workers in (1, 2, 4):
            for seed in (1, 2):
                history = [{"step": s, "top1": 0.5 + 0.04 * s, "train_s": float(s * workers + seed),
                            "train_loss": 2.0 / s, "bytes_sent": 1e6 * s * (1 + len(method))} for s in range(1, 11)]
                _put(root, f"{method}-w{workers}-{seed}", history, method=method, workers=workers, seed=seed,
                     top1=0.9 - 0.01 * len(method) + seed / 1000, bytes_sent=int(1e7 * (1 + len(method))),
                     images_per_s=100.0 * workers + len(method))
    return plots.runs_frame(root)


def test_a_method_has_one_colour_in_every_figure(tmp_path):
    """TernGrad was orange in one figure and green in the next: the colour followed the methods a figure
    happened to show. It follows commbench's list of methods now, here across three figures of different
    method sets and the crossover map."""
    frame = _every_figure_frame(tmp_path)
    two = frame[(frame["workers"] == 2)]
    colours = []
    for draw, runs in ((plots._all_methods_vs_bytes, two[two["method"].isin(["bgt", "terngrad"])]),
                       (plots._accuracy_vs_time, two[two["method"].isin(["baseline", "fp16", "terngrad"])]),
                       (plots._accuracy_vs_workers, frame[frame["method"].isin(["terngrad", "wgt"])])):
        fig, ax = _drawn(draw, runs.reset_index(drop=True))
        legend = ax.get_legend()
        [handle] = [h for h, t in zip(legend.legend_handles, legend.get_texts()) if t.get_text().startswith("terng")]
        colours.append(to_hex(handle.get_color()))
        plt.close(fig)
    fig, ax = plt.subplots()
    _crossover_axes(ax, {"terngrad": [(1e8, 1.0), (1e9, 2.0)]}, {"fp16": [(1e8, 1.0), (1e9, 1.0)]}, [], "map")
    colours += [to_hex(line.get_color()) for line in ax.get_lines() if line.get_xdata()[0] == 1e8 and
                line.get_ydata()[-1] == 2.0]
    plt.close(fig)
    assert len(colours) == 4 and set(colours) == {figure_style.method_color("terngrad")}


def test_every_known_method_has_its_own_colour_and_an_unknown_one_the_same_in_every_process():
    assert len({figure_style.method_color(m) for m in METHODS}) == len(METHODS)
    # Python's hash() of a string changes with PYTHONHASHSEED: a colour chosen by it would change per run
    probe = "from commbench.analysis.figure_style import method_color; print(method_color('not-a-method'))"
    seen = {subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout.strip() for seed in ("1", "2", "3")}
    assert seen == {figure_style.method_color("not-a-method")} and seen <= set(figure_style.OTHER_PALETTE)


def test_variants_of_a_method_share_its_colour_and_differ_in_shape():
    styles = figure_style.variant_styles(["terngrad (clip=0.0)", "terngrad (clip=2.5)", "bgt"])
    a, b = styles["terngrad (clip=0.0)"], styles["terngrad (clip=2.5)"]
    assert a["color"] == b["color"] == figure_style.method_color("terngrad") != styles["bgt"]["color"]
    assert (a["marker"], a["ls"]) != (b["marker"], b["ls"])


def _crowded_crossover(ax):
    methods = sorted(METHODS)
    shape = {m: [(10 ** (7 + i / 10), 0.5 + i / 40 + j / 10) for i in range(41)] for j, m in enumerate(methods)}
    points = [{"method": m, "bits_per_s": 1e8, "relative": 1.0 + j / 10, "low": 0.9, "high": 1.2 + j / 10}
              for j, m in enumerate(methods)]
    _crossover_axes(ax, shape, {m: list(curve) for m, curve in shape.items()}, points, "crowded")


@pytest.mark.parametrize("figure", ["time-accuracy", "throughput-vs-workers", "bytes-accuracy", "training-curves",
                                    "workers-accuracy", "crossover"])
def test_no_legend_lies_over_the_data(tmp_path, figure):
    """With 9 methods (18 lines in the throughput figure, 27 with models) an inside legend covered curves."""
    fig, ax = plt.subplots()
    if figure == "crossover":
        _crowded_crossover(ax)
    else:
        frame = _every_figure_frame(tmp_path)
        draw = {f.name: f.draw for f in plots.FIGURES}[figure]
        runs = frame if figure in ("throughput-vs-workers", "workers-accuracy") else frame[frame["workers"] == 2]
        assert draw(ax, runs.reset_index(drop=True))
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legend, data = ax.get_legend().get_window_extent(renderer), ax.get_window_extent(renderer)
    assert legend.x0 >= data.x1 and not legend.overlaps(data)
    assert len(ax.get_legend().get_texts()) >= 9  # every method named
    plt.close(fig)


def test_the_crossover_legend_names_each_method_once_and_each_line_style_once():
    fig, ax = plt.subplots()
    _crowded_crossover(ax)
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert len(texts) == len(METHODS) + 4 and len(set(texts)) == len(texts)
    assert set(sorted(METHODS)) <= set(texts)
    plt.close(fig)


def _tick_texts(fig, axis):
    fig.canvas.draw()
    lo, hi = axis.get_view_interval()
    return [t.get_text() for t in axis.get_majorticklabels() if t.get_text() and lo <= t.get_position()[
        0 if axis.axis_name == "x" else 1] <= hi]


def test_bandwidth_ticks_read_in_bits_per_second_and_ratios_as_multiples():
    fig, ax = plt.subplots()
    _crowded_crossover(ax)
    xs, ys = _tick_texts(fig, ax.xaxis), _tick_texts(fig, ax.yaxis)
    assert len(xs) >= 3 and all("bit/s" in t and "e+" not in t and "e-" not in t for t in xs)
    assert {"10 Mbit/s", "100 Mbit/s", "1 Gbit/s", "10 Gbit/s", "100 Gbit/s"} <= set(xs)
    assert len(ys) >= 2 and all(t.endswith("x") and "e" not in t and "^" not in t for t in ys)
    plt.close(fig)


def test_byte_ticks_read_in_bytes_with_their_unit(tmp_path):
    for method, sent in (("baseline", 3e10), ("terngrad", 2e9), ("bgt", 4e7)):
        write_record(tmp_path, method, method=method, bytes_sent=int(sent))
    fig, ax = _drawn(plots._all_methods_vs_bytes, plots.runs_frame(tmp_path))
    ticks = _tick_texts(fig, ax.xaxis)
    assert len(ticks) >= 3 and all(t.split(" ")[1] in ("MB", "GB") and "e" not in t.split(" ")[0] for t in ticks)
    plt.close(fig)


@pytest.mark.parametrize("value, text", [(1e8, "100 Mbit/s"), (1e9, "1 Gbit/s"), (3e10, "30 Gbit/s"),
                                         (1e7, "10 Mbit/s"), (512, "512 bit/s")])
def test_bit_rates_read_as_people_write_them(value, text):
    assert figure_style.bits_per_s_label(value) == text


@pytest.mark.parametrize("value, text", [(3e8, "300 MB"), (2e9, "2 GB"), (1.5e12, "1.5 TB"), (12_000, "12 kB"),
                                         (1e7, "10 MB")])
def test_byte_counts_read_as_people_write_them(value, text):
    assert figure_style.bytes_label(value) == text


@pytest.mark.parametrize("value, text", [(1e7, "10,000,000"), (1e-5, "0.00001"), (0.03, "0.03"), (2.5, "2.5")])
def test_plain_numbers_have_no_exponent(value, text):
    assert figure_style.plain_number(value) == text


def test_threshold_labels_do_not_overlap(tmp_path):
    """Six thresholds of a method within a few percent of each other's bytes and top-1: their labels ran into
    each other; each now takes a free place round its point."""
    for method in ("bgt", "qgt", "wgt"):
        for i, threshold in enumerate((1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3)):
            write_record(tmp_path, f"{method}-{i}", method=method, params={"threshold": threshold},
                         top1=0.985 + 0.0002 * i, bytes_sent=int(4e9 * (1 + 0.02 * i)))
    write_record(tmp_path, "base", top1=0.986, bytes_sent=int(4e10))
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    assert plots._accuracy_vs_bytes(ax, plots.runs_frame(tmp_path))
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    labels = [t for t in ax.texts if t.get_text()]
    boxes = [Text.get_window_extent(t, renderer) for t in labels]  # the text alone, not the line tying it
    assert len(boxes) == 18
    assert not [(a.get_text(), b.get_text()) for i, (a, p) in enumerate(zip(labels, boxes))
                for b, q in zip(labels[i + 1:], boxes[i + 1:]) if p.overlaps(q)]
    plt.close(fig)


@pytest.mark.parametrize("backend,says", [("sim", True), ("dist", False)])
def test_the_time_axis_of_runs_not_timed_alone_says_they_are_no_speed_result(tmp_path, backend, says):
    """The table withholds a sim run's speeds; its figure's time axis says why its seconds are none either."""
    for seed in (1, 2):
        _put(tmp_path, f"r{seed}", [{"step": s, "top1": 0.1 * s, "train_s": float(s)} for s in range(1, 5)],
             seed=seed, backend=backend)
    fig, ax = _drawn(plots._accuracy_vs_time, plots.runs_frame(tmp_path))
    assert ("sim: not timed alone, so no speed result" in ax.get_xlabel()) == says, ax.get_xlabel()
    plt.close(fig)
