"""The threshold methods' codecs in fused passes: what a worker sends and what a receiver adds, bit for bit
the bytes of :func:`commbench.methods.codecs.sparse.encode` and the sums of
:func:`commbench.methods.codecs.sparse.add_into`.

The sender's pass accumulates into the float64 residual, selects the elements whose magnitude reaches T, takes
what each sends (WGT its value, BGT sign x T, QGT sign x m x T with m = floor(|G| / T) capped at 255, in float32
as receivers rebuild it), subtracts exactly that from the residual, and writes both layouts' parts at once: the
bitmap (plane-major: element k*m + j is bit k of byte j, so each of the 8 planes is one contiguous run of
elements), and the sent elements' values, codes, signs and multiples in element order. The payload is then cut
from whichever layout is smaller. The receiver adds a payload's values into the float32 total: the sparse codes
in order, or the bitmap plane by plane, a chunk at a time as the sender (the chunk's flags, each sent element's
value in order, then a vector add where one was sent). Compiled by numba; the torch path (``select`` and
:mod:`sparse`) stands in where numba is missing or on CUDA, and computes the same bytes.
"""
from __future__ import annotations

import threading

import numpy as np
import torch

from . import sparse
from .jit import cache_ok, called_by_kernels, numba

KIND_CODE = {"wgt": 0, "bgt": 1, "qgt": 2}
# Elements are taken a chunk at a time (it stays in the L1 cache): first the passes with no dependence between
# elements, which the compiler turns into vector instructions (accumulate, compare, QGT's multiple, the bitmap),
# then the one serial part, the compaction of what is sent, over the chunk's flags: it writes every element at
# the running count (overwritten by the next one where nothing is sent: a branch per element is mispredicted
# once in three at a third sent) and skips eight elements at a time where none is sent. The vector loops take
# slices indexed by their own counter (an offset index makes numba check each for wrap-around, and the loop
# stays scalar) and touch few arrays (the compiler checks each pair for overlap at run time, up to a limit).
CHUNK = 2048


