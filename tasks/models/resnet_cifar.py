"""ResNet-20 for CIFAR-10 in the two forms the papers' code uses.

``option-a``: He et al. 2016 (sec. 4.2) as in akamaster/pytorch_resnet_cifar10 resnet.py: conv 3x3 16 -> BN ->
ReLU -> 3 stages x 3 BasicBlocks (16/32/64, stride 2 at stages 2-3; conv-BN-ReLU-conv-BN, add, ReLU) -> global
average pool -> FC. Shortcuts are parameter-free (option A): subsample by 2 and zero-pad the new channels.
Kaiming-normal init on conv and FC weights (akamaster's ``_weights_init``); torch defaults elsewhere.
269,722 parameters for 10 classes.

``preact-projection``: SSD-SGD's MXNet example/image-classification/symbols/resnet.py with num_layers=20 and a
CIFAR-sized image (filter_list [16, 16, 32, 64], units [3, 3, 3], bottle_neck=False):
- ``bn_data``: BatchNorm on the raw input with fix_gamma=True (a shift, no learnable scale)
- ``conv0`` 3x3 16, no bias, no BN/ReLU after it (the first unit pre-activates)
- pre-activation units: BN-ReLU-conv3x3(stride)-BN-ReLU-conv3x3; the first unit of every stage (stage 1 too)
  has a 1x1 conv projection shortcut, applied to the pre-activated input (``act1``)
- final BN-ReLU-global average pool-FC
BN eps 2e-5, MXNet momentum 0.9 (torch momentum 0.1). Init as SSD-SGD's common/fit.py default for this
network: ``Xavier(rnd_type='gaussian', factor_type='in', magnitude=2)`` = normal std sqrt(2 / fan_in) on conv and
FC weights, zero biases, BN gamma 1 / beta 0.

``preact-option-a``: tf_cnn_benchmarks' ``resnet20_v2`` (models/resnet_model.py, ResnetCifar10Model), the model
of GRACE's ResNet-20 runs:
- stem: conv 3x3 16 (no bias) -> BN (gamma and beta, eps 1e-5, TF decay 0.9) -> ReLU
- pre-activation units: BN (beta only: batch_norm()'s scale=False, eps 1e-3, decay 0.999) -> ReLU -> conv 3x3
  (stride; 'SAME', which pads a stride-2 conv on the bottom/right only) -> BN (gamma and beta, eps 1e-5, decay 0.9)
  -> ReLU -> conv 3x3 (no BN, no bias); the shortcut, taken from the unit's input before its BN, is option A:
  a 1x1 average pool with the stride (every other pixel) and channels zero-padded (depth - in) / 2 on each side
- final BN (beta only, eps 1e-3, decay 0.999) -> ReLU -> global average pool -> FC with bias
Init as tf_cnn_benchmarks: conv kernels ``variance_scaling_initializer()`` (truncated normal, fan in, scale 1),
FC weights truncated normal std sqrt(1 / 64) (a linear layer), biases 0, BN gamma 1 / beta 0.

All end in global average pooling, so 32x32 (He et al., tf_cnn_benchmarks) and 28x28 (SSD-SGD's train_cifar10.py
crops) work.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ._tf import BatchNormNoScale, conv_same, trunc_normal_

VARIANTS = ("option-a", "preact-projection", "preact-option-a")

_MX_BN = dict(eps=2e-5, momentum=0.1)


class BasicBlockA(nn.Module):
    """Post-activation basic block with an option-A (zero-pad, no parameters) shortcut."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.stride, self.pad = stride, cout - cin

    def shortcut(self, x: torch.Tensor) -> torch.Tensor:
        if self.stride == 1 and self.pad == 0:
            return x
        # akamaster: F.pad(x[:, :, ::2, ::2], (0, 0, 0, 0, planes // 4, planes // 4)); planes // 4 = pad / 2
        x = x[:, :, ::self.stride, ::self.stride]
        return F.pad(x, (0, 0, 0, 0, self.pad // 2, self.pad - self.pad // 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class PreActUnit(nn.Module):
    """MXNet resnet.py ``residual_unit(bottle_neck=False)``; ``sc`` exists when ``dim_match`` is False."""

    def __init__(self, cin: int, cout: int, stride: int, projection: bool):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(cin, **_MX_BN)
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout, **_MX_BN)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.sc = nn.Conv2d(cin, cout, 1, stride, bias=False) if projection else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        act1 = F.relu(self.bn1(x))
        out = self.conv2(F.relu(self.bn2(self.conv1(act1))))
        return out + (x if self.sc is None else self.sc(act1))


# tf_cnn_benchmarks' two BN settings: batch_norm_config for the BN inside conv(), batch_norm()'s defaults
_TF_CONV_BN = dict(eps=1e-5, momentum=0.1)     # decay 0.9, scale=True
_TF_PLAIN_BN = dict(eps=1e-3, momentum=0.001)  # decay 0.999, scale=False (BatchNormNoScale)
_TRUNCATED_STD = 0.87962566103423978  # TF's variance scaling: the std of a unit normal truncated at 2 std


class TfPreActUnit(nn.Module):
    """tf_cnn_benchmarks ``residual_block(version='v2')`` with its option-A ("Plan A") shortcut."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.bn1 = BatchNormNoScale(cin, **_TF_PLAIN_BN)
        self.conv1 = conv_same(cin, cout, 3, stride, bias=False)
        self.bn2 = nn.BatchNorm2d(cout, **_TF_CONV_BN)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.stride, self.pad = stride, (cout - cin) // 2

    def shortcut(self, x: torch.Tensor) -> torch.Tensor:
        if self.pad == 0 and self.stride == 1:
            return x
        x = x[:, :, ::self.stride, ::self.stride]  # apool(1, 1, stride, stride): a 1x1 window keeps every other pixel
        return F.pad(x, (0, 0, 0, 0, self.pad, self.pad))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.conv1(F.relu(self.bn1(x)))
        out = self.conv2(F.relu(self.bn2(out)))
        return self.shortcut(x) + out


def _stages(make_unit, widths=(16, 32, 64), units: int = 3) -> nn.Sequential:
    """3 stages of ``units`` units from 16 channels: ``make_unit(cin, cout, stride, first)``, stride 2 at the first
    unit of stages 2 and 3."""
    out, cin = [], 16
    for i, w in enumerate(widths):
        for j in range(units):
            out.append(make_unit(cin, w, 2 if i > 0 and j == 0 else 1, j == 0))
            cin = w
    return nn.Sequential(*out)


class ResNetCifar(nn.Module):
    def __init__(self, variant: str, num_classes: int = 10, units: int = 3):
        super().__init__()
        if variant not in VARIANTS:
            raise ValueError(f"unknown ResNet-20 variant {variant!r}; choose from {VARIANTS}")
        self.variant = variant
        widths = (16, 32, 64)
        if variant == "option-a":
            self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
            self.stages = _stages(lambda cin, w, stride, first: BasicBlockA(cin, w, stride), widths, units)
            self.head = nn.Identity()
        elif variant == "preact-option-a":
            self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16, **_TF_CONV_BN),
                                      nn.ReLU())
            self.stages = _stages(lambda cin, w, stride, first: TfPreActUnit(cin, w, stride), widths, units)
            self.head = nn.Sequential(BatchNormNoScale(64, **_TF_PLAIN_BN), nn.ReLU())
        else:
            # MXNet's bn_data has a gamma pinned to 1 by fix_gamma; only its beta is a parameter here.
            self.stem = nn.Sequential(BatchNormNoScale(3, **_MX_BN), nn.Conv2d(3, 16, 3, 1, 1, bias=False))
            self.stages = _stages(lambda cin, w, stride, first: PreActUnit(cin, w, stride, projection=first),
                                  widths, units)
            self.head = nn.Sequential(nn.BatchNorm2d(64, **_MX_BN), nn.ReLU())
        self.fc = nn.Linear(64, num_classes)
        if variant == "preact-option-a":
            self._init_tf()
            return
        with torch.no_grad():
            for m in self.modules():
                if isinstance(m, (nn.Conv2d, nn.Linear)):
                    # Both references: normal(0, sqrt(2 / fan_in)).
                    nn.init.kaiming_normal_(m.weight)
            if variant == "preact-projection":
                self.fc.bias.zero_()  # MXNet's Xavier initialises biases to 0; akamaster keeps torch's default

    @torch.no_grad()
    def _init_tf(self) -> None:
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                fan_in = m.in_channels * m.kernel_size[0] * m.kernel_size[1]
                trunc_normal_(m.weight, (1.0 / fan_in) ** 0.5 / _TRUNCATED_STD)
        trunc_normal_(self.fc.weight, (1.0 / self.fc.in_features) ** 0.5)
        self.fc.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.head(self.stages(self.stem(x)))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


def resnet20(variant: str = "option-a", num_classes: int = 10) -> nn.Module:
    return ResNetCifar(variant, num_classes)
