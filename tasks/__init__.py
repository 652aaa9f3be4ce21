"""What is trained: models, data sets and recipes. Never imports ``bench`` or ``methods``.

The package is lazy (PEP 562), as ``commbench.methods`` is: ``from commbench.tasks import Cited`` (the settings'
declarations) imports no torch, so the command line's parser and ``--help`` start at once; the tasks, and torch
with them, load the first time ``TASKS`` or a task class is asked for.
"""
from __future__ import annotations

import importlib
import threading
from typing import TYPE_CHECKING

from .recipe import Cited, Recipe, assumed

if TYPE_CHECKING:
    from .alexnet_imagenet import AlexNetImageNet
    from .alexnet_mxnet_imagenet import AlexNetMXNetImageNet
    from .base import Task
    from .cifarnet_cifar10 import CifarNetCIFAR10
    from .data import DataUnavailable
    from .googlenet_imagenet import GoogLeNetImageNet
    from .lenet_mnist import LeNetMNIST
    from .nin_imagenet import NiNImageNet
    from .resnet20_cifar10 import ResNet20CIFAR10
    from .resnet50_imagenet import ResNet50ImageNet
    from .vgg11_imagenet import VGG11ImageNet

    TASKS: dict[str, Task]

# name -> the submodule that defines it, imported at first use
_LAZY = {"Task": "base", "DataUnavailable": "data", "AlexNetImageNet": "alexnet_imagenet",
         "AlexNetMXNetImageNet": "alexnet_mxnet_imagenet", "CifarNetCIFAR10": "cifarnet_cifar10",
         "GoogLeNetImageNet": "googlenet_imagenet", "LeNetMNIST": "lenet_mnist", "NiNImageNet": "nin_imagenet",
         "ResNet20CIFAR10": "resnet20_cifar10", "ResNet50ImageNet": "resnet50_imagenet",
         "VGG11ImageNet": "vgg11_imagenet"}

# the order of docs/contract.md; tasks added since after them.
_ORDER = ("LeNetMNIST", "CifarNetCIFAR10", "AlexNetImageNet", "GoogLeNetImageNet", "ResNet20CIFAR10",
          "ResNet50ImageNet", "NiNImageNet", "VGG11ImageNet", "AlexNetMXNetImageNet")
_BUILDING = threading.RLock()  # two threads asking at once still get the one dict


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    elif name != "TASKS":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    else:  # built once, on first use: every holder of it shares the one dict
        with _BUILDING:
            if "TASKS" not in globals():
                globals()["TASKS"] = {t.name: t for t in (__getattr__(cls)() for cls in _ORDER)}
            return globals()["TASKS"]
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY, "TASKS"})


__all__ = ["TASKS", "Cited", "DataUnavailable", "Recipe", "Task", "assumed"]
