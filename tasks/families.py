"""What the CIFAR-10 and the ImageNet tasks share: their data sets, sizes and synthetic stand-ins.

A task picks the model and the recipe; the family knows where the images come from, how many there are and
which augmentation its paper used (``augment``: a mode of :mod:`commbench.tasks.data`).
"""
from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from .base import Task
from .data import (load_cifar10, load_cifar10_jpeg, load_imagenet_folder, make_synthetic, provision_cifar10,
                   provision_cifar10_jpeg)

CIFAR10_TRAIN = 50_000          # the CIFAR-10 training split
IMAGENET_TRAIN = 1_281_167      # ILSVRC-2012 training images
SYNTHETIC_TRAIN = 10_000        # generated on demand, so size costs nothing up front
SYNTHETIC_EVAL = {"cifar10": 1_000, "imagenet": 100}


def decay_weights_only(model, weight_decay: float) -> dict[str, float]:
    """TF-slim and Caffe (bias decay_mult 0): L2 on conv and fc kernels, never on biases or BN parameters."""
    return {n: (weight_decay if p.ndim > 1 else 0.0) for n, p in model.named_parameters()}


def decay_mxnet_style(model, weight_decay: float) -> dict[str, float]:
    """MXNet's Optimizer.set_wd_mult: names ending in _weight or _gamma are decayed, _bias and _beta not.
    In torch names that is every ``*.weight`` (conv, fc and BN scale) and no ``*.bias``."""
    return {n: (weight_decay if n.endswith("weight") else 0.0) for n, _ in model.named_parameters()}


def decay_all_but_batchnorm(model, weight_decay: float) -> dict[str, float]:
    """tf_cnn_benchmarks' ``filter_l2_loss_vars``: L2 on every variable whose name lacks "batchnorm" (conv kernels,
    FC weights and FC biases), never on BN's gamma and beta."""
    from torch import nn

    norms = {name for name, m in model.named_modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)}
    return {n: (0.0 if n.rpartition(".")[0] in norms else weight_decay) for n, _ in model.named_parameters()}


def decay_everything(model, weight_decay: float) -> dict[str, float]:
    """torch's ``SGD(weight_decay=...)``: every parameter, BN and biases included."""
    return {n: weight_decay for n, _ in model.named_parameters()}


class Cifar10Task(Task):
    paper_dataset = "cifar10"
    datasets = ("cifar10", "cifar10-jpeg", "synthetic")  # cifar10-jpeg: the real images re-encoded, a stand-in
    augment: ClassVar[str]  # commbench.tasks.data CIFAR-10 augmentation mode

    def augment_for(self, variant: str) -> str:
        return self.augment

    def input_size(self, variant: str) -> int:
        return {"cifarnet": 24, "resnet28": 28}.get(self.augment_for(variant), 32)

    def train_size(self, dataset):
        return SYNTHETIC_TRAIN if dataset == "synthetic" else CIFAR10_TRAIN

    def prepare_data(self, dataset, root: Path):
        if dataset == "cifar10":  # once, before the workers start, so that they do not all download it
            provision_cifar10(root)
        elif dataset == "cifar10-jpeg":  # decoded once into the data root, before the workers start
            provision_cifar10_jpeg(root)

    def load_data(self, dataset, root: Path, variant):
        if dataset == "synthetic":
            size = self.input_size(variant)
            return make_synthetic((3, size, size), 10, SYNTHETIC_TRAIN, SYNTHETIC_EVAL["cifar10"])
        if dataset == "cifar10-jpeg":
            return load_cifar10_jpeg(root, self.augment_for(variant))
        return load_cifar10(root, self.augment_for(variant))


class ImageNetTask(Task):
    paper_dataset = "imagenet"
    datasets = ("imagenet", "synthetic")
    augment: ClassVar[str] = "caffe"
    crop: ClassVar[int] = 224
    classes: ClassVar[int] = 1000  # ImageFolder's classes; TernGrad's TF code adds a background class (1001)

    def train_size(self, dataset):
        return SYNTHETIC_TRAIN if dataset == "synthetic" else IMAGENET_TRAIN

    def prepare_data(self, dataset, root: Path):
        if dataset == "imagenet":  # fail before any worker starts, with the layout in the message
            load_imagenet_folder(root, self.augment, self.crop)

    def load_data(self, dataset, root: Path, variant):
        if dataset == "synthetic":
            return make_synthetic((3, self.crop, self.crop), self.classes, SYNTHETIC_TRAIN,
                                  SYNTHETIC_EVAL["imagenet"])
        return load_imagenet_folder(root, self.augment, self.crop)


def epochs_to_steps(epochs: float, train_size: int, global_batch: int) -> int:
    """Iterations in ``epochs`` passes (the loop drops each epoch's incomplete last batch)."""
    return round(epochs * (train_size // global_batch))
