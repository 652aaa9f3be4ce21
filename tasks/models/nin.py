"""Network in Network for ImageNet, the Caffe model-zoo version (mavenlin's gist d802a5849de39225bcc6,
prototxt ``name: "nin_imagenet"``), which Anoosheh et al.'s thresholded-sync experiments train.

- conv1 96@11x11/4 -> cccp1 96 -> cccp2 96 -> max-pool 3x3/2        224 -> 54 -> 27
- conv2 256@5x5 pad 2 -> cccp3 256 -> cccp4 256 -> max-pool 3x3/2   27 -> 13
- conv3 384@3x3 pad 1 -> cccp5 384 -> cccp6 384 -> max-pool 3x3/2   13 -> 6 -> dropout 0.5
- conv4-1024 1024@3x3 pad 1 -> cccp7-1024 1024 -> cccp8-1024 num_classes
- average pool 6x6 (global at 224) -> logits
ReLU follows every conv, cccp8 included (so the logits are non-negative, as in the prototxt).
Caffe rounds pooling output sizes up, hence ``ceil_mode=True`` (54 -> 27 needs it).

Init: Caffe "gaussian" (plain normal) std 0.01 for conv1, conv3, cccp8 and 0.05 for the others; biases 0.
(Caffe's bias lr x2 / no bias decay belong to the optimizer, not here.)
"""
from __future__ import annotations

import torch
from torch import nn

# (out, kernel, stride, pad, init std) per conv, in prototxt order.
_STACKS = [
    [(96, 11, 4, 0, 0.01), (96, 1, 1, 0, 0.05), (96, 1, 1, 0, 0.05)],
    [(256, 5, 1, 2, 0.05), (256, 1, 1, 0, 0.05), (256, 1, 1, 0, 0.05)],
    [(384, 3, 1, 1, 0.01), (384, 1, 1, 0, 0.05), (384, 1, 1, 0, 0.05)],
    [(1024, 3, 1, 1, 0.05), (1024, 1, 1, 0, 0.05), (None, 1, 1, 0, 0.01)],  # None: num_classes
]


class NiN(nn.Module):
    def __init__(self, num_classes: int = 1000, dropout: float = 0.5):
        super().__init__()
        layers: list[nn.Module] = []
        stds: list[float] = []
        cin = 3
        for i, stack in enumerate(_STACKS):
            for cout, k, s, p, std in stack:
                cout = num_classes if cout is None else cout
                layers += [nn.Conv2d(cin, cout, k, s, p), nn.ReLU()]
                stds.append(std)
                cin = cout
            if i < 3:
                layers.append(nn.MaxPool2d(3, 2, ceil_mode=True))
            if i == 2:
                layers.append(nn.Dropout(dropout))
        layers += [nn.AvgPool2d(6, 1), nn.Flatten()]
        self.features = nn.Sequential(*layers)
        convs = [m for m in self.features if isinstance(m, nn.Conv2d)]
        with torch.no_grad():
            for conv, std in zip(convs, stds):
                nn.init.normal_(conv.weight, std=std)
                conv.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.features(x)
