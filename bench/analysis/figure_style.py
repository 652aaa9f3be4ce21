"""One look for every figure of a report: a method's colour (the same in every figure, fixed by commbench's list of
methods), readable units on ticks (``300 MB``, ``1 Gbit/s``, never ``1e+07``), legends outside the data, and labels
beside points that do not overlap."""
from __future__ import annotations

import math
import zlib
from decimal import Decimal
from functools import lru_cache
from typing import Callable

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LINESTYLES = ("-", "--", "-.", ":")

# One colour per method across every figure of a report and the crossover map: commbench's methods in the
# catalogue's order (the papers' methods, torch's hooks, then the field's compressors; a method added at the end
# leaves every earlier one its colour) take these in turn: matplotlib's tab10 less its grey (which reads as a
# reference line), then tab20's paler halves and tab20b's darker ones, so that 24 methods stay apart ...
METHOD_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf",
                  "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#dbdb8d", "#9edae5",
                  "#6b6ecf", "#b5cf6b", "#e7ba52", "#d6616b", "#ce6dbd", "#9c9ede")
# ... and a method commbench does not list (a record of a retired or outside method) one of these, by a checksum
# of its name: the same in every process, where Python's own hash() of a string is salted per process
OTHER_PALETTE = ("#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#5254a3", "#ad494a", "#3b7d6e")
REFERENCE = "black"  # declared targets, the 1x line: not a method
BIT_RATE_UNITS = (("Tbit/s", 1e12), ("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3), ("bit/s", 1.0))
BYTE_UNITS = (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3), ("B", 1.0))


@lru_cache(maxsize=1)
def known_methods() -> tuple[str, ...]:
    """Every method commbench knows, in the catalogue's order (a user's registered methods after it): the order
    that gives each its colour."""
    from commbench.methods import METHODS  # brings torch: imported when a figure is coloured, not at import

    return tuple(METHODS)


def method_color(method: str) -> str:
    """The colour of ``method`` in every figure: fixed by commbench's list of methods, not by which methods one
    figure happens to show (TernGrad was orange in one figure and green in the next)."""
    known = known_methods()
    if method in known and known.index(method) < len(METHOD_PALETTE):
        return METHOD_PALETTE[known.index(method)]
    return OTHER_PALETTE[zlib.crc32(str(method).encode()) % len(OTHER_PALETTE)]


def method_of(label: str) -> str:
    """The method a line label names: ``terngrad (clip=0.0)`` -> ``terngrad``."""
    return str(label).split(" (")[0]


def variant_styles(labels) -> dict[str, dict]:
    """Each line label's colour (its method's), marker and line style: the i-th variant of a method (labels
    sorted) takes the i-th marker and line style, so variants of one method share its colour and differ in
    shape."""
    styles: dict[str, dict] = {}
    count: dict[str, int] = {}
    for label in sorted(set(labels)):
        method = method_of(label)
        i = count[method] = count.get(method, -1) + 1
        styles[label] = {"color": method_color(method), "marker": MARKERS[i % len(MARKERS)],
                         "ls": LINESTYLES[i % len(LINESTYLES)]}
    return styles


def plain_number(value: float) -> str:
    """A number as a reader writes it, to 4 significant digits: 0.00001, 20, 10,000; never 1e+07."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    text = format(Decimal(f"{value:.4g}"), ",f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def _in_units(value: float, units) -> str:
    name, size = next(((n, s) for n, s in units if abs(value) >= 0.9995 * s), units[-1])
    return f"{plain_number(value / size)} {name}"


def bits_per_s_label(value: float) -> str:
    """A link rate: ``100 Mbit/s``, ``1 Gbit/s``."""
    return _in_units(value, BIT_RATE_UNITS)


def bytes_label(value: float) -> str:
    """A byte count in decimal units, as the axes say GB = 10^9 bytes: ``300 MB``, ``3 GB``."""
    return _in_units(value, BYTE_UNITS)


def gigabytes_label(value: float) -> str:
    """An axis in GB, labelled as bytes: ``0.03`` GB reads ``30 MB``."""
    return bytes_label(value * 1e9)


def ratio_label(value: float) -> str:
    return f"{plain_number(value)}x"


def readable_log_ticks(ax, label: Callable[[float], str] = plain_number, axis: str = "x") -> None:
    """Labels at 1 to 9 per decade over under half a decade, 1, 2 and 5 up to two, 1 and 3 up to four, powers of
    ten beyond, each
    written by ``label`` (with its unit); no minor labels: matplotlib labels every minor tick of an axis under a
    decade (2.925x10^0, 2.95x10^0, ...) and those labels run into each other."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.autoscale_view()
    lo, hi = sorted(ax.get_xlim() if axis == "x" else ax.get_ylim())
    decades = math.log10(hi / lo) if lo > 0 else 9
    # under half a decade 1-9 (a loss from 7 to 10 had one label, 10); there 9 and 10 lie a tenth of the axis apart
    subs = tuple(range(1, 10)) if decades < 0.5 else (1.0, 2.0, 5.0) if decades <= 2 else (1.0, 3.0) if decades <= 4 \
        else (1.0,)
    scale = ax.xaxis if axis == "x" else ax.yaxis
    scale.set_major_locator(LogLocator(base=10, subs=subs, numticks=12))
    scale.set_major_formatter(FuncFormatter(lambda v, _: label(v)))
    scale.set_minor_formatter(NullFormatter())


def value_ticks(ax, values, axis: str = "x") -> None:
    """Ticks at exactly the values swept (workers 1, 2, 4, 8; delay steps 1-5), as plain numbers: a log2 axis
    otherwise reads 2^0, 2^1, and a linear one 1.5 delay steps."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    scale = ax.xaxis if axis == "x" else ax.yaxis
    scale.set_major_locator(FixedLocator(sorted(float(v) for v in set(values))))
    scale.set_major_formatter(FuncFormatter(lambda v, _: plain_number(v)))
    scale.set_minor_locator(NullLocator())


def legend_outside(ax, handles=None, labels=None, fontsize: float = 7):
    """The legend right of the axes: inside, a long one lay over the curves it names."""
    if handles is None:
        handles, labels = ax.get_legend_handles_labels()
    return ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
                     fontsize=fontsize, frameon=False)


def legend_key(label: str, **style):
    """A legend entry for a drawing convention (line style, band) rather than for a line of data."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    if style.pop("patch", False):
        return Patch(label=label, **style)
    return Line2D([], [], label=label, **{"color": REFERENCE, **style})


def freeze_limits(ax) -> None:
    """Fix the axes' limits where autoscaling put them, so that what is placed by screen position stays put."""
    ax.autoscale_view()
    ax.set_xlim(ax.get_xlim())
    ax.set_ylim(ax.get_ylim())


# where a point's label may go, in points from it: nearest first, up and right first (as the labels were)
LABEL_OFFSETS = tuple((round(r * math.cos(math.radians(a)), 1), round(r * math.sin(math.radians(a)), 1))
                      for r in (5, 11, 18, 27, 38) for a in (45, -45, 135, -135, 0, 90, 180, 270, 20, -20, 160, -160))


def _align(offset: float, positive: str, negative: str) -> str:
    return positive if offset > 0.5 else negative if offset < -0.5 else "center"


def _points_along(ax, lines, spacing_px: float = 3.0):
    """Screen points every few pixels along each polyline ((xs, ys) in data units): what a label should not cover."""
    import numpy as np

    dots = [np.empty((0, 2))]
    for xs, ys in lines:
        corners = ax.transData.transform(np.column_stack([xs, ys]))
        for a, b in zip(corners[:-1], corners[1:]):
            steps = max(2, int(np.hypot(*(b - a)) / spacing_px))
            dots.append(a + np.linspace(0, 1, steps)[:, None] * (b - a))
    return np.concatenate(dots)


def _clashes(box, taken, dots, frame, gap: float) -> int:
    """How badly a label's box sits: covering a label or a point is worst, then leaving the axes, then crossing a
    line (a line can be read through a label; two labels on each other cannot be read)."""
    inside = (frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1)
    crossed = bool(((dots[:, 0] >= box.x0) & (dots[:, 0] <= box.x1) & (dots[:, 1] >= box.y0)
                    & (dots[:, 1] <= box.y1)).any())
    near = box.padded(gap)  # two labels that touch read as one: "0.0001" and "1e-05" as "0.00011e-05"
    return 10 * sum(near.overlaps(other) for other in taken) + 5 * (not inside) + crossed


def place_labels(ax, items: list[tuple[float, float, str, str]], obstacles=(), lines=()) -> None:
    """Text beside points (x, y, text, colour) where no label lies over another or over a point, nor, where it
    can be helped, across a line (``lines``: (xs, ys) each): each label takes the first of the offsets round its
    point that is free and inside the axes (or, where none is, the one that clashes least), and one set beyond
    the first ring is tied to its point by a thin line. The axes' limits must be final (``freeze_limits``) and
    so must its place on the figure."""
    from matplotlib.transforms import Bbox

    renderer = ax.figure.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    half = 3.5 * ax.figure.dpi / 72  # half a marker
    marks = [(x, y) for x, y, *_ in items] + list(obstacles)
    taken = [Bbox.from_bounds(px - half, py - half, 2 * half, 2 * half)
             for px, py in (ax.transData.transform(marks) if marks else [])]
    dots = _points_along(ax, lines)
    for x, y, text, color in items:
        best, fewest, best_box = LABEL_OFFSETS[0], None, None
        for dx, dy in LABEL_OFFSETS:
            probe = ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", fontsize=6,
                                ha=_align(dx, "left", "right"), va=_align(dy, "bottom", "top"))
            box = probe.get_window_extent(renderer)
            probe.remove()
            clashes = _clashes(box, taken, dots, frame, gap=2 * ax.figure.dpi / 72)
            if fewest is None or clashes < fewest:
                best, fewest, best_box = (dx, dy), clashes, box
            if clashes == 0:
                break
        dx, dy = best
        tie = {"arrowprops": {"arrowstyle": "-", "color": color, "lw": 0.5, "alpha": 0.7, "shrinkA": 0,
                              "shrinkB": 2}} if math.hypot(dx, dy) > 6 else {}
        ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", fontsize=6, color=color,
                    ha=_align(dx, "left", "right"), va=_align(dy, "bottom", "top"), **tie)
        taken.append(best_box)
