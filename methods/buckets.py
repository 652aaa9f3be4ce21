"""Gradient buckets, laid out as DistributedDataParallel lays them out, and a method's exchange per bucket.

Parameters are taken in reverse registration order (roughly the order backward produces their gradients) and
packed greedily into buckets of at most ``cap_bytes`` (DDP's ``bucket_cap_mb``, 25 MiB), the first one capped
at ``first_cap_bytes`` (DDP's 1 MiB), so that communication starts early in backward. A tensor larger than
the cap is a bucket of its own. Every process computes the same layout from the same shapes, so buckets are
exchanged in the same order everywhere (the collectives of all ranks must match); under ``sim`` the same
buckets are exchanged in the same order, after all local workers' backward passes, so that values and bytes
are those of ``dist``.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import torch

MIB = 1024 * 1024
DEFAULT_CAP_MB = 25.0     # torch.nn.parallel.DistributedDataParallel(bucket_cap_mb=25)
FIRST_BUCKET_BYTES = MIB  # torch.distributed._DEFAULT_FIRST_BUCKET_BYTES


def bucket_layout(tensors: Mapping[str, torch.Tensor], cap_bytes: float = DEFAULT_CAP_MB * MIB,
                  first_cap_bytes: float = FIRST_BUCKET_BYTES) -> list[list[str]]:
    """Names of each bucket, in exchange order (reverse parameter order)."""
    buckets: list[list[str]] = []
    current: list[str] = []
    size = 0
    for name in reversed(list(tensors)):
        t = tensors[name]
        nbytes = t.numel() * t.element_size()
        cap = first_cap_bytes if not buckets else cap_bytes
        if current and size + nbytes > cap:
            buckets.append(current)
            current, size = [], 0
        current.append(name)
        size += nbytes
    if current:
        buckets.append(current)
    return buckets


class BucketTracker:
    """Launches buckets in order as their gradients become ready during one worker's backward (dist).

    ``ready(name)`` is called from a gradient hook; bucket i starts once all its gradients are ready and buckets
    0..i-1 have started (so every process issues its collectives in the same order). ``flush()`` after
    backward starts whatever is left (a parameter without a gradient this step)."""

    def __init__(self, layout: Sequence[Sequence[str]], launch):
        self.layout = [list(b) for b in layout]
        self.bucket_of = {n: i for i, b in enumerate(self.layout) for n in b}
        self.launch = launch
        self.reset()

    def reset(self) -> None:
        self.missing = [set(b) for b in self.layout]
        self.next = 0

    def ready(self, name: str) -> None:
        self.missing[self.bucket_of[name]].discard(name)
        while self.next < len(self.layout) and not self.missing[self.next]:
            self.launch(self.next)
            self.next += 1

    def flush(self) -> None:
        while self.next < len(self.layout):
            self.launch(self.next)
            self.next += 1
