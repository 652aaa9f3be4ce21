"""The codecs' math and wire formats: unbiasedness, clipping, residual conservation, round trips."""
from __future__ import annotations

import pytest
import torch

from methods.codecs import sparse
from methods.codecs.bits import TRIT_PACKINGS, pack_bits, unpack_bits
from methods.codecs.ternary import clip_and_scale, mix_seed, ternarize
from methods.threshold import select

SIZES = [1, 2, 3, 4, 5, 7, 8, 9, 31, 33, 1000]


def draws(g: torch.Tensor, s: torch.Tensor, k: int, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return ternarize(g.expand(k, -1).contiguous(), s, gen).float() * s


def test_ternarize_is_unbiased():
    g = torch.randn(500, generator=torch.Generator().manual_seed(1))
    _, s = clip_and_scale(g, 0.0, "max")
    k = 20_000
    mean = draws(g, s, k).mean(0)
    # each draw has std <= s/2 per element, so the mean's std is <= s / (2 sqrt(k)); allow 8 of those
    assert (mean - g).abs().max() < 4 * s / k ** 0.5
    assert abs((mean - g).mean()) < s / k ** 0.5  # no systematic bias across elements


@pytest.mark.parametrize("scaler", ["max", "std"])
def test_clipping_bounds_the_expectation_at_c_sigma(scaler):
    g = torch.randn(400, generator=torch.Generator().manual_seed(2))
    g[0], g[1] = 50.0, -50.0  # outliers far beyond 2.5 sigma
    clipped, s = clip_and_scale(g, 2.5, scaler)
    bound = 2.5 * g.std(correction=0)
    assert s == pytest.approx(bound.item() if scaler == "std" else clipped.abs().max().item())
    mean = draws(clipped, s, 20_000).mean(0)
    expected = g.clamp(-bound.item(), bound.item())
    assert (mean - expected).abs().max() < 4 * s / 20_000 ** 0.5


def test_ternarize_levels_and_zero_scaler():
    g = torch.tensor([0.5, -0.25, 0.0])
    t = ternarize(g, torch.tensor(0.5), torch.Generator().manual_seed(0))
    assert t.dtype == torch.int8 and set(t.tolist()) <= {-1, 0, 1} and t[2] == 0
    assert ternarize(torch.zeros(5), torch.tensor(0.0), torch.Generator()).eq(0).all()


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
