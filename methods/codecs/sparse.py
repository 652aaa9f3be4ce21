"""Wire formats of the threshold methods: which elements were sent and what each carries.

A payload is one uint8 tensor: an 8-byte header (int32 layout, int32 count k), then the body. Two layouts,
whichever is smaller for this payload:

* ``sparse``: per sent element an int32 code ``index << 1 | sign`` (Strom's 31-bit index + sign bit), and
  for WGT a float32 value, for QGT a uint8 multiple of T.
* ``bitmap``: one bit per element saying whether it was sent, then (in element order) float32 values for
  WGT, or a sign bit each plus, for QGT, a uint8 multiple each.

4-byte sections come first so that they stay aligned. The header means a payload is never empty (gloo
hangs on empty tensors) even when nothing is sent.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .bits import as_bytes, from_bytes, pack_bits, unpack_bits

HEADER = 8
SPARSE, BITMAP = 0, 1
KINDS = ("wgt", "bgt", "qgt")


@dataclass
class Sent:
    """What one worker sends: element indices (int64, ascending), and per kind: ``values`` (wgt, float32),
    ``negative`` (bgt/qgt, bool), ``multiples`` (qgt, uint8, 1..255), all in element order."""

    indices: torch.Tensor | None
    values: torch.Tensor | None = None
    negative: torch.Tensor | None = None
    multiples: torch.Tensor | None = None
    mask: torch.Tensor | None = None  # bool (n,), set when decoded from the bitmap layout


def body_bytes(kind: str, n: int, k: int) -> dict[int, int]:
    """Body size of each layout for k of n elements (bytes)."""
    per = {"wgt": 4, "bgt": 0, "qgt": 1}[kind]
    sparse = k * (4 + per)
    bitmap = (n + 7) // 8 + (k * 4 if kind == "wgt" else (k + 7) // 8 + k * per)
    return {SPARSE: sparse, BITMAP: bitmap}


def encode(kind: str, sent: Sent, n: int) -> torch.Tensor:
    k = sent.indices.numel()
    sizes = body_bytes(kind, n, k)
    layout = SPARSE if sizes[SPARSE] <= sizes[BITMAP] else BITMAP
    device = sent.indices.device
    parts = [as_bytes(torch.tensor([layout, k], dtype=torch.int32, device=device))]
    if layout == SPARSE:
        if n >= 2 ** 31:
            raise ValueError(f"sparse layout holds 31-bit indices; got {n} elements")
        if kind == "wgt":
            parts += [as_bytes(sent.indices.to(torch.int32)), as_bytes(sent.values.to(torch.float32))]
        else:
            codes = (sent.indices << 1 | sent.negative.to(torch.int64)).to(torch.int32)
            parts.append(as_bytes(codes))
            if kind == "qgt":
                parts.append(sent.multiples)
    else:
        mask = sent.mask
        if mask is None:
            mask = torch.zeros(n, dtype=torch.bool, device=device)
            mask[sent.indices] = True
        if kind == "wgt":
            parts += [as_bytes(sent.values.to(torch.float32)), pack_bits(mask)]
        else:
            parts += [pack_bits(mask), pack_bits(sent.negative)]
            if kind == "qgt":
                parts.append(sent.multiples)
    payload = torch.cat(parts)
    assert payload.numel() == HEADER + sizes[layout]
    return payload


def decode(kind: str, payload: torch.Tensor, n: int, want_indices: bool = True) -> Sent:
    layout, k = from_bytes(payload[:HEADER], torch.int32).tolist()
    body = payload[HEADER:]
    if layout == SPARSE:
        if kind == "wgt":
            idx = from_bytes(body[:4 * k], torch.int32).long()
            return Sent(idx, values=from_bytes(body[4 * k:8 * k], torch.float32))
        codes = from_bytes(body[:4 * k], torch.int32).long()
        sent = Sent(codes >> 1, negative=(codes & 1).bool())
        if kind == "qgt":
            sent.multiples = body[4 * k:5 * k]
        return sent
    nbits = (n + 7) // 8
    if kind == "wgt":
        values = from_bytes(body[:4 * k], torch.float32)
        mask = unpack_bits(body[4 * k:4 * k + nbits], n)
        return Sent(mask.nonzero().squeeze(1) if want_indices else None, values=values, mask=mask)
    mask = unpack_bits(body[:nbits], n)
    ksign = (k + 7) // 8
    sent = Sent(mask.nonzero().squeeze(1) if want_indices else None, mask=mask,
                negative=unpack_bits(body[nbits:nbits + ksign], k))
    if kind == "qgt":
        sent.multiples = body[nbits + ksign:nbits + ksign + k]
    return sent


def add_into(kind: str, payload: torch.Tensor, n: int, threshold: float, total: torch.Tensor) -> None:
    """total[i] += the value worker sent for element i (float32). The bitmap layout is scattered through
    its mask, so the receiver never builds an index list for a dense payload."""
    sent = decode(kind, payload, n, want_indices=False)  # only bitmap payloads come back with a mask
    values = values_of(kind, sent, threshold)
    if sent.mask is None:
        total.index_add_(0, sent.indices, values)
    elif values.numel():
        # Sent element i carries value number cumsum(mask)[i]; unsent ones point at a zero put in front.
        # A cumsum and one gather: 3x faster on one CPU thread than masked_scatter_ (integer masking of the
        # positions, since multiplying floats by a bool mask is slow).
        position = torch.cumsum(sent.mask, 0, dtype=torch.int32).mul_(sent.mask.view(torch.uint8))
        total += torch.index_select(torch.cat([values.new_zeros(1), values]), 0, position)


def values_of(kind: str, sent: Sent, threshold: float) -> torch.Tensor:
    """The float32 value each sent element stands for on the receiving side."""
    if kind == "wgt":
        return sent.values
    t = torch.tensor(threshold, dtype=torch.float32, device=sent.negative.device)
    signed_t = torch.where(sent.negative, -t, t)
    if kind == "bgt":
        return signed_t
    return sent.multiples.to(torch.float32).mul_(signed_t)


def paper_bytes(kind: str, k: int) -> float:
    """The threshold paper's own accounting (Sec. 3.1): values only, no indices, no container:
    WGT 32 bits, BGT 1 bit, QGT 8 bits per sent element."""
    return k * {"wgt": 4.0, "bgt": 1 / 8, "qgt": 1.0}[kind]
