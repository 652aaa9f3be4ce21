"""Seeds of TernGrad's random streams. The ternarization itself (Eq. 1-3 and 21) is the fused codec,
:mod:`commbench.methods.codecs.fused_ternary`, whose plain torch path is its reference."""
from __future__ import annotations


MASK64 = (1 << 64) - 1


def mix_seed(*parts: int) -> int:
    """splitmix64 over integers: an independent random stream per (worker seed, step, tensor), so that
    every transport and the DDP hook draw the same Bernoulli variables for the same tensor."""
    x = 0x9E3779B97F4A7C15
    for p in parts:
        x = (x ^ (p & MASK64)) & MASK64
        x = (x + 0x9E3779B97F4A7C15) & MASK64
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
        x ^= x >> 31
    return x >> 1
