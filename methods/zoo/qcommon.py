"""Pieces the zoo's quantizers and sign methods share: each tensor's own random stream, a group's tensors cut into
blocks (QSGD's buckets, fp8's scaling blocks, 1-bit SGD's columns), and the rank-order average of the workers'
decoded payloads.

Every draw comes from a CPU ``torch.Generator`` seeded with ``mix_seed(seed, step, j)`` for tensor j of the
method's compressed tensors, so a tensor draws the same numbers in any grouping (a bucket, the whole gradient,
a DDP bucket), under sim and dist, and on either device (the draws are moved to the gradient's device).
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch

from ..codecs.ternary import mix_seed
from ..kit import Group


def draws(group: Group, seed: int, device, draw: Callable[[int, torch.Generator], torch.Tensor]) -> torch.Tensor:
    """``draw(n, generator)`` for each tensor of the group from its own (seed, step, tensor) stream, concatenated
    in the group's order, on ``device``."""
    parts = [draw(n, torch.Generator().manual_seed(mix_seed(seed, group.step, j)))
             for n, j in zip(group.sizes, group.indices)]
    return torch.cat(parts).to(device)


def uniforms(group: Group, seed: int, device) -> torch.Tensor:
    """Uniform float32 in [0, 1), one per element."""
    return draws(group, seed, device, lambda n, g: torch.rand(n, generator=g))


class Blocks:
    """A group's tensors, each cut into blocks of ``size`` elements (its last block padded with zeros), as rows of
    one (count, size) matrix: a block never spans two tensors, so a tensor's blocks are its own in any group."""

    def __init__(self, sizes: Sequence[int], size: int, device):
        counts = [-(-n // size) for n in sizes]
        self.size, self.count = size, sum(counts)
        starts = torch.tensor([0, *counts[:-1]], dtype=torch.int64).cumsum(0) * size
        # each element's place in the padded matrix, and so its block (row)
        self.at = torch.cat([torch.arange(n, dtype=torch.int64) + s for n, s in zip(sizes, starts.tolist())]
                            ).to(device) if sizes else torch.zeros(0, dtype=torch.int64, device=device)
        self.row = self.at // size

    def rows(self, flat: torch.Tensor) -> torch.Tensor:
        """(count, size): the blocks of ``flat``, padded with zeros (unique places: a deterministic copy)."""
        out = torch.zeros(self.count * self.size, dtype=flat.dtype, device=flat.device)
        out[self.at] = flat
        return out.view(self.count, self.size)


class BlockCache:
    """One :class:`Blocks` per group layout (sizes) and device: a group recurs every step."""

    def __init__(self):
        self._cache: dict[tuple, Blocks] = {}

    def __call__(self, sizes: Sequence[int], size: int, device) -> Blocks:
        key = (tuple(sizes), size, str(device))
        if key not in self._cache:
            self._cache[key] = Blocks(sizes, size, device)
        return self._cache[key]


def mean_in_rank_order(payloads: Sequence[torch.Tensor], decode_one: Callable[[torch.Tensor], torch.Tensor],
                       workers: int) -> torch.Tensor:
    """The workers' average: each payload decoded (a fresh float32 tensor), added in rank order, divided by their
    number, so that every worker, under sim and dist, adds the same numbers in the same order."""
    total = None
    for payload in payloads:
        value = decode_one(payload)
        total = value if total is None else total.add_(value)
    return total.div_(workers)
