"""The verdict rule's error rates and power, by simulation: the project's own estimate, interval and verdict
functions (``stats.Estimate``, ``verdicts.equivalence_label``) driven by runs drawn from a model with a known truth.

The model (the fidelity audit's): each run's correctness on each of m = 10,000 test images is a probit, latent
mu_arm + a_image + c_run + e_run,image > 0, with an image effect a shared by every run (images are easy or hard),
a run's own shift c and independent noise e. Calibrated to LeNet on MNIST (99.1% top-1, runs disagreeing on
0.5% of the images) and to ResNet-20 on CIFAR-10 (86.5% top-1, 9.3% disagreement, a per-seed gap SD of 0.46
points as the campaign's records show). Seeds pair the arms (the same images, each arm its own c and e). The
estimand is the gap on the fixed test set both arms score: per draw, the expectation over runs of the two arms'
accuracy on that draw's images.

What must hold (the issue's criteria, at 2 Monte-Carlo standard errors): ``reproduced`` at most 5% of the time
where the truth lies exactly at the margin; ``not reproduced`` at most 2.5% where the replication's truth equals
the paper's, the paper's number being one run (its own SE 0.25 at a margin of 0.25); the 90% and 95% intervals
cover the truth at least as often as they say; and power: a true difference of 0 reads ``reproduced`` and one of
twice the margin ``not reproduced`` at least 80% of the time where the standard error is a quarter of the margin.
The t-interval scenarios (3 seeds and more) run 2,000 draws each here; the 2-seed bootstrap ones, 400 draws, in
the slow tier.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pytest
from scipy import stats as sps

from commbench.analysis.papers import stats
from commbench.analysis.papers.verdicts import NOT_REPRODUCED, REPRODUCED, equivalence_label

IMAGES = 10_000
DRAWS = 2_000


@dataclass(frozen=True)
class Calibration:
    accuracy: float       # top-1 of a run, as a fraction
    disagreement: float   # share of the test images two runs of one arm score differently
    gap_sd: float | None  # per-seed SD of a paired gap, points (None: the images' noise alone)

    @cached_property
    def mu(self) -> float:
        return float(sps.norm.ppf(self.accuracy))

    @cached_property
    def rho(self) -> float:
        """The image effect's share of the latent variance that gives the calibrated disagreement."""
        def disagree(rho: float) -> float:
            both = sps.multivariate_normal([0, 0], [[1, rho], [rho, 1]]).cdf([self.mu, self.mu])
            return 2 * (self.accuracy - both)
        low, high = 0.0, 0.999
        for _ in range(40):  # disagreement falls as images explain more
            mid = (low + high) / 2
            low, high = (mid, high) if disagree(mid) > self.disagreement else (low, mid)
        return (low + high) / 2

    @cached_property
    def run_shift_sd(self) -> float:
        """c's SD on the latent scale that makes the per-seed gap SD the calibrated one."""
        if self.gap_sd is None:
            return 0.0
        images_only = 100 * math.sqrt(self.disagreement / IMAGES)
        slope = 100 * sps.norm.pdf(self.mu)  # points of accuracy per unit of latent shift
        return math.sqrt(max(0.0, self.gap_sd ** 2 - images_only ** 2) / 2) / slope


LENET = Calibration(0.991, 0.005, None)
RESNET = Calibration(0.865, 0.093, 0.46)


def draw_gaps(cal: Calibration, seeds: int, shift: float, draws: int, rng) -> tuple[np.ndarray, ...]:
    """Per draw: each seed's measured gap (points), the disagreement floor's SE, and the true gap (points)."""
    gaps, floors, truths = np.empty((draws, seeds)), np.empty(draws), np.empty(draws)
    noise_sd = math.sqrt(1 - cal.rho)
    spread = math.sqrt(1 - cal.rho + cal.run_shift_sd ** 2)
    for d in range(draws):
        image = rng.standard_normal(IMAGES, dtype=np.float32) * math.sqrt(cal.rho)
        latent = (image[None, None, :] + np.array([cal.mu, cal.mu + shift], dtype=np.float32)[None, :, None]
                  + (rng.standard_normal((seeds, 2, 1), dtype=np.float32) * cal.run_shift_sd)
                  + rng.standard_normal((seeds, 2, IMAGES), dtype=np.float32) * noise_sd)
        correct = latent > 0
        diff = correct[:, 1, :].astype(np.float32) - correct[:, 0, :]
        gaps[d] = 100 * diff.mean(axis=1)
        floors[d] = 100 * math.sqrt(float(diff.var(axis=1).mean()) / IMAGES)
        expect = sps.norm.cdf((image[None, :] + np.array([[cal.mu], [cal.mu + shift]])) / spread)
        truths[d] = 100 * float((expect[1] - expect[0]).mean())
    return gaps, floors, truths