# The kernels, defined only where numba imports (else the torch path stands in): module-level functions, so that
# each is compiled once per process, or loaded from numba's cache, at its first call.
if numba is not None:
    _jit = numba.njit(cache=cache_ok(__file__), nogil=True, error_model="numpy")
    # compiled into the sender's and the receiver's kernels, so that numba's cache serves those in every process
    _inlined = called_by_kernels()

    # The vector passes: accumulate, compare, and subtract from the residual what each sent element carries; per
    # element a flag (0: kept; else 1, plus 2 where negative) and WGT's float32 value or QGT's multiple
    @_inlined
    def _accumulate_values(acc, contribution, t64, sent, value):
        count = 0
        for c in range(acc.size):
            a = acc[c] + np.float64(contribution[c])
            s = abs(a) >= t64
            v = np.float32(a)
            value[c] = v
            acc[c] = a - np.float64(v) if s else a
            sent[c] = s
            count += s
        return count

    @_inlined
    def _accumulate_signs(acc, contribution, t, sent):
        t64 = np.float64(t)
        count = 0
        for c in range(acc.size):
            a = acc[c] + np.float64(contribution[c])
            s = abs(a) >= t64
            neg = a < 0
            acc[c] = a - np.float64(-t if neg else t) if s else a
            sent[c] = np.uint8(1 | (2 if neg else 0)) if s else np.uint8(0)
            count += s
        return count

    @_inlined
    def _accumulate_multiples(acc, contribution, t, sent, multiple):
        t64 = np.float64(t)
        count = 0
        for c in range(acc.size):
            a = acc[c] + np.float64(contribution[c])
            s = abs(a) >= t64
            neg = a < 0
            q = min(np.floor(abs(a) / t64), 255.0)
            multiple[c] = np.uint8(q)
            acc[c] = a - np.float64(np.float32(q) * (-t if neg else t)) if s else a
            sent[c] = np.uint8(1 | (2 if neg else 0)) if s else np.uint8(0)
            count += s
        return count

    @_inlined
    def _mark(bits, sent, plane):
        for c in range(bits.size):
            bits[c] |= (sent[c] & 1) << plane

    # The serial pass: each sent element to the running count (as an unsigned number, which numba does not check
    # for wrap-around), in a loop per kind. No select here: the compiler makes a branch of a select on a loaded
    # flag, mispredicted once in three at a third sent. A chunk with few sent skips eight elements at a time where
    # none is; a dense one runs the plain loop.
    @_inlined
    def _compact_values(sent, flags, value, lo, k, values, codes, dense):
        at = numba.uint64(k)
        if dense:
            for c in range(sent.size):
                values[at] = value[c]
                codes[at] = np.int32(lo + c)
                at += numba.uint64(sent[c])
            return np.int64(at)
        words = sent.size >> 3
        for w in range(words + 1):
            if w < words and flags[w] == 0:
                continue
            for c in range(w << 3, min((w << 3) + 8, sent.size)):
                values[at] = value[c]
                codes[at] = np.int32(lo + c)
                at += numba.uint64(sent[c])
        return np.int64(at)

    @_inlined
    def _compact_signs(sent, flags, multiple, lo, k, codes, negative, multiples, with_multiples, dense):
        at = numba.uint64(k)
        if dense:
            for c in range(sent.size):
                f = sent[c]
                negative[at] = f >> 1
                codes[at] = np.int32(((lo + c) << 1) | (f >> 1))
                if with_multiples:
                    multiples[at] = multiple[c]
                at += numba.uint64(f & 1)
            return np.int64(at)
        words = sent.size >> 3
        for w in range(words + 1):
            if w < words and flags[w] == 0:
                continue
            for c in range(w << 3, min((w << 3) + 8, sent.size)):
                f = sent[c]
                negative[at] = f >> 1
                codes[at] = np.int32(((lo + c) << 1) | (f >> 1))
                if with_multiples:
                    multiples[at] = multiple[c]
                at += numba.uint64(f & 1)
        return np.int64(at)

    @_jit
    def _select_sent(acc, contribution, t32, kind, bits, m, values, codes, negative, multiples):
        """One sweep over the n elements; returns k, the number sent. ``bits`` (m bytes) must be zeroed."""
        n = acc.size
        t = np.float32(t32)
        sent = np.zeros(CHUNK, dtype=np.uint8)
        words = sent.view(np.uint64)
        value = np.zeros(CHUNK, dtype=np.float32)
        multiple = np.zeros(CHUNK, dtype=np.uint8)
        k = 0
        for plane in range(8):
            start = plane * m
            stop = min(start + m, n)
            for lo in range(start, stop, CHUNK):
                hi = min(lo + CHUNK, stop)
                part, flags = acc[lo:hi], sent[:hi - lo]
                if kind == 0:
                    count = _accumulate_values(part, contribution[lo:hi], np.float64(t), flags, value[:hi - lo])
                elif kind == 1:
                    count = _accumulate_signs(part, contribution[lo:hi], t, flags)
                else:
                    count = _accumulate_multiples(part, contribution[lo:hi], t, flags, multiple[:hi - lo])
                if count == 0:
                    continue  # bits are zeroed already
                _mark(bits[lo - start:hi - start], flags, np.uint8(plane))
                dense = count * 16 > hi - lo  # more than one in sixteen: few words of eight are empty
                if kind == 0:
                    k = _compact_values(flags, words, value, lo, k, values, codes, dense)
                else:
                    k = _compact_signs(flags, words, multiple, lo, k, codes, negative, multiples, kind == 2, dense)
        return k

    @_jit
    def _pack_signs(negative, k, out):
        """The k sent elements' signs, plane-major as :func:`sparse.pack_bits` (bit q // mk of byte q % mk)."""
        mk = (k + 7) // 8
        for j in range(mk):
            byte = np.uint8(0)
            for plane in range(8):
                q = plane * mk + j
                if q < k:
                    byte |= np.uint8(negative[q]) << np.uint8(plane)
            out[j] = byte

    @_inlined
    def _flags_of(bits, plane, sent):
        count = 0
        for c in range(bits.size):
            f = (bits[c] >> plane) & 1
            sent[c] = f
            count += f
        return count

    @_inlined
    def _expand(sent, flags, vals, p, value, dense):
        """Each sent element of the chunk gets the next value, from number ``p`` on; returns the next number.
        ``flags``: the chunk buffer behind ``sent``, eight flags a word."""
        at = numba.uint64(p)
        last = numba.uint64(vals.size - 1)
        if dense:
            for c in range(sent.size):
                value[c] = vals[min(at, last)]
                at += numba.uint64(sent[c])
            return np.int64(at)
        words = sent.size >> 3
        for w in range(words + 1):
            if w < words and flags[w] == 0:
                continue
            for c in range(w << 3, min((w << 3) + 8, sent.size)):
                value[c] = vals[min(at, last)]
                at += numba.uint64(sent[c])
        return np.int64(at)

    @_inlined
    def _add_where(total, sent, value):
        for c in range(total.size):  # the element keeps its total where nothing was sent
            x = total[c]
            total[c] = x + value[c] if sent[c] else x

    @_jit
    def _add_payload(layout, kind, k, body, n, t32, total):
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
        else:  # the bitmap, the signs' bitmap over the k sent, QGT's multiples: their values first
            bits = body[:m]
            mk = (k + 7) // 8
            signs = body[m:m + mk]
            vals = np.empty(k, dtype=np.float32)
            for plane in range(8):
                for j in range(min(mk, k - plane * mk)):
                    q = plane * mk + j
                    v = -t if (signs[j] >> plane) & 1 else t
                    if kind == 2:
                        v = np.float32(body[m + mk + q]) * v
                    vals[q] = v
        sent = np.zeros(CHUNK, dtype=np.uint8)
        words = sent.view(np.uint64)
        value = np.zeros(CHUNK, dtype=np.float32)
        p = 0
        for plane in range(8):
            start = plane * m
            stop = min(start + m, n)
            for lo in range(start, stop, CHUNK):
                hi = min(lo + CHUNK, stop)
                flags = sent[:hi - lo]
                count = _flags_of(bits[lo - start:hi - start], np.uint8(plane), flags)
                if count == 0:
                    continue
                p = _expand(flags, words, vals, p, value, count * 16 > hi - lo)
                _add_where(total[lo:hi], flags, value)

    _SELECT, _PACK_SIGNS, _ADD = _select_sent, _pack_signs, _add_payload
