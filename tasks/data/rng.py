"""Counter-based randomness for data: every random number is a pure function of integers.

A sample's augmentation draws depend only on (seed, step, sample index, draw number), never on which process,
which loader worker or how many of either computed it, nor on what was drawn before. So a sim run and a dist
run of one configuration see bit-identical inputs, a DataLoader with 0 or 8 workers produces the same batches,
and a run restarted at step s reproduces step s's inputs without replaying steps 0..s-1.

The hash is SplitMix64 (Steele, Lea and Flood 2014; the finaliser of Java's SplittableRandom): a key is
folded from the integers, and draw j of a key is ``fmix(key + (j + 1) * GOLDEN)``, the key's SplitMix64
stream. The top 53 bits of a draw make a float64 uniform in [0, 1).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
_M1, _M2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
AUGMENT_TAG = 0x617567  # "aug": keeps augmentation keys apart from other uses of the same seed


def _fmix(z: int) -> int:
    z = ((z ^ (z >> 30)) * _M1) & MASK
    z = ((z ^ (z >> 27)) * _M2) & MASK
    return z ^ (z >> 31)


def mix_seed(*parts: int) -> int:
    """A well-mixed 63-bit seed from integers (any sign, any size), e.g. for ``torch.Generator.manual_seed``."""
    h = 0
    for p in parts:
        h = _fmix(((h ^ (int(p) & MASK)) + GOLDEN) & MASK)
    return h >> 1


def _fmix_np(z: np.ndarray) -> np.ndarray:
    z = (z ^ (z >> np.uint64(30))) * np.uint64(_M1)  # uint64 array arithmetic wraps modulo 2**64
    z = (z ^ (z >> np.uint64(27))) * np.uint64(_M2)
    return z ^ (z >> np.uint64(31))


def sample_uniforms(seed: int, step: int, indices: Sequence[int] | torch.Tensor | np.ndarray,
                    draws: int) -> torch.Tensor:
    """``[len(indices), draws]`` float64 uniforms in [0, 1): row i depends on (seed, step, indices[i]) only."""
    key = mix_seed(AUGMENT_TAG, seed, step)
    if isinstance(indices, torch.Tensor):
        indices = indices.numpy()
    idx = np.asarray(indices, dtype=np.int64).reshape(-1).astype(np.uint64)
    state = _fmix_np((idx ^ np.uint64(key)) + np.uint64(GOLDEN))  # one SplitMix64 key per sample
    counters = np.arange(1, draws + 1, dtype=np.uint64) * np.uint64(GOLDEN)
    z = _fmix_np(state[:, None] + counters[None, :])
    return torch.from_numpy((z >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53)))
