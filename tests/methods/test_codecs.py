"""The codecs' math and wire formats: unbiasedness, clipping, residual conservation, round trips."""
from __future__ import annotations

import pytest
import numpy as np
import torch

from commbench.methods.codecs import sparse
from commbench.methods.codecs.bits import TRIT_PACKINGS, pack_bits, unpack_bits
from commbench.methods.codecs import fused_ternary as fused
from commbench.methods.codecs.ternary import mix_seed
from commbench.methods.threshold import select

SIZES = [1, 2, 3, 4, 5, 7, 8, 9, 31, 33, 1000]
INF = torch.tensor([float("inf")])


def draws(g: torch.Tensor, s: torch.Tensor, k: int, seed: int = 0, bound: torch.Tensor = INF) -> torch.Tensor:
    """k independent draws of the codec on g: one stream over g repeated k times (each copy its own counters)."""
    flat = g.repeat(k)
    trits = fused.trits_torch(flat, fused.offsets_of([flat.numel()]), bound, s.reshape(1), [mix_seed(seed, 0, 0)])
    return trits.view(k, -1).float() * s


def test_ternarize_is_unbiased():
    g = torch.randn(500, generator=torch.Generator().manual_seed(1))
    s = g.abs().max()
    k = 20_000
    mean = draws(g, s, k).mean(0)
    # each draw has std <= s/2 per element, so the mean's std is <= s / (2 sqrt(k)); allow 8 of those
    assert (mean - g).abs().max() < 4 * s / k ** 0.5
    assert abs((mean - g).mean()) < s / k ** 0.5  # no systematic bias across elements


@pytest.mark.parametrize("scaler", ["max", "std"])
def test_clipping_bounds_the_expectation_at_c_sigma(scaler):
    g = torch.randn(400, generator=torch.Generator().manual_seed(2))
    g[0], g[1] = 50.0, -50.0  # outliers far beyond 2.5 sigma
    bound, s = fused.scalers(g, fused.offsets_of([400]), 2.5, scaler)
    sigma = g.std(correction=0)
    assert bound.item() == pytest.approx(2.5 * sigma.item(), rel=1e-5)
    expected_s = 2.5 * sigma if scaler == "std" else g.clamp(-bound.item(), bound.item()).abs().max()
    assert s.item() == pytest.approx(expected_s.item(), rel=1e-5)
    mean = draws(g, s, 20_000, bound=bound).mean(0)
    expected = g.clamp(-2.5 * sigma.item(), 2.5 * sigma.item())
    assert (mean - expected).abs().max() < 4 * s / 20_000 ** 0.5


def test_ternarize_levels_and_zero_scaler():
    g = torch.tensor([0.5, -0.25, 0.0])
    t = fused.trits_torch(g, fused.offsets_of([3]), INF, torch.tensor([0.5]), [1])
    assert t.dtype == torch.int8 and set(t.tolist()) <= {-1, 0, 1} and t[2] == 0
    assert fused.trits_torch(torch.zeros(5), fused.offsets_of([5]), INF, torch.tensor([0.0]), [1]).eq(0).all()


@pytest.mark.parametrize("sizes", [[5], [1, 2, 3], [7, 8, 9, 31, 33], [1000, 3, 17]])
@pytest.mark.parametrize("clip,scaler", [(2.5, "max"), (2.5, "std"), (0.0, "max")])
@pytest.mark.parametrize("packing", fused.PACKINGS)
def test_the_fused_kernels_compute_the_plain_torch_path(sizes, clip, scaler, packing):
    """The numba kernels (one pass to ternarize and pack, one to unpack, scale and average) against the plain
    torch path with the same counter-based uniforms: the same bytes, the same average."""
    flat = torch.randn(sum(sizes), generator=torch.Generator().manual_seed(len(sizes)))
    offsets = fused.offsets_of(sizes)
    bounds, scales = fused.scalers(flat, offsets, clip, scaler)
    keys = [mix_seed(7, 3, j) for j in range(len(sizes))]
    packed, _ = fused.encode(flat, offsets, bounds, scales, keys, packing)
    pack, unpack, _ = TRIT_PACKINGS[packing]
    assert torch.equal(packed, pack(fused.trits_torch(flat, offsets, bounds, scales, keys)))
    for workers in (1, 2, 3, 5):  # the decoder's three shapes: one payload, a pair, a pair and adds
        payloads = [fused.encode(flat * (w + 1), offsets, bounds, scales,
                                 [mix_seed(w, 3, j) for j in range(len(sizes))], packing)[0] for w in range(workers)]
        levels = sum(unpack(p, flat.numel()).to(torch.int16) for p in payloads)
        expected = levels.float() * torch.repeat_interleave(scales / workers, torch.tensor(sizes))
        assert torch.equal(fused.decode_shared(payloads, flat.numel(), offsets, scales, packing), expected), workers


