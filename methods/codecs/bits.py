"""Bit and trit packing: vectorized tensor ops only, no Python loops over elements."""
from __future__ import annotations

import torch

_TRIT3_LUT: dict[torch.device, torch.Tensor] = {}


def _lut(cache: dict, device: torch.device, build) -> torch.Tensor:
    if device not in cache:
        cache[device] = build().to(device)
    return cache[device]


def _planes(packed: torch.Tensor, fields: int, width: int, n: int) -> torch.Tensor:
    """Split each byte into ``fields`` bit fields of ``width`` bits; field k of byte j is element k*m + j.

    Every layout here is plane-major (TernGrad's quarters), so each field fills one contiguous block of the
    output: a few whole-array shifts instead of a gather through an index tensor."""
    m = packed.numel()
    out = torch.empty(fields * m, dtype=torch.uint8, device=packed.device)
    planes = out.view(fields, m)
    mask = (1 << width) - 1
    for k in range(fields):
        torch.bitwise_right_shift(packed, width * k, out=planes[k])
        planes[k].bitwise_and_(mask)
    return out[:n]


def _join(codes: torch.Tensor, fields: int, width: int, fill: int) -> torch.Tensor:
    """Inverse of :func:`_planes` for codes (uint8, each < 2**width), padded with ``fill``."""
    n = codes.numel()
    m = (n + fields - 1) // fields
    padded = torch.full((fields * m,), fill, dtype=torch.uint8, device=codes.device)
    padded[:n] = codes
    planes = padded.view(fields, m)
    out = planes[0].clone()
    for k in range(1, fields):
        out.bitwise_or_(planes[k] << (width * k))
    return out


def pack_bits(mask: torch.Tensor) -> torch.Tensor:
    """bool (n,) -> uint8 (ceil(n/8),); element k*m + j is bit k of byte j (m = ceil(n/8))."""
    return _join(mask.reshape(-1).view(torch.uint8), 8, 1, 0)


def unpack_bits(packed: torch.Tensor, n: int) -> torch.Tensor:
    """uint8 (ceil(n/8),) -> bool (n,)."""
    return _planes(packed, 8, 1, n).view(torch.bool)


def pack_trits_2bit(trits: torch.Tensor) -> torch.Tensor:
    """int8 in {-1,0,1} (n,) -> uint8 (ceil(n/4),), 4 trits a byte as TernGrad's ternary_encoder lays them
    out: the vector is cut into 4 contiguous quarters and byte j holds element j of each quarter."""
    return _join((trits.reshape(-1) + 1).view(torch.uint8), 4, 2, 1)


def unpack_trits_2bit(packed: torch.Tensor, n: int) -> torch.Tensor:
    out = _planes(packed, 4, 2, n).view(torch.int8)
    return out.sub_(1)


def pack_trits_base3(trits: torch.Tensor) -> torch.Tensor:
    """int8 in {-1,0,1} (n,) -> uint8 (ceil(n/5),): 5 trits a byte as a base-3 number (max 242), 1.6 bits
    per element against the log2(3) = 1.585 bound. Same plane-major layout: 5 contiguous fifths."""
    n = trits.numel()
    m = (n + 4) // 5
    codes = torch.ones(5 * m, dtype=torch.uint8, device=trits.device)  # padding decodes to 0
    codes[:n] = trits.reshape(-1).view(torch.uint8)
    codes[:n] += 1  # -1 wraps to 0 in uint8: codes 0, 1, 2
    q = codes.view(5, m)
    out = q[4].clone()
    for k in (3, 2, 1, 0):  # Horner, in place: ((q4 * 3 + q3) * 3 + ...) + q0
        out.mul_(3).add_(q[k])
    return out


def unpack_trits_base3(packed: torch.Tensor, n: int) -> torch.Tensor:
    lut = _lut(_TRIT3_LUT, packed.device,
               lambda: (torch.arange(256)[None, :] // (3 ** torch.arange(5))[:, None] % 3 - 1).to(torch.int8))
    m = packed.numel()
    index = packed.to(torch.int32)
    out = torch.empty(5 * m, dtype=torch.int8, device=packed.device)
    planes = out.view(5, m)
    for k in range(5):  # digit k of every byte, by one table lookup into a contiguous plane
        torch.index_select(lut[k], 0, index, out=planes[k])
    return out[:n]


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


def level_bits(workers: int) -> int:
    """Bits for one element of a sum of ``workers`` trits: 2N + 1 levels need ceil(log2(2N + 1)) bits."""
    return (2 * workers).bit_length()


def pack_uint(values: torch.Tensor, width: int) -> torch.Tensor:
    """Non-negative integers below 2**width (n,) -> uint8 (ceil(n * width / 8),): the stream of bit planes
    (bit 0 of every element, then bit 1, ...) in :func:`pack_bits`' layout. Any width, so 17 levels take
    5 bits, not 8; each plane is whole-array shifts over uint8 (int16 above 8 bits)."""
    small = torch.uint8 if width <= 8 else torch.int16
    v = values.reshape(-1).to(small)
    planes = torch.empty((width, v.numel()), dtype=small, device=values.device)
    for b in range(width):
        torch.bitwise_right_shift(v, b, out=planes[b])
        planes[b].bitwise_and_(1)
    bits = planes if small == torch.uint8 else planes.to(torch.uint8)
    return pack_bits(bits.view(torch.bool).reshape(-1))


def unpack_uint(packed: torch.Tensor, n: int, width: int) -> torch.Tensor:
    """Inverse of :func:`pack_uint`: uint8 (width <= 8) or int16 (n,)."""
    small = torch.uint8 if width <= 8 else torch.int16
    planes = unpack_bits(packed, n * width).view(width, n)
    out = planes[0].to(small)
    for b in range(1, width):
        out.bitwise_or_(planes[b].to(small) << b)
    return out
