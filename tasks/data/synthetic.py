"""Synthetic data: deterministic, of the task's shape and class count, learnable, and generated lazily.

Each class has a fixed random prototype; a sample is its class prototype plus Gaussian noise. The prototypes
are faint (``signal`` x N(0, 1) per pixel under N(0, 1) noise) so that classes overlap and accuracy stays well
below 100%: a method that hurts learning shows it. The data set depends only on (shape, classes, sizes),
never on the run's seed, so every run sees the same samples.

Nothing image-sized is made up front, so an ImageNet-shaped set (3 x 224 x 224, 1000 classes) costs no memory:

- labels: one ``randint`` per split from a generator seeded by (DATA_SEED, split), 8 bytes a sample;
- prototype c: ``signal * randn(shape)`` from a generator seeded by (DATA_SEED, PROTOTYPE, c), made when a
  sample of class c is, and kept in a cache of at most ``PROTOTYPE_CACHE_BYTES``;
- sample i of a split: ``prototype[y_i] + randn(shape)``, the noise from a generator seeded by
  (DATA_SEED, split, i).

So any sample can be made alone, in any order, in any process, with the same bits. ``train_x`` / ``eval_x``
still exist for code that wants the whole split as one tensor: they are generated (and kept) on first use.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Iterator, Sequence

import torch

from .base import Batch, Data
from .rng import mix_seed

DATA_SEED = 20170101
SPLITS = {"train": 0, "eval": 1}
PROTOTYPE = 2  # the third stream of (DATA_SEED, ...): prototypes, apart from the two splits
PROTOTYPE_CACHE_BYTES = 64 << 20


class SyntheticData(Data):
    def __init__(self, shape: tuple[int, ...], num_classes: int, train_size: int, eval_size: int,
                 signal: float = 0.15):
        self.name = "synthetic"
        self.shape, self.num_classes, self.signal = tuple(shape), num_classes, signal
        self.input_shape = self.shape
        self._sizes = {"train": train_size, "eval": eval_size}
        self._labels = {split: torch.randint(num_classes, (n,), generator=torch.Generator().manual_seed(
            mix_seed(DATA_SEED, SPLITS[split]))) for split, n in self._sizes.items()}
        sample_bytes = 4 * torch.Size(self.shape).numel()
        self._cache_slots = max(1, PROTOTYPE_CACHE_BYTES // sample_bytes)
        self._prototypes: OrderedDict[int, torch.Tensor] = OrderedDict()
        self._full: dict[str, torch.Tensor] = {}
        self.provenance = {
            "source": f"generated ({signal} x N(0,1) class prototypes + N(0,1) noise, data seed {DATA_SEED}; "
                      "sample i made on demand from a generator seeded by (data seed, split, i))",
            "synthetic": True, "path": None, "eval_split": "generated", "shape": list(self.shape),
            "train_samples": train_size, "eval_samples": eval_size}

    @property
    def train_size(self) -> int:
        return self._sizes["train"]

    @property
    def eval_size(self) -> int:
        return self._sizes["eval"]

    @property
    def train_y(self) -> torch.Tensor:
        return self._labels["train"]

    @property
    def eval_y(self) -> torch.Tensor:
        return self._labels["eval"]

    @property
    def train_x(self) -> torch.Tensor:
        """The whole training split as one tensor (generated on first use: mind the size)."""
        return self._materialize("train")

    @property
    def eval_x(self) -> torch.Tensor:
        return self._materialize("eval")

    def _materialize(self, split: str) -> torch.Tensor:
        if split not in self._full:
            self._full[split] = self.samples(split, range(self._sizes[split]))
        return self._full[split]

    def prototype(self, c: int) -> torch.Tensor:
        proto = self._prototypes.get(c)
        if proto is None:
            g = torch.Generator().manual_seed(mix_seed(DATA_SEED, PROTOTYPE, c))
            proto = self.signal * torch.randn(self.shape, generator=g)
            self._prototypes[c] = proto
            if len(self._prototypes) > self._cache_slots:
                self._prototypes.popitem(last=False)
        else:
            self._prototypes.move_to_end(c)
        return proto

    def samples(self, split: str, indices: Sequence[int] | torch.Tensor) -> torch.Tensor:
        """Samples ``indices`` of ``split`` (``train`` or ``eval``), stacked."""
        indices = torch.as_tensor(indices, dtype=torch.long).reshape(-1).tolist()
        labels = self._labels[split]
        out = torch.empty((len(indices), *self.shape))
        for row, i in enumerate(indices):
            if not 0 <= i < self._sizes[split]:
                raise IndexError(f"synthetic {split} sample {i} of {self._sizes[split]}")
            g = torch.Generator().manual_seed(mix_seed(DATA_SEED, SPLITS[split], i))
            torch.randn(self.shape, generator=g, out=out[row])
            out[row] += self.prototype(int(labels[i]))
        return out

    def train_batch(self, indices, step: int = 0, seed: int = 0) -> Batch:
        indices = torch.as_tensor(indices, dtype=torch.long)
        if "train" in self._full:
            return self._full["train"][indices], self.train_y[indices]
        return self.samples("train", indices), self.train_y[indices]

    def eval_batches(self, batch_size: int) -> Iterator[Batch]:
        for start in range(0, self.eval_size, batch_size):
            end = min(start + batch_size, self.eval_size)
            yield self.samples("eval", range(start, end)), self.eval_y[start:end]


def make_synthetic(shape: tuple[int, ...], num_classes: int, train_size: int, eval_size: int,
                   signal: float = 0.15) -> SyntheticData:
    return SyntheticData(shape, num_classes, train_size, eval_size, signal)
