"""TernGrad on parameter servers (topology=ps, the paper's Figure 1): the same average as the all-gather
topology bit for bit, the levels' width and every byte by hand, and sim == dist on real gloo processes."""
from __future__ import annotations

import os
import traceback

import pytest
import torch

from commbench.methods import Worker
from commbench.methods.codecs.bits import TRIT_PACKINGS, level_bits
from commbench.methods.comm import SimCommunicator, make_dist_communicator
from commbench.methods.terngrad import TernGrad, TernGradParams

from ..gloo import spawn

SIZES = {"a": 10, "b": 3, "c": 5}  # 18 elements; shards over 2 servers as a, c -> server 0 and b -> server 1


def make_workers(ranks, seed_base: int = 100) -> list[Worker]:
    out = []
    for rank in ranks:
        tensors = {n: torch.nn.Parameter(torch.zeros(k)) for n, k in SIZES.items()}
        out.append(Worker(rank, tensors, torch.optim.SGD(tensors.values(), lr=0.1, momentum=0.9), seed=seed_base + rank))
    return out


def gradients(rank: int, step: int) -> dict:
    g = torch.Generator().manual_seed(97 * rank + step)
    return {n: torch.randn(k, generator=g) * (1 + rank) for n, k in SIZES.items()}


def run(method: TernGrad, steps: int) -> None:
    for step in range(steps):
        method.step([gradients(w.rank, step) for w in method.workers], lr=0.1, step=step)


def sim(params: TernGradParams, n: int, steps: int = 3):
    servers = params.servers if params.topology == "ps" else 0
    comm = SimCommunicator(n, num_servers=servers)
    method = TernGrad(comm, make_workers(range(n)), params, {"a": 1e-3})
    run(method, steps)
    return method, comm


@pytest.mark.parametrize("n", [2, 3, 8])
@pytest.mark.parametrize("servers", [1, 2])
@pytest.mark.parametrize("packing", ["2bit", "base3"])
def test_the_average_is_the_allgather_topologys_bit_for_bit(n, servers, packing):
    ps, _ = sim(TernGradParams(topology="ps", servers=servers, packing=packing), n)
    ag, _ = sim(TernGradParams(topology="allgather", packing=packing), n)
    for a, b in zip(ps.workers, ag.workers):
        for name in SIZES:
            assert torch.equal(a.params[name], b.params[name]), (a.rank, name)


def test_float_tensors_travel_whole_and_agree_with_the_allgather_topology():
    params = dict(min_size=4, float_last_layer=False)  # b (3 elements) stays float32
    ps, comm = sim(TernGradParams(topology="ps", servers=2, **params), 3)
    ag, _ = sim(TernGradParams(**params), 3)
    for a, b in zip(ps.workers, ag.workers):
        assert all(torch.equal(a.params[n], b.params[n]) for n in SIZES)
    # server 1 holds b alone: 3 float32 pushed by each worker, their sum (3 float32) sent back to each
    assert comm.ledger.received[4] == 3 * 12 * 3 and comm.ledger.sent[4] == 3 * 12 * 3


@pytest.mark.parametrize("n,width", [(1, 2), (2, 3), (4, 4), (8, 5), (15, 5), (16, 6), (64, 8)])
def test_levels_take_ceil_log2_of_2n_plus_1_bits(n, width):
    assert level_bits(n) == width
    assert 2 ** (width - 1) < 2 * n + 1 <= 2 ** width


@pytest.mark.parametrize("servers,pushed,replied", [(1, [5], [12]), (2, [4, 1], [10, 2])])
def test_bytes_by_hand_at_8_workers(servers, pushed, replied):
    """8 workers, 2-bit trits. One server: 18 trits push as ceil(18/4) = 5 bytes, the reply is 18 levels of
    5 bits, ceil(90/8) = 12 bytes. Two servers (a, c: 15 elements; b: 3): pushes 4 + 1, replies 10 + 2.
    Scaler sharing all-gathers 3 float32 scalers: 12 bytes sent, 7 x 12 received per worker."""
    steps, n = 3, 8
    _, comm = sim(TernGradParams(topology="ps", servers=servers), n, steps)
    for rank in range(n):
        assert comm.ledger.sent[rank] == steps * (12 + sum(pushed))
        assert comm.ledger.received[rank] == steps * (7 * 12 + sum(replied))
    for i, server in enumerate(comm.server_ranks):
        assert comm.ledger.received[server] == steps * n * pushed[i]
        assert comm.ledger.sent[server] == steps * n * replied[i]


