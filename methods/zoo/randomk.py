"""Random-k sparsification: Stich, Cordonnier & Jaggi 2018, "Sparsified SGD with memory" (the rand_k operator),
and Wangni, Wang, Liu & Zhang 2018, "Gradient Sparsification for Communication-Efficient Distributed
Optimization" (unbiased sparsification, g_i / p_i kept with probability p_i; here p_i = k/n for every i).

Per tensor of n elements, k = max(1, int(ratio x n)) coordinates drawn without replacement from a generator seeded
with mix_seed(shared_seed, step, j), j the tensor's index: every worker of the run draws the same coordinates, so
the payload is just the k values, and the workers' payloads add up (linear): one all-reduce of k float32 values
carries them, and decode scatters their SUM / workers. Indices are never sent: 32 k / n bits per element (0.32 at
ratio 0.01).

Two variants (``scaled``), each with the memory its paper pairs it with (``memory="auto"``):

* unscaled (default): the values as they are, a k-contraction, E|x - rand_k(x)|^2 = (1 - k/n)|x|^2 (Stich et al.
  Def. 2.1), biased, with error feedback: e <- p - rand_k(p), p = e + g (Stich et al.'s Mem-SGD, Algorithm 1, the
  paper's method; GRACE's randomk sends the values unscaled too).
* scaled (``scaled=true``): the values times n / k, E[C(x)] = x (Wangni et al.'s estimator at uniform p_i = k/n),
  with variance E|C(x) - x|^2 = (n/k - 1)|x|^2 exactly: omega = n/k - 1 (99 at 1%). Without memory: unbiased, it
  needs none, and a residual would grow (an omega >= 1 is no contraction).

The variant is a compressor class of its own (its ``unbiased`` declaration is a class constant), picked by the
method from ``scaled`` (:meth:`RandomK.compressor_for`), for runs, the DDP hook and the contract report alike
(``commbench compressors`` shows the scaled variant as a row of its own).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..codecs.ternary import mix_seed
from ..kit import Compressor, KitMethod
from .topk import MEMORIES, check_ratio, offsets


@dataclass(frozen=True)
class RandomKParams:
    ratio: float = 0.01    # share of each tensor's elements sent
    scaled: bool = False   # False: Stich et al.'s rand_k; True: n / k times the values, unbiased (Wangni et al.)
    memory: str = "auto"   # "auto": residual unscaled (Mem-SGD), none scaled (Wangni et al.); or "residual", "none"

    def __post_init__(self):
        check_ratio(self.ratio)
        if self.memory not in ("auto", *MEMORIES):
            raise ValueError(f"memory must be one of auto, {', '.join(MEMORIES)}, got {self.memory!r}")


class RandomKCompressor(Compressor):
    """k shared random coordinates of each tensor, their values unscaled (Stich et al.'s rand_k)."""

    linear = True  # every worker sends the same coordinates: the values add up where they lie
    claims = {"variance": "Stich et al. Def. 2.1: rand_k is a k-contraction, E|x - rand_k(x)|^2 <= (1 - k/d)|x|^2",
              "residual": "Stich et al. Algorithm 1 (Mem-SGD): m <- m + gamma g - rand_k(m + gamma g), what is not "
                          "sent is kept (the kit keeps gradients: gamma outside)",
              "linear": "the coordinates come from a seed every worker shares: the k values add up",
              "bytes": "k float32 values per tensor, no index: 32 k/d bits per element"}

    def __init__(self, params, shapes, device="cpu"):
        super().__init__(params, shapes, device)
        # per group (its tensors' indices): (shared seed, step, the coordinates drawn), so that the other local
        # workers and the decode reuse the draw of the first worker to encode the group at that step
        self.drawn: dict[tuple, tuple[int, int, torch.Tensor]] = {}

    def ks(self, group) -> list[int]:
        return self.ks_of(group.sizes)

    def ks_of(self, sizes) -> list[int]:
        return [max(1, int(self.params.ratio * n)) for n in sizes]

    def coordinates(self, group, seed: int) -> torch.Tensor:
        """The group-flat coordinates of every tensor, tensor j's from its own stream mix_seed(seed, step, j)."""
        key = tuple(group.indices)
        cached = self.drawn.get(key)
        if cached is not None and cached[:2] == (seed, group.step):
            return cached[2]
        picks = []
        for at, n, k, j in zip(offsets(group.sizes), group.sizes, self.ks(group), group.indices):
            generator = torch.Generator().manual_seed(mix_seed(seed, group.step, j))
            picks.append(torch.randperm(n, generator=generator)[:k].sort().values + at)  # without replacement
        index = torch.cat(picks).to(self.device)
        self.drawn[key] = (seed, group.step, index)
        return index

    def encode(self, group, flat, local, shared, sender):
        return flat[self.coordinates(group, sender.shared_seed)]

    def gain(self, group) -> torch.Tensor | float:
        """What a sent value is multiplied by on decode: 1 here, n / k per tensor when scaled."""
        return 1.0

    def decode(self, group, payloads, shared):
        """``payloads``: the workers' sum (an all-reduce); scattered at the coordinates, / workers."""
        cached = self.drawn.get(tuple(group.indices))
        if cached is None or cached[1] != group.step:
            raise RuntimeError("random-k decodes a group at the coordinates its encode drew: encode it first")
        total = torch.zeros(group.numel, dtype=torch.float32, device=payloads.device)
        total[cached[2]] = payloads * self.gain(group) / group.workers
        return total

    def payload_bytes(self, group, sent=None):
        return 4 * sum(self.ks(group))  # k float32 values per tensor


class ScaledRandomKCompressor(RandomKCompressor):
    """The same coordinates, the values times n / k: unbiased, omega = n / k - 1."""

    unbiased = "the input"
    claims = {"unbiased": "Wangni et al.: Q(g)_i = Z_i g_i / p_i is unbiased, E[Q(g)] = g",
              "variance": "Wangni et al.: E|Q(g)|^2 = sum g_i^2 / p_i, so omega = d/k - 1 at p_i = k/d",
              "linear": RandomKCompressor.claims["linear"], "bytes": RandomKCompressor.claims["bytes"]}

    def draws_needed(self) -> int:
        """Each element is kept with probability k/n per draw: 30 n/k draws keep each some 30 times."""
        sizes = [s.numel() for n, s in self.shapes.items() if n in self.index]
        return max((30 * math.ceil(n / k) for n, k in zip(sizes, self.ks_of(sizes))), default=0)

    def gain(self, group):
        ks = self.ks(group)
        ratios = torch.tensor([n / k for n, k in zip(group.sizes, ks)], dtype=torch.float32, device=self.device)
        return torch.repeat_interleave(ratios, torch.tensor(ks, device=self.device))


class RandomK(KitMethod):
    name = "randomk"
    Params, compressor = RandomKParams, RandomKCompressor  # the default variant's
    contract_rows = {"scaled=true": {"scaled": True}}  # the unbiased variant, checked as a row of its own
    param_sources = {
        "scaled": "Stich et al. 2018 Algorithm 1 (Mem-SGD with rand_k, unscaled); scaled=true: Wangni et al. 2018 "
                  "(g_i / p_i, unbiased) at uniform p_i = k/d",
        "memory": "auto: Stich et al. 2018 Algorithm 1 keeps a residual (unscaled); Wangni et al. 2018 none (scaled)",
        "ratio": "topk's 1% (Aji & Heafield's 99% drop), so that the two compare at one budget",
    }

    @classmethod
    def memory_for(cls, params):
        if params.memory == "auto":
            return MEMORIES["none" if params.scaled else "residual"]
        return MEMORIES[params.memory]

    @classmethod
    def compressor_for(cls, params) -> type[RandomKCompressor]:
        return ScaledRandomKCompressor if params.scaled else RandomKCompressor
