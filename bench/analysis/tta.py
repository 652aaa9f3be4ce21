"""Time to accuracy against the strongest baseline: the question the field asks of a compression method.

A run's time to target is the training time (``train_s``) at its first evaluation whose top-1 reaches the target;
a run that never reaches it within its steps (the horizon, the same for every method of a setting) is censored:
"not reached within H steps", never a number. The target is the one the runs declared before they ran
(``eval.target``), else one the reader passes (``table --target``), else the setting's fp32 baseline's final
top-1 less 0.5 points (then a derived target: say so). The evaluated model is the one every top-1 in the
record is: worker 0's raw weights (or the recipe's moving average where the recipe averages).

The strongest baseline of a setting is the all-reduce people really run, fp32, fp16 or bf16, with the lowest
mean time to target among those whose every run reached it. A method's speed-up against it pairs the seeds the
two arms share: the geometric mean of the per-seed ratios, with a t interval on their logarithms (95%).

Times compare only when measured on one CPU (``env.cpu_model``; records from before it was recorded count as one
unknown CPU): an arm whose timed runs ran on more than one has no time to target, and an arm is measured against
the strongest baseline measured on its own CPU.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from commbench.methods import registry

# the all-reduce arms a method must beat, what people run instead of compressing: the methods of the registry's
# "all-reduce baseline" family (a method's ``family`` class attribute), asked of the registry at each use
STRONG_BASELINES = registry.Members(registry.ALLREDUCE_BASELINE)
LEVEL = 0.95


def time_to(curve: list[tuple[float, float]], target: float) -> float | None:
    """Training seconds at the first evaluation whose top-1 reaches ``target``, or None if none does."""
    return next((t for t, top1 in curve if top1 >= target), None)


@dataclass(frozen=True)
class Arm:
    """One setting's runs, timed: seed -> seconds to target (None: not reached within the horizon)."""

    method: str
    times: dict
    cpu: str | None = None   # the one CPU every timed run ran on (None: more than one, so no times)

    @property
    def all_reached(self) -> bool:
        return bool(self.times) and all(t is not None for t in self.times.values())

    @property
    def mean(self) -> float | None:
        return sum(self.times.values()) / len(self.times) if self.all_reached else None


def strongest(arms: list[Arm], cpu: str | None = None) -> Arm | None:
    """The fp32, fp16 or bf16 all-reduce arm with the lowest mean time to target (every run reached it); given
    ``cpu``, among the arms measured on that CPU alone."""
    strong = registry.members(registry.ALLREDUCE_BASELINE)
    candidates = [a for a in arms if a.method in strong and a.all_reached and (cpu is None or a.cpu == cpu)]
    return min(candidates, key=lambda a: (a.mean, strong.index(a.method)), default=None)


@dataclass(frozen=True)
class Speedup:
    ratio: float | None        # strongest's time over this arm's (> 1: this arm reaches the target sooner)
    low: float | None
    high: float | None
    pairs: int                 # seeds both arms ran, both reaching the target
    why: str = ""              # where there is no ratio, or no interval: why


def speedup(strong: Arm, arm: Arm, level: float = LEVEL) -> Speedup:
    """The paired speed-up of ``arm`` over ``strong``: per shared seed, strong's time / arm's time."""
    shared = sorted(set(strong.times) & set(arm.times), key=str)
    if not shared:
        return Speedup(None, None, None, 0, "no seed in common with the strongest baseline")
    if any(arm.times[s] is None for s in shared):
        missed = sum(arm.times[s] is None for s in shared)
        return Speedup(None, None, None, 0, f"{missed} of {len(shared)} paired runs did not reach the target")
    logs = [math.log(strong.times[s] / arm.times[s]) for s in shared]
    n, mean = len(logs), sum(logs) / len(logs)
    if n < 2:
        return Speedup(math.exp(mean), None, None, n, "one pair: no interval")
    from scipy import stats

    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1))
    half = stats.t.ppf(0.5 + level / 2, n - 1) * sd / math.sqrt(n)
    return Speedup(math.exp(mean), math.exp(mean - half), math.exp(mean + half), n)