def test_ps_receives_less_than_allgather_from_3_workers_on():
    for n, fewer in ((2, False), (3, True), (8, True)):
        _, ps = sim(TernGradParams(topology="ps"), n)
        _, ag = sim(TernGradParams(), n)
        assert (ps.ledger.received[0] < ag.ledger.received[0]) is fewer, n


def test_ps_needs_scaler_sharing():
    with pytest.raises(ValueError, match="topology: ps needs scaler_sharing"):
        TernGradParams(topology="ps", scaler_sharing=False)


# -- sim == dist ----------------------------------------------------------------------------------------------
WORKERS, SERVERS, STEPS = 2, 2, 4
DIST_PARAMS = TernGradParams(topology="ps", servers=SERVERS)


def _dist(rank: int, port: int, queue) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(WORKERS + SERVERS))
    try:
        comm = make_dist_communicator(backend="gloo", timeout_s=60, num_servers=SERVERS)
        weights = None
        if comm.local_ranks:
            method = TernGrad(comm, make_workers(comm.local_ranks), DIST_PARAMS, {"a": 1e-3})
            run(method, STEPS)
            weights = {n: t.detach().clone() for n, t in method.workers[0].params.items()}
        else:
            role = TernGrad.make_server(comm, DIST_PARAMS, make_workers([-1])[0], {"a": 1e-3})
            for step in range(STEPS):
                role.step(step, 0.1)
            role.close()
        queue.put((rank, (weights, comm.ledger.sent[rank], comm.ledger.received[rank])))
        comm.close()
    except BaseException:
        queue.put((rank, traceback.format_exc()))
        raise


def test_dist_equals_sim_bit_for_bit():
    results = spawn(_dist, WORKERS + SERVERS, timeout_s=180)
    method, comm = sim(DIST_PARAMS, WORKERS, STEPS)
    for rank in range(WORKERS + SERVERS):
        weights, sent, received = results[rank]
        assert (sent, received) == (comm.ledger.sent[rank], comm.ledger.received[rank]), rank
        if rank < WORKERS:
            assert all(torch.equal(weights[n], method.workers[rank].params[n].detach()) for n in SIZES), rank


# -- the average since version 3 -------------------------------------------------------------------------------------
def test_the_average_is_the_integer_level_times_s_over_n_and_old_versions_do_not_count():
    """level x (s / N), s / N rounded once per tensor: what the fused decoder and mean_of_levels both compute.
    Versions 1 and 2 drew their trits from torch's generator, version 3's clipping bound could differ in its last
    bit: none of their records computes what version 4 or 5 does (5 changed only the clip under a shared c sigma)."""
    from commbench.methods.codecs import fused_ternary as fused
    from commbench.methods.terngrad import mean_of_levels

    g = torch.Generator().manual_seed(3)
    trits = [torch.randint(-1, 2, (1000,), generator=g, dtype=torch.int8) for _ in range(3)]
    scale = torch.rand(2, generator=g) + 0.5
    payloads = [TRIT_PACKINGS["2bit"][0](t) for t in trits]
    levels = torch.stack([t.to(torch.int16) for t in trits]).sum(0, dtype=torch.int16)
    by_torch = mean_of_levels(levels, scale, torch.tensor([600, 400]), 3)
    by_kernel = fused.decode_shared(payloads, 1000, fused.offsets_of([600, 400]), scale, "2bit")
    assert torch.equal(by_torch, by_kernel)
    expected = levels[:600].float() * (scale[0] / 3)
    assert torch.equal(by_torch[:600], expected)
    assert TernGrad.version == 5 and TernGrad.computes_as(5, 8, {}) and TernGrad.computes_as(4, 8, {})
    assert not any(TernGrad.computes_as(v, 2, {}) for v in (1, 2, 3))
