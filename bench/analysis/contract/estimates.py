"""Bias and spread of one worker's D(C(x)) over independent draws: each draw is a step and a seed of its own, so
a stochastic compressor draws fresh randomness (a deterministic one, found so by its first two draws, needs one).

Bias is tested against the compressor's declared target (``Compressor.unbiased``) with two z statistics per
tensor, each a mean over draws of a scalar, so that the central limit theorem holds over draws whatever the
elements' own distributions (a per-element test would not: a rare Bernoulli is nowhere near normal in 200 draws):

* the error projected on the target itself: catches a wrong scale, the usual bias of a broken decoder;
* the error projected on the mean error of the first half of the draws, measured on the second half: catches a
  bias in any direction, tested on draws that did not choose the direction.

The spread is E||D(C(x)) - x||^2 / ||x||^2: the variance factor omega of an unbiased compressor, or one minus the
contraction delta of a biased one.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from statistics import NormalDist

import torch

from .fixture import Fixture
from .inputs import InputSet
from .targets import UnknownTarget, target_of

SEED = 4242  # the draws' seeds are SEED + draw
EXACT = 1e-6  # a deterministic compressor's relative error to its target that still reads as unbiased (float32)


@dataclass(frozen=True)
class TensorStats:
    """One tensor's (or the whole model's, ``name == "model"``) bias statistics and spread."""

    name: str
    z_target: float | None   # None: deterministic (one draw), judged by ``relative_error``
    z_split: float | None
    scale_bias: float        # mean error along the target, relative to |target|^2 (0.1: a decoder 10% high)
    relative_error: float    # |mean D(C(x)) - target| / |target|
    spread: float            # E|D(C(x)) - x|^2 / |x|^2 (nan for a zero tensor)


@dataclass(frozen=True)
class Estimate:
    label: str               # the input set's key (``synthetic``, ``step50``)
    draws: int
    target: str | None       # what the bias was measured against; None: declared biased, not tested
    tensors: list[TensorStats]
    model: TensorStats
    untested: str | None = None  # why the declared target was not tested (one the report cannot compute)

    @property
    def deterministic(self) -> bool:
        return self.draws == 1


def estimate(fx: Fixture, inputs: InputSet, target: str | None, draws: int = 200) -> Estimate:
    """Draw D(C(x)) ``draws`` times (at least 4: two per half) for ``inputs`` and measure bias against ``target``
    and the spread."""
    draws = max(draws, 4)
    x = fx.flat(inputs.tensors)
    group = fx.group(0)
    first = fx.encode(group, x, SEED)
    try:
        t = target_of(fx, target, group, x, first) if target is not None else x.double()
    except UnknownTarget as exc:
        return replace(estimate(fx, inputs, None, draws), untested=str(exc))
    y0, y1 = fx.decode_own(group, first), fx.round_trip(x, 1, SEED + 1)
    if torch.equal(y0, y1):  # deterministic: one draw, judged exactly (float64)
        return _statistics(inputs.key or inputs.label, target, [y0], 1, t, x.double(), fx)
    # float32 for the draws: the dot products' rounding (~1e-6 of them) is far below a mean's standard error over
    # 200 draws (~5%), and float64 would double the memory traffic that bounds the report's time
    ys = _draws(fx, x, y0.float(), y1.float(), draws)  # streamed: 200 draws of a model's gradient do not fit
    return _statistics(inputs.key or inputs.label, target, ys, draws, t.float(), x, fx)


def _draws(fx: Fixture, x, y0, y1, draws):
    yield y0
    yield y1
    for r in range(2, draws):
        yield fx.round_trip(x, r, SEED + r, torch.float32)


def _statistics(label, target, ys, count, t, x, fx: Fixture) -> Estimate:
    """Per tensor and for the model: each draw's dot products (with e = y - target and c = target - x, |y - x|^2 is
    e.e + 2 e.c + c.c), then their means and spreads over the draws."""
    bounds, half, c = _bounds(fx.sizes), count // 2, t - x
    cc, total = _dots(c, c, bounds), torch.zeros_like(t)
    along_target, along_split, squares = [], [], []
    for r, y in enumerate(ys):
        if r == half and half:
            direction = total / half  # the first half's mean error: the second half is tested on it
        e = y.sub_(t)
        along_target.append(_dots(e, t, bounds))
        if r >= half and half:
            along_split.append(_dots(e, direction, bounds))
        squares.append([ee + 2 * ec + k for ee, ec, k in zip(_dots(e, e, bounds), _dots(e, c, bounds), cc)])
        total += e
    mean_error = total / count
    per = [_tensor(fx.names[j], [a[j] for a in along_target], [s[j] for s in along_split], [q[j] for q in squares],
                   _norm2(t[lo:hi]), _norm2(x[lo:hi]), _norm2(mean_error[lo:hi])) for j, (lo, hi) in enumerate(bounds)]
    model = _tensor("model", [sum(a) for a in along_target], [sum(s) for s in along_split],
                    [sum(q) for q in squares], _norm2(t), _norm2(x), _norm2(mean_error))
    return Estimate(label, count, target, per, model)


def _tensor(name, along_target, along_split, squares, t2, x2, bias2) -> TensorStats:
    deterministic = len(along_target) == 1
    return TensorStats(name, None if deterministic else _z(along_target, t2),
                       None if deterministic or not along_split else _z(along_split, t2),
                       _mean(along_target) / t2 if t2 else 0.0, math.sqrt(bias2 / t2) if t2 else math.sqrt(bias2),
                       _mean(squares) / x2 if x2 else math.nan)


def _z(values: list[float], scale: float) -> float:
    """Mean over draws in units of its standard error. A value that does not vary is judged as exact or not."""
    n, mean = len(values), _mean(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    if sd <= 1e-12 * max(scale, 1e-300):
        return 0.0 if abs(mean) <= EXACT * scale else math.inf
    return mean / (sd / math.sqrt(n))


def _mean(values) -> float:
    return sum(values) / len(values)


def _norm2(v: torch.Tensor) -> float:
    return float(torch.dot(v, v).double())


def _dots(a: torch.Tensor, b: torch.Tensor, bounds) -> list[float]:
    return [float(torch.dot(a[lo:hi], b[lo:hi])) for lo, hi in bounds]


def _bounds(sizes: list[int]) -> list[tuple[int, int]]:
    out, at = [], 0
    for size in sizes:
        out.append((at, at + size))
        at += size
    return out


ALPHA = 1e-3  # the family-wise false alarm rate of one compressor's bias tests (Bonferroni over all of them)


@dataclass(frozen=True)
class BiasVerdict:
    holds: bool
    worst: float          # the largest |z| (or relative error, where deterministic) over every test
    critical: float       # the Bonferroni-corrected critical value it is held to
    where: str            # which input and tensor gave the worst
    tests: int
    exact: bool = False   # judged by relative error (a deterministic compressor), not by z


def bias_verdict(estimates: list[Estimate], alpha: float = ALPHA) -> BiasVerdict | None:
    """Unbiased for the declared target? Every tensor's and the model's two z statistics, over every input, held
    to one Bonferroni-corrected bound, both as two-sided tests (conservative for the split one, where a bias shows
    as positive). None: nothing was tested (declared biased, or a target the report cannot compute)."""
    tested = [e for e in estimates if e.target is not None]
    if not tested:
        return None
    stats = [(e.label, s, e.deterministic) for e in tested for s in [*e.tensors, e.model]]
    exact = [(s.relative_error, label, s.name) for label, s, det in stats if det]
    zs = [(abs(z), label, s.name) for label, s, det in stats if not det for z in (s.z_target, s.z_split)
          if z is not None]
    exact_holds = all(err <= EXACT for err, _, _ in exact)
    if not zs:
        worst, label, name = max(exact)
        return BiasVerdict(exact_holds, worst, EXACT, f"{label}: {name}", len(exact), exact=True)
    critical = NormalDist().inv_cdf(1 - alpha / (2 * len(zs)))
    worst, label, name = max(zs)
    return BiasVerdict(worst <= critical and exact_holds, worst, critical, f"{label}: {name}", len(zs) + len(exact))
