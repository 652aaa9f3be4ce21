"""What a compressor's output should average to: its declared target (``Compressor.unbiased``), computed.

``Compressor.unbiased`` is a phrase. The report computes the target of the phrases the kit's compressors use:
"the input", and an input "clipped" at the bounds of TernGrad's codec (the very bounds its encoder clips at,
:meth:`~commbench.methods.codecs.fused_ternary.TernaryCodec.bounds_under`). A user's compressor with another
target says how to compute it with a method ``contract_target(group, flat, local, shared)`` (flat float32 in,
the target out); a phrase the report cannot compute is reported as such, not guessed.
"""
from __future__ import annotations

import torch

from .fixture import Encoded, Fixture

INPUT = "the input"


class UnknownTarget(ValueError):
    """A declared target the report cannot compute."""


def target_of(fx: Fixture, declared: str, group, flat: torch.Tensor, encoded: Encoded) -> torch.Tensor:
    """The declared target of ``flat`` (float64), under the state ``flat`` was encoded with."""
    c = fx.compressor
    custom = getattr(c, "contract_target", None)
    if custom is not None and declared != INPUT:
        return custom(group, flat, encoded.local, encoded.shared).double()
    if declared == INPUT:
        return flat.double()
    if "clip" in declared and hasattr(getattr(c, "codec", None), "bounds_under"):
        return clipped(c.codec, group, flat, encoded.local, encoded.shared).double()
    raise UnknownTarget(f"cannot compute the target {declared!r} (a compressor may define contract_target)")


def clipped(codec, group, flat: torch.Tensor, local, shared) -> torch.Tensor:
    """``flat`` clipped per tensor at the bounds the codec's encoder clips at (its own, or the shared scaler)."""
    _, bounds, _ = local
    bound = codec.bounds_under(bounds, shared, len(group.sizes)).to(flat.device, torch.float32)
    per = torch.repeat_interleave(bound, torch.tensor(group.sizes, device=flat.device))
    return torch.minimum(torch.maximum(flat, -per), per)
