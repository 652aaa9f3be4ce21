"""One verdict per paper-table row, by a stated rule: reproduced, not reproduced, untestable here, or missing.

The rule (also in docs/papers.md):

* ``missing``: no run fills the row (the table says why).
* What can be compared where. An *absolute* value (a top-1, a top-5, a share of bytes, images/s) compares only
  on the paper's own model, on the paper's own data, at the paper's length; anywhere else it is
  ``untestable here``, with the reason. A *gap* (a method against its baseline or a sibling variant, in
  points), a *speed-up* or an *ordering* (the best k, the best warm-up) compares on a stand-in too. A row of a
  method's top-1 or top-5 that has a gap in both the paper and here is judged on the gap.
* Agreement, per metric:
  - accuracy (absolute or gap, in points): within max(0.5 points, 2 standard deviations of our value over
    seeds); an upper bound the paper states ("less than 2%") holds if ours is below it plus that tolerance;
  - speed-up: the same direction as the paper's (faster, or not) and within a factor of 2 of it;
  - a model's size or gradient count: within 1%; a share of bytes on the paper's model: within 10%;
  - a share of zero gradients: within 5 points;
  - the best delay steps: the same k, or a k whose top-1 here is within the accuracy tolerance of the best
    one's (the runs cannot tell them apart); the best warm-up likewise, a length within 1 counting as the same
    (Algorithm 1's rounding).
* A top-5 loss where the baseline's top-5 is at least 99% (a 10-class data set) is ``untestable here``: a loss
  cannot show against a saturated metric.
"""
from __future__ import annotations

from dataclasses import dataclass

from commbench.analysis.papers.reproduce import CHOICE_ROUNDING, Cell

REPRODUCED, NOT_REPRODUCED, UNTESTABLE, MISSING = "reproduced", "not reproduced", "untestable here", "missing"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, UNTESTABLE, MISSING)

ACCURACY_POINTS = 0.5
GAPS = {"top1_gain", "top1_loss", "top5_loss", "top1_loss_vs_clipped", "top1_loss_vs_glu", "top1_loss_vs_dcasgd",
        "top1_loss_vs_batch_256", "accuracy_gain_max", "accuracy_loss_max", "top5_loss_mean_upper_bound"}
UPPER_BOUNDS = {"top5_loss_mean_upper_bound"}
SPEEDUPS = {"speedup", "speedup_pct", "speedup_pct_min", "speedup_pct_max"}
MODEL_COUNTS = {"model_size", "gradients_per_iteration", "gradients_total"}
# bytes a method sends: for the baseline the model's count (every gradient, 32 bits), for a threshold method what
# the threshold lets through, which depends on the model's gradients
BYTE_SHARES = {"gb_transferred", "pct_per_gb", "data_fraction", "bytes_per_node_per_iteration"}
SPEED_FACTOR = 2.0


@dataclass(frozen=True)
class Verdict:
    label: str
    why: str


def _where(cell: Cell) -> str | None:
    """Why the runs are not the paper's own experiment (a stand-in model, other data, a shortened run), or None."""
    ref, reasons = cell.ref, []
    for r in cell.records:
        cfg, data = r["config"], r.get("data") or {}
        if ref.task and cfg.get("task") != ref.task:
            reasons.append(f"a stand-in model ({cfg.get('task')} for {ref.task})")
        if data.get("synthetic"):
            reasons.append("synthetic data")
        elif data.get("substitute_for") or (ref.dataset and cfg.get("dataset") != ref.dataset):
            reasons.append(f"other data ({cfg.get('dataset')} for {data.get('substitute_for') or ref.dataset})")
        paper_steps = ref.iterations or ((cfg.get("overrides") or {}).get("steps") or {}).get("paper")
        if paper_steps and (cfg.get("steps") or 0) < paper_steps:
            reasons.append(f"a shortened run ({cfg.get('steps'):,} of {paper_steps:,} iterations)")
    return ", ".join(dict.fromkeys(reasons)) or None


def _spread(std: float | None) -> float:
    return max(ACCURACY_POINTS, 2 * std) if std is not None else ACCURACY_POINTS


def _within(ours: float, paper: float, tolerance: float, what: str) -> Verdict:
    ok = abs(ours - paper) <= tolerance
    return Verdict(REPRODUCED if ok else NOT_REPRODUCED,
                   f"{what} {ours:+.2f} vs the paper's {paper:+.2f}: {'within' if ok else 'beyond'} {tolerance:.2f}")


