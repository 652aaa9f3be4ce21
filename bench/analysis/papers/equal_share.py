"""A threshold method's accuracy on a stand-in model, at the paper's share of bytes, not at its threshold."""
from __future__ import annotations

import math
import statistics
from collections import defaultdict

from commbench.analysis.papers.cell import Cell
from commbench.analysis.papers.conditions import samples_seen
from commbench.analysis.papers.differs import markers
from commbench.analysis.papers.metric_kinds import NO_MATCH, PAIRED
from commbench.analysis.papers.pairing import paired_with
from commbench.analysis.papers.paper_rows import paper_baseline_value
from commbench.analysis.papers.reference import Analogue, Reference
from commbench.analysis.papers.runs import fp32_fraction, percent, same_value, setting_of
from commbench.analysis.runs import Run
from commbench.methods import registry

COLLAPSE_POINTS = 2.0  # a threshold whose runs lose more than this to the baseline has collapsed (QGT's byte cap)


def equal_share_applies(ref: Reference, analogue: Analogue | None) -> bool:
    """A threshold method's accuracy on a stand-in model: its absolute thresholds, tuned to the paper's model,
    let another share of the bytes through on ours, so the comparison is made at the paper's share."""
    return analogue is not None and ref.method in registry.members(registry.THRESHOLD) and \
        ref.threshold is not None and ref.metric in ("top1", "top1_loss")


def _paper_share(ref: Reference, references: list[Reference]) -> float | None:
    """The share of its baseline's bytes the paper's method sends at the row's threshold (its own accounting)."""
    sent = [r for r in references if r.paper == ref.paper and r.method == ref.method and r.metric == "gb_transferred"
            and same_value(r.threshold, ref.threshold)]
    base = paper_baseline_value(ref, references, "gb_transferred")
    return sent[0].value / base.value if len(sent) == 1 and base is not None and base.value else None


def _across_a_collapse(by_t: dict, ta: float, tb: float, share: float) -> str | None:
    """Why two bracketing thresholds cannot be interpolated between, or None: one collapsed (its runs more than 2
    points under the baseline: QGT at T=1e-7, capped at one byte) and the other not. Halfway between a run that
    collapsed and one that did not is neither's accuracy; both on the same side of the collapse are a bracket."""
    gaps = {t: statistics.fmean(g for g, _, _ in by_t[t]) for t in (ta, tb)}
    collapsed = {t for t, g in gaps.items() if g < -COLLAPSE_POINTS}
    if len(collapsed) != 1:
        return None
    return (f"the paper's share of bytes ({100 * share:.3g}%) lies between T={ta:g} (gap {gaps[ta]:+.2f} points) and "
            f"T={tb:g} (gap {gaps[tb]:+.2f}), and T={next(iter(collapsed)):g} collapsed (more than "
            f"{COLLAPSE_POINTS:g} points under its baseline): no interpolation across a collapse")


def _one_family(paired: list[tuple[float, Run]]) -> list[tuple[float, float, Run]] | None:
    """The (gain, fp32 fraction, run) of the one setting (but the threshold) the row is interpolated in; None where
    no paired run has a threshold and a share of the bytes."""
    families: dict[str, list] = defaultdict(list)
    for gain, r in paired:
        if (f := fp32_fraction(r, True)) and r.params.get("threshold"):
            families[setting_of(r, ("threshold",))].append((gain, f, r))
    if not families:
        return None
    # one family of runs, never a mix of settings: the longest runs (a gap needs half the schedule), then the
    # one with the most thresholds (the most shares to bracket with), then the most records
    return max(families.values(), key=lambda g: (max(samples_seen(r.config) for _, _, r in g),
                                                 len({r.params["threshold"] for _, _, r in g}), len(g)))


def _interpolate_seeds(cell: Cell, ref: Reference, at_a: list, at_b: list, w: float,
                       partner_of: dict[str, Run]) -> None:
    """Each seed run at both bracketing thresholds: its value (or loss) and gap, weighted ``1 - w`` at the first
    threshold and ``w`` at the second, into ``cell``."""
    seeds_a = {r.config.seed: (g, r) for g, _, r in at_a}
    seeds_b = {r.config.seed: (g, r) for g, _, r in at_b}
    loss = ref.metric == "top1_loss"
    for seed in sorted(set(seeds_a) & set(seeds_b), key=str):
        (ga, ra), (gb, rb) = seeds_a[seed], seeds_b[seed]
        gap = (1 - w) * ga + w * gb
        gap_terms = [(1 - w, ra, partner_of[ra.run_id]), (w, rb, partner_of[rb.run_id])]
        if loss:
            cell.values.append(-gap)
            cell.backing.append(gap_terms)
        else:
            cell.values.append((1 - w) * percent(ra.metrics["top1"]) + w * percent(rb.metrics["top1"]))
            cell.backing.append([(1 - w, ra, None), (w, rb, None)])
            cell.gap_values.append(gap)
            cell.gap_backing.append(gap_terms)
        cell.records.append(ra)
        cell.run_ids += [ra.run_id, rb.run_id]


