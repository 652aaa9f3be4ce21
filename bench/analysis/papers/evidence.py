"""What a row's runs can tell: the estimate with its errors (bench/analysis/papers/stats.py), and the gates a
comparison must pass before any verdict on it means something (where the runs stand against the paper's
experiment, how much of the schedule they cover).

A value's *backing* (``cell.Term``) names the runs it is computed from: for a gap, each run and its partner
(baseline or sibling) of the same seed; for an absolute accuracy, the run alone; for a value interpolated between
two thresholds, both pairs with their weights. The test set's error comes from the runs' per-image correctness
where every run stored it (``metrics.eval_correct``: a paired bootstrap), else from their accuracies (the
binomial floor).
"""
from __future__ import annotations

import statistics

import numpy as np

from commbench.store.correctness import unpack_correct
from commbench.analysis.papers import stats
from commbench.analysis.papers.conditions import Coverage, coverage
from commbench.analysis.papers.cell import Cell, Term
from commbench.analysis.runs import Run

LENGTH_SHARE = 0.5      # a gap is judged from runs that cover at least half of the schedule, in samples seen
BASELINE_POINTS = 2.0   # on the paper's own model and data, our baseline within 2 points of the paper's


def _images(run: Run) -> int | None:
    stored = run.metrics.get("eval_correct")
    if isinstance(stored, dict) and type(stored.get("images")) is int:
        return stored["images"]
    data = run.data
    if type(data.get("eval_samples")) is int and data["eval_samples"] > 0:
        return data["eval_samples"]
    return stats.TEST_IMAGES.get(run.config.dataset)


def _bits(run: Run) -> np.ndarray | None:
    return unpack_correct(run.metrics.get("eval_correct"))


def _per_image(backing: list[list[Term]], metric: str) -> tuple[int | None, list[np.ndarray] | None]:
    """The test-set size, and per value its per-image differences (run minus partner, weighted; a run alone is
    its correctness) where every run stored which images it got right (top-1 only); None where unknown."""
    runs = [r for terms in backing for _, run, partner in terms for r in (run, partner) if r is not None]
    sizes = {_images(r) for r in runs}
    if len(sizes) != 1 or None in sizes:
        return None, None
    m = sizes.pop()
    if metric.startswith("top5"):
        return m, None
    bits = {id(r): _bits(r) for r in runs}
    if not all(b is not None and b.size == m for b in bits.values()):
        return m, None
    return m, [sum(w * (bits[id(run)].astype(np.float32) -
                        (bits[id(partner)].astype(np.float32) if partner is not None else 0.0))
                   for w, run, partner in terms) for terms in backing]


def floor_se(backing: list[list[Term]], metric: str) -> tuple[float | None, str]:
    """From 3 seeds on: the floor under the seeds' t interval, sqrt(disagreement / m) in points (for a gap, the
    share of test images on which the two arms differ; for a value, p q), where every run's correctness is
    stored; else the binomial floor of the accuracies, as for fewer seeds."""
    if not backing:
        return None, "no runs"
    m, diffs = _per_image(backing, metric)
    if m is None:
        return None, "test-set size unknown"
    if diffs is None:
        return test_se(backing, metric)
    spread = statistics.fmean(float(np.var(d.astype(np.float64))) for d in diffs)
    return 100.0 * (spread / m) ** 0.5, f"t over seeds, floor sqrt(disagreement / m) over {m:,} test images"


def test_se(backing: list[list[Term]], metric: str) -> tuple[float | None, str]:
    """The test set's standard error (points) of the mean over the values backed by ``backing``, and how it was
    found. Top-1 with every run's correctness stored: the paired bootstrap; else the binomial floor."""
    if not backing:
        return None, "no runs"
    m, diffs = _per_image(backing, metric)
    if m is None:
        return None, "test-set size unknown"
    if diffs is not None:
        return stats.paired_bootstrap_se(diffs), "paired bootstrap over seeds and test images"
    key = "top5" if metric.startswith("top5") else "top1"
    # the binomial floor: each term's two arms at their mean accuracies over the seeds (the test set is shared by
    # the seeds, so its error does not shrink with them)
    variance = 0.0
    for position in range(len(backing[0])):
        terms = [t[position] for t in backing if len(t) > position]
        weight = terms[0][0]
        for arm in (1, 2):
            accs = [t[arm].metrics.get(key) for t in terms if t[arm] is not None]
            accs = [a for a in accs if isinstance(a, (int, float))]
            if accs:
                p = statistics.fmean(accs)
                variance += weight ** 2 * p * (1 - p)
    return 100.0 * (variance / m) ** 0.5, f"binomial floor over {m:,} test images"


