"""The arithmetic a run computes forward and backward in (``precision``), and the layout the methods see.

``bf16-autocast`` runs forward and backward under ``torch.autocast`` with bfloat16 (the CPU's AMX-BF16 and
AVX512-BF16 units, or a GPU's tensor cores), and keeps convolutional models in channels_last, the layout those
kernels want. Weights, the optimizer and every byte on the wire stay fp32: autocast computes in bfloat16 and
hands back fp32 gradients. A channels_last model's gradients are stored channels_last, which would change the
order in which a codec reads a tensor's elements (and so which random draw meets which element), so the methods
get every gradient in the standard contiguous layout, as under ``fp32``.
"""
from __future__ import annotations

import contextlib

import torch
from torch import nn


def autocast_args(device_type: str, precision: str) -> dict | None:
    """``torch.autocast``'s arguments for ``precision`` on a device type ("cpu", "cuda"); None for fp32."""
    if precision == "fp32":
        return None
    if precision == "bf16-autocast":
        return {"device_type": device_type, "dtype": torch.bfloat16}
    raise ValueError(f"precision {precision!r}: expected fp32 or bf16-autocast")


def strict_fp32(device: torch.device, precision: str) -> None:
    """``fp32`` on a GPU means fp32: PyTorch lets cuDNN's convolutions (and may let cuBLAS) round their inputs
    to TF32 (10 mantissa bits) on Ampere and later, which the papers' GPUs (Pascal, Volta) never did. Under
    ``fp32`` on CUDA both are turned off; autocast runs choose their arithmetic themselves."""
    if device.type == "cuda" and precision == "fp32":
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False


def compute_context(device: torch.device, precision: str):
    """Where forward (and so backward) runs: under autocast, or as it is."""
    args = autocast_args(device.type, precision)
    return torch.autocast(**args) if args else contextlib.nullcontext()


def is_convolutional(model: nn.Module) -> bool:
    return any(isinstance(m, nn.Conv2d) for m in model.modules())


def uses_channels_last(model: nn.Module, precision: str) -> bool:
    return precision != "fp32" and is_convolutional(model)


def for_methods(grad: torch.Tensor | None) -> torch.Tensor | None:
    """A gradient in the standard contiguous layout (a copy only where it is not)."""
    return grad if grad is None else grad.contiguous()
