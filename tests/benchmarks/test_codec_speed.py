"""Codec speed on a 4M-element float32 gradient, one CPU thread, beside a plain copy of the same tensor.

Two numbers per method: the wire codec alone (pack + unpack for TernGrad's trits; encode + decode of the
threshold payloads) and the whole path (quantize + encode + decode: ternarization or threshold selection
included). Ratios against the copy, all measured in one session, land in results/benchmarks/codecs.json.
Run with ``make bench``.
"""
from __future__ import annotations


import numpy as np
import pytest
import torch

from . import write_result
from commbench.methods.codecs import sparse
from commbench.methods.codecs.bits import TRIT_PACKINGS
from commbench.methods.codecs import fused_ternary as fused
from commbench.methods.threshold import select


N = 4 * 1024 * 1024
RESULTS: dict[str, float] = {}


@pytest.fixture(scope="module", autouse=True)
def one_thread_and_report():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
    copy = RESULTS.get("copy")
    if copy:
        table = {k: {"median_ms": v * 1e3, "rate_vs_copy": copy / v} for k, v in RESULTS.items()}
        write_result("codecs", {"elements": N, "threads": 1, "results": table})
        print("\n" + "\n".join(f"{k:28s} {v['median_ms']:8.2f} ms  {v['rate_vs_copy']:.3f} x copy rate"
                               for k, v in table.items()))


@pytest.fixture(scope="module")
def gradient():
    return torch.randn(N, generator=torch.Generator().manual_seed(0)) * 1e-3


def run(benchmark, name, fn):
    benchmark.pedantic(fn, rounds=15, warmup_rounds=2)
    RESULTS[name] = benchmark.stats.stats.median


@pytest.mark.benchmark
def test_copy(benchmark, gradient):
    out = torch.empty_like(gradient)
    run(benchmark, "copy", lambda: out.copy_(gradient))


@pytest.mark.benchmark
@pytest.mark.parametrize("packing", sorted(TRIT_PACKINGS))
def test_terngrad_wire(benchmark, gradient, packing):
    pack, unpack, _ = TRIT_PACKINGS[packing]
    offsets = fused.offsets_of([N])
    bound, s = fused.scalers(gradient, offsets, 2.5, "max")
    trits = fused.trits_torch(gradient, offsets, bound, s, [1])
    run(benchmark, f"terngrad-{packing} wire", lambda: unpack(pack(trits), N))


@pytest.mark.benchmark
@pytest.mark.parametrize("packing", sorted(TRIT_PACKINGS))
def test_terngrad_encode(benchmark, gradient, packing):
    """One worker's encode, fused: the scaler (one pass: sigma and max|g|), then clip + Bernoulli ternarization
    from the counter-based stream + packing (one pass)."""
    offsets = fused.offsets_of([N])

    def encode():
        bound, s = fused.scalers(gradient, offsets, 2.5, "max")
        return fused.encode(gradient, offsets, bound, s, [1], packing)

    run(benchmark, f"terngrad-{packing} encode", encode)


@pytest.mark.benchmark
@pytest.mark.parametrize("packing", sorted(TRIT_PACKINGS))
def test_terngrad_decode(benchmark, gradient, packing):
    """The receiving side for 2 workers, fused: unpack both payloads, sum, scale, in one pass, into the output
    buffer the method reuses every step."""
    offsets = fused.offsets_of([N])
    bound, s = fused.scalers(gradient, offsets, 2.5, "max")
    payloads = [fused.encode(gradient, offsets, bound, s, [w], packing)[0] for w in (1, 2)]
    out = torch.empty(N)
    run(benchmark, f"terngrad-{packing} decode (2 workers)", lambda: fused.decode_shared(payloads, N, offsets, s,
                                                                                          packing, out))


THRESHOLDS = [1e-3, 3e-3]  # on this gradient: about 32% and 0.3% of elements sent


@pytest.mark.benchmark
@pytest.mark.parametrize("kind", sparse.KINDS)
@pytest.mark.parametrize("threshold", THRESHOLDS)
def test_threshold_wire(benchmark, gradient, kind, threshold):
    sent, _ = select(kind, gradient.double(), threshold)
    total = torch.zeros(N)
    run(benchmark, f"{kind} T={threshold:g} wire",
        lambda: sparse.add_into(kind, sparse.encode(kind, sent, N), N, threshold, total))


@pytest.mark.benchmark
@pytest.mark.parametrize("kind", sparse.KINDS)
@pytest.mark.parametrize("threshold", THRESHOLDS)
def test_threshold_full(benchmark, gradient, kind, threshold):
    """The method's path: the fused pass (accumulate into the residual, select, subtract, encode), and the
    receiver's fused add. The residual restarts from zero before each round, outside the timing (a 32 MB write
    that is the benchmark's, not the method's), so every round selects the same elements."""
    from commbench.methods.codecs.fused_threshold import add_into, encode_into

    acc, total = torch.zeros(N, dtype=torch.float64), torch.zeros(N)

    def full():
        payload, _ = encode_into(kind, acc, gradient, threshold)
        add_into(kind, payload, N, threshold, total)

    def restart():  # returns nothing: pytest-benchmark would take a returned value for the call's arguments
        acc.zero_()

    benchmark.pedantic(full, setup=restart, rounds=15, warmup_rounds=2)
    RESULTS[f"{kind} T={threshold:g} full"] = benchmark.stats.stats.median


@pytest.mark.benchmark
def test_threshold_floor(benchmark, gradient):
    """What no threshold codec can go below: the float64 residual's update alone (read the gradient and the
    residual, write the residual: 80 MB against the copy's 32), before any selection, packing or receiving."""
    import numba

    @numba.njit(nogil=True, error_model="numpy")
    def accumulate(acc, g):
        for i in range(acc.size):
            acc[i] += np.float64(g[i])

    acc, g = np.zeros(N), gradient.numpy()
    run(benchmark, "threshold floor: residual += g", lambda: accumulate(acc, g))
