"""TernGrad's ternarization (TernGrad Eq. 1-3 and 21), separate from how the trits are packed."""
from __future__ import annotations

import torch

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


def clip_and_scale(g: torch.Tensor, clip: float, scaler: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradient clipping and the scaler s, as a 0-dim float32 tensor (no host sync).

    ``scaler="max"`` (paper, Eq. 21 then Eq. 1): clip to [-c sigma, c sigma], then s = max|clipped g|.
    ``scaler="std"`` (official code): s = c sigma and no separate clip (elements beyond s become +-s when
    ternarized, which is the same clip). With c = 0 both give s = max|g| and no clipping.
    sigma is the population standard deviation (mean subtracted), as the official code computes it.
    """
    if clip <= 0:
        return g, g.abs().max()
    sigma = g.std(correction=0)
    if scaler == "std":
        return g, clip * sigma
    bound = clip * sigma
    clipped = torch.maximum(torch.minimum(g, bound), -bound)
    return clipped, clipped.abs().max()


def ternarize(g: torch.Tensor, s: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Stochastic ternarization: sign(g) with probability min(|g|/s, 1), else 0 (int8 in {-1, 0, 1}).

    E[s * ternarize(g)] = g wherever |g| <= s (Eq. 3: unbiased). With u ~ U(0, 1): +1 where g > u*s and
    -1 where g < -u*s, which is sign(g) * [u < |g|/s] without dividing by a possibly zero s.
    """
    threshold = torch.rand(g.shape, generator=generator, device=g.device, dtype=g.dtype).mul_(s)
    positive = (g > threshold).view(torch.int8)
    return positive.sub_((g < threshold.neg_()).view(torch.int8))