@pytest.mark.parametrize("n", [1, 31, 32, 33, 100_003])
def test_the_stats_kernel_sums_in_a_fixed_order_close_to_float64(n):
    """sigma's sums: 32 float32 lanes in a fixed order (so a wider vector unit cannot change the scaler), close
    to float64's; max|g| exact."""
    g = torch.randn(n, generator=torch.Generator().manual_seed(n)) * 3 + 1
    total, squares, peak = fused._KERNELS["stats"](g.numpy())
    lanes = torch.zeros(32, dtype=torch.float32)
    lanes2 = torch.zeros(32, dtype=torch.float32)
    full = n - n % 32
    for row in g[:full].view(-1, 32):  # the same order, written out
        lanes += row
        lanes2 += row * row
    reference = 0.0
    for x in lanes.tolist() + g[full:].tolist():  # lanes folded into float64 one by one, then the tail
        reference += x
    assert total == reference
    assert abs(total - g.double().sum().item()) <= 1e-5 * g.double().abs().sum().item()
    assert abs(squares - (g.double() ** 2).sum().item()) <= 1e-5 * (g.double() ** 2).sum().item()
    assert np.uint32(peak).view(np.float32) == g.abs().max().item()


def test_counter_uniforms_are_uniform_and_streams_differ():
    u = fused.uniforms(12345, 200_000)
    assert 0.0 <= u.min() and u.max() < 1.0
    assert abs(u.mean().item() - 0.5) < 0.003 and abs(u.var().item() - 1 / 12) < 0.002
    counts = torch.histc(u, bins=16, min=0.0, max=1.0)
    assert (counts - 12_500).abs().max() < 600  # about 5 standard deviations of a bin
    assert not torch.equal(fused.uniforms(12345, 1000), fused.uniforms(12346, 1000))
    assert abs(torch.corrcoef(torch.stack([u[:-1], u[1:]]))[0, 1].item()) < 0.01  # neighbours independent


