"""The data interface the training loop uses, and an in-memory implementation.

Every data object (:class:`InMemoryData`, :class:`~commbench.tasks.data.synthetic.SyntheticData`,
:class:`~commbench.tasks.data.imagenet.FolderData`) has

- ``name``, ``num_classes``, ``train_size``, ``eval_size``;
- ``input_shape``: (C, H, W) of one model input, after augmentation;
- ``provenance``: where the data came from (path, source package or URL, split evaluated on, ``synthetic``);
- ``train_stream(batches, seed)``: ``batches`` yields ``(step, indices)``, this worker's global sample indices
  of each step; the stream yields that step's ``(x, y)``, in order. Augmentation randomness of a sample is a
  function of (seed, step, sample index) alone (:mod:`commbench.tasks.data.rng`), so the same run as one process or as
  many, with any number of loader workers, or restarted at step s, computes the same inputs;
- ``train_batch(indices, step=0, seed=0)``: one such batch, directly (what a stream yields for that step);
- ``eval_batches(batch_size)``: the evaluation split in order, deterministic, without augmentation.
"""
from __future__ import annotations

from abc import ABC, abstractmethod

import os
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Protocol, Sequence

import torch

from .rng import sample_uniforms

Batch = tuple[torch.Tensor, torch.Tensor]
LOADER_WORKERS_ENV = "COMMBENCH_LOADER_WORKERS"


class DataUnavailable(RuntimeError):
    """The data set is not on disk and cannot be fetched; the message says what to do."""


def download_failure(exc: BaseException) -> str:
    """Why a download failed, in one line: torchvision's message puts the reason after a line that only names the
    file ("Error downloading x.gz:"), and the cause (a refused connection, an unknown host) may sit below it."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    cause = exc.__cause__ or exc.__context__
    reasons = [ln for ln in lines if not ln.endswith(":")] + ([str(cause).strip()] if cause and str(cause).strip() else [])
    return "; ".join(dict.fromkeys(reasons)) or (lines[0].rstrip(":") if lines else type(exc).__name__)


def loader_workers() -> int:
    """DataLoader worker processes per stream: ``$COMMBENCH_LOADER_WORKERS``, else min(4, usable cores)."""
    env = os.environ.get(LOADER_WORKERS_ENV, "").strip()
    if env:
        if not env.isdigit():
            raise ValueError(f"{LOADER_WORKERS_ENV}={env!r}: expected a non-negative integer")
        return int(env)
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return min(4, cores)


class Data(ABC):
    """What every data set offers the training loop (see the module docstring)."""

    name: str
    num_classes: int
    input_shape: tuple[int, int, int]
    provenance: dict

    @property
    @abstractmethod
    def train_size(self) -> int:
        ...

    @property
    @abstractmethod
    def eval_size(self) -> int:
        ...

    @abstractmethod
    def train_batch(self, indices: Sequence[int] | torch.Tensor, step: int = 0, seed: int = 0) -> Batch: ...

    @abstractmethod
    def eval_batches(self, batch_size: int) -> Iterator[Batch]: ...

    def plain_train_batch(self, indices: Sequence[int] | torch.Tensor) -> Batch:
        """Training samples through the evaluation transform, without augmentation (what BatchNorm statistics
        are recomputed on). A data set without augmentation: its training batch."""
        return self.train_batch(indices)

    def train_stream(self, batches: Iterable[tuple[int, torch.Tensor]], seed: int, *,
                     num_workers: int | None = None) -> Iterator[Batch]:
        """Batches computed in this process when asked for: the in-memory sets need no more. ``num_workers``
        is for streams that read files (ignored here)."""
        for step, indices in batches:
            yield self.train_batch(indices, step, seed)


class BatchAugment(Protocol):
    """Augmentation of a whole batch at once (vectorised), driven by per-sample uniforms."""

    draws: int                             # uniforms each sample consumes
    input_shape: tuple[int, int, int]      # what ``train`` and ``eval`` return per sample

    def train(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """``x``: stored batch (uint8 N x C x H x W); ``u``: [N, draws] float64 uniforms, row i sample i's."""

    def eval(self, x: torch.Tensor) -> torch.Tensor:
        """The deterministic evaluation transform."""


@dataclass
class InMemoryData(Data):
    """Images and labels held as tensors; ``transform`` turns a stored batch (e.g. uint8) into model input.

    Without ``augment``, training batches go through ``transform`` too. With it, training batches are
    ``augment.train(x, u)`` with u the samples' uniforms for (seed, step, index) and evaluation batches
    ``augment.eval(x)`` (pass ``transform=augment.eval``).
    """

    name: str
    train_x: torch.Tensor
    train_y: torch.Tensor
    eval_x: torch.Tensor
    eval_y: torch.Tensor
    num_classes: int
    transform: Callable[[torch.Tensor], torch.Tensor]
    provenance: dict = field(default_factory=dict)
    augment: BatchAugment | None = None
    input_shape: tuple[int, int, int] | None = None  # None: the shape ``transform`` gives one stored sample

    def __post_init__(self):
        if self.input_shape is None:
            probe = self.eval_x[:1] if len(self.eval_x) else self.train_x[:1]
            self.input_shape = tuple(self.transform(probe).shape[1:])

    @property
    def train_size(self) -> int:
        return len(self.train_y)

    @property
    def eval_size(self) -> int:
        return len(self.eval_y)

    def train_batch(self, indices, step: int = 0, seed: int = 0) -> Batch:
        indices = torch.as_tensor(indices, dtype=torch.long)
        x, y = self.train_x[indices], self.train_y[indices]
        if self.augment is None:
            return self.transform(x), y
        return self.augment.train(x, sample_uniforms(seed, step, indices, self.augment.draws)), y

    def eval_batches(self, batch_size: int) -> Iterator[Batch]:
        for start in range(0, self.eval_size, batch_size):
            end = start + batch_size
            yield self.transform(self.eval_x[start:end]), self.eval_y[start:end]

    def plain_train_batch(self, indices) -> Batch:
        indices = torch.as_tensor(indices, dtype=torch.long)
        return self.transform(self.train_x[indices]), self.train_y[indices]