MIN_T_SEEDS = 3  # from 3 paired seeds the t interval over them holds each seed's test-image noise


def estimate(values: list[float], backing: list[list[Term]], metric: str, accuracy: bool) -> stats.Estimate:
    """The mean of ``values`` (one per seed) with the seeds' and, for an accuracy, the test set's error: from 3
    seeds the disagreement floor under the t interval, with fewer the paired bootstrap (or binomial floor)."""
    if not accuracy:
        se, how = None, "seeds only"
    elif len(values) >= MIN_T_SEEDS:
        se, how = floor_se(backing, metric)
    else:
        se, how = test_se(backing, metric)
    return stats.estimate(values, se, how)


# -- gates ------------------------------------------------------------------------------------------------------
def runs_of(cell: Cell) -> list[Run]:
    backing = cell.gap_backing or cell.backing
    found = [r for terms in backing for _, run, partner in terms for r in (run, partner) if r is not None]
    for runs in cell.choices.values():
        found += list(runs)
    return found or list(cell.records)


def early(cell: Cell, ours: float, paper: float | None) -> str | None:
    """Why a gap from these runs is not the paper's converged gap, or None: a run covers less than half of the
    schedule, or its learning rate does not drop where the schedule's does, or (on the paper's own model and
    data) our baseline is more than 2 points from the paper's."""
    ref = cell.ref
    covers = [(c, r) for r in runs_of(cell) if (c := coverage(r, ref)) is not None]
    said = f"here {ours:+.2f}" + (f", the paper {paper:+.2f}" if paper is not None else "")
    if covers:
        least: Coverage = min((c for c, _ in covers), key=lambda c: c.share)
        if least.share < LENGTH_SHARE:
            steps = min(r.config.steps or 0 for c, r in covers if c is least)
            return f"early-training gap: the runs cover {least.describe()} ({steps:,} steps); {said}"
        incomplete = next((c for c, _ in covers if not c.complete), None)
        if incomplete is not None:
            return (f"early-training gap: the lr schedule ({incomplete.shape}) is not the schedule's shape "
                    f"compressed to the run; {said}")
    return _baseline_off(cell, said)


def _baseline_off(cell: Cell, said: str) -> str | None:
    """The baseline gate, on the paper's own model and on every data set (a labelled substitute included: a gap
    beside a baseline 5 points under the paper's is another regime's gap): our baseline more than 2 points from
    the paper's. A stand-in model's baseline is another model's, and is not held to the paper's."""
    ref = cell.ref
    if cell.paper_baseline is None:
        return None
    bases = [r for r in runs_of(cell) if r.config.method == "baseline" and r.config.task == ref.task]
    key = "top5" if ref.metric.startswith("top5") else "top1"
    accs = [100 * r.metrics[key] for r in bases if isinstance(r.metrics.get(key), (int, float))]
    if not accs or abs(statistics.fmean(accs) - cell.paper_baseline) <= BASELINE_POINTS:
        return None
    ours = statistics.fmean(accs)
    data = sorted({r.data.get("dataset") or r.config.dataset for r in bases})
    return (f"baseline {ours:.2f} {'below' if ours < cell.paper_baseline else 'above'} the paper's "
            f"{cell.paper_baseline:.2f} by more than {BASELINE_POINTS:g} points (on {', '.join(data)}); {said}")


def saturated_top5(cell: Cell) -> float | None:
    """The highest top-5 (points) of a top-5 row's runs, where it is 99% or more: every model of the stand-in's
    quality scores at the ceiling (a 10-class data set), so no top-5 effect can show."""
    if not cell.ref.metric.startswith("top5"):
        return None
    top5 = [r.metrics.get("top5") for r in runs_of(cell) if isinstance(r.metrics.get("top5"), (int, float))]
    return 100 * max(top5) if top5 and max(top5) >= 0.99 else None
