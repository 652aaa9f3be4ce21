"""Synthetic data: deterministic, of the task's shape and class count, and learnable.

Each class has a fixed random prototype; a sample is its class prototype plus Gaussian noise. The prototypes
are faint (``signal`` x N(0, 1) per pixel under N(0, 1) noise) so that classes overlap and accuracy stays well
below 100%: a method that hurts learning shows it. The data set depends only on (shape, classes, sizes),
never on the run's seed, so every run sees the same samples.
"""
from __future__ import annotations

import torch

from .base import InMemoryData

DATA_SEED = 20170101


def make_synthetic(shape: tuple[int, ...], num_classes: int, train_size: int, eval_size: int,
                   signal: float = 0.15) -> InMemoryData:
    g = torch.Generator().manual_seed(DATA_SEED)
    prototypes = signal * torch.randn((num_classes, *shape), generator=g)

    def split(n: int):
        y = torch.randint(num_classes, (n,), generator=g)
        x = prototypes[y] + torch.randn((n, *shape), generator=g)
        return x, y

    train_x, train_y = split(train_size)
    eval_x, eval_y = split(eval_size)
    return InMemoryData(
        name="synthetic", train_x=train_x, train_y=train_y, eval_x=eval_x, eval_y=eval_y,
        num_classes=num_classes, transform=lambda x: x,
        provenance={"source": f"generated ({signal} x N(0,1) class prototypes + N(0,1) noise, data seed {DATA_SEED})",
                    "synthetic": True, "eval_split": "generated", "train_samples": train_size,
                    "eval_samples": eval_size},
    )
