"""AlexNet as MXNet's ``example/image-classification/symbols/alexnet.py`` defines it: the network SSD-SGD's
``alex.sh`` trains (main-520/SSD-SGD, ``train_imagenet.py --network alexnet``).

One tower, no BatchNorm, a bias on every layer; at 224 px (MXNet floors every output size, as torch does):

- conv1 96@11x11/4, no pad -> ReLU -> LRN -> max-pool 3x3/2       224 -> 54 -> 26
- conv2 256@5x5 pad 2 -> ReLU -> LRN -> max-pool 3x3/2            26 -> 12
- conv3 384@3x3 pad 1 -> ReLU; conv4 384@3x3 pad 1 -> ReLU
- conv5 256@3x3 pad 1 -> ReLU -> max-pool 3x3/2                   12 -> 5, so 256 x 5 x 5 = 6,400 features
- fc1 4096 -> ReLU -> dropout 0.5; fc2 4096 -> ReLU -> dropout 0.5; fc3 (the classes)

50,844,008 parameters for 1,000 classes: 203.38 MB of float32, SSD-SGD Sec. 4.6's "203.4MB". TernGrad's AlexNet
(alexnet.py) is another network: two towers, 6x6 before fc6, BN, 60,965,224 parameters.

LRN is MXNet's ``LRN(alpha=1e-4, beta=0.75, knorm=2, nsize=5)``: x / (knorm + alpha / nsize * sum x^2)^beta over
5 channels centred on each, which is torch's ``LocalResponseNorm(5, 1e-4, 0.75, k=2)``. Init: fit.py gives
AlexNet ``mx.init.Normal()`` ("AlexNet will not converge using Xavier"): weights N(0, 0.01), biases 0.
"""
from __future__ import annotations

import torch
from torch import nn

INIT_STD = 0.01  # mx.init.Normal()'s sigma


def _lrn() -> nn.LocalResponseNorm:
    return nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=2.0)


def _pool() -> nn.MaxPool2d:
    return nn.MaxPool2d(3, 2)  # MXNet's pooling_convention "valid": floor


class AlexNetMXNet(nn.Module):
    """The layers carry MXNet's names (conv1 ... conv5, fc1 ... fc3), in its order of arguments, so that
    per-tensor methods see the tensors the authors' key-value store held."""

    def __init__(self, num_classes: int = 1000, dropout: float = 0.5):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 96, 11, stride=4)
        self.conv2 = nn.Conv2d(96, 256, 5, padding=2)
        self.conv3 = nn.Conv2d(256, 384, 3, padding=1)
        self.conv4 = nn.Conv2d(384, 384, 3, padding=1)
        self.conv5 = nn.Conv2d(384, 256, 3, padding=1)
        self.fc1 = nn.Linear(256 * 5 * 5, 4096)
        self.fc2 = nn.Linear(4096, 4096)
        self.fc3 = nn.Linear(4096, num_classes)
        self.lrn1, self.lrn2 = _lrn(), _lrn()
        self.pool = _pool()
        self.relu = nn.ReLU()
        self.dropout = nn.Dropout(dropout)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("weight"):
                    p.normal_(0.0, INIT_STD)
                else:
                    p.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.lrn1(self.relu(self.conv1(x))))
        x = self.pool(self.lrn2(self.relu(self.conv2(x))))
        x = self.relu(self.conv4(self.relu(self.conv3(x))))
        x = self.pool(self.relu(self.conv5(x)))
        x = self.dropout(self.relu(self.fc1(torch.flatten(x, 1))))
        x = self.dropout(self.relu(self.fc2(x)))
        return self.fc3(x)
