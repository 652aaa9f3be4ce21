"""AlexNet with batch norm, as TernGrad trains it on ImageNet.

Source: wenwei202/terngrad terngrad/inception/slim/models.py: alexnet, built under inception_model.py: inference(),
whose arg_scope gives every ``ops.conv2d`` ``batch_norm_params`` (decay 0.9997, eps 0.001). Old-slim
``ops.batch_norm`` has ``center=True, scale=False``, and ``ops.conv2d`` drops its bias when BN is on, so each conv
owns one weight and one beta. The fc layers have no BN.

The two "towers" of the original are separate convs (TF variables conv1_1, conv1_2, ...), each with its own
tensors, which matters for per-tensor gradient compression:

- conv1_{1,2} 48@11x11/4 SAME (on the full input) -> LRN -> max-pool 3x3/2 VALID   224 -> 56 -> 27
- conv2_{1,2} 128@5x5 on its own tower -> LRN -> pool, concat                      27 -> 13, 256 ch
- conv3_{1,2} 192@3x3, each on the concat
- conv4_{1,2} 192@3x3 and conv5_{1,2} 128@3x3 on their own tower -> pool, concat    13 -> 6, 256 ch
- fc6 4096 -> dropout -> fc7 4096 -> dropout -> logits (ReLU everywhere but the logits)

LRN is old slim's ``ops.lrn`` default: depth_radius 2, bias 2.0, alpha 1e-4, beta 0.75.
Init: truncated normal std 0.01 (fc6/fc7 0.005); fc6/fc7 biases 0.1, logits bias 0; BN beta 0.
TernGrad passes ``num_classes=1001`` (label 0 is background) and ``dropout_keep_prob`` (0.5 default, 0.8 in
run_multi_gpus_alexnet.sh); ``dropout`` here is 1 - keep_prob.
"""
from __future__ import annotations

import torch
from torch import nn

from ._tf import ConvBNReLU, tf_lrn, trunc_normal_


def _lrn() -> nn.LocalResponseNorm:
    return tf_lrn(2, 2.0, 1e-4, 0.75)


def _pool() -> nn.MaxPool2d:
    return nn.MaxPool2d(3, 2)  # VALID


def _pair(make) -> nn.ModuleList:
    return nn.ModuleList([make(), make()])


class AlexNetBN(nn.Module):
    def __init__(self, num_classes: int = 1000, dropout: float = 0.5):
        super().__init__()
        # Module order follows TF's variable order: conv1_1, conv1_2, conv2_1, ...
        self.conv1 = _pair(lambda: nn.Sequential(ConvBNReLU(3, 48, 11, stride=4), _lrn(), _pool()))
        self.conv2 = _pair(lambda: nn.Sequential(ConvBNReLU(48, 128, 5), _lrn(), _pool()))
        self.conv3 = _pair(lambda: ConvBNReLU(256, 192, 3))
        self.conv4 = _pair(lambda: ConvBNReLU(192, 192, 3))
        self.conv5 = _pair(lambda: nn.Sequential(ConvBNReLU(192, 128, 3), _pool()))
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(256 * 6 * 6, 4096), nn.ReLU(), nn.Dropout(dropout),
            nn.Linear(4096, 4096), nn.ReLU(), nn.Dropout(dropout),
            nn.Linear(4096, num_classes),
        )
        with torch.no_grad():
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    trunc_normal_(m.weight, 0.01)
            for fc, std, bias in zip(self.classifier[1::3], (0.005, 0.005, 0.01), (0.1, 0.1, 0.0)):
                trunc_normal_(fc.weight, std)
                fc.bias.fill_(bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        towers = [t(x) for t in self.conv1]
        x = torch.cat([t(h) for t, h in zip(self.conv2, towers)], 1)
        towers = [t(x) for t in self.conv3]
        towers = [t(h) for t, h in zip(self.conv4, towers)]
        x = torch.cat([t(h) for t, h in zip(self.conv5, towers)], 1)
        return self.classifier(x)
