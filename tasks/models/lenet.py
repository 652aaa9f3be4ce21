"""LeNet for 28x28 grey images, in the two forms the TernGrad reproduction needs.

``tf`` (default): TernGrad's own TensorFlow LeNet (terngrad/inception/slim/models.py: lenet): 5x5 convs with
SAME padding and ReLU, 2x2 max-pools, fc 500 + ReLU, logits; truncated-normal init with stddev 0.05, 0.05,
0.048, 0.0767 and zero biases; inputs in [-1, 1].

``caffe``: BVLC Caffe's examples/mnist/lenet_train_test.prototxt: unpadded convs without ReLU, ip1 500 +
ReLU, ip2; Xavier init, zero biases; inputs scaled by 1/256.
"""
from __future__ import annotations

import torch
from torch import nn


def _trunc_normal(t: torch.Tensor, std: float) -> None:
    # TF's truncated_normal re-draws beyond two standard deviations.
    nn.init.trunc_normal_(t, std=std, a=-2 * std, b=2 * std)


def _caffe_xavier(t: torch.Tensor) -> None:
    # Caffe's "xavier" filler: uniform(-a, a) with a = sqrt(3 / fan_in).
    fan_in = t[0].numel()
    bound = (3.0 / fan_in) ** 0.5
    nn.init.uniform_(t, -bound, bound)


class LeNet(nn.Module):
    def __init__(self, variant: str = "tf", num_classes: int = 10, in_channels: int = 1):
        super().__init__()
        if variant not in ("tf", "caffe"):
            raise ValueError(f"unknown LeNet variant {variant!r}")
        self.variant = variant
        pad, act = (2, nn.ReLU) if variant == "tf" else (0, nn.Identity)
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 20, 5, padding=pad), act(), nn.MaxPool2d(2, 2),
            nn.Conv2d(20, 50, 5, padding=pad), act(), nn.MaxPool2d(2, 2),
        )
        side = 7 if variant == "tf" else 4
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(50 * side * side, 500), nn.ReLU(), nn.Linear(500, num_classes)
        )
        weights = [self.features[0].weight, self.features[3].weight, self.classifier[1].weight,
                   self.classifier[3].weight]
        with torch.no_grad():
            for w, std in zip(weights, (0.05, 0.05, 0.048, 0.0767)):
                _trunc_normal(w, std) if variant == "tf" else _caffe_xavier(w)
            for m in self.modules():
                if isinstance(m, (nn.Conv2d, nn.Linear)):
                    m.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))
