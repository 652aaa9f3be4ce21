"""Elias recursive (omega) coding of QSGD's levels (Alistarh et al., NeurIPS 2017, Sec. 3.1 "Efficient Coding of
Gradients"; Elias 1975), vectorized: tensor ops only, on the CPU or a GPU, no loop over elements.

Elias(k) of a positive integer k: its binary representation, prefixed by the code of (its length - 1),
recursively, ending with a 0 bit: 1 -> "0", 2 -> "10 0", 16 -> "10 100 10000 0". A vector of signed levels
becomes, for each nonzero level in order, Elias(gap) (the distance from the previous nonzero, the first one's
1-based position), one sign bit (1: negative), Elias(|level|). The stream is padded to whole bytes with 1 bits,
which no code can end in, so the decoder needs no count.

Decoding is sequential by nature (a code's start depends on every code before it). Here every bit position is
decoded as if a record started there (at most five omega groups per code, each read at once from a window as wide
as the largest value's binary), and the records' true starts are the orbit of position 0 under "next record",
found by pointer doubling. Costly next to a fixed width: about 3 s to decode a million levels on one CPU core.
"""
from __future__ import annotations

import torch

from .bits import pack_bits, unpack_bits

GROUPS = 5   # omega groups of a value below 2**32: k, len(k) - 1 <= 31, then 4, 2 at most; one spare
WINDOW = 32  # the widest group a stream may hold (a value's own binary, below 2**32)


def _bit_length(x: torch.Tensor) -> torch.Tensor:
    """Bits of the binary representation of each positive int64 (exact below 2**53)."""
    return torch.frexp(x.double())[1].to(torch.int64)


def _omega_fields(k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(values, widths), each (len(k), GROUPS + 1): Elias(k)'s groups in the order they are written (the shortest
    first) and its closing 0; absent groups have width 0."""
    values, widths, n = [], [], k
    for _ in range(GROUPS):  # N_0 = k, N_{i+1} = len(N_i) - 1, while N_i > 1
        length = _bit_length(n)
        present = n > 1
        values.append(torch.where(present, n, 0))
        widths.append(torch.where(present, length, 0))
        n = torch.where(present, length - 1, n)
    values, widths = values[::-1], widths[::-1]  # the recursion writes the innermost prefix first
    zero = torch.zeros_like(k)
    return torch.stack([*values, zero], 1), torch.stack([*widths, zero + 1], 1)


def encode_levels(level: torch.Tensor) -> torch.Tensor:
    """Signed integer levels (n,) -> uint8 bytes: per nonzero Elias(gap), sign bit, Elias(|level|)."""
    at = torch.nonzero(level).reshape(-1)
    if at.numel() == 0:
        return torch.zeros(0, dtype=torch.uint8, device=level.device)
    gap = torch.diff(at, prepend=at.new_full((1,), -1))
    nonzero = level[at].to(torch.int64)
    gv, gw = _omega_fields(gap)
    lv, lw = _omega_fields(nonzero.abs())
    sign = (nonzero < 0).to(torch.int64)[:, None]
    values = torch.cat([gv, sign, lv], 1).reshape(-1)
    widths = torch.cat([gw, torch.ones_like(sign), lw], 1).reshape(-1)
    return pack_bits(_write(values, widths).bool())


def _write(values: torch.Tensor, widths: torch.Tensor) -> torch.Tensor:
    """The fields' bits, most significant first, one after another, padded with 1s to whole bytes (uint8 0/1)."""
    ends = widths.cumsum(0)
    total = int(ends[-1])
    field = torch.repeat_interleave(torch.arange(widths.numel(), device=values.device), widths)  # each bit's field
    below = ends[field] - 1 - torch.arange(total, device=values.device)  # its place value within the field
    bits = torch.ones(-(-total // 8) * 8, dtype=torch.uint8, device=values.device)
    bits[:total] = ((values[field] >> below) & 1).to(torch.uint8)
    return bits


def decode_levels(payload: torch.Tensor, n: int, largest: int) -> torch.Tensor:
    """Inverse of :func:`encode_levels`: the signed levels (n,) as int32. ``largest``: the largest |level| the
    stream can hold (it and n bound the widest group the decoder must read)."""
    length, device = 8 * payload.numel(), payload.device
    bits = torch.cat([unpack_bits(payload, length).to(torch.int32),
                      torch.ones(WINDOW + 2, dtype=torch.int32, device=device)])  # reads past the end: 1s
    value, end, ok = _omega_everywhere(bits, length, max(2, int(n).bit_length(), int(largest).bit_length()))
    at = _record_starts(end, ok, length)
    gap_end = end[at]
    gap, negative, level = value[at], bits[gap_end], value[gap_end + 1]
    place = gap.to(torch.int64).cumsum(0) - 1
    if place.numel() and int(place[-1]) >= n:
        raise ValueError(f"Elias stream decodes past the end of its {n} levels")
    out = torch.zeros(n, dtype=torch.int32, device=device)
    out[place] = torch.where(negative == 1, -level, level)
    return out


def _omega_everywhere(bits: torch.Tensor, length: int, width: int):
    """Elias decoded from every position p in [0, length + 2), as if a code started there: (value, end: the
    position after the code, ok: a complete code within the stream's ``length`` bits), int32 and bool. ``width``:
    the widest group a code of the stream can have (the bits of its largest value, a gap or a level)."""
    size, device = length + 2, bits.device
    window = torch.zeros(size, dtype=torch.int32, device=device)
    for i in range(width):  # window[p]: bits p .. p + width - 1, the first most significant
        window.mul_(2).add_(bits[i:i + size])
    value = torch.ones(size, dtype=torch.int32, device=device)
    end = torch.zeros(size, dtype=torch.int32, device=device)
    ok = torch.zeros(size, dtype=torch.bool, device=device)
    start = torch.arange(size, dtype=torch.int32, device=device)
    pos, n = start.clone(), value.clone()  # the codes still being read: where each started, is, and its n
    for _ in range(GROUPS + 1):
        closes = bits[pos] == 0  # a 0 where a group could start closes the code: its value is n
        done = start[closes].long()
        value[done], end[done], ok[done] = n[closes], pos[closes] + 1, True
        k = n + 1  # a 1 starts the next group: the binary of the next n, n + 1 bits from here
        reads = ~closes & (k <= width) & (pos + k <= length)  # the others run past the stream: no code there
        start, pos, n, k = start[reads], pos[reads], n[reads], k[reads]
        if start.numel() == 0:
            break
        n = window[pos.long()] >> (width - k)
        pos = pos + k
    return value, end, ok


def _record_starts(end: torch.Tensor, ok: torch.Tensor, length: int) -> torch.Tensor:
    """The positions where the stream's records start, in order: the orbit of position 0 under "the record that
    would start here ends there", found by pointer doubling (``length``: a sentinel, no record)."""
    p = torch.arange(length + 1, device=end.device)
    gap_end = end[p].long()
    level_at = (gap_end + 1).clamp(max=length + 1)
    whole = ok[p] & (gap_end < length) & ok[level_at]  # a gap code, its sign bit, a level code
    jump = torch.where(whole, end[level_at].long(), length)
    reached = torch.zeros(length + 1, dtype=torch.int32, device=end.device)
    reached[0] = 1
    for _ in range(max(1, (length + 1).bit_length())):  # after r rounds: next^i(0) for every i < 2**r
        reached.index_put_((jump,), reached.clone(), accumulate=True)
        reached.clamp_(max=1)
        jump = jump[jump]
    return torch.nonzero((reached > 0) & whole).reshape(-1)
