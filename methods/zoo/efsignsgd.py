"""EF-signSGD (Karimireddy et al., ICML 2019, "Error Feedback Fixes SignSGD and other Gradient Compression
Schemes"), Algorithm 1 with the scaled sign compressor.

Algorithm: each worker compresses p = g + e (its gradient plus the error it kept), sends
C(p) = (||p||_1 / d) * sign(p) per tensor of d elements, and keeps e <- p - C(p) (the kit's float64 residual).
The aggregate is the mean of the workers' C(p). sign(0) is +1 (GRACE's p >= 0).

The paper's Algorithm 1 compresses p_t = lr_t g_t + e_t, its error in units of the step (x <- x - C(p)); here the
memory holds e_t / lr (the step applies lr to the decoded mean, as for every kit method). C is positively
homogeneous (C(a p) = a C(p) for a > 0), so under a constant learning rate the two compute the same iterates; when
the rate changes, the paper's carried error keeps the old rate's scale (e_t enters as is beside lr_t g_t), while
this one rescales it to the new rate (lr_t e'_t). Following the paper exactly would need the learning rate at
encoding time, which a kit compressor (and the bucketed exchange, which starts before the step's rate is applied)
does not see. GRACE (grace_dl/dist/memory/efsignsgd.py) multiplies g by a fixed lr in its memory and divides the
aggregate by it: the same as this with a constant rate.

Wire format: per tensor a float32 scale ||p||_1 / d, then one bit per element (1: negative), packed 8 to a byte:
1 + 32 / d bits per element. Collective: a same-size all-gather; every worker decodes each payload and adds them in
rank order, then divides by N.
"""
from __future__ import annotations

import torch

from ..base import NoParams
from ..codecs.bits import as_bytes, from_bytes, pack_bits, unpack_bits
from ..kit import Compressor, KitMethod, Residual
from .qcommon import mean_in_rank_order


class ScaledSignCompressor(Compressor):
    """Per tensor its mean magnitude ||p||_1 / d (float32), then its sign bits."""

    claims = {"residual": "Algorithm 1: e_{t+1} = p_t - Delta_t, the part of p_t not applied",
              "bytes": "d bits and one float per tensor of d elements"}

    def encode(self, group, flat, local, shared, sender):
        scales = torch.stack([part.abs().mean() for part in flat.split(group.sizes)])
        return torch.cat([as_bytes(scales.to(torch.float32)), pack_bits(flat < 0)])

    def payload_bytes(self, group, sent=None):
        """A float32 scale per tensor and one bit per element, packed 8 to a byte."""
        return 4 * len(group.sizes) + -(-group.numel // 8)

    def decode(self, group, payloads, shared):
        return mean_in_rank_order(payloads, lambda p: self._values(group, p), group.workers)

    def _values(self, group, payload) -> torch.Tensor:
        k = len(group.sizes)
        scales = torch.repeat_interleave(from_bytes(payload[:4 * k], torch.float32),
                                         torch.tensor(group.sizes, device=payload.device))
        negative = unpack_bits(payload[4 * k:], group.numel)
        return torch.where(negative, -scales, scales)


class EFSignSGD(KitMethod):
    name = "efsignsgd"
    Params, compressor, memory = NoParams, ScaledSignCompressor, Residual