def _relative(ours: float, paper: float, share: float, what: str) -> Verdict:
    off = abs(ours - paper) / abs(paper) if paper else abs(ours)
    ok = off <= share
    return Verdict(REPRODUCED if ok else NOT_REPRODUCED,
                   f"{what} off by {off:.1%} ({'within' if ok else 'beyond'} {share:.0%})")


def _saturated_top5(cell: Cell) -> float | None:
    """The highest top-5 among the row's runs, if a top-5 row's runs sit at 99% or more."""
    top5 = [r["metrics"].get("top5") for r in cell.records if r.get("metrics", {}).get("top5") is not None]
    return max(top5) if top5 and max(top5) >= 0.99 else None


def judge(cell: Cell) -> Verdict:
    ref, metric = cell.ref, cell.ref.metric
    if not cell.values:
        return Verdict(MISSING, cell.why_missing or "no matching run")
    mean, std, elsewhere = cell.mean, cell.std, _where(cell)
    saturated = _saturated_top5(cell) if "top5" in metric else None
    if metric in ("top1", "top5"):
        if cell.gap is not None and cell.paper_gap is not None:
            if saturated is not None:
                return Verdict(UNTESTABLE, f"top-5 is saturated here ({saturated:.1%}): a gap cannot show")
            return _within(cell.gap, cell.paper_gap, _spread(cell.gap_std), "gap to the baseline")
        if elsewhere:
            return Verdict(UNTESTABLE, f"an absolute accuracy on {elsewhere}")
        return _within(mean, ref.value, _spread(std), "accuracy")
    if saturated is not None:
        return Verdict(UNTESTABLE, f"top-5 is saturated here ({saturated:.1%}): a loss cannot show")
    if metric in UPPER_BOUNDS:
        bound = ref.value + _spread(std)
        ok = mean <= bound
        return Verdict(REPRODUCED if ok else NOT_REPRODUCED,
                       f"{mean:.2f} {'below' if ok else 'above'} the paper's bound {ref.value:g} + tolerance "
                       f"({bound:.2f})")
    if metric in GAPS:
        return _within(mean, ref.value, _spread(std), "gap")
    if metric in SPEEDUPS:
        ours, paper = (mean, ref.value) if ref.unit == "x" else (1 + mean / 100, 1 + ref.value / 100)
        same_way = (ours > 1) == (paper > 1)
        close = paper > 0 and 1 / SPEED_FACTOR <= ours / paper <= SPEED_FACTOR
        ok = same_way and close
        return Verdict(REPRODUCED if ok else NOT_REPRODUCED,
                       f"speed-up {ours:.2f}x vs the paper's {paper:.2f}x: "
                       + ("same direction, within a factor of 2" if ok else
                          "the other direction" if not same_way else "beyond a factor of 2"))
    if metric == "throughput_images_per_s":
        return Verdict(UNTESTABLE, "an absolute speed, on other hardware than the paper's")
    if metric in MODEL_COUNTS or (metric in BYTE_SHARES and ref.method == "baseline"):
        return _relative(mean, ref.value, 0.01, "the model's count")
    if metric in BYTE_SHARES:
        if elsewhere:
            what = "bytes sent" if metric == "bytes_per_node_per_iteration" else "a share of bytes"
            return Verdict(UNTESTABLE, f"{what} on {elsewhere}: what a threshold lets through depends on the "
                                       f"model's gradients")
        return _relative(mean, ref.value, 0.10, "the share of bytes")
    if metric == "gradient_zero_fraction":
        if elsewhere:
            return Verdict(UNTESTABLE, f"a property of the paper model's gradients, measured on {elsewhere}")
        return _within(mean, ref.value, 5.0, "zero share")
    if metric in CHOICE_ROUNDING:
        said = f"best here {mean:g}, in the paper {ref.value:g}"
        if abs(mean - ref.value) <= CHOICE_ROUNDING[metric]:
            return Verdict(REPRODUCED, said)
        if cell.choice_shortfall is None:  # not measured: the exact rule alone
            return Verdict(NOT_REPRODUCED, said)
        tolerance = _spread(cell.choice_std)
        ok = cell.choice_shortfall <= tolerance
        return Verdict(REPRODUCED if ok else NOT_REPRODUCED,
                       f"{said}, whose top-1 trails the best by {cell.choice_shortfall:.2f} points: "
                       f"{'within' if ok else 'beyond'} {tolerance:.2f}")
    return Verdict(UNTESTABLE, f"no rule for metric {metric!r}")
