"""The threshold methods' codecs in fused passes: what a worker sends and what a receiver adds, bit for bit the
bytes of :func:`methods.codecs.sparse.encode` and the sums of :func:`methods.codecs.sparse.add_into`.

The sender's pass accumulates into the float64 residual, selects the elements whose magnitude reaches T, takes
what each sends (WGT its value, BGT sign x T, QGT sign x m x T with m = floor(|G| / T) capped at 255, in float32
as receivers rebuild it), subtracts exactly that from the residual, and writes both layouts' parts at once: the
bitmap (plane-major: element k*m + j is bit k of byte j, so each of the 8 planes is one contiguous run of
elements), and the sent elements' values, codes, signs and multiples in element order. The payload is then cut
from whichever layout is smaller. The receiver's pass adds a payload's values into the float32 total, walking
the bitmap plane by plane, or the sparse codes in order. Compiled by numba; the torch path (``select`` and
:mod:`sparse`) stands in where numba is missing or on CUDA, and computes the same bytes.
"""
from __future__ import annotations

import numpy as np
import torch

from . import sparse
from .jit import cache_ok, numba

KIND_CODE = {"wgt": 0, "bgt": 1, "qgt": 2}


def _compile():
    if numba is None:
        return None, None
    cache = cache_ok(__file__)

    @numba.njit(cache=cache, nogil=True, error_model="numpy")
    def select(acc, contribution, t32, kind, bits, m, values, codes, negative, multiples):
        """One pass over the n elements; returns k, the number sent. ``bits`` (m bytes) must be zeroed."""
        n = acc.size
        t = np.float32(t32)
        t64 = np.float64(t)
        k = 0
        for plane in range(8):
            start = plane * m
            stop = min(start + m, n)
            for i in range(start, stop):
                a = acc[i] + np.float64(contribution[i])
                if abs(a) >= t64:
                    neg = a < 0
                    if kind == 0:
                        v = np.float32(a)
                        codes[k] = np.int32(i)
                    else:
                        if kind == 1:
                            v = -t if neg else t
                        else:
                            q = min(np.floor(abs(a) / t64), 255.0)
                            multiples[k] = np.uint8(q)
                            v = np.float32(q) * (-t if neg else t)
                        codes[k] = np.int32((i << 1) | (1 if neg else 0))
                    values[k] = v
                    negative[k] = neg
                    bits[i - start] |= np.uint8(1 << plane)
                    a = a - np.float64(v)
                    k += 1
                acc[i] = a
        return k

    @numba.njit(cache=cache, nogil=True, error_model="numpy")
    def add(layout, kind, k, body, n, t32, total):
        """total += the payload's values. ``body``: the payload after its header, as bytes."""
        t = np.float32(t32)
        if layout == 0:  # sparse: int32 codes, then WGT's float32 values or QGT's uint8 multiples
            codes = body[:4 * k].view(np.int32)
            if kind == 0:
                vals = body[4 * k:8 * k].view(np.float32)
                for p in range(k):
                    total[codes[p]] += vals[p]
            else:
                for p in range(k):
                    c = codes[p]
                    v = -t if c & 1 else t
                    if kind == 2:
                        v = np.float32(body[4 * k + p]) * v
                    total[c >> 1] += v
            return
        if k == 0:
            return
        m = (n + 7) // 8
        if kind == 0:  # float32 values, then the bitmap
            vals = body[:4 * k].view(np.float32)
            bits = body[4 * k:4 * k + m]
        else:  # the bitmap, the signs' bitmap over the k sent, QGT's multiples
            bits = body[:m]
            mk = (k + 7) // 8
            signs = body[m:m + mk]
            mult = body[m + mk:m + mk + k]
        # branch-free: every element reads a value (the next one to add, or the last one past the end) and keeps
        # its old total where its bit is clear; at a third of the elements sent, a branch per element is
        # mispredicted often enough to make this walk 3x slower (WGT, 4M elements, T = 0.001)
        last = k - 1
        p = 0
        for plane in range(8):
            start = plane * m
            stop = min(start + m, n)
            for i in range(start, stop):
                b = (bits[i - start] >> plane) & 1
                q = p if p < last else last
                if kind == 0:
                    v = vals[q]
                else:
                    v = -t if (signs[q % mk] >> (q // mk)) & 1 else t
                    if kind == 2:
                        v = np.float32(mult[q]) * v
                x = total[i]
                total[i] = x + v if b else x
                p += b

    return select, add


_SELECT, _ADD = _compile()


def select(kind: str, acc: torch.Tensor, threshold: float) -> tuple[sparse.Sent, torch.Tensor]:
    """The rule, with plain torch ops, on an accumulated float64 vector. Returns what is sent and, per sent
    element, the float64 value of the float32 number receivers will add (so the caller can subtract it exactly)."""
    t32 = float(torch.tensor(threshold, dtype=torch.float32))
    mask = acc.abs() >= t32
    indices = mask.nonzero().squeeze(1)
    picked = acc[indices]
    if kind == "wgt":
        sent = sparse.Sent(indices, values=picked.to(torch.float32), mask=mask)
    else:
        negative = picked < 0
        sent = sparse.Sent(indices, negative=negative, mask=mask)
        if kind == "qgt":
            sent.multiples = torch.floor(picked.abs() / t32).clamp_(max=255).to(torch.uint8)
    return sent, sparse.values_of(kind, sent, threshold).double()


def select_into(kind: str, acc: torch.Tensor, contribution: torch.Tensor, threshold: float) -> sparse.Sent:
    """Accumulate ``contribution`` into ``acc`` (float64, in place), select, keep the rest; what is sent (the
    torch path of :func:`encode_into`)."""
    acc += contribution.double()
    sent, values = select(kind, acc, threshold)
    acc[sent.indices] -= values
    return sent


def encode_into(kind: str, acc: torch.Tensor, contribution: torch.Tensor, threshold: float) -> tuple[torch.Tensor, int]:
    """Accumulate, select, keep the rest in ``acc`` and encode: the payload (uint8) and the number sent."""
    n = acc.numel()
    if _SELECT is None or acc.is_cuda:
        sent = select_into(kind, acc, contribution, threshold)
        return sparse.encode(kind, sent, n), sent.indices.numel()
    m = (n + 7) // 8
    bits = np.zeros(m, dtype=np.uint8)
    values = np.empty(n, dtype=np.float32)
    codes = np.empty(n, dtype=np.int32)
    negative = np.empty(n, dtype=np.bool_)
    multiples = np.empty(n if kind == "qgt" else 1, dtype=np.uint8)
    t32 = float(np.float32(threshold))
    k = _SELECT(acc.numpy(), contribution.numpy(), t32, KIND_CODE[kind], bits, m, values, codes, negative, multiples)
    sizes = sparse.body_bytes(kind, n, k)
    layout = sparse.SPARSE if sizes[sparse.SPARSE] <= sizes[sparse.BITMAP] else sparse.BITMAP
    if layout == sparse.SPARSE and n >= 2 ** 31:
        raise ValueError(f"sparse layout holds 31-bit indices; got {n} elements")
    out = np.empty(sparse.HEADER + sizes[layout], dtype=np.uint8)
    out[:sparse.HEADER].view(np.int32)[:] = (layout, k)
    parts: list[np.ndarray]
    if layout == sparse.SPARSE:
        parts = [codes[:k].view(np.uint8)]
        if kind == "wgt":
            parts.append(values[:k].view(np.uint8))
        elif kind == "qgt":
            parts.append(multiples[:k])
    elif kind == "wgt":
        parts = [values[:k].view(np.uint8), bits]
    else:
        parts = [bits, sparse.pack_bits(torch.from_numpy(negative[:k])).numpy()]
        if kind == "qgt":
            parts.append(multiples[:k])
    at = sparse.HEADER
    for part in parts:
        out[at:at + part.size] = part
        at += part.size
    return torch.from_numpy(out), k


def add_into(kind: str, payload: torch.Tensor, n: int, threshold: float, total: torch.Tensor) -> None:
    """total[i] += the value a worker's payload carries for element i (float32), as :func:`sparse.add_into`."""
    if _ADD is None or total.is_cuda:
        sparse.add_into(kind, payload, n, threshold, total)
        return
    raw = payload.numpy()
    layout, k = (int(v) for v in raw[:sparse.HEADER].view(np.int32))
    _ADD(layout, KIND_CODE[kind], k, raw[sparse.HEADER:], n, float(np.float32(threshold)), total.numpy())
