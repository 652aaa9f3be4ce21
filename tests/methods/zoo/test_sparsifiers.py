"""The zoo's sparsifiers (topk, randomk, dgc): the math each paper states, checked where it could fail, the bytes
by hand, and what the contract report shows of them."""
from __future__ import annotations

import math

import pytest
import torch

from commbench.analysis.contract import check, inputs
from commbench.analysis.contract.subjects import Subject
from commbench.analysis.contract.table import render
from commbench.methods.codecs.ternary import mix_seed
from commbench.methods.comm import SimCommunicator
from commbench.methods.comm.ledger import ByteLedger
from commbench.methods.kit import Group, Memory, Residual
from commbench.methods.kit.compressor import Sender
from commbench.methods.zoo.dgc import DGC, DGCCompressor, DGCMemory, DGCParams, select
from commbench.methods.zoo.randomk import RandomK, RandomKCompressor, RandomKParams, ScaledRandomKCompressor
from commbench.methods.zoo.topk import TopK, TopKCompressor, TopKParams

from ..test_compression_methods import SHAPES, averaged, grads, workers

SIZES = {n: math.prod(s) for n, s in SHAPES.items()}  # 12, 4, 8, 2
CONTRACT_SHAPES = {"dense.weight": (48, 40), "conv.weight": (8, 3, 3, 3), "dense.bias": (48,), "out.bias": (5,)}


@pytest.fixture(scope="module")
def small():
    """The contract report's synthetic tensors at a small size, ten steps of error feedback."""
    return inputs(None, shapes=CONTRACT_SHAPES, feedback_steps=10)


def group_of(sizes, step=0, workers=1, indices=None):
    return Group([f"t{j}" for j in range(len(sizes))], list(sizes), list(indices or range(len(sizes))), step, workers)


def compressor(cls, params, sizes):
    return cls(params, {f"t{j}": torch.Size([n]) for j, n in enumerate(sizes)})


def sender(rank=0, seed=100, shared=7):
    return Sender(rank, seed, ByteLedger(), shared)