def shift_for(cal: Calibration, gap_points: float) -> float:
    """The latent shift of the method arm whose expected gap is ``gap_points``."""
    spread = math.sqrt(1 - cal.rho + cal.run_shift_sd ** 2)
    grid = np.linspace(-3, 3, 2001)
    weights = sps.norm.pdf(grid)
    weights /= weights.sum()

    def gap(shift: float) -> float:
        a = grid * math.sqrt(cal.rho)
        return 100 * float((weights * (sps.norm.cdf((a + cal.mu + shift) / spread)
                                       - sps.norm.cdf((a + cal.mu) / spread))).sum())
    low, high = -2.0, 2.0
    for _ in range(50):
        mid = (low + high) / 2
        low, high = (mid, high) if gap(mid) < gap_points else (low, mid)
    return (low + high) / 2


def estimates(gaps, floors, paper, tau: float | None) -> list[stats.Estimate]:
    out = []
    for g, floor, p in zip(gaps, floors, paper):
        est = stats.Estimate(float(g.mean()), len(g), float(g.std(ddof=1)) / math.sqrt(len(g)), float(floor),
                             "t over seeds, floor sqrt(disagreement / m)")
        out.append(est.with_reference(tau, "given").shifted(float(p)))
    return out


def rate(hits: int, n: int) -> tuple[float, float]:
    p = hits / n
    return p, math.sqrt(max(p * (1 - p), 1e-4) / n)


def scenario(cal, seeds, true_difference, margin, tau, seed=0, draws=DRAWS):
    """Labels and whether each interval covers the truth, where ours - the paper's truly is ``true_difference``;
    the paper's number is one run of SE ``tau`` around its own truth (exact where tau is None)."""
    rng = np.random.default_rng(seed)
    gaps, floors, truths = draw_gaps(cal, seeds, shift_for(cal, -1.0), draws, rng)
    paper_truth = truths - true_difference
    paper = paper_truth + (rng.standard_normal(draws) * tau if tau else 0.0)
    ests = estimates(gaps, floors, paper, tau)
    labels = [equivalence_label(e, margin) for e in ests]
    covered = {level: np.mean([lo <= t - p <= hi for e, t, p in zip(ests, truths, paper_truth)
                               for lo, hi in [e.interval(level)]]) for level in (0.90, 0.95)}
    return labels, covered


def test_the_calibrations_give_the_records_noise():
    """The model's per-seed gap SD is the records' (ResNet-20 0.46 points; LeNet its images' noise alone)."""
    rng = np.random.default_rng(5)
    gaps, floors, _ = draw_gaps(RESNET, 3, 0.0, 200, rng)
    assert gaps.std(axis=1, ddof=1).mean() == pytest.approx(0.46, rel=0.15)
    assert np.mean(floors) == pytest.approx(100 * math.sqrt(0.093 / IMAGES), rel=0.15)  # sqrt(disagreement / m)
    lenet, _, _ = draw_gaps(LENET, 3, 0.0, 200, rng)
    assert lenet.std(axis=1, ddof=1).mean() < 0.15


@pytest.mark.parametrize("cal,seeds,margin", [(RESNET, 3, 1.5), (LENET, 3, 0.35)], ids=["resnet20", "lenet"])
def test_at_the_margin_reproduced_is_called_at_most_5_percent_of_the_time(cal, seeds, margin):
    labels, _ = scenario(cal, seeds, margin, margin, None, seed=1)
    p, se = rate(sum(label == REPRODUCED for label in labels), len(labels))
    assert p <= 0.05 + 2 * se, p


@pytest.mark.parametrize("cal,seeds", [(RESNET, 3), (LENET, 10)], ids=["resnet20", "lenet"])
def test_a_replication_as_true_as_the_paper_is_rarely_not_reproduced_when_the_paper_is_one_run(cal, seeds):
    """The paper's gap is one run, with its own SE of 0.25, at a margin of 0.25: counted (tau), not reproduced
    stays under 2.5% and the intervals cover; the control, the same draws with the paper's number taken as exact,
    breaks that bound where our own evidence is precise (LeNet, 10 seeds)."""
    rng = np.random.default_rng(2)
    gaps, floors, truths = draw_gaps(cal, seeds, shift_for(cal, -1.0), DRAWS, rng)
    paper = truths + rng.standard_normal(DRAWS) * 0.25
    counted = estimates(gaps, floors, paper, 0.25)
    p, se = rate(sum(equivalence_label(e, 0.25) == NOT_REPRODUCED for e in counted), DRAWS)
    assert p <= 0.025 + 2 * se, p
    for level in (0.90, 0.95):
        share = np.mean([lo <= 0.0 <= hi for e in counted for lo, hi in [e.interval(level)]])
        assert share >= level - 2 * math.sqrt(level * (1 - level) / DRAWS), (level, share)
    if cal is LENET:
        exact = estimates(gaps, floors, paper, None)
        wrong, wrong_se = rate(sum(equivalence_label(e, 0.25) == NOT_REPRODUCED for e in exact), DRAWS)
        assert wrong > 0.025 + 2 * wrong_se, wrong


