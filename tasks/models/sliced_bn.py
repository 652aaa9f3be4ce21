"""BatchNorm over slices of a worker's batch (``model.bn_batch``): what a worker with several devices computes.

A paper's "worker" is often a machine with several GPUs (SSD-SGD: 4, each with 32 images), and BatchNorm then
normalises each device's 32 images with their own statistics; a simulated worker holding the machine's 128
images in one process would normalise over all 128. Here each slice of ``size`` images is normalised with its
own mean and variance, and the running statistics move once per step by the mean over the slices of their
statistics: the average of the devices' running statistics, as MXNet averages its devices' auxiliary states
(linear updates from the same start, so averaging once at the end is averaging every step). In evaluation mode,
and for a batch no larger than one slice, it is torch's BatchNorm.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ._tf import unit_gamma


class SlicedBatchNorm(nn.modules.batchnorm._BatchNorm):
    """A BatchNorm (the mixin of :func:`sliced`, before the layer's own class) normalising slices of
    ``slice_size`` samples in training."""

    slice_size: int

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or x.shape[0] <= self.slice_size:
            return super().forward(x)
        slices = x.split(self.slice_size)
        gamma = unit_gamma(self)
        out = torch.cat([F.batch_norm(s, None, None, gamma, self.bias, True, 0.0, self.eps) for s in slices])
        if self.track_running_stats:
            with torch.no_grad():
                dims = [0] + list(range(2, x.dim()))
                mean = torch.stack([s.mean(dim=dims) for s in slices]).mean(dim=0)
                var = torch.stack([s.var(dim=dims, unbiased=True) for s in slices]).mean(dim=0)
                self.num_batches_tracked.add_(1)
                # torch's factor: momentum, or a cumulative average (momentum None)
                factor = self.momentum if self.momentum is not None else 1.0 / float(self.num_batches_tracked)
                self.running_mean.mul_(1 - factor).add_(mean, alpha=factor)
                self.running_var.mul_(1 - factor).add_(var, alpha=factor)
        return out

    def extra_repr(self) -> str:
        return super().extra_repr() + f", slice_size={self.slice_size}"


_CLASSES: dict[type, type] = {}


def sliced(cls: type) -> type:
    """``cls`` (BatchNorm1d, 2d, 3d or a model's own subclass) normalising slices: one class per ``cls``."""
    if cls not in _CLASSES:
        _CLASSES[cls] = type(f"Sliced{cls.__name__}", (SlicedBatchNorm, cls), {})
    return _CLASSES[cls]


def slice_batch_norm(model: nn.Module, size: int) -> int:
    """Make every BatchNorm of ``model`` (in place: its parameters, buffers and settings stay) normalise slices
    of ``size`` samples; the number it changed."""
    replaced = 0
    for module in model.modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm) and not isinstance(module, SlicedBatchNorm):
            module.__class__ = sliced(type(module))
            module.slice_size = size
            replaced += 1
    return replaced
