"""Error feedback: over a fixed stream of gradients, what a worker sent plus what it still holds must be what it
was given, and what it holds must stay bounded relative to a gradient.

Checked for a method whose memory is a :class:`~commbench.methods.kit.Residual` (or a subclass): one worker, its
memory carried from step to step as the method carries it, each step's sent value its own decode of its payload.
The totals are kept in float64, as the threshold methods keep their residual: there the identity is exact, bit for
bit (sent values are float32, every sum of them and of the inputs fits float64's mantissa at gradient scales).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from commbench.methods.kit import Residual

from .fixture import Fixture
from .inputs import InputSet

SEED = 11
TOLERANCE = 1e-12  # relative error of the identity that still holds (float64 rounding, where it is not exact)


@dataclass(frozen=True)
class Feedback:
    ratios: tuple[float, ...]  # per step, |residual| / |gradient|
    error: float               # |sent + residual - given| / |given|, everything summed over the steps

    @property
    def max_ratio(self) -> float:
        return max(self.ratios)

    @property
    def at_step(self) -> int:
        return self.ratios.index(self.max_ratio)

    @property
    def growth(self) -> float:
        """Mean ratio over the last quarter of the steps over that of the second quarter: about 1 for a residual
        that has settled, 2.3 for one that grows linearly (a sign-only rule under a persistent gradient)."""
        q = max(1, len(self.ratios) // 4)
        second, last = self.ratios[q:2 * q] or self.ratios[:1], self.ratios[-q:]
        return (sum(last) / len(last)) / max(sum(second) / len(second), 1e-300)

    @property
    def exact(self) -> bool:
        return self.error == 0.0

    @property
    def holds(self) -> bool:
        return self.error <= TOLERANCE


def has_residual(fx: Fixture) -> bool:
    return issubclass(fx.method.memory_for(fx.params), Residual)


def feedback(fx: Fixture, gradients: list[InputSet]) -> Feedback:
    """Run one worker's memory over ``gradients`` (one input set per step)."""
    memory = fx.memory([0])
    given = sent = None
    ratios = []
    for step, inputs in enumerate(gradients):
        group = fx.group(step)
        flat = fx.flat(inputs.tensors)
        out = fx.decode_own(group, fx.encode(group, flat, SEED, memory))
        given = flat.double() if given is None else given.add_(flat.double())
        sent = out if sent is None else sent.add_(out)
        held = memory.residual[0]
        ratios.append(float(held.norm() / flat.double().norm()) if flat.any() else math.inf)
    residual = memory.residual[0].double()  # flat over the compressed tensors, in the group's order
    error = float((sent + residual - given).norm() / given.norm()) if given.any() else float((sent + residual).norm())
    return Feedback(tuple(ratios), error)