def t3(n, seed):
    """Heavy-tailed values (Student-t, 3 degrees of freedom): distinct magnitudes, a few large ones."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, generator=g) / (torch.randn(3, n, generator=g).pow(2).sum(0) / 3).sqrt()


# -- top-k ---------------------------------------------------------------------------------------------------
def test_topk_sends_exactly_the_k_largest_magnitudes_of_each_tensor():
    sizes, ratio = [300, 50, 7], 0.1
    c, x = compressor(TopKCompressor, TopKParams(ratio=ratio), sizes), t3(357, 1)
    group = group_of(sizes)
    payload = c.encode(group, x, None, None, sender())
    assert payload.dtype == torch.float32 and payload.numel() == 2 * (30 + 5 + 1)
    y = c.decode_own(group, payload, None, None)
    at = 0
    for n in sizes:
        part, got = x[at:at + n], y[at:at + n]
        k = max(1, int(ratio * n))
        chosen = set(torch.nonzero(got).view(-1).tolist())
        assert chosen == set(part.abs().argsort(descending=True)[:k].tolist())
        assert torch.equal(got[list(chosen)], part[list(chosen)])  # the values themselves, unchanged
        at += n


def test_topk_delta_is_at_least_k_over_d_on_every_tensor():
    sizes = [500, 64, 10, 3]
    for ratio in (0.01, 0.1, 0.5):
        c = compressor(TopKCompressor, TopKParams(ratio=ratio), sizes)
        for seed in range(5):
            x, group = t3(sum(sizes), seed), group_of(sizes)
            y = c.decode_own(group, c.encode(group, x, None, None, sender()), None, None)
            at = 0
            for n in sizes:
                part, err = x[at:at + n].double(), (y[at:at + n] - x[at:at + n]).double()
                delta = 1 - float(err.pow(2).sum() / part.pow(2).sum())
                assert delta >= max(1, int(ratio * n)) / n - 1e-12, (ratio, seed, n, delta)
                at += n


def test_the_contract_report_shows_topks_delta_above_k_over_d_and_an_exact_residual(small):
    found = check(Subject("topk", TopK, TopKParams(), None), small, draws=20, repeats=0)
    assert found.failures == [] and found.bias is None and found.estimates[0].deterministic
    # every tensor of every estimate is measured: the bound below is checked on each, never on none
    assert all(len(est.tensors) == len(CONTRACT_SHAPES) for est in found.estimates)
    for est in found.estimates:
        for stats, n in zip(est.tensors, (math.prod(s) for s in CONTRACT_SHAPES.values())):
            assert 1 - stats.spread >= max(1, int(0.01 * n)) / n - 1e-9, (stats.name, stats.spread)
    assert found.feedback.holds and all(w.exact for w in found.wires)
    row = render([found], small, "md")
    assert f"delta {1 - found.estimates[0].model.spread:.3g} (synthetic)" in row and "formula exact" in row


def test_topk_bytes_and_average_by_hand():
    """ratio 0.25 on 12, 4, 8, 2 elements: k = 3, 1, 2, 1 (at least one): 7 indices and 7 values, 56 bytes."""
    ws, comm = averaged(TopK, TopKParams(ratio=0.25, memory="none"), 2, grads(2, seed=3))
    assert comm.ledger.sent == {0: 56, 1: 56}
    gs = grads(2, seed=3)
    for name, k in zip(SHAPES, (3, 1, 2, 1)):
        expected = torch.zeros(SIZES[name])
        for g in gs:
            flat = g[name].reshape(-1)
            top = flat.abs().topk(k).indices
            expected[top] += flat[top]
        assert torch.equal(ws[0].params[name].grad.reshape(-1), expected / 2), name


def test_topk_memory_chooses_the_residual():
    assert TopK.memory_for(TopKParams()) is Residual and TopK.memory_for(TopKParams(memory="none")) is Memory
    with pytest.raises(ValueError, match="^memory must be one of"):
        TopKParams(memory="momentum")


# -- random-k ------------------------------------------------------------------------------------------------
def test_randomk_draws_k_distinct_coordinates_shared_by_the_workers_and_per_tensor():
    sizes = [200, 30, 9]
    c = compressor(RandomKCompressor, RandomKParams(ratio=0.1), sizes)
    whole = c.coordinates(group_of(sizes, step=3), seed=7)
    assert whole.numel() == 20 + 3 + 1 and whole.unique().numel() == whole.numel()
    # tensor 1 alone, in a group of its own: the same coordinates (its own stream), whatever the grouping
    alone = compressor(RandomKCompressor, RandomKParams(ratio=0.1), sizes).coordinates(
        group_of([30], step=3, indices=[1]), seed=7)
    assert torch.equal(alone + 200, whole[20:23])
    assert not torch.equal(c.coordinates(group_of(sizes, step=4), seed=7), whole)  # another step, another draw
    expected = torch.randperm(200, generator=torch.Generator().manual_seed(mix_seed(7, 3, 0)))[:20].sort().values
    assert torch.equal(whole[:20], expected)


@pytest.mark.parametrize("scaled", [False, True])
def test_randomk_is_one_all_reduce_of_k_values_and_averages_at_the_shared_coordinates(scaled):
    """ratio 0.25 on 12, 4, 8, 2 elements: k = 3, 1, 2, 1: seven float32 values, 28 bytes, no index."""
    params, gs = RandomKParams(ratio=0.25, scaled=scaled, memory="none"), grads(3, seed=4)
    comm, ws = SimCommunicator(3), workers(3)
    method = RandomK(comm, ws, params, {}, shared_seed=11)
    assert type(method.exchange.compressor) is (ScaledRandomKCompressor if scaled else RandomKCompressor)
    method.step(gs, lr=0.0, step=5)
    assert comm.ledger.sent == {0: 28, 1: 28, 2: 28}
    for j, (name, k) in enumerate(zip(SHAPES, (3, 1, 2, 1))):
        n = SIZES[name]
        at = torch.randperm(n, generator=torch.Generator().manual_seed(mix_seed(11, 5, j)))[:k]
        total = sum(g[name].reshape(-1)[at] for g in gs)
        expected = torch.zeros(n)
        expected[at] = total * (n / k if scaled else 1.0) / 3
        torch.testing.assert_close(ws[0].params[name].grad.reshape(-1), expected, rtol=1e-6, atol=0)


def test_scaled_randomk_is_unbiased_with_omega_d_over_k_minus_1():
    """Every coordinate is drawn with probability k/n, so E[(n/k) x_S] = x and E|(n/k) x_S - x|^2 = (n/k - 1)|x|^2;
    over 3000 draws of a 10-element tensor at k = 3, each coordinate's frequency and the spread match."""
    n, k, draws = 10, 3, 3000
    c, x = compressor(ScaledRandomKCompressor, RandomKParams(ratio=0.3, scaled=True), [n]), t3(n, 2)
    hits, spread = torch.zeros(n), 0.0
    for step in range(draws):
        group = group_of([n], step=step)
        y = c.decode_own(group, c.encode(group, x, None, None, sender()), None, None)
        hits += (y != 0).float()
        spread += float((y - x).double().pow(2).sum() / x.double().pow(2).sum())
    p, sd = k / n, math.sqrt(k / n * (1 - k / n) / draws)
    assert ((hits / draws - p).abs() < 4 * sd).all(), hits / draws
    assert abs(spread / draws - (n / k - 1)) < 0.15 * (n / k - 1)


