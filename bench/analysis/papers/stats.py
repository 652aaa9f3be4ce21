"""The numbers behind a verdict: an estimate over paired seeds, its standard error and its intervals.

The estimand is the gap (or the accuracy) on the fixed test set both arms score. Our own noise is the seeds':
initialisation, data order and the methods' random draws. Gaps are paired by seed (the same seed fixes
initialisation and data order for every method, sim and dist alike: tests/run/test_seed_pairing.py), so the
spread over seeds is that of the differences, s_d, and each seed's value already holds its test-image noise.

* **3 seeds or more**: the Student t interval over the per-seed differences, t(n - 1, L) x s_d / sqrt(n), with a
  floor of z(L) x sqrt(disagreement / m) (two arms that disagree on a share d of the m test images cannot know
  their gap finer than that, however closely three seeds happen to agree); a joint bootstrap over seeds and
  test images would count the test images twice;
* **2 seeds**: the larger of the t interval and z(L) x the paired bootstrap's SE (seeds and test images
  resampled, the same images for both arms), or, without per-image correctness (older records), the binomial
  SE of the two accuracies, sqrt(p1 q1 / m + p2 q2 / m);
* **1 seed**: the bootstrap (or binomial) alone: a row from one seed is at most ``inconclusive``.

**The paper's number is a sample too.** For a value or a gap, the reference's own standard error tau widens the
interval of (ours - paper): where our runs are the paper's model on its data (or a labelled substitute), tau is
our own per-seed SD and the interval a prediction interval, t(n - 1) s sqrt(1/n + 1); elsewhere tau is the
binomial proxy at the paper's accuracy p and test-set size m (sqrt(2pq/m) for a gap, sqrt(pq/m) for a value),
combined with our half-width in quadrature; the larger where both apply; tau / sqrt(k) where the paper averaged
k runs.

The standard error the power rule uses is sqrt(SE_ours^2 + tau^2), at n - 1 degrees of freedom.
"""
from __future__ import annotations

import hashlib
import math
import statistics
from dataclasses import dataclass, replace

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
    test_se: float | None   # the test set's: n >= 3 the disagreement floor, else the paired bootstrap or the
    how: str                # binomial; None where not an accuracy. how: which, in words
    ref_se: float | None = None  # tau: the paper's number's own standard error (value and gap claims)
    ref_how: str = ""            # where tau comes from
    prediction: bool = False     # tau is our own per-seed SD: the interval is a prediction interval

    @property
    def own_se(self) -> float:
        """Our runs' standard error: the larger of the seeds' and the test set's."""
        return max(self.seed_se or 0.0, self.test_se or 0.0)

    @property
    def se(self) -> float:
        """The standard error the power rule and the decisive-by-4-SE test use: ours and the paper's together."""
        return math.hypot(self.own_se, self.ref_se or 0.0)

    @property
    def df(self) -> float:
        """Degrees of freedom of the seeds' part (n - 1); infinite where the seeds do not set the error."""
        return self.n - 1 if self.seed_se is not None and self.n > 1 else math.inf

    @property
    def per_seed_sd(self) -> float | None:
        return self.seed_se * math.sqrt(self.n) if self.seed_se is not None else None

    def half_width(self, level: float) -> float:
        seeds = t(level, self.n - 1) * self.seed_se if self.seed_se is not None and self.n > 1 else 0.0
        test = z(level) * self.test_se if self.test_se is not None else 0.0
        ours = max(seeds, test)
        if self.ref_se is None:
            return ours
        if self.prediction:  # t(n - 1) s sqrt(1/n + 1) = t(n - 1) SE_seeds sqrt(n + 1)
            return max(ours, t(level, self.n - 1) * self.seed_se * math.sqrt(self.n + 1))
        return math.hypot(ours, z(level) * self.ref_se)

    def interval(self, level: float) -> tuple[float, float]:
        h = self.half_width(level)
        return self.value - h, self.value + h

    def negated(self) -> "Estimate":
        return replace(self, value=-self.value)

    def shifted(self, by: float) -> "Estimate":
        """The same evidence about ``value - by`` (ours minus the paper's)."""
        return replace(self, value=self.value - by)

    def with_reference(self, tau: float | None, how: str, prediction: bool = False) -> "Estimate":
        """The same evidence about ours - the paper's, the paper's number counted as a sample of SE ``tau``."""
        return replace(self, ref_se=tau, ref_how=how, prediction=prediction) if tau is not None else self


def seed_se(values: list[float]) -> float | None:
    return statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else None


# -- power: how many seeds a claim needs (TOST and its one-sided and sign forms) ---------------------------------
ALPHA, POWER = 0.05, 0.80
MAX_SEEDS = 50


def _t(q: float, df: float) -> float:
    return float(_scipy.norm.ppf(q)) if math.isinf(df) else float(_scipy.t.ppf(q, df))


def needed_se_multiple(test: str, df: float) -> float:
    """How many standard errors the margin (or the effect) must span for the claim's test at 5% to have 80%
    power: TOST at a true difference of 0, t(0.95) + t(0.90) (4.8 at 2 degrees of freedom, 2.9 with many);
    a one-sided test (no loss, a bound), t(0.95) + t(0.80); a sign, t(0.975) + t(0.80) at the paper's effect."""
    first, second = {"tost": (1 - ALPHA, 1 - (1 - POWER) / 2), "one-sided": (1 - ALPHA, POWER),
                     "sign": (1 - ALPHA / 2, POWER)}[test]
    return _t(first, df) + _t(second, df)


def decidable(est: Estimate, distance: float, test: str) -> bool:
    """Whether ``est``'s evidence can decide the claim: ``distance`` (the margin, or the effect claimed) spans the
    standard errors the claim's test needs at the row's degrees of freedom."""
    return est.se == 0 or distance >= needed_se_multiple(test, est.df) * est.se


def seeds_to_decide(per_seed_sd: float, floor: float, tau: float, distance: float, test: str) -> str:
    """The least number of paired seeds n at which the claim's test has 80% power at 5% (at a true difference of 0
    for equivalence), from the per-seed SD, the test-set floor and the paper's own SE tau (per-seed noise shrinks
    as 1/sqrt(n), the floor and tau do not): ``">50"`` where none up to 50 does, or where 1.645 tau alone reaches
    the distance (no number of seeds here can decide it)."""
    if z(1 - 2 * ALPHA) * tau >= distance:  # 1.645 tau: the paper's own noise fills the margin
        return f">{MAX_SEEDS}"
    for n in range(2, MAX_SEEDS + 1):
        se = math.hypot(max(per_seed_sd / math.sqrt(n), floor), tau)
        if distance >= needed_se_multiple(test, n - 1) * se:
            return str(n)
    return f">{MAX_SEEDS}"


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