else:
    _SELECT = _PACK_SIGNS = _ADD = None


WARM_UP_ELEMENTS = 64


def warm_up(kind: str | None = None) -> None:
    """Compile the sender's and the receiver's kernels (or load them from numba's cache) on a tiny vector, so that
    a timed training loop never pays for it (numba compiles a kernel at its first call). One kind's call compiles
    them for every kind (the kind is an argument, not a type); ``kind`` picks which kind's payload is added back.
    No generator is drawn from and the vectors are the warm-up's own, so a run computes the same numbers with or
    without it. Both layouts are encoded: a dense vector sends in the bitmap layout (BGT's and QGT's sign packing),
    a sparse one in the sparse layout."""
    if _SELECT is None:
        return
    kind = kind or "bgt"
    for dense in (True, False):
        contribution = torch.linspace(-1.0, 1.0, WARM_UP_ELEMENTS, dtype=torch.float32)
        threshold = 0.1 if dense else 0.99
        for name in dict.fromkeys((kind, "bgt")):  # bgt too: its bitmap layout packs signs
            acc = torch.zeros(WARM_UP_ELEMENTS, dtype=torch.float64)
            payload, _ = encode_into(name, acc, contribution, threshold)
            add_into(name, payload, WARM_UP_ELEMENTS, threshold, torch.zeros(WARM_UP_ELEMENTS, dtype=torch.float32))


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


class _Buffers:
    """What the sender's pass writes per sent element, kept between calls: a gradient's worth of fresh pages
    every step costs the kernel's zeroing of them (a third of the pass at a third sent)."""

    def __init__(self, n: int, kind: str):
        self.values = np.empty(n if kind == "wgt" else 1, dtype=np.float32)
        self.codes = np.empty(n, dtype=np.int32)
        self.negative = np.empty(n if kind != "wgt" else 1, dtype=np.bool_)
        self.multiples = np.empty(n if kind == "qgt" else 1, dtype=np.uint8)


_LOCAL = threading.local()  # one set per thread: the buffers are written by the pass, then copied out


def _workspace(n: int, kind: str) -> _Buffers:
    cached = getattr(_LOCAL, "buffers", None)
    if cached is None or cached[0] != (n, kind):
        cached = ((n, kind), _Buffers(n, kind))
        _LOCAL.buffers = cached
    return cached[1]


def encode_into(kind: str, acc: torch.Tensor, contribution: torch.Tensor, threshold: float) -> tuple[torch.Tensor, int]:
    """Accumulate, select, keep the rest in ``acc`` and encode: the payload (uint8) and the number sent."""
    n = acc.numel()
    if _SELECT is None or acc.is_cuda:
        sent = select_into(kind, acc, contribution, threshold)
        return sparse.encode(kind, sent, n), sent.indices.numel()
    m = (n + 7) // 8
    work = _workspace(n, kind)
    bits = np.zeros(m, dtype=np.uint8)
    t32 = float(np.float32(threshold))
    k = _SELECT(acc.numpy(), contribution.numpy(), t32, KIND_CODE[kind], bits, m, work.values, work.codes,
                work.negative, work.multiples)
    sizes = sparse.body_bytes(kind, n, k)
    layout = sparse.SPARSE if sizes[sparse.SPARSE] <= sizes[sparse.BITMAP] else sparse.BITMAP
    if layout == sparse.SPARSE and n >= 2 ** 31:
        raise ValueError(f"sparse layout holds 31-bit indices; got {n} elements")
    out = np.empty(sparse.HEADER + sizes[layout], dtype=np.uint8)
    out[:sparse.HEADER].view(np.int32)[:] = (layout, k)
    parts: list[np.ndarray]
    if layout == sparse.SPARSE:
        parts = [work.codes[:k].view(np.uint8)]
        if kind == "wgt":
            parts.append(work.values[:k].view(np.uint8))
        elif kind == "qgt":
            parts.append(work.multiples[:k])
    elif kind == "wgt":
        parts = [work.values[:k].view(np.uint8), bits]
    else:
        signs = np.empty((k + 7) // 8, dtype=np.uint8)
        _PACK_SIGNS(work.negative, k, signs)
        parts = [bits, signs]
        if kind == "qgt":
            parts.append(work.multiples[:k])
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
