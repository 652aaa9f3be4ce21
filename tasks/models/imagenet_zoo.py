"""ResNet-50 and VGG-11 for ImageNet, from torchvision (imported lazily: torchvision is slow to import).

SSD-SGD (main-520/SSD-SGD) trains MXNet's example/image-classification/symbols networks through
train_imagenet.py. For VGG-11 (symbols/vgg.py, ``num_layers=11``, default ``batch_norm=False``) torchvision's
``vgg11`` is the same network layer for layer: 8 biased 3x3 convs (64, M, 128, M, 256, 256, M, 512, 512, M, 512,
512, M), fc6/fc7 4096 with ReLU and dropout 0.5, fc8; 132,863,336 parameters at 1000 classes (torchvision's
7x7 adaptive pool is the identity at 224).

ResNet-50 is NOT layer-for-layer the network SSD-SGD ran. Its scripts (res-imagenet.sh, new-res-imagenet.sh) pass
``--network resnet --num-layers 50``, i.e. symbols/resnet.py, MXNet's pre-activation ResNet (v2, "Identity
Mappings in Deep Residual Networks") with a ``bn_data`` stem, no BN on the projection shortcuts, and a final
BN-ReLU; its hard-coded ``parameter_count`` of 157 arrays matches that layout (torchvision's v1 has 161 tensors).
torchvision's ResNet-50 v1 (25,557,032 parameters at 1000 classes) is the common stand-in: same depth, widths,
bottleneck units and stride placement (torchvision puts the stride on the 3x3 conv, as MXNet's v2 does).

Init is torchvision's own (Kaiming-normal fan_out convs; VGG's fc normal(0, 0.01)), not MXNet's
fit.py defaults (Xavier gaussian fan_in magnitude 2 for ResNet, plain ``Xavier()`` for VGG).
"""
from __future__ import annotations

from torch import nn


def resnet50(num_classes: int = 1000) -> nn.Module:
    from torchvision.models import resnet50 as _resnet50

    return _resnet50(weights=None, num_classes=num_classes)


def vgg11(num_classes: int = 1000) -> nn.Module:
    from torchvision.models import vgg11 as _vgg11

    return _vgg11(weights=None, num_classes=num_classes)