def test_the_contract_report_of_scaled_randomk_holds_with_omega_within_d_over_k_minus_1(small):
    """At ratio 0.25 (every coordinate in a quarter of the draws); at 1% on heavy-tailed tensors 200 draws are too
    few for the report's z statistic: an element holding half a tensor's norm is drawn in 1% of them."""
    class Scaled(RandomK):
        compressor = ScaledRandomKCompressor

    params = RandomKParams(ratio=0.25, scaled=True)
    found = check(Subject("randomk scaled", Scaled, params, "the input"), small, draws=200, repeats=0)
    assert found.failures == [] and found.bias.holds and found.feedback is None
    bounds = [math.prod(s) / max(1, int(0.25 * math.prod(s))) - 1 for s in CONTRACT_SHAPES.values()]
    for stats, bound in zip(found.estimates[0].tensors, bounds):
        assert 0.6 * bound < stats.spread < 1.4 * bound, (stats.name, stats.spread, bound)
    assert found.estimates[0].model.spread < 1.4 * max(bounds)
    assert "omega" in render([found], small, "md")


def test_randomk_memory_follows_the_variant_unless_set():
    assert RandomK.memory_for(RandomKParams()) is Residual
    assert RandomK.memory_for(RandomKParams(scaled=True)) is Memory
    assert RandomK.memory_for(RandomKParams(scaled=True, memory="residual")) is Residual


# -- DGC -----------------------------------------------------------------------------------------------------
def test_dgc_warm_up_follows_the_papers_exponential_sparsities():
    c = compressor(DGCCompressor, DGCParams(warmup_steps=400), [10])
    sparsity = [1 - c.density(step) for step in (0, 99, 100, 200, 300, 399, 400, 10_000)]
    paper = [0.75, 0.75, 0.9375, 0.984375, 0.996, 0.996, 0.999, 0.999]
    assert all(abs(s - q) < 0.002 for s, q in zip(sparsity, paper)), sparsity
    assert compressor(DGCCompressor, DGCParams(), [10]).density(0) == 0.001  # no warm-up by default


def test_dgc_warm_up_default_is_4_of_164_epochs_of_the_run():
    assert DGC.run_defaults(64_000)["warmup_steps"][0] == 1561  # He et al.'s 64K steps: 4 epochs of 390


def test_dgc_threshold_sends_about_the_target_and_only_the_largest():
    n, density = 100_000, 0.001
    v = t3(n, 5)
    index = select(v, density, 0.01, torch.Generator().manual_seed(3))
    assert 0.7 * n * density <= index.numel() <= 1.3 * n * density
    sent = torch.zeros(n, dtype=torch.bool)
    sent[index] = True
    assert v.abs()[sent].min() >= v.abs()[~sent].max()  # a threshold: nothing unsent is larger
    assert torch.equal(index, select(v, density, 0.01, torch.Generator().manual_seed(3)))  # its own seed's draw


