"""TensorFlow layer semantics in PyTorch, shared by the TF-defined networks (CifarNet, AlexNet-BN, GoogLeNet-BN).

Three TF behaviours have no exact torch.nn equivalent:

- ``padding='SAME'`` with a stride: TF pads ``max((ceil(n/s) - 1) * s + k - n, 0)`` in total and puts the odd
  extra row/column on the bottom/right; torch's ``padding=`` is symmetric. Max pools pad with -inf (TF ignores
  the padded cells).
- ``tf.nn.lrn``: ``x / (bias + alpha * sum_{d-r..d+r} x^2) ** beta``. torch's LocalResponseNorm divides alpha by
  the window size, so alpha is multiplied back.
- slim's ``batch_norm`` defaults to ``center=True, scale=False``: a learnable beta, no gamma, and the conv before
  it has no bias. TF's ``decay`` is torch's ``1 - momentum``.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

# slim batch_norm_params in TernGrad's inception_model.py and slim's inception_arg_scope.
TF_BN_MOMENTUM = 3e-4  # decay 0.9997
TF_BN_EPS = 1e-3


@torch.no_grad()
def trunc_normal_(t: torch.Tensor, std: float) -> torch.Tensor:
    """TF's ``truncated_normal``: normal(0, std) with values beyond two std re-drawn.

    Same distribution as ``nn.init.trunc_normal_(t, std=std, a=-2 * std, b=2 * std)``, but re-drawing (about 5%
    per round) is ~15x faster than its inverse-CDF sampling on AlexNet's 37M-element fc6.
    """
    if t.is_meta:  # shape-only construction (e.g. counting parameters)
        return t
    flat = t.view(-1)  # parameters are contiguous
    flat.normal_(0.0, std)
    idx = (flat.abs() > 2 * std).nonzero().squeeze(1)
    while idx.numel():
        redraw = torch.empty(idx.numel(), dtype=t.dtype, device=t.device).normal_(0.0, std)
        flat[idx] = redraw
        idx = idx[redraw.abs() > 2 * std]
    return t


def same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """(before, after) padding of TF's 'SAME' along one axis."""
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


class SamePad2d(nn.Module):
    """Pads H and W as TF's 'SAME' would for a ``kernel`` x ``kernel`` window with ``stride``."""

    def __init__(self, kernel: int, stride: int, value: float = 0.0):
        super().__init__()
        self.kernel, self.stride, self.value = kernel, stride, value

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        top, bottom = same_padding(x.shape[-2], self.kernel, self.stride)
        left, right = same_padding(x.shape[-1], self.kernel, self.stride)
        if top == bottom == left == right == 0:
            return x
        return F.pad(x, (left, right, top, bottom), value=self.value)

    def extra_repr(self) -> str:
        return f"kernel={self.kernel}, stride={self.stride}, value={self.value}"


def max_pool_same(kernel: int, stride: int) -> nn.Sequential:
    """TF ``max_pool(..., padding='SAME')``: -inf padding so padded cells never win."""
    return nn.Sequential(SamePad2d(kernel, stride, float("-inf")), nn.MaxPool2d(kernel, stride))


def conv_same(cin: int, cout: int, kernel: int, stride: int = 1, bias: bool = True) -> nn.Module:
    """TF ``conv2d(..., padding='SAME')``. Stride 1 with an odd kernel pads symmetrically, as torch does."""
    if stride == 1 and kernel % 2 == 1:
        return nn.Conv2d(cin, cout, kernel, padding=kernel // 2, bias=bias)
    return nn.Sequential(SamePad2d(kernel, stride), nn.Conv2d(cin, cout, kernel, stride, bias=bias))


def tf_lrn(depth_radius: int, bias: float, alpha: float, beta: float) -> nn.LocalResponseNorm:
    """``tf.nn.lrn`` as torch's LocalResponseNorm (which uses alpha / size)."""
    size = 2 * depth_radius + 1
    return nn.LocalResponseNorm(size, alpha=alpha * size, beta=beta, k=bias)


class BatchNormNoScale(nn.BatchNorm2d):
    """Batch norm with a learnable shift (beta) and no scale (gamma), like slim's ``scale=False`` default
    (and MXNet's ``fix_gamma=True``, whose gamma stays 1).

    ``weight`` is None, so ``parameters()`` holds exactly the tensors TF trains (and communicates).
    """

    def __init__(self, num_features: int, eps: float = TF_BN_EPS, momentum: float = TF_BN_MOMENTUM):
        super().__init__(num_features, eps=eps, momentum=momentum, affine=True)
        self.register_parameter("weight", None)

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """torch's BatchNorm with gamma fixed at 1 (:func:`unit_gamma`)."""
        self._check_input_dim(x)
        factor = self.momentum if self.momentum is not None else 0.0
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # a cumulative average
                factor = 1.0 / float(self.num_batches_tracked)
        batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        tracked = not self.training or self.track_running_stats
        return F.batch_norm(x, self.running_mean if tracked else None, self.running_var if tracked else None,
                            unit_gamma(self), self.bias, batch_stats, factor, self.eps)


def unit_gamma(bn: nn.modules.batchnorm._BatchNorm) -> torch.Tensor | None:
    """A BatchNorm's gamma, or ones where it has a beta and no gamma (:class:`BatchNormNoScale`). Passing None
    is the same arithmetic, and on the CPU bit for bit, but CUDA's batch-norm backward then hands back an empty
    beta gradient (torch 2.11 on an H100: "NativeBatchNormBackward0 returned an invalid gradient")."""
    if bn.weight is None and bn.bias is not None:
        return torch.ones_like(bn.bias, requires_grad=False)
    return bn.weight


class ConvBNReLU(nn.Sequential):
    """slim conv2d with batch_norm_params: SAME conv without bias -> BN (beta only) -> ReLU."""

    def __init__(self, cin: int, cout: int, kernel: int, stride: int = 1):
        super().__init__(conv_same(cin, cout, kernel, stride, bias=False), BatchNormNoScale(cout), nn.ReLU())
