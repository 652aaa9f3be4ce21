"""GoogLeNet with batch norm (TF-slim Inception-v1), as TernGrad trains it on ImageNet.

Source: wenwei202/terngrad terngrad/inception/slim/models.py: googlenet -> slim/inception_v1.py (TF-slim's
inception_v1, with aux heads removed: ``end_points['aux_logits'] = tf.constant(0)``) under
slim's ``inception_arg_scope(weight_decay=4e-5)``:

- every conv: SAME, no bias, BN (decay 0.9997, eps 0.001, slim default ``scale=False``: beta only), ReLU
- no LRN (unlike the 2014 Caffe model)
- slim's "5x5" branch uses 3x3 kernels (Branch_2 Conv2d_0b_3x3); kept, it is what TernGrad trained
- Conv2d_1a 7x7/2 -> MaxPool 3x3/2 -> 1x1 64 -> 3x3 192 -> MaxPool 3x3/2 -> 3b, 3c -> MaxPool 3x3/2
  -> 4b..4f -> MaxPool 2x2/2 -> 5b, 5c -> AvgPool 7x7 VALID -> dropout -> 1x1 conv logits (bias, no BN/ReLU)

Init, pinned from the arg_scopes: inception_v1_base wraps its convs in its own
``weights_initializer=trunc_normal(0.01)``, which overrides the outer variance-scaling one, so every conv up to
Mixed_5c is truncated normal std 0.01. Only the logits conv sees ``slim.variance_scaling_initializer()``
(factor 2, FAN_IN, truncated normal with std sqrt(1.3 * 2 / fan_in)); its bias starts at 0.

Input 224 (the 7x7 average pool is fixed, as slim's default ``global_pool=False``).
``dropout`` is 1 - dropout_keep_prob (0.8 in run_multi_gpus_googlenet_quick.sh).
"""
from __future__ import annotations

import math

import torch
from torch import nn

from ._tf import ConvBNReLU, max_pool_same, trunc_normal_


class Inception(nn.Module):
    """One Mixed block: 1x1 | 1x1 -> 3x3 | 1x1 -> 3x3 | max-pool 3x3/1 -> 1x1, concatenated."""

    def __init__(self, cin: int, b0: int, b1: tuple[int, int], b2: tuple[int, int], b3: int):
        super().__init__()
        self.branch_0 = ConvBNReLU(cin, b0, 1)
        self.branch_1 = nn.Sequential(ConvBNReLU(cin, b1[0], 1), ConvBNReLU(b1[0], b1[1], 3))
        self.branch_2 = nn.Sequential(ConvBNReLU(cin, b2[0], 1), ConvBNReLU(b2[0], b2[1], 3))
        # Stride-1 SAME max-pool pads 1 on each side; torch pads max-pools with -inf, as TF ignores padding.
        self.branch_3 = nn.Sequential(nn.MaxPool2d(3, 1, padding=1), ConvBNReLU(cin, b3, 1))
        self.out_channels = b0 + b1[1] + b2[1] + b3

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.branch_0(x), self.branch_1(x), self.branch_2(x), self.branch_3(x)], 1)


# name: (in, Branch_0, Branch_1 (1x1, 3x3), Branch_2 (1x1, 3x3), Branch_3 pool-proj), from slim's inception_v1.py
MIXED = {
    "Mixed_3b": (192, 64, (96, 128), (16, 32), 32),
    "Mixed_3c": (256, 128, (128, 192), (32, 96), 64),
    "Mixed_4b": (480, 192, (96, 208), (16, 48), 64),
    "Mixed_4c": (512, 160, (112, 224), (24, 64), 64),
    "Mixed_4d": (512, 128, (128, 256), (24, 64), 64),
    "Mixed_4e": (512, 112, (144, 288), (32, 64), 64),
    "Mixed_4f": (528, 256, (160, 320), (32, 128), 128),
    "Mixed_5b": (832, 256, (160, 320), (32, 128), 128),
    "Mixed_5c": (832, 384, (192, 384), (48, 128), 128),
}


class GoogLeNetBN(nn.Module):
    def __init__(self, num_classes: int = 1000, dropout: float = 0.2):
        super().__init__()
        mixed = {name: Inception(*spec) for name, spec in MIXED.items()}
        self.features = nn.Sequential(
            ConvBNReLU(3, 64, 7, stride=2),  # 224 -> 112, SAME pads 2 top/left and 3 bottom/right
            max_pool_same(3, 2),  # 56
            ConvBNReLU(64, 64, 1),
            ConvBNReLU(64, 192, 3),
            max_pool_same(3, 2),  # 28
            mixed["Mixed_3b"], mixed["Mixed_3c"],
            max_pool_same(3, 2),  # 14
            mixed["Mixed_4b"], mixed["Mixed_4c"], mixed["Mixed_4d"], mixed["Mixed_4e"], mixed["Mixed_4f"],
            max_pool_same(2, 2),  # 7
            mixed["Mixed_5b"], mixed["Mixed_5c"],
            nn.AvgPool2d(7, 1),  # VALID: 7 -> 1
        )
        self.dropout = nn.Dropout(dropout)
        self.logits = nn.Conv2d(1024, num_classes, 1)
        with torch.no_grad():
            for m in self.features.modules():
                if isinstance(m, nn.Conv2d):
                    trunc_normal_(m.weight, 0.01)
            trunc_normal_(self.logits.weight, math.sqrt(1.3 * 2.0 / 1024))
            self.logits.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.logits(self.dropout(self.features(x))).flatten(1)
