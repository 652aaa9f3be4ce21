"""CifarNet: the TensorFlow CIFAR-10 tutorial ConvNet, which TernGrad trains as ``cifar10_alexnet``.

Source: tensorflow/models tutorials/image/cifar10/cifar10.py: inference(), and its copy in
wenwei202/terngrad terngrad/inception/slim/models.py: cifar10_alexnet (same layers and init).

Input: 24x24 crops (N x 3 x 24 x 24).

- conv1 64@5x5 SAME + ReLU -> max-pool 3x3/2 SAME -> LRN(r=4, bias 1, alpha 0.001/9, beta 0.75)
- conv2 64@5x5 SAME + ReLU -> LRN -> max-pool 3x3/2 SAME (note: LRN before the pool here, after it in block 1)
- local3 384 + ReLU -> local4 192 + ReLU -> logits

Init: truncated normal (re-drawn beyond 2 std) with std 0.05, 0.05, 0.04, 0.04, 1/192; biases 0, 0.1, 0.1, 0.1, 0.
1,068,298 parameters for 10 classes. ``decayed_weights`` names the tensors the tutorial decays (local3/local4).
"""
from __future__ import annotations

import torch
from torch import nn

from ._tf import max_pool_same, tf_lrn, trunc_normal_


class CifarNet(nn.Module):
    # The tutorial's weight decay (0.004) covers local3's and local4's weights only.
    decayed_weights = frozenset({"classifier.1.weight", "classifier.3.weight"})

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 5, padding=2), nn.ReLU(),
            max_pool_same(3, 2),  # 24 -> 12; TF pads one -inf row/col on the bottom/right
            tf_lrn(4, 1.0, 0.001 / 9.0, 0.75),
            nn.Conv2d(64, 64, 5, padding=2), nn.ReLU(),
            tf_lrn(4, 1.0, 0.001 / 9.0, 0.75),
            max_pool_same(3, 2),  # 12 -> 6
        )
        self.classifier = nn.Sequential(
            nn.Flatten(),  # C,H,W order where TF flattens H,W,C: a fixed permutation of local3's rows
            nn.Linear(64 * 6 * 6, 384), nn.ReLU(),
            nn.Linear(384, 192), nn.ReLU(),
            nn.Linear(192, num_classes),
        )
        layers = [self.features[0], self.features[4], self.classifier[1], self.classifier[3], self.classifier[5]]
        with torch.no_grad():
            for layer, std, bias in zip(layers, (0.05, 0.05, 0.04, 0.04, 1 / 192.0), (0.0, 0.1, 0.1, 0.1, 0.0)):
                trunc_normal_(layer.weight, std)
                layer.bias.fill_(bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))
