"""Natural compression (Horvath et al., 2019, "Natural Compression for Distributed Deep Learning"), C_nat.

Algorithm: each float32 t != 0, with 2^a <= |t| < 2^(a+1), becomes sign(t) * 2^a with probability
(2^(a+1) - |t|) / 2^a and sign(t) * 2^(a+1) otherwise: stochastic rounding to one of the two nearest powers of
two, unbiased, with E[C(t)^2] <= 9/8 t^2 (omega = 1/8). On the float32 bits: the probability of rounding up is the
mantissa m / 2^23, so the exponent field is raised by one where a uniform integer in [0, 2^23) (the worker's own
stream) is below m, and the mantissa is dropped. Zero stays zero; a subnormal rounds to 0 or 2^-126 by the same
rule (exponent field 0 is zero), still unbiased.

Wire format: the paper's 9 bits per element, sign and 8-bit exponent: the exponent fields as one uint8 each, then
the signs packed 8 to a byte (n + ceil(n / 8) bytes). GRACE instead packs both into 8 bits by clipping the exponent
to 2^-110 .. 2^17 (grace_dl/dist/compressor/natural.py), which biases values outside that range; the 9-bit form is
the paper's and unbiased over all of float32 (only the overflow of 2^127 to infinity is not).

No error feedback (the paper uses C_nat as an unbiased compressor). Collective: a same-size all-gather; every
worker decodes the payloads to float32 and adds them in rank order (the paper's in-network sum is of the same
values).
"""
from __future__ import annotations

import torch

from ..base import NoParams
from ..codecs.bits import pack_bits, unpack_bits
from ..kit import Compressor, KitMethod
from .qcommon import draws, mean_in_rank_order

MANTISSA = 23


class NaturalCompressor(Compressor):
    """Per element its rounded exponent field (uint8), then the signs packed 8 to a byte: 9 bits per element."""

    unbiased = "the input"
    claims = {"unbiased": "C_nat is unbiased: E[C_nat(t)] = t",
              "variance": "C_nat's variance: E[C_nat(t)^2] <= 9/8 t^2 (omega = 1/8)",
              "bytes": "sign and exponent: 9 bits per element instead of 32"}

    def encode(self, group, flat, local, shared, sender):
        bits = flat.contiguous().view(torch.int32)
        exponent = (bits >> MANTISSA) & 0xFF
        mantissa = bits & ((1 << MANTISSA) - 1)
        threshold = draws(group, sender.seed, flat.device,
                          lambda n, g: torch.randint(0, 1 << MANTISSA, (n,), generator=g, dtype=torch.int32))
        # up with probability m / 2^23 = (|t| - 2^a) / 2^a; the field saturates at 255 (infinity)
        exponent = (exponent + (threshold < mantissa).to(torch.int32)).clamp_(max=0xFF)
        return torch.cat([exponent.to(torch.uint8), pack_bits(flat < 0)])

    def payload_bytes(self, group, sent=None):
        """One exponent byte per element and one sign bit, packed 8 to a byte."""
        return group.numel + -(-group.numel // 8)

    def decode(self, group, payloads, shared):
        return mean_in_rank_order(payloads, lambda p: self._values(group.numel, p), group.workers)

    @staticmethod
    def _values(n: int, payload: torch.Tensor) -> torch.Tensor:
        exponent = payload[:n].to(torch.int32)
        negative = unpack_bits(payload[n:], n).to(torch.int32)
        return ((negative << 31) | (exponent << MANTISSA)).view(torch.float32)  # +-2^(e - 127), or +-0


class Natural(KitMethod):
    name = "natural"
    Params, compressor = NoParams, NaturalCompressor