def _by_threshold(family: list[tuple[float, float, Run]]) -> dict[float, list]:
    """The family's (gain, fp32 fraction, run) grouped by the run's threshold."""
    by_t: dict[float, list] = defaultdict(list)
    for gain, f, r in family:
        by_t[float(r.params["threshold"])].append((gain, f, r))
    return by_t


def _log_weight(fa: float, fb: float, share: float) -> float:
    """Where ``share`` lies between the shares ``fa`` and ``fb``, on log share: 0 at ``fa``, 1 at ``fb``."""
    return 0.0 if fa == fb else (math.log(fa) - math.log(share)) / (math.log(fa) - math.log(fb))


def _equal_share_markers(ref: Reference, share: float, bracket: tuple, w: float, points: list) -> list[str]:
    """What the row's reader is told of the interpolation: where it was made, and where its map from T to the
    share of bytes is not one to one."""
    (ta, fa), (tb, fb) = bracket
    t_star = math.exp(math.log(ta) + w * (math.log(tb) - math.log(ta)))
    said = [f"at the paper's share of bytes ({100 * share:.3g}% of its baseline's at T={ref.threshold:g}): "
            f"interpolated at T={t_star:.3g} between T={ta:g} ({100 * fa:.3g}%) and T={tb:g} ({100 * fb:.3g}%)"]
    # the interpolation takes the share to fall as T grows; where it rises between two thresholds run, the paper's
    # share may also be sent at some other T, and the row's reader should know the map is not one to one
    return said + [f"the share of bytes here rises with T from T={t0:g} ({100 * s0:.3g}%) to T={t1:g} "
                   f"({100 * s1:.3g}%): not one share per T, as the interpolation assumes"
                   for (t0, s0), (t1, s1) in zip(points, points[1:]) if s1 > s0]


def at_equal_share(cell: Cell, ref: Reference, runs: list[Run], baselines: list[Run],
                   references: list[Reference], analogue: Analogue | None) -> Cell:
    """The row's accuracy (or loss) where our runs send the paper's share of the bytes: interpolated on log T
    between the two thresholds run whose shares bracket it (log share linear in log T), seed by seed."""
    share = _paper_share(ref, references)
    if share is None:
        cell.why_missing = "the paper states no bytes at this threshold to take its share from"
        return cell
    partner_of: dict[str, Run] = {}
    family = _one_family(paired_with(runs, baselines, PAIRED["top1_gain"], into=partner_of))
    if family is None:
        cell.why_missing = NO_MATCH if not runs else "no baseline run of the same setting to compare with"
        return cell
    by_t = _by_threshold(family)
    points = sorted((t, statistics.fmean(f for _, f, _ in g)) for t, g in by_t.items())
    bracket = next(((a, b) for a, b in zip(points, points[1:]) if a[1] >= share >= b[1]), None)
    if bracket is None:
        said = ", ".join(f"T={t:g} {100 * f:.3g}%" for t, f in points)
        cell.untestable = (f"no two thresholds run here bracket the paper's share of bytes ({100 * share:.3g}% at "
                           f"T={ref.threshold:g}): here {said}; the comparison is at equal share, not equal T")
        return cell
    (ta, fa), (tb, fb) = bracket
    if (across := _across_a_collapse(by_t, ta, tb, share)) is not None:
        cell.untestable = across
        return cell
    w = _log_weight(fa, fb, share)
    _interpolate_seeds(cell, ref, by_t[ta], by_t[tb], w, partner_of)
    if not cell.values:
        cell.untestable = f"the thresholds that bracket the paper's share (T={ta:g}, T={tb:g}) share no seed"
        return cell
    cell.markers = markers(cell.records, ref, analogue) + _equal_share_markers(ref, share, bracket, w, points)
    return cell
