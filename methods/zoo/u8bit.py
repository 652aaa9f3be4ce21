"""8-bit approximation (Dettmers, ICLR 2016, "8-Bit Approximations for Parallelism in Deep Learning"): the 8-bit
dynamic tree data type, Sec. 3.1.

Algorithm: each tensor is divided by its largest magnitude (Sec. 3.1: "normalize a matrix by dividing by its
absolute maximum value"), so its elements lie in [-1, 1], and each becomes the nearest of the 8-bit dynamic tree
values (round to nearest: deterministic, biased); the receiver looks the code up and multiplies by the scale.
The code, from its most significant bit: the sign; n zero bits, the decimal exponent 10^-n (n = 0 .. 6); a 1
bit, the flag; the remaining 6 - n bits, the route through a binary bisection tree of the interval (0.1, 1),
whose value is the midpoint of the interval the route ends in. So a code is +-10^-n (0.1 + 0.9 (f + 1/2) / 2^(6-n))
for the 6 - n bits f, 127 magnitudes from 5.5e-7 to 0.993 (the same table as bitsandbytes' create_dynamic_map,
Dettmers' later library), and the all-zero code (either sign) is 0. This is the paper's text; its own CUDA code
(github.com/TimDettmers/clusterNet, source/8bit_floats.hdf5, and GRACE's u8bit.py copy of its table) encodes with a
126-value table that does not follow that construction.

Wire format: 8 bits per element, the code above, plus one float32 scale per tensor (the paper exchanges the
matrix's maximum beside its codes). No error feedback by default (the paper has none); ``memory="residual"`` adds
it. Collective: a same-size all-gather (codes of different workers' scales do not add); each worker decodes every
payload and adds them in rank order.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..codecs.bits import as_bytes, from_bytes
from ..kit import Compressor, KitMethod, Memory, Residual
from .qcommon import mean_in_rank_order

MEMORIES = {"none": Memory, "residual": Residual}


@dataclass(frozen=True)
class U8bitParams:
    memory: str = "none"  # "none" (the paper) or "residual" (error feedback)

    def __post_init__(self):
        if self.memory not in MEMORIES:
            raise ValueError(f"memory must be one of {', '.join(MEMORIES)}, got {self.memory!r}")


def dynamic_tree() -> torch.Tensor:
    """The 128 magnitudes of the 7 bits after the sign, indexed by those bits (float64): 0 for 0000000; for n
    leading zeros, the flag, and f in the 6 - n bits after it, 10^-n times the midpoint of the bisection interval f
    of (0.1, 1). Increasing in the code, so the nearest code is a search in this table."""
    values = [0.0]
    for code in range(1, 128):
        bits = code.bit_length() - 1  # the bits after the flag: 6 - n
        n, f = 6 - bits, code - (1 << bits)
        values.append(10.0 ** -n * (0.1 + 0.9 * (f + 0.5) / (1 << bits)))
    return torch.tensor(values, dtype=torch.float64)


def nearest(table: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The code (uint8, 0 .. 127) of the table value nearest each y in [0, 1] (ties: the smaller). The decade
    n = floor(-log10 y) and the bisection interval f containing y name a code whose value is that interval's
    midpoint; the nearest value is it or a neighbour (across a decade's edge, or where log10 rounds)."""
    n = torch.floor(-torch.log10(y)).clamp_(0, 6)  # y = 0: the smallest decade, then code 1 or 0
    width = torch.exp2(6 - n)  # 2^(6 - n) intervals in the decade
    f = torch.floor((y * torch.pow(10.0, n) - 0.1) / 0.9 * width).clamp_(min=0)
    best = (width + torch.minimum(f, width - 1)).to(torch.int64)
    error = (table[best] - y).abs_()
    for other in ((best - 1).clamp_(min=0), (best + 1).clamp_(max=127)):
        off = (table[other] - y).abs_()
        closer = (off < error) | ((off == error) & (other < best))  # of equals, the smaller code
        best, error = torch.where(closer, other, best), torch.where(closer, off, error)
    return best.to(torch.uint8)


class DynamicTreeCompressor(Compressor):
    """Per tensor its largest magnitude (float32), then one dynamic-tree code per element."""

    claims = {"bytes": "8 bits per element (and the matrix's maximum)"}

    def __init__(self, params, shapes, device="cpu"):
        super().__init__(params, shapes, device)
        self.table = dynamic_tree().to(torch.float32)

    def _table(self, device) -> torch.Tensor:
        if self.table.device != device:
            self.table = self.table.to(device)
        return self.table

    def encode(self, group, flat, local, shared, sender):
        sizes = torch.tensor(group.sizes, device=flat.device)
        scales = torch.stack([part.abs().max() if part.numel() else flat.new_zeros(())
                              for part in flat.split(group.sizes)])
        per = torch.repeat_interleave(torch.where(scales > 0, scales, torch.ones_like(scales)), sizes)
        magnitude = nearest(self._table(flat.device), (flat.abs() / per).clamp_(max=1.0))
        return torch.cat([as_bytes(scales.to(torch.float32)), magnitude | ((flat < 0).to(torch.uint8) << 7)])

    def payload_bytes(self, group, sent=None):
        """A float32 scale per tensor, a byte per element."""
        return 4 * len(group.sizes) + group.numel

    def decode(self, group, payloads, shared):
        return mean_in_rank_order(payloads, lambda p: self._values(group, p), group.workers)

    def _values(self, group, payload) -> torch.Tensor:
        k = len(group.sizes)
        scales = from_bytes(payload[:4 * k], torch.float32)
        codes = payload[4 * k:]
        value = self._table(payload.device)[(codes & 0x7F).long()]
        value = torch.where(codes >= 0x80, -value, value)
        return value.mul_(torch.repeat_interleave(scales, torch.tensor(group.sizes, device=payload.device)))


class U8bit(KitMethod):
    name = "u8bit"
    Params, compressor = U8bitParams, DynamicTreeCompressor
    param_sources = {"memory": "Dettmers Sec. 3: the 8-bit values are exchanged as they are (no error feedback)"}

    @classmethod
    def memory_for(cls, params):
        return MEMORIES[params.memory]
