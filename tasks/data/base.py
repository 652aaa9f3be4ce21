"""The data interface the training loop uses, and an in-memory implementation."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator

import torch


class DataUnavailable(RuntimeError):
    """The data set is not on disk and cannot be fetched; the message says what to do."""


@dataclass
class InMemoryData:
    """Images and labels held as tensors; ``transform`` turns a stored batch (e.g. uint8) into model input.

    ``train_batch`` takes global sample indices, so every transport and every worker reads exactly the
    samples the sampler assigned, whatever process it lives in.
    """

    name: str
    train_x: torch.Tensor
    train_y: torch.Tensor
    eval_x: torch.Tensor
    eval_y: torch.Tensor
    num_classes: int
    transform: Callable[[torch.Tensor], torch.Tensor]
    provenance: dict = field(default_factory=dict)

    @property
    def train_size(self) -> int:
        return len(self.train_y)

    @property
    def eval_size(self) -> int:
        return len(self.eval_y)

    def train_batch(self, indices: torch.Tensor, generator: torch.Generator | None = None):
        return self.transform(self.train_x[indices]), self.train_y[indices]

    def eval_batches(self, batch_size: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for start in range(0, self.eval_size, batch_size):
            end = start + batch_size
            yield self.transform(self.eval_x[start:end]), self.eval_y[start:end]
