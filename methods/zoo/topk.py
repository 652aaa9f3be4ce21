"""Top-k sparsification with error feedback: Aji & Heafield 2017, "Sparse Communication for Distributed Gradient
Descent" (map the 99% smallest updates by absolute value to zero, keep them locally), and Stich, Cordonnier &
Jaggi 2018, "Sparsified SGD with memory" (Mem-SGD, Algorithm 1 with the top_k operator).

Per worker and per tensor of n elements, k = max(1, int(ratio x n)) (GRACE's rounding, grace_dl/dist/compressor/
topk.py). With memory (``memory="residual"``, the papers'): p = e + g, send the k largest-|p| elements of p, keep
e <- p - top_k(p) for the next step (the kit's float64 :class:`~commbench.methods.kit.Residual`); without
(``memory="none"``): send top_k(g) and forget the rest.

Wire: per sent element an int32 index (into the group's flat vector) and its float32 value, 64 bits, so 64 k / n
bits per element of a tensor (0.64 at ratio 0.01). The payload is one float32 tensor, [k indices as int32 bits |
k values]. k depends only on the group, so every worker's payload has the same size: a same-size all-gather.
Decode: every worker's values scatter-added in rank order into zeros, divided by the number of workers.

Biased, a contraction: |x - top_k(x)|^2 <= (1 - k/n) |x|^2 per tensor (Stich et al., Definition 2.1), so the
contract report's delta (1 - that ratio) is at least k/n.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate

import torch

from ..kit import Compressor, KitMethod, Memory, Residual

MEMORIES = {"residual": Residual, "none": Memory}


def offsets(sizes: list[int]) -> list[int]:
    """Where each tensor starts in the group's flat vector."""
    return list(accumulate(sizes[:-1], initial=0))


def pack(index: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """One float32 payload: the int32 indices' bits, then the values (8 bytes per sent element)."""
    return torch.cat([index.to(torch.int32).view(torch.float32), values.float()])


def sent_index(payload: torch.Tensor) -> torch.Tensor:
    """The group-flat indices a payload of :func:`pack` carries."""
    return payload[:payload.numel() // 2].view(torch.int32).long()


def scatter_sum(payloads, numel: int) -> torch.Tensor:
    """Every payload's values added at their indices, in rank order (float32, dense): each payload's indices are
    distinct, so one index_add per payload is exact and deterministic, on the CPU and on CUDA."""
    total = torch.zeros(numel, dtype=torch.float32, device=payloads[0].device)
    for payload in payloads:
        total.index_add_(0, sent_index(payload), payload[payload.numel() // 2:])
    return total


def check_ratio(ratio: float, name: str = "ratio") -> None:
    if not 0 < ratio <= 1:
        raise ValueError(f"{name} must be in (0, 1], got {ratio}")


@dataclass(frozen=True)
class TopKParams:
    ratio: float = 0.01        # share of each tensor's elements a worker sends (Aji & Heafield drop 99%)
    memory: str = "residual"   # "residual": error feedback (both papers); "none": what is not sent is lost

    def __post_init__(self):
        check_ratio(self.ratio)
        if self.memory not in MEMORIES:
            raise ValueError(f"memory must be one of {', '.join(MEMORIES)}, got {self.memory!r}")


class TopKCompressor(Compressor):
    """The k largest-magnitude elements of each tensor of the group, with their indices."""

    claims = {"variance": "Stich et al. Def. 2.1: top_k is a k-contraction, |x - top_k(x)|^2 <= (1 - k/d) |x|^2",
              "residual": "Stich et al. Algorithm 1 (Mem-SGD): m <- m + gamma g - top_k(m + gamma g), what is not sent "
                          "is kept (the kit keeps gradients: gamma outside)",
              "bytes": "Aji & Heafield: the 99% smallest updates mapped to zero, sparse matrices exchanged"}

    def ks(self, group) -> list[int]:
        return [max(1, int(self.params.ratio * n)) for n in group.sizes]

    def encode(self, group, flat, local, shared, sender):
        index = torch.cat([flat[at:at + n].abs().topk(k, sorted=False).indices + at
                           for at, n, k in zip(offsets(group.sizes), group.sizes, self.ks(group))])
        return pack(index, flat[index])

    def decode(self, group, payloads, shared):
        return scatter_sum(payloads, group.numel).div_(group.workers)

    def payload_bytes(self, group, sent=None):
        return 8 * sum(self.ks(group))  # an int32 index and a float32 value per sent element


class TopK(KitMethod):
    name = "topk"
    Params, compressor = TopKParams, TopKCompressor
    param_sources = {
        "ratio": "Aji & Heafield 2017, abstract: the 99% smallest updates (by absolute value) mapped to zero",
        "memory": "Stich et al. 2018 Algorithm 1 (Mem-SGD); Aji & Heafield 2017 keep the dropped values too",
    }

    @classmethod
    def memory_for(cls, params):
        return MEMORIES[params.memory]