def test_dgc_momentum_correction_and_factor_masking():
    """One worker, one tensor, m = 0.5: u <- m u + g, v <- v + u; where sent, v and u go to 0."""
    n, m = 100, 0.5
    params = DGCParams(ratio=0.01, momentum=m)
    c = compressor(DGCCompressor, params, [n])
    memory = DGCMemory({"t0": torch.Size([n])}, ["t0"], [0], "cpu")
    g1, g2 = t3(n, 6), t3(n, 7)
    p1 = memory.encode(c, group_of([n], step=0), g1, None, None, sender())
    first = int(g1.abs().argmax())
    assert p1.numel() == 2 and p1[:1].view(torch.int32).item() == first and p1[1] == g1[first]
    u1, v1 = g1.clone(), g1.clone()
    u1[first], v1[first] = 0, 0
    assert torch.equal(memory.u[0], u1) and torch.equal(memory.v[0], v1)
    p2 = memory.encode(c, group_of([n], step=1), g2, None, None, sender())
    u2 = u1 * m + g2
    v2 = v1 + u2
    second = int(v2.abs().argmax())
    assert p2[:1].view(torch.int32).item() == second and p2[1] == v2[second]
    u2[second], v2[second] = 0, 0
    assert torch.equal(memory.u[0], u2) and torch.equal(memory.v[0], v2)


def test_dgc_computes_the_same_in_any_grouping_of_its_tensors():
    """A tensor's selection draws from its own stream and its own u, v: the whole gradient as one group, or its
    tensors in buckets out of the buffers' order, send and keep the same."""
    sizes, params = [400, 30, 50], DGCParams(ratio=0.05, momentum=0.9)
    shapes = {f"t{j}": torch.Size([n]) for j, n in enumerate(sizes)}
    c = compressor(DGCCompressor, params, sizes)
    whole, parts = (DGCMemory(shapes, list(shapes), [0], "cpu") for _ in range(2))
    for step in range(3):
        g = t3(sum(sizes), 20 + step)
        y = c.decode_own(group_of(sizes, step), whole.encode(c, group_of(sizes, step), g, None, None, sender()),
                         None, None)
        at = [0, 400, 430]
        for js in ((2, 1), (0,)):  # (2, 1): not in the buffers' order, so encoded from copies
            bucket = Group([f"t{j}" for j in js], [sizes[j] for j in js], list(js), step, 1)
            part = torch.cat([g[at[j]:at[j] + sizes[j]] for j in js])
            got = c.decode_own(bucket, parts.encode(c, bucket, part, None, None, sender()), None, None)
            assert torch.equal(got, torch.cat([y[at[j]:at[j] + sizes[j]] for j in js])), (step, js)
    assert torch.equal(whole.u[0], parts.u[0]) and torch.equal(whole.v[0], parts.v[0])


def test_dgc_local_clipping_bounds_each_tensor_of_the_share_at_c_over_root_n():
    c = compressor(DGCCompressor, DGCParams(clip_norm=2.0), [50, 20])
    flat = torch.cat([t3(50, 8) * 10, t3(20, 9) * 1e-3])
    out = c.clipped(group_of([50, 20], workers=4), flat)
    assert float(out[:50].norm()) == pytest.approx(1.0, rel=1e-5)  # 2 / sqrt(4)
    assert torch.equal(out[50:], flat[50:])  # already under the bound


def test_dgc_bytes_by_hand_and_the_shares_sum_to_the_mean():
    """Each worker's payload: 8 bytes per element it sent, a count of its own; the all-gather pads to the largest
    and announces each size in 8 bytes. One step from zero memory: v = g / N, zeroed where sent, so the mean is
    the sum of the shares where each worker sent them."""
    gs, comm, ws = grads(2, seed=8), SimCommunicator(2), workers(2)
    method = DGC(comm, ws, DGCParams(ratio=0.25, momentum=0.9), {})
    method.step(gs, lr=0.0, step=0)
    memory = method.exchange.memory
    sent = [memory.v[r] == 0 for r in (0, 1)]
    assert all(torch.equal(memory.u[r] == 0, sent[r]) for r in (0, 1))  # momentum factor masking
    counts = [int(s.sum()) for s in sent]
    assert all(0.7 * 0.25 * 26 <= c <= 1.3 * 0.25 * 26 + 4 for c in counts)  # 26 elements; k >= 1 per tensor
    assert comm.ledger.sent == {0: 8 * max(counts) + 8, 1: 8 * max(counts) + 8}
    shares = [torch.cat([g[name].reshape(-1) for name in SHAPES]) / 2 for g in gs]
    expected = torch.where(sent[0], shares[0], 0.0) + torch.where(sent[1], shares[1], 0.0)
    assert torch.equal(torch.cat([ws[0].params[name].grad.reshape(-1) for name in SHAPES]), expected)