@pytest.mark.parametrize("lag", [1, 2, 1 << 18, (1 << 20) // 5])  # neighbours, and elements sharing a byte
def test_counter_uniforms_are_equidistributed_in_pairs(lag):
    """Pairs (u_i, u_{i+lag}) fill a 16 x 16 grid evenly (chi-square within 6 standard deviations of its mean).
    A cheaper hash with one multiply round passes the one-dimensional checks and fails this one at every lag."""
    u = fused.uniforms(mix_seed(1, 0, 0), 1 << 20)
    cells = (u[:-lag] * 16).long() * 16 + (u[lag:] * 16).long()
    counts = torch.bincount(cells, minlength=256).double()
    expected = counts.sum() / 256
    chi2 = ((counts - expected) ** 2 / expected).sum().item()
    assert chi2 < 255 + 6 * (2 * 255) ** 0.5, chi2


def test_mix_seed_separates_streams():
    seeds = {mix_seed(a, b, c) for a in range(4) for b in range(4) for c in range(4)}
    assert len(seeds) == 64 and all(0 <= s < 2 ** 63 for s in seeds)


@pytest.mark.parametrize("packing", sorted(TRIT_PACKINGS))
@pytest.mark.parametrize("n", SIZES)
def test_trit_packings_round_trip(packing, n):
    pack, unpack, size = TRIT_PACKINGS[packing]
    for trits in (torch.randint(-1, 2, (n,), dtype=torch.int8), torch.zeros(n, dtype=torch.int8)):
        packed = pack(trits)
        assert packed.dtype == torch.uint8 and packed.numel() == size(n)
        assert torch.equal(unpack(packed, n), trits)


def test_base3_is_five_trits_a_byte_and_2bit_four():
    assert TRIT_PACKINGS["base3"][2](1_000_000) == 200_000  # 1.6 bits per element
    assert TRIT_PACKINGS["2bit"][2](1_000_000) == 250_000


@pytest.mark.parametrize("n", SIZES)
def test_bits_round_trip(n):
    mask = torch.rand(n, generator=torch.Generator().manual_seed(n)) < 0.4
    assert torch.equal(unpack_bits(pack_bits(mask), n), mask)


def make_sent(kind, n, k, seed=0):
    g = torch.Generator().manual_seed(seed)
    idx = torch.randperm(n, generator=g)[:k].sort().values
    sent = sparse.Sent(idx)
    if kind == "wgt":
        sent.values = torch.randn(k, generator=g)
    else:
        sent.negative = torch.rand(k, generator=g) < 0.5
        if kind == "qgt":
            sent.multiples = torch.randint(1, 256, (k,), generator=g, dtype=torch.uint8)
    return sent


@pytest.mark.parametrize("kind", sparse.KINDS)
@pytest.mark.parametrize("n, k", [(1, 0), (1, 1), (7, 0), (7, 3), (33, 1), (33, 32), (1000, 5), (1000, 600)])
def test_sparse_payload_round_trips_in_the_smaller_layout(kind, n, k):
    sent = make_sent(kind, n, k)
    payload = sparse.encode(kind, sent, n)
    sizes = sparse.body_bytes(kind, n, k)
    assert payload.dtype == torch.uint8 and payload.numel() == sparse.HEADER + min(sizes.values())
    back = sparse.decode(kind, payload, n)
    assert torch.equal(back.indices, sent.indices)
    assert torch.equal(sparse.values_of(kind, back, 1e-3), sparse.values_of(kind, sent, 1e-3))


def test_layout_choice_by_hand():
    # WGT, 1000 elements: sparse 8 B per element, bitmap 125 B + 4 B per element
    assert sparse.body_bytes("wgt", 1000, 10) == {sparse.SPARSE: 80, sparse.BITMAP: 165}
    assert sparse.body_bytes("wgt", 1000, 40) == {sparse.SPARSE: 320, sparse.BITMAP: 285}
    # BGT: 4 B per element (31-bit index + sign) against 125 B + 1 bit per element
    assert sparse.body_bytes("bgt", 1000, 10) == {sparse.SPARSE: 40, sparse.BITMAP: 127}
    # QGT: 5 B per element against 125 B + 1 bit + 1 B per element
    assert sparse.body_bytes("qgt", 1000, 100) == {sparse.SPARSE: 500, sparse.BITMAP: 238}


@pytest.mark.parametrize("kind", sparse.KINDS)
def test_residual_conservation_is_exact(kind):
    """sent (as the receivers reconstruct it) + new residual == accumulated input, exactly, every step."""
    gen = torch.Generator().manual_seed(3)
    threshold = 1e-3
    residual = torch.zeros(2000, dtype=torch.float64)
    for _ in range(20):
        contribution = (torch.randn(2000, generator=gen) * 2e-3).float()
        contribution[:5] = torch.tensor([0.9, -0.9, 1e-3, -1e-3, 0.0])  # past the QGT cap, at T exactly, zero
        acc = residual + contribution.double()
        sent, values = select(kind, acc.clone(), threshold)
        received = sparse.values_of(kind, sparse.decode(kind, sparse.encode(kind, sent, 2000), 2000), threshold)
        assert torch.equal(received.double(), values)
        residual = acc.clone()
        residual[sent.indices] -= values
        rebuilt = residual.clone()
        rebuilt[sent.indices] += values
        assert torch.equal(rebuilt, acc)
        if kind == "wgt":  # everything at or above T left; only float32 rounding stays behind where it did
            assert residual[sent.indices].abs().max() < 1e-9 and (residual.abs() < threshold).all()
        if kind == "qgt":  # below one multiple of T, except where the 255 cap bound
            uncapped = sent.multiples < 255
            assert (residual[sent.indices[uncapped]].abs() < threshold).all()
        if kind == "bgt":  # one T per step: what exceeds it waits
            assert torch.equal(values.abs(), torch.full_like(values, float(torch.tensor(threshold))))


def test_qgt_caps_the_multiple_at_255_and_rounds_towards_zero():
    t = float(torch.tensor(1e-3, dtype=torch.float32))
    acc = torch.tensor([1000 * t, -2.5 * t, 0.99 * t], dtype=torch.float64)
    sent, values = select("qgt", acc, 1e-3)
    assert sent.indices.tolist() == [0, 1]
    assert sent.multiples.tolist() == [255, 2] and sent.negative.tolist() == [False, True]
    assert values[1].item() == pytest.approx(-2 * t)


def test_paper_accounting_counts_values_only():
    assert sparse.paper_bytes("wgt", 10) == 40 and sparse.paper_bytes("qgt", 10) == 10
    assert sparse.paper_bytes("bgt", 16) == 2


@pytest.mark.parametrize("kind", sparse.KINDS)
@pytest.mark.parametrize("threshold", [1e-5, 1e-3, 3e-3, 1.0])  # dense to nothing sent: both layouts
@pytest.mark.parametrize("n", [5, 50_000, 50_003])  # fewer elements than planes; a last byte partly padding
def test_the_fused_threshold_codec_is_the_torch_path_bit_for_bit(kind, threshold, n):
    """The fused pass (accumulate, select, subtract what is sent, encode) against the torch path (select(),
    its bookkeeping and sparse.encode): the same residual and the same payload bytes; and the fused receiver adds
    what sparse.add_into adds."""
    from commbench.methods.codecs.fused_threshold import add_into, encode_into, select_into

    g = torch.Generator().manual_seed(5)
    acc = torch.randn(n, generator=g, dtype=torch.float64) * 1e-3
    contribution = torch.randn(n, generator=g) * 1e-3
    reference = acc.clone()
    sent = select_into(kind, reference, contribution, threshold)
    expected = sparse.encode(kind, sent, n)
    fused = acc.clone()
    payload, k = encode_into(kind, fused, contribution, threshold)
    assert torch.equal(fused, reference) and k == sent.indices.numel()
    assert torch.equal(payload, expected)
    base = torch.randn(n, generator=g)
    want, got = base.clone(), base.clone()
    sparse.add_into(kind, expected, n, threshold, want)
    add_into(kind, payload, n, threshold, got)
    assert torch.equal(got, want)
