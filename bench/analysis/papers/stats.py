"""The numbers behind a verdict: an estimate over paired seeds, its standard error and its intervals.

Two sources of noise are in every accuracy a run reports, and the interval covers both:

* **seeds**: initialisation, data order and the methods' random draws. Gaps are paired by seed (the same seed
  fixes initialisation and data order for every method, sim and dist alike: tests/run/test_seed_pairing.py),
  so the spread over seeds is that of the differences, s_d, and its share of the error is s_d / sqrt(n);
* **the test set**: m test images are a sample. Where the records hold which test images each run got right
  (``metrics.eval_correct``, new records), a paired bootstrap resamples the seeds and the test images, the same
  images for both arms, and its replicates' spread is the standard error. Where they do not (older records),
  the binomial standard error of the two accuracies, sqrt(p1 q1 / m + p2 q2 / m), is a floor that holds even
  with one seed (wider than the paired one: two models agree on most images).

The half-width at level L is the larger of t(n - 1, L) x s_d / sqrt(n) and z(L) x SE_test; the standard error the
power rule uses is the larger of s_d / sqrt(n) and SE_test.
"""
from __future__ import annotations

import hashlib
import math
import statistics
from dataclasses import dataclass

import numpy as np
from scipy import stats as _scipy

BOOTSTRAP_REPLICATES = 1000
BOOTSTRAP_SEED = 20261125  # fixed: a table regenerated from the same records prints the same intervals
# test-set sizes of the evaluation splits, for records that do not state theirs (metrics.eval_images)
TEST_IMAGES = {"mnist": 10_000, "fashion-mnist": 10_000, "cifar10": 10_000, "cifar10-jpeg": 10_000,
               "imagenet": 50_000}


def z(level: float) -> float:
    """The two-sided normal quantile: 1.645 at 90%, 1.960 at 95%."""
    return float(_scipy.norm.ppf(0.5 + level / 2))


def t(level: float, df: int) -> float:
    """The two-sided Student t quantile with ``df`` degrees of freedom (4.303 at 95% for 2)."""
    return float(_scipy.t.ppf(0.5 + level / 2, df))


@dataclass(frozen=True)
class Estimate:
    """A mean over n paired seeds, in the claim's unit (points for accuracies), with what its error is made of."""

    value: float
    n: int                  # paired seeds
    seed_se: float | None   # s_d / sqrt(n); None with one seed
    test_se: float | None   # the test set's: paired bootstrap, or the binomial floor; None where not an accuracy
    how: str                # "paired bootstrap over seeds and test images" | "binomial floor" | "seeds only"

    @property
    def se(self) -> float:
        """The standard error the power rule and the decisive-by-4-SE test use."""
        return max(self.seed_se or 0.0, self.test_se or 0.0)

    def half_width(self, level: float) -> float:
        seeds = t(level, self.n - 1) * self.seed_se if self.seed_se is not None and self.n > 1 else 0.0
        test = z(level) * self.test_se if self.test_se is not None else 0.0
        return max(seeds, test)

    def interval(self, level: float) -> tuple[float, float]:
        h = self.half_width(level)
        return self.value - h, self.value + h

    def negated(self) -> "Estimate":
        return Estimate(-self.value, self.n, self.seed_se, self.test_se, self.how)

    def shifted(self, by: float) -> "Estimate":
        """The same evidence about ``value - by`` (ours minus the paper's)."""
        return Estimate(self.value - by, self.n, self.seed_se, self.test_se, self.how)


def seed_se(values: list[float]) -> float | None:
    return statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else None


def binomial_se(accuracies: list[float], images: int) -> float:
    """In points: the test set's standard error of an accuracy (one arm) or of a difference (two arms,
    unpaired), from the accuracies as fractions."""
    return 100.0 * math.sqrt(sum(p * (1 - p) for p in accuracies) / images)


def paired_bootstrap_se(diffs: list[np.ndarray]) -> float:
    """In points: the bootstrap standard error of the mean over seeds of per-image differences, one array per
    seed (for a gap, run correct minus partner correct: -1, 0 or 1 per image; for an accuracy, 0 or 1; weighted
    sums of such arrays for an interpolated value). Each replicate resamples the seeds, and the test images once
    for all seeds and both arms (the runs were evaluated on the same images)."""
    values = np.stack([np.asarray(d, dtype=np.float32) for d in diffs]).astype(np.float64)
    key = (values.shape, hashlib.sha256(values.tobytes()).hexdigest())
    if key not in _BOOTSTRAPPED:     # a table asks for the same comparison from several rows
        _BOOTSTRAPPED[key] = _bootstrap(values)
    return _BOOTSTRAPPED[key]


_BOOTSTRAPPED: dict[tuple, float] = {}


def _bootstrap(values: np.ndarray) -> float:
    n, m = values.shape
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    replicates = np.empty(BOOTSTRAP_REPLICATES)
    chunk = max(1, 2_000_000 // max(1, m))
    for start in range(0, BOOTSTRAP_REPLICATES, chunk):
        b = min(chunk, BOOTSTRAP_REPLICATES - start)
        images = rng.integers(0, m, size=(b, m))                              # the images drawn, per replicate
        # how often each image was drawn in each replicate, so that a replicate's per-seed sums are one matrix
        # product (a gather of n x b x m values was two thirds of `commbench table`'s time)
        drawn = np.bincount((images + (np.arange(b) * m)[:, None]).ravel(), minlength=b * m).reshape(b, m)
        per_seed = (drawn @ values.T) / m                                    # (b, n)
        seeds = rng.multinomial(n, np.full(n, 1.0 / n), size=b)              # the seeds drawn
        replicates[start:start + b] = (per_seed * seeds).sum(axis=1) / n
    return 100.0 * float(np.std(replicates, ddof=1))


def estimate(values: list[float], test_se: float | None, how: str) -> Estimate:
    """The mean of per-seed values with its seed and test-set errors."""
    return Estimate(statistics.fmean(values), len(values), seed_se(values), test_se, how)


def holm(p_values: list[float]) -> list[float]:
    """Holm-adjusted p-values, in the given order (step-down, monotone, capped at 1)."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [0.0] * len(p_values)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def one_sided_p(est: Estimate) -> float:
    """P(a difference at least this large in this direction | no difference): t(n - 1) where the seeds' spread
    decides the error, the normal where the test set's does."""
    if est.se == 0:
        return 0.0 if est.value > 0 else 1.0
    stat = est.value / est.se
    if est.seed_se is not None and est.n > 1 and est.seed_se >= (est.test_se or 0.0):
        return float(_scipy.t.sf(stat, est.n - 1))
    return float(_scipy.norm.sf(stat))