def test_dgc_owns_momentum_takes_the_recipes_and_decays_before_the_exchange():
    from commbench.config import resolve

    cfg = resolve({"task": "lenet-mnist", "method": "dgc", "dataset": "synthetic", "workers": 2, "steps": 328})
    assert cfg.method_params["momentum"] == 0.9 and cfg.method_params["warmup_steps"] == 8  # 328 x 4 / 164
    assert cfg.optimizer["name"] == "sgd" and cfg.optimizer["momentum"] == 0.0
    assert DGC.owns_momentum and DGC.decay_before_exchange(DGCParams())


# -- sim and dist: one method per collective (same-size all-gather, all-reduce, variable-size all-gather) -------
# Three workers where the payloads are gathered (decoded in rank order on every worker); two for the all-reduce,
# whose float sum gloo orders its own way beyond two workers (as for any float all-reduce).
@pytest.mark.slow
@pytest.mark.parametrize("method, workers, extra", [("topk", 3, []), ("randomk", 2, ["--set", "method.scaled=true"]),
                                                    ("dgc", 3, ["--set", "method.warmup_steps=4"])])
def test_sim_and_dist_agree_bit_for_bit(tmp_path, method, workers, extra):
    from ...conftest import run_and_load

    (sim, w_sim), (dist, w_dist) = (
        run_and_load("--task", "lenet-mnist", "--dataset", "synthetic", "--method", method, "--workers",
                     str(workers), "--backend", backend, "--steps", "6", "--set", f"global_batch={16 * workers}",
                     "--set", "eval.every=6", *extra, "--out", str(tmp_path))
        for backend in ("sim", "dist"))
    assert all(torch.equal(w_sim[k], w_dist[k]) for k in w_sim)
    for key in ("bytes_sent", "bytes_received", "top1"):
        assert sim["metrics"][key] == dist["metrics"][key], key
    assert sim["metrics"]["bytes_sent"] < sim["metrics"]["bytes_fp32_equiv"]


@pytest.mark.parametrize("cls, params", [
    (TopK, TopKParams(ratio=1.0, memory="residual")),
    (RandomK, RandomKParams(ratio=1.0, scaled=False, memory="residual")),
    (RandomK, RandomKParams(ratio=1.0, scaled=True, memory="none")),
])
def test_a_sparsifier_keeping_every_element_is_the_plain_average_and_leaves_no_residual(cls, params):
    """At ratio 1 nothing is dropped: over several steps each worker gets exactly the mean of the gradients (the
    error-feedback memory stays zero), as the fp32 all-reduce gives it; a wrong index, scale or residual shows."""
    comm, ws = SimCommunicator(3), workers(3)
    method = cls(comm, ws, params, {})
    for step in range(3):
        gs = grads(3, seed=10 + step)
        method.step(gs, lr=0.0, step=step)
        for name in SHAPES:
            mean = sum(g[name] for g in gs) / 3
            for w in ws:
                torch.testing.assert_close(w.params[name].grad, mean, rtol=1e-6, atol=1e-7)
    memories = [t for t in _tensors(method.state_dict())]
    assert memories or params.memory == "none"  # error feedback keeps one residual per worker: it is checked
    assert all(float(t.abs().max()) == 0.0 for t in memories if t.is_floating_point())


def _tensors(state):
    if isinstance(state, torch.Tensor):
        yield state
    elif isinstance(state, dict):
        for value in state.values():
            yield from _tensors(value)
    elif isinstance(state, (list, tuple)):
        for value in state:
            yield from _tensors(value)
