"""A kit method's DDP hook counts its bytes as the harness counts them, and the baseline's hook counts an
all-reduce's, in a user's own DDP script (2 gloo processes).

The model is small (under DDP's 1 MiB first bucket), so DDP hands the whole gradient over as one bucket, which
is the harness's exchange after backward: the hook's ledger must then equal, rank by rank and step by step, what
the harness's ledger counts for the same local gradients (replayed here in one process through the method's own
exchange on a :class:`SimCommunicator`). WGT is the case: its payload's size depends on the values, so only the
same computation gives the same count.
"""
from __future__ import annotations

import os

import torch
import torch.nn.functional as F
from torch import nn

from commbench.methods.comm import ByteLedger, SimCommunicator
from commbench.methods.threshold import WGT, ThresholdParams

from ..gloo import spawn

WORLD, STEPS, SEED = 2, 3, 1000
PARAMS = ThresholdParams(threshold=1e-3)


def model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 5))  # 1,669 parameters: one bucket


def batch(rank: int, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(100 * step + rank)
    return torch.randn((16, 20), generator=g), torch.randint(5, (16,), generator=g)


def _ddp_worker(rank: int, port: int, queue) -> None:
    import functools

    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from commbench.methods.ddp_hooks import AllReduceHookState, allreduce_hook
    from commbench.methods.kit import KitHookState, kit_hook

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    try:
        out = {}
        for label in ("wgt", "allreduce"):
            net = model()
            ddp = DDP(net)
            ledger = ByteLedger()
            if label == "wgt":
                state, hook = KitHookState(ddp, WGT, PARAMS, worker_seed=SEED + rank, ledger=ledger), kit_hook
            else:
                state, hook = AllReduceHookState(ddp, ledger=ledger), allreduce_hook
            seen, sent = [], []

            @functools.wraps(hook)  # DDP checks the hook's signature
            def recording(state, bucket, hook=hook, seen=seen):
                seen.append({n: g.detach().clone().view(p.shape) for n, p, g in
                             zip(state.names(bucket), bucket.parameters(), bucket.gradients())})
                return hook(state, bucket)

            ddp.register_comm_hook(state, recording)
            optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
            for step in range(STEPS):
                x, y = batch(rank, step)
                optimizer.zero_grad()
                F.cross_entropy(ddp(x), y).backward()
                optimizer.step()
                sent.append(ledger.total_sent())
            out[label] = {"buckets": seen, "sent": sent, "received": ledger.total_received()}
        queue.put((rank, out))
    finally:
        dist.destroy_process_group()


def _harness_counts(buckets_by_rank: dict[int, list[dict]]) -> dict[int, list[int]]:
    """The harness's exchange after backward, over the same local gradients: each rank's running bytes sent."""
    comm = SimCommunicator(WORLD)
    shapes = {n: g.shape for n, g in buckets_by_rank[0][0].items()}
    exchange = WGT.build_exchange(comm, PARAMS, shapes, "cpu", [SEED + r for r in range(WORLD)])
    running = {r: [] for r in range(WORLD)}
    for step in range(STEPS):
        grads = [buckets_by_rank[r][step] for r in range(WORLD)]
        exchange.finish(exchange.start(list(shapes), grads, step))
        for r in range(WORLD):
            running[r].append(comm.ledger.sent[r])
    return running


def test_a_kit_hook_counts_the_harness_bytes_and_the_baseline_hook_an_all_reduce():
    results = spawn(_ddp_worker, WORLD, timeout_s=180)
    wgt = {r: results[r]["wgt"] for r in range(WORLD)}
    assert all(len(wgt[r]["buckets"]) == STEPS for r in range(WORLD)), "one bucket per step: the whole model"
    expected = _harness_counts({r: wgt[r]["buckets"] for r in range(WORLD)})
    for r in range(WORLD):
        assert wgt[r]["sent"] == expected[r], r
        assert wgt[r]["sent"][0] > 8  # a payload and its size went out
    # two ranks: each receives what the other sent (payloads padded to the larger, and the size announcements)
    assert (wgt[0]["received"], wgt[1]["received"]) == (wgt[1]["sent"][-1], wgt[0]["sent"][-1])
    numel = 20 * 64 + 64 + 64 * 5 + 5
    for r in range(WORLD):
        plain = results[r]["allreduce"]
        assert plain["sent"] == [4 * numel * (s + 1) for s in range(STEPS)], r  # float32, each way, per step
        assert plain["received"] == 4 * numel * STEPS
