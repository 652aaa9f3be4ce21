"""What a task is: a model, the data sets it accepts, and named recipes whose every value cites a source."""
from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar

import torch
from torch import nn

from .data import Data
from .models.sliced_bn import slice_batch_norm
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
    classes: ClassVar[int] = 10               # classes of the paper's data set
    method_defaults: ClassVar[dict[str, Recipe]] = {}  # per method: values this task's paper used with it

    def method_overlay(self, recipe: str, method: str) -> Recipe:
        """What the paper changed for ``method`` in ``recipe``: ``method.<param>`` values and any other key
        (TernGrad's dropout ratio, weight decay). Tasks whose overlay differs per recipe override this."""
        return self.method_defaults.get(method, {})

    @abstractmethod
    def build_model(self, variant: str, num_classes: int, **options) -> nn.Module:
        """The network; ``options`` are the recipe's model settings (``model.dropout`` -> ``dropout``)."""

    def make_model(self, variant: str, num_classes: int, in_chans: int, options: dict) -> nn.Module:
        """What a run trains: the task's network (:meth:`build_model`), or with ``options["timm"]`` any timm
        model by name, for the task's classes and input channels (the record's ``model_options`` names it);
        with ``options["bn_batch"]`` its BatchNorm normalises slices of that many samples (a worker's devices)."""
        options = dict(options)
        name = options.pop("timm", None)
        bn_batch = options.pop("bn_batch", None)
        if name is None:
            model = self.build_model(variant, num_classes, **options)
        elif options:
            raise ValueError(f"model options {sorted(options)}: not with model.timm={name} (timm's own defaults)")
        else:
            from .models.timm_models import create

            model = create(name, num_classes, in_chans)
        if bn_batch is not None and not slice_batch_norm(model, bn_batch):
            raise ValueError(f"model.bn_batch={bn_batch}: the model has no BatchNorm layer to normalise in slices")
        return model

    def parameter_count(self, variant: str | None = None) -> int:
        """Trainable parameters of the default (or given) variant, built on the meta device (no memory)."""
        with torch.device("meta"):
            model = self.build_model(variant or self.variants[0], self.classes)
        return sum(p.numel() for p in model.parameters() if p.requires_grad)

    @abstractmethod
    def weight_decay_map(self, model: nn.Module, weight_decay: float) -> dict[str, float]:
        """Per named parameter, the L2 coefficient the reference recipe applies (0 where none)."""

    @abstractmethod
    def train_size(self, dataset: str) -> int: ...

    def prepare_data(self, dataset: str, root: Path) -> None:
        """Put the data where :meth:`load_data` finds it (once, before any worker starts)."""

    @abstractmethod
    def load_data(self, dataset: str, root: Path, variant: str) -> Data: ...