@pytest.mark.parametrize("cal,seeds,margin,tau", [(RESNET, 3, 1.5, None), (LENET, 10, 0.3, None),
                                                  (RESNET, 10, 1.0, 0.25)], ids=["resnet20", "lenet", "with-tau"])
def test_the_intervals_cover_the_truth_as_often_as_they_say(cal, seeds, margin, tau):
    _, covered = scenario(cal, seeds, 0.3 * margin, margin, tau, seed=3)
    for level, share in covered.items():
        assert share >= level - 2 * math.sqrt(level * (1 - level) / DRAWS), (level, share)


def test_the_rule_has_power_where_the_error_is_a_quarter_of_the_margin():
    """LeNet, 10 seeds: the margin four times the standard error (the images' floor, about 0.12 points between
    a 1-point-worse arm and its baseline), measured from a pilot of the same model."""
    gaps, floors, _ = draw_gaps(LENET, 10, shift_for(LENET, -1.0), 50, np.random.default_rng(9))
    margin = 4 * max(float(np.mean(floors)), float(np.mean(gaps.std(axis=1, ddof=1))) / math.sqrt(10))
    same, _ = scenario(LENET, 10, 0.0, margin, None, seed=4)
    apart, _ = scenario(LENET, 10, 2 * margin, margin, None, seed=5)
    assert sum(label == REPRODUCED for label in same) / len(same) >= 0.80
    assert sum(label == NOT_REPRODUCED for label in apart) / len(apart) >= 0.80


# -- two seeds: the paired bootstrap over seeds and images (the slow tier) ------------------------------------
def bootstrap_estimates(cal, true_difference, tau, draws, seed):
    rng = np.random.default_rng(seed)
    out, truths, papers = [], [], []
    shift = shift_for(cal, -1.0)
    for _ in range(draws):
        image = rng.standard_normal(IMAGES) * math.sqrt(cal.rho)
        runs = [[(cal.mu + s + image + rng.standard_normal() * cal.run_shift_sd
                  + rng.standard_normal(IMAGES) * math.sqrt(1 - cal.rho)) > 0 for s in (0.0, shift)] for _ in (1, 2)]
        diffs = [r[1].astype(np.float32) - r[0] for r in runs]
        gaps = [100 * float(d.mean()) for d in diffs]
        spread = math.sqrt(1 - cal.rho + cal.run_shift_sd ** 2)
        truth = 100 * float((sps.norm.cdf((image + cal.mu + shift) / spread)
                             - sps.norm.cdf((image + cal.mu) / spread)).mean())
        paper = truth - true_difference + (rng.standard_normal() * tau if tau else 0.0)
        est = stats.Estimate(float(np.mean(gaps)), 2, float(np.std(gaps, ddof=1)) / math.sqrt(2),
                             stats.paired_bootstrap_se(diffs), "paired bootstrap over seeds and test images")
        out.append(est.with_reference(tau, "given").shifted(paper))
        truths.append(true_difference)  # ours - the paper's, in truth
    return out, truths


@pytest.mark.slow
@pytest.mark.parametrize("true_difference,margin,tau,check", [
    (1.5, 1.5, None, "false reproduced"), (0.0, 0.25, 0.25, "false not reproduced")])
def test_two_seeds_with_the_bootstrap_keep_the_error_rates(true_difference, margin, tau, check):
    draws = 400
    ests, truths = bootstrap_estimates(RESNET, true_difference, tau, draws, seed=6)
    labels = [equivalence_label(e, margin) for e in ests]
    bad = REPRODUCED if check == "false reproduced" else NOT_REPRODUCED
    p, se = rate(sum(label == bad for label in labels), draws)
    assert p <= (0.05 if bad == REPRODUCED else 0.025) + 2 * se, p
    covered = np.mean([lo <= t <= hi for e, t in zip(ests, truths) for lo, hi in [e.interval(0.95)]])
    assert covered >= 0.95 - 2 * math.sqrt(0.95 * 0.05 / draws)
