"""What a task is: a model, the data sets it accepts, and named recipes whose every value cites a source."""
from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar

from torch import nn

from .data import InMemoryData
from .recipe import Recipe


class Task(ABC):
    name: ClassVar[str]
    summary: ClassVar[str]
    model_name: ClassVar[str]
    paper_dataset: ClassVar[str]              # what the papers trained on
    datasets: ClassVar[tuple[str, ...]]       # what this task accepts
    variants: ClassVar[tuple[str, ...]]       # model variants; the first is the default
    recipes: ClassVar[dict[str, Recipe]]      # named recipes; the first is the default
    tiers: ClassVar[dict[str, Recipe]]        # paper (as published), cpu and smoke (shortened)
    method_defaults: ClassVar[dict[str, Recipe]] = {}  # per method: method.<param> values this task's paper used

    @abstractmethod
    def build_model(self, variant: str, num_classes: int) -> nn.Module: ...

    @abstractmethod
    def weight_decay_map(self, model: nn.Module, weight_decay: float) -> dict[str, float]:
        """Per named parameter, the L2 coefficient the reference recipe applies (0 where none)."""

    @abstractmethod
    def train_size(self, dataset: str) -> int: ...

    def prepare_data(self, dataset: str, root: Path) -> None:
        """Put the data where :meth:`load_data` finds it (once, before any worker starts)."""

    @abstractmethod
    def load_data(self, dataset: str, root: Path, variant: str) -> InMemoryData: ...
