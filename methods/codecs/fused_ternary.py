"""TernGrad's codec as fused single passes over memory: one pass for the statistics (sigma, max|g|), one for
clip + Bernoulli ternarization + packing, one for unpack + scale + average over the workers.

The Bernoulli variables come from a counter-based generator: the uniform of element i of tensor j at step t of
a worker with seed s is a hash of (key(s, t, j), i), so any process, any bucket layout and the DDP hook draw
exactly the same variables, with no generator state to carry or reseed. The hash is 32-bit (Wellons'
``lowbias32`` of i * 0x9E3779B9 + key, mod 2^32), so that the loops vectorize; its top 24 bits make the
uniform u = bits * 2^-24 in [0, 1).

Kernels are compiled by numba (no compiler needed at run time) for CPU tensors; a plain torch path computes the
same numbers for CUDA tensors (and where numba is missing). The layout of the packed bytes is the one of
:mod:`commbench.methods.codecs.bits` (plane-major: byte j holds element k*m + j of each quarter, or fifth).
"""
from __future__ import annotations

import numpy as np
import torch

from .jit import cache_ok, called_by_kernels, numba

SCALE24 = np.float32(2.0 ** -24)
PACKINGS = ("2bit", "base3")


# -- statistics and the scaler (Eq. 21, Eq. 1) -----------------------------------------------------------------
def scalers(flat: torch.Tensor, offsets: np.ndarray, clip: float, scaler: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Per segment (``offsets``: boundaries into ``flat``): the clipping bound b and the scaler s, float32.

    ``scaler="max"`` (paper): b = c sigma, s = max|clamp(g, -b, b)| = min(max|g|, b). ``"std"`` (official code):
    s = b = c sigma. With c = 0: no clipping, s = max|g|. sigma is the population standard deviation (mean
    subtracted), accumulated in one pass: blocks of float32 lanes folded into float64 (the kernel), float64 (torch)."""
    segments = offsets.size - 1
    stats = np.zeros((segments, 3), dtype=np.float64)
    if flat.is_cuda or _KERNELS is None:
        for t in range(segments):
            seg = flat[offsets[t]:offsets[t + 1]].double()
            stats[t] = [seg.sum().item(), (seg * seg).sum().item(), seg.abs().max().item() if seg.numel() else 0.0]
    else:
        g = flat.numpy()
        for t in range(segments):
            total, squares, peak = _KERNELS["stats"](g[offsets[t]:offsets[t + 1]])
            stats[t] = [total, squares, np.uint32(peak).view(np.float32)]
    n = np.diff(offsets).astype(np.float64)
    mean = stats[:, 0] / np.maximum(n, 1)
    sigma = np.sqrt(np.maximum(stats[:, 1] / np.maximum(n, 1) - mean * mean, 0.0))
    peak = stats[:, 2]
    if clip <= 0:
        bound, s = np.full(segments, np.inf), peak
    elif scaler == "std":
        bound = s = clip * sigma
    else:
        bound = clip * sigma
        s = np.minimum(peak, bound)
    return torch.from_numpy(bound.astype(np.float32)), torch.from_numpy(s.astype(np.float32))


# -- the counter-based uniforms ------------------------------------------------------------------------------
GOLDEN32, H1, H2, MASK32 = 0x9E3779B9, 0x7FEB352D, 0x846CA68B, 0xFFFFFFFF


def key32(key: int) -> int:
    """A tensor stream's 32-bit key from its 63-bit seed (:func:`commbench.methods.codecs.ternary.mix_seed`)."""
    return (key ^ (key >> 32)) & MASK32


def uniforms(key: int, count: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """The first ``count`` uniforms of stream ``key`` (float32) with plain torch ops: the reference for the
    kernels and the path for CUDA. int64 holds the 32-bit arithmetic; products are masked back to 32 bits."""
    x = (torch.arange(count, dtype=torch.int64, device=device) * GOLDEN32 + key32(key)) & MASK32
    x = ((x ^ (x >> 16)) * H1) & MASK32
    x = ((x ^ (x >> 15)) * H2) & MASK32
    x = x ^ (x >> 16)
    return (x >> 8).to(torch.float32) * float(SCALE24)


# -- encode ----------------------------------------------------------------------------------------------------
def encode(flat: torch.Tensor, offsets: np.ndarray, bounds: torch.Tensor, scales: torch.Tensor, keys: list[int],
           packing: str, count: int | None = None) -> tuple[torch.Tensor, np.ndarray]:
    """Clip, ternarize (sign(v) with probability |v| / s) and pack a worker's concatenated float32 gradient:
    segment t = elements offsets[t]..offsets[t+1] of tensor stream keys[t], bound bounds[t], scaler scales[t].
    Returns the packed bytes and, per segment, its number of zero trits if it is segment ``count`` (else 0)."""
    n = flat.numel()
    fields = 4 if packing == "2bit" else 5
    m = (n + fields - 1) // fields
    if flat.is_cuda or _KERNELS is None:
        trits = trits_torch(flat, offsets, bounds, scales, keys)
        zeros = np.array([int((trits[offsets[t]:offsets[t + 1]] == 0).sum()) if t == count else 0
                          for t in range(offsets.size - 1)])
        from .bits import TRIT_PACKINGS

        return TRIT_PACKINGS[packing][0](trits), zeros
    out = np.empty(m, dtype=np.uint8)  # field 0 writes every byte first
    zeros = _encode_numba(flat.numpy(), offsets, bounds.numpy(), scales.numpy(),
                          np.array([key32(k) for k in keys], dtype=np.uint32), out, packing, count)
    return torch.from_numpy(out), zeros


def trits_torch(flat, offsets, bounds, scales, keys) -> torch.Tensor:
    """The trits (int8) the kernels pack, with plain torch ops."""
    out = torch.empty(flat.numel(), dtype=torch.int8, device=flat.device)
    for t in range(offsets.size - 1):
        lo, hi = int(offsets[t]), int(offsets[t + 1])
        v = flat[lo:hi].clamp(-float(bounds[t]), float(bounds[t]))
        threshold = uniforms(keys[t], hi - lo, flat.device) * scales[t].to(flat.device)
        out[lo:hi] = (v > threshold).to(torch.int8) - (v < -threshold).to(torch.int8)
    return out


# -- decode ----------------------------------------------------------------------------------------------------
def decode_shared(payloads: list[torch.Tensor], n: int, offsets: np.ndarray, scales: torch.Tensor,
                  packing: str, out: torch.Tensor | None = None) -> torch.Tensor:
    """The average of N workers' packed trits under shared scalers: (sum of the trits) x (s / N), float32, from
    the integer level (as :func:`commbench.methods.terngrad.mean_of_levels`). ``out``: a float32 buffer of n elements to
    write into (a caller that decodes every step reuses one: a fresh 16 MB array costs the kernel's page faults,
    as long as the decode itself)."""
    if not payloads[0].is_cuda and _KERNELS is not None:
        if out is None or out.numel() != n:
            out = torch.empty(n, dtype=torch.float32)
        _decode_numba(np.stack([p.numpy() for p in payloads]), n, offsets, scales.numpy(), out.numpy(), packing)
        return out
    from .bits import TRIT_PACKINGS

    unpack = TRIT_PACKINGS[packing][1]
    levels = None
    for p in payloads:
        trits = unpack(p, n)
        levels = trits.to(torch.int16) if levels is None else levels.add_(trits)
    sizes = torch.from_numpy(np.diff(offsets)).to(payloads[0].device)
    per = scales.to(payloads[0].device) / len(payloads)
    return levels.float().mul_(torch.repeat_interleave(per, sizes))


# -- the kernels -----------------------------------------------------------------------------------------------
# Defined only where numba imports (else the torch paths above stand in): module-level functions, so that each
# kernel is compiled once per process, or loaded from numba's cache, at its first call.
if numba is not None:
    u32 = numba.uint32
    _EXACT = {"cache": cache_ok(__file__), "nogil": True, "error_model": "numpy"}  # arithmetic rounded as written
    _LANES = 32  # the stats' fixed accumulator lanes: the same sums whatever the vector width

    @numba.njit(**_EXACT)
    def _stats(g):
        """One segment: sum and sum of squares and max|g|. The sums run in 32 float32 lanes in a fixed order,
        folded into float64 at the end: the same bits whatever the CPU's vector width (the compiler's own
        reassociation would not be). The max runs on the bit patterns (for non-negative floats their order is
        the integers' order)."""
        bits = g.view(np.uint32)
        acc = np.zeros(_LANES, np.float32)
        acc2 = np.zeros(_LANES, np.float32)
        peaks = np.zeros(_LANES, np.uint32)
        n = g.size
        full = n - n % _LANES
        rows, row_bits = g[:full].reshape(full // _LANES, _LANES), bits[:full].reshape(full // _LANES, _LANES)
        for r in range(full // _LANES):  # (row, lane) indices: loop counters, so numba checks no wrap-around
            for lane in range(_LANES):
                v = rows[r, lane]
                acc[lane] += v
                acc2[lane] += v * v
                a = row_bits[r, lane] & u32(0x7FFFFFFF)
                peaks[lane] = a if a > peaks[lane] else peaks[lane]
        total, squares, peak = 0.0, 0.0, u32(0)
        for lane in range(_LANES):
            total += np.float64(acc[lane])
            squares += np.float64(acc2[lane])
            peak = peaks[lane] if peaks[lane] > peak else peak
        for i in range(full, n):
            v = np.float64(g[i])
            total += v
            squares += v * v
            a = bits[i] & u32(0x7FFFFFFF)
            peak = a if a > peak else peak
        return total, squares, peak

    def _encode_kernel(field: int, base3: bool, count: bool):
        """The loop of one field (its shift or its power of 3 a constant, so the byte arithmetic vectorizes);
        ``count``: also count the zero trits (a separate compiled loop, so the common one stays lean)."""
        shift, factor = u32(2 * field), u32(3 ** field)

        @numba.njit(**_EXACT)
        def run(g, o, first, key, bound, scale):
            unit = SCALE24 * scale  # exact: a power of two times s
            zeros = u32(0)
            for i in range(g.size):
                x = u32(u32(i) + first)
                x = u32(x * u32(GOLDEN32) + key)
                x = u32((x ^ (x >> u32(16))) * u32(H1))
                x = u32((x ^ (x >> u32(15))) * u32(H2))
                x = x ^ (x >> u32(16))
                threshold = np.float32(np.int32(x >> u32(8))) * unit
                v = min(max(g[i], -bound), bound)
                c = u32(2) if v > threshold else (u32(0) if v < -threshold else u32(1))  # code 1 is trit 0
                if count:
                    zeros += c & u32(1)
                if field == 0:  # the first field covers every byte: it sets, the others add
                    o[i] = np.uint8(c)
                elif base3:
                    o[i] = np.uint8(u32(o[i]) + c * factor)
                else:
                    o[i] = np.uint8(u32(o[i]) | (c << shift))
            return zeros
        return run

    def _decode_kernel(field: int, base3: bool):
        """Unpack one field of every worker's payload, sum the codes and scale. The running sum lives in ``out``
        as float32 (small integers: exact), so that each loop is a plain stream: with 2 workers one pass reads
        both payloads and writes the floats once. Code c is trit c - 1, so the level is the sum minus N."""
        shift, divisor = u32(2 * field), u32(3 ** field)

        @called_by_kernels(inline="always")
        def code(byte):
            return np.float32(np.int32((u32(byte) // divisor) % u32(3) if base3 else (u32(byte) >> shift) & u32(3)))

        # one row per argument, sliced by the caller: rows taken from one 2-D array inside a kernel, or indexed
        # with an offset (numba then checks each index for wrap-around), keep the loops from vectorizing
        @numba.njit(**_EXACT)
        def pair(p0, p1, out, minus, scale):
            for j in range(out.size):
                out[j] = (code(p0[j]) + code(p1[j]) - minus) * scale

        @numba.njit(**_EXACT)
        def add(row, out, minus, scale):
            for j in range(out.size):
                out[j] = (out[j] + code(row[j]) - minus) * scale

        @numba.njit(**_EXACT)
        def single(row, out, minus, scale):
            for j in range(out.size):
                out[j] = (code(row[j]) - minus) * scale

        def run(payloads, lo, out, scale_over_n):
            """Workers 1 and 2: one pass. More: the first two, then one add per worker; the last subtracts N
            and scales (x - 0 and x * 1 leave the running sum exact)."""
            workers = payloads.shape[0]
            rows = payloads[:, lo:lo + out.size]
            n, zero, one = np.float32(workers), np.float32(0), np.float32(1)
            if workers == 1:
                return single(rows[0], out, n, scale_over_n)
            if workers == 2:
                return pair(rows[0], rows[1], out, n, scale_over_n)
            pair(rows[0], rows[1], out, zero, one)
            for w in range(2, workers - 1):
                add(rows[w], out, zero, one)
            add(rows[workers - 1], out, n, scale_over_n)
        return run

    # one compiled loop per field of each packing, with and without the zero count
    _KERNELS = {"stats": _stats,
                "encode_2bit": tuple(_encode_kernel(k, False, False) for k in range(4)),
                "encode_base3": tuple(_encode_kernel(k, True, False) for k in range(5)),
                "count_2bit": tuple(_encode_kernel(k, False, True) for k in range(4)),
                "count_base3": tuple(_encode_kernel(k, True, True) for k in range(5)),
                "decode_2bit": tuple(_decode_kernel(k, False) for k in range(4)),
                "decode_base3": tuple(_decode_kernel(k, True) for k in range(5))}
else:
    _KERNELS = None


def _parts(offsets: np.ndarray, m: int):
    """(segment, field, start, stop) runs: a segment cut where a field (a quarter or a fifth) ends, so that each
    run has one scaler, one stream key and one field, and its loop vectorizes."""
    for t in range(offsets.size - 1):
        a, end = int(offsets[t]), int(offsets[t + 1])
        while a < end:
            k = a // m
            b = min(end, (k + 1) * m)
            yield t, k, a, b
            a = b


def _encode_numba(g: np.ndarray, offsets, bounds: np.ndarray, scales: np.ndarray, keys: np.ndarray, out: np.ndarray,
                  packing: str, count: int | None) -> np.ndarray:
    """Fill ``out``; returns the number of zero trits of segment ``count`` (the others: 0)."""
    runs, counting = _KERNELS["encode_" + packing], _KERNELS["count_" + packing]
    m, n, fields = out.size, g.size, len(runs)
    zeros = np.zeros(offsets.size - 1, dtype=np.int64)
    for t, k, a, b in _parts(offsets, m):
        kernel = counting[k] if t == count else runs[k]
        zeros[t] += kernel(g[a:b], out[a - k * m:b - k * m], np.uint32(a - offsets[t]), keys[t], bounds[t],
                           scales[t])
    for k in range(fields):  # padding past the last element decodes to trit 0 (code 1)
        lo, hi = max(n, k * m) - k * m, m
        if lo < hi:
            if packing == "base3":
                out[lo:hi] += np.uint8(3 ** k)
            else:
                out[lo:hi] |= np.uint8(1 << (2 * k))
    return zeros


def _decode_numba(payloads: np.ndarray, n: int, offsets, scales: np.ndarray, out: np.ndarray, packing: str) -> None:
    workers, m = payloads.shape
    kernels = _KERNELS["decode_" + packing]
    for t, k, a, b in _parts(offsets, m):
        kernels[k](payloads, a - k * m, out[a:b], np.float32(scales[t]) / np.float32(workers))


def offsets_of(sizes) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(np.asarray(sizes, dtype=np.int64))]).astype(np.int64)


WARM_UP_ELEMENTS = 40  # every field of both packings holds some of them (m = 10 or 8 bytes)


def warm_up(packing: str | None = None) -> None:
    """Compile every kernel of ``packing`` (both packings when None), or load it from numba's cache, on a tiny
    tensor, so that a timed training loop never pays for it: numba compiles a kernel at its first call, and a
    TernGrad run's first step once carried 11.5 s of compilation in its train_s, images/s and time to target.
    Nothing here draws from a generator (the uniforms are the counter hash of a fixed key) and what it computes
    is thrown away, so a run computes the same numbers with or without it. The calls go through the public
    entry points, so the kernels see the argument types a run gives them (no second compilation later)."""
    if _KERNELS is None:
        return
    flat = torch.linspace(-1.0, 1.0, WARM_UP_ELEMENTS, dtype=torch.float32)
    whole = offsets_of([WARM_UP_ELEMENTS])  # one segment across every field: the zero-counting loops
    split = offsets_of([WARM_UP_ELEMENTS // 2, WARM_UP_ELEMENTS // 2])
    for name in (packing,) if packing else PACKINGS:
        for offsets, count in ((whole, 0), (split, None)):
            bounds, scales = scalers(flat, offsets, 2.5, "max")
            packed, _ = encode(flat, offsets, bounds, scales, [1] * (offsets.size - 1), name, count)
            for workers in (1, 2, 3):  # one, two and more workers each take their own decode loops
                decode_shared([packed] * workers, WARM_UP_ELEMENTS, offsets, scales, name)


__all__ = ["PACKINGS", "decode_shared", "encode", "offsets_of", "scalers", "trits_torch", "uniforms", "warm_up"]


class TernaryCodec:
    """TernGrad's steps for one worker's list of tensors (a bucket, or the whole gradient): the one object the
    method and its DDP hook share, so that the two cannot drift apart.

    ``layerwise``: a scaler per tensor (Sec. 3.3), else one for all the tensors given. ``clip_bound``: with the
    c sigma scaler shared by the workers, where each worker clips: at the shared scaler (``shared``: what the
    authors' TensorFlow code does, implicitly, as any |g| >= s rounds to +-s), or at its own c sigma_i
    (``own``). The max scaler clips at the worker's own bound either way."""

    def __init__(self, clip: float, scaler: str, packing: str, layerwise: bool = True, clip_bound: str = "shared"):
        self.clip, self.scaler, self.packing, self.layerwise = clip, scaler, packing, layerwise
        self.clip_bound = clip_bound

    def bounds_under(self, own: torch.Tensor, shared: torch.Tensor | None, segments: int) -> torch.Tensor:
        """The clipping bounds a worker encodes with: its own, or the shared scaler (c sigma shared: the max over
        the workers of c sigma_i, per segment)."""
        if shared is None or self.scaler != "std" or self.clip <= 0 or self.clip_bound != "shared":
            return own
        return self.per_segment(shared.to(own.device), segments)

    def scalers(self, flat: torch.Tensor, sizes: list[int]) -> tuple[np.ndarray, torch.Tensor, torch.Tensor]:
        """(segment offsets, clipping bound per segment, the scalers): one scaler per tensor, or one in all."""
        offsets = offsets_of(sizes)
        if self.layerwise:
            bounds, scales = scalers(flat, offsets, self.clip, self.scaler)
            return offsets, bounds, scales
        bound, scale = scalers(flat, offsets_of([flat.numel()]), self.clip, self.scaler)
        return offsets, bound.expand(len(sizes)).contiguous(), scale

    def per_segment(self, scales: torch.Tensor, segments: int) -> torch.Tensor:
        return scales if self.layerwise else scales.expand(segments).contiguous()

    def encode(self, flat, offsets, bounds, scales, keys, count: int | None = None):
        """The packed trits (and the zero count of segment ``count``) under ``scales`` (own or shared)."""
        return encode(flat, offsets, bounds, self.per_segment(scales, offsets.size - 1), keys, self.packing, count)

    def trits(self, flat, offsets, bounds, scales, keys) -> torch.Tensor:
        """The same trits unpacked (int8), for exchanges that cut the vector themselves (a parameter server)."""
        return trits_torch(flat, offsets, bounds, self.per_segment(scales, offsets.size - 1), keys)

    def decode(self, payloads, n, offsets, shared, out: torch.Tensor | None = None) -> torch.Tensor:
        """The average of the workers' payloads under the shared scalers (into ``out`` where given)."""
        return decode_shared(payloads, n, offsets, self.per_segment(shared, offsets.size - 1), self.packing, out)
