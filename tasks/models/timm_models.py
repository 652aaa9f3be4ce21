"""Models from timm (PyTorch Image Models), where timm has the paper's network or the user names one.

``mxnet_resnet50_v2``: SSD-SGD trained MXNet's ``symbols/resnet.py`` at 50 layers, a pre-activation (v2)
ResNet. timm's ``resnetv2_50`` has the same blocks (pre-activation bottlenecks, 3-4-6-3, widths 256-2048, a
final BN + ReLU before pooling, a 1000-way classifier with bias): 25,549,352 parameters. MXNet's symbol adds two
BatchNorms that timm's stem has not: one on the input data (``bn_data``, 3 channels: 6 parameters) and one after
the 7x7 stem convolution (``bn0`` + ReLU, 64 channels: 128 parameters). With both added here the network has
MXNet's 25,549,486 parameters and layers. One reading: MXNet fixes ``bn_data``'s scale at 1
(``fix_gamma=True``); here it trains, as every parameter the harness exchanges does.
"""
from __future__ import annotations

from torch import nn


def create(name: str, num_classes: int, in_chans: int = 3) -> nn.Module:
    """Any timm model by name, randomly initialised (no download), for a task's classes and input channels."""
    import timm

    try:
        return timm.create_model(name, pretrained=False, num_classes=num_classes, in_chans=in_chans)
    except RuntimeError as exc:  # timm: "Unknown model (...)"
        raise ValueError(f"model.timm: {exc}") from None


def mxnet_resnet50_v2(num_classes: int) -> nn.Module:
    """timm's ``resnetv2_50`` with MXNet's input BN and stem BN + ReLU (see the module docstring)."""
    model = create("resnetv2_50", num_classes)
    stem = model.stem
    model.stem = nn.Sequential()
    model.stem.add_module("bn_data", nn.BatchNorm2d(3, eps=2e-5))
    model.stem.add_module("conv", stem.conv)
    model.stem.add_module("bn0", nn.BatchNorm2d(64, eps=2e-5))
    model.stem.add_module("relu0", nn.ReLU(inplace=True))
    model.stem.add_module("pool", stem.pool)
    return model
