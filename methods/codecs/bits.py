"""Bit and trit packing: vectorized tensor ops only, no Python loops over elements."""
from __future__ import annotations

import torch

_SHIFTS = (0, 1, 2, 3, 4, 5, 6, 7)
_BIT_LUT: dict[torch.device, torch.Tensor] = {}
_TRIT2_LUT: dict[torch.device, torch.Tensor] = {}
_TRIT3_LUT: dict[torch.device, torch.Tensor] = {}


def _lut(cache: dict, device: torch.device, build) -> torch.Tensor:
    if device not in cache:
        cache[device] = build().to(device)
    return cache[device]


def pack_bits(mask: torch.Tensor) -> torch.Tensor:
    """bool (n,) -> uint8 (ceil(n/8),); element j is bit j%8 of byte j//8."""
    n = mask.numel()
    bits = torch.zeros(((n + 7) // 8) * 8, dtype=torch.uint8, device=mask.device)
    bits[:n] = mask.reshape(-1)
    bits = bits.view(-1, 8)
    out = bits[:, 0].clone()
    for s in _SHIFTS[1:]:
        out |= bits[:, s] << s
    return out


def unpack_bits(packed: torch.Tensor, n: int) -> torch.Tensor:
    """uint8 (ceil(n/8),) -> bool (n,)."""
    lut = _lut(_BIT_LUT, packed.device,
               lambda: ((torch.arange(256)[:, None] >> torch.arange(8)) & 1).bool())
    return lut[packed.long()].reshape(-1)[:n]


def pack_trits_2bit(trits: torch.Tensor) -> torch.Tensor:
    """int8 in {-1,0,1} (n,) -> uint8 (ceil(n/4),), 4 trits a byte as TernGrad's ternary_encoder lays them
    out: the vector is cut into 4 contiguous quarters and byte j holds element j of each quarter."""
    n = trits.numel()
    m = (n + 3) // 4
    codes = torch.ones(4 * m, dtype=torch.uint8, device=trits.device)  # padding decodes to 0
    codes[:n] = (trits.reshape(-1) + 1).to(torch.uint8)
    q = codes.view(4, m)
    return q[0] | (q[1] << 2) | (q[2] << 4) | (q[3] << 6)


def unpack_trits_2bit(packed: torch.Tensor, n: int) -> torch.Tensor:
    lut = _lut(_TRIT2_LUT, packed.device,
               lambda: (((torch.arange(256)[:, None] >> (2 * torch.arange(4))) & 3) - 1).to(torch.int8))
    return lut[packed.long()].t().reshape(-1)[:n]


def pack_trits_base3(trits: torch.Tensor) -> torch.Tensor:
    """int8 in {-1,0,1} (n,) -> uint8 (ceil(n/5),): 5 trits a byte as a base-3 number (max 242), 1.6 bits
    per element against the log2(3) = 1.585 bound. Same quarter-style layout: 5 contiguous fifths."""
    n = trits.numel()
    m = (n + 4) // 5
    codes = torch.ones(5 * m, dtype=torch.uint8, device=trits.device)
    codes[:n] = (trits.reshape(-1) + 1).to(torch.uint8)
    q = codes.view(5, m)
    return q[0] + q[1] * 3 + q[2] * 9 + q[3] * 27 + q[4] * 81


def unpack_trits_base3(packed: torch.Tensor, n: int) -> torch.Tensor:
    def build():
        v = torch.arange(256)[:, None] // (3 ** torch.arange(5)) % 3 - 1
        return v.to(torch.int8)

    lut = _lut(_TRIT3_LUT, packed.device, build)
    return lut[packed.long()].t().reshape(-1)[:n]


TRIT_PACKINGS = {
    "2bit": (pack_trits_2bit, unpack_trits_2bit, lambda n: (n + 3) // 4),
    "base3": (pack_trits_base3, unpack_trits_base3, lambda n: (n + 4) // 5),
}


def as_bytes(t: torch.Tensor) -> torch.Tensor:
    """A contiguous tensor's raw bytes as uint8 (no copy)."""
    return t.contiguous().reshape(-1).view(torch.uint8)


def from_bytes(b: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Inverse of :func:`as_bytes`; copies when the slice is not aligned for ``dtype``."""
    width = torch.empty(0, dtype=dtype).element_size()
    if b.storage_offset() % width:
        b = b.clone()
    return b.view(dtype)
