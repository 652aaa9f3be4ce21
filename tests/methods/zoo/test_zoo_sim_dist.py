"""Every zoo compressor computes the same under sim and dist, bit for bit: one spawn of two real gloo processes
runs each method for a few steps on a small model's gradients, and the test process runs the same steps with two
simulated workers. Final weights, every memory the method checkpoints, and the bytes each rank sent and received
must be equal. (One gloo spawn for all of them: a CLI run per method would cost the suite minutes; a CLI
sim == dist run per collective kind is in tests/methods/test_compression_methods.py.)"""
from __future__ import annotations

import os
import traceback

import pytest
import torch
from torch import nn

from commbench.methods import Worker, registry
from commbench.methods.catalog import CATALOG
from commbench.methods.comm import SimCommunicator, make_dist_communicator

from ...gloo import spawn

WORLD, STEPS, SHARED_SEED = 2, 4, 20261204
ZOO = sorted(n for n, e in CATALOG.items() if e.source.startswith("commbench.methods.zoo.")) + ["powersgd-batched"]
# compress inside the test's four steps and its small tensors: PowerSGD from the third step, QSGD every tensor
SETTINGS = {"powersgd-batched": {"start_iter": 2}, "qsgd": {"min_size": 1}}


def model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(48, 32), nn.ReLU(), nn.Linear(32, 10))


def local_grads(rank: int, step: int) -> dict:
    """Worker ``rank``'s gradient at ``step``: fixed random tensors, heavy-tailed like gradients."""
    g = torch.Generator().manual_seed(1000 * step + rank)
    shapes = {n: p.shape for n, p in model().named_parameters()}
    return {n: torch.randn(s, generator=g) ** 3 * 1e-2 for n, s in shapes.items()}


def make_worker(rank: int) -> Worker:
    tensors = dict(model().named_parameters())
    return Worker(rank, tensors, torch.optim.SGD(tensors.values(), lr=0.1), seed=100 + rank)


def outcome(method, workers, ledger) -> dict:
    """What must agree: each worker's final weights, the method's state, the bytes each rank sent and received."""
    return {"weights": {w.rank: {n: t.detach().clone() for n, t in w.params.items()} for w in workers},
            "state": method.state_dict(), "sent": dict(ledger.sent), "received": dict(ledger.received)}


def run(name: str, comm, workers) -> dict:
    cls = registry.get(name)
    method = cls(comm, workers, registry.params_for(name, SETTINGS.get(name, {})), {n: 1e-4 for n in workers[0].params},
                 shared_seed=SHARED_SEED)
    for step in range(STEPS):
        method.step([local_grads(w.rank, step) for w in workers], lr=0.1, step=step)
    return outcome(method, workers, comm.ledger)


def _dist(rank: int, port: int, queue) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(WORLD))
    try:
        comm = make_dist_communicator(backend="gloo", timeout_s=60)
        out = {}
        for name in ZOO:
            comm.ledger.sent.clear(), comm.ledger.received.clear()
            out[name] = run(name, comm, [make_worker(rank)])
        queue.put((rank, out))
        comm.close()
    except BaseException:
        queue.put((rank, traceback.format_exc()))
        raise


def equal(a, b) -> bool:
    """Nested dicts, lists and tensors equal bit for bit (a NaN equal to a NaN in the same place)."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and \
            torch.equal(torch.nan_to_num(a), torch.nan_to_num(b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b))
    return a == b


@pytest.fixture(scope="module")
def dist_outcomes() -> dict:
    return spawn(_dist, WORLD, timeout_s=300)


def test_the_zoo_is_registered_and_listed():
    assert len(ZOO) >= 12 and all(name in registry.names() for name in ZOO)


@pytest.mark.parametrize("name", ZOO)
def test_sim_and_dist_compute_the_same_weights_state_and_bytes(name, dist_outcomes):
    comm = SimCommunicator(WORLD)
    sim = run(name, comm, [make_worker(r) for r in range(WORLD)])
    for rank in range(WORLD):
        dist = dist_outcomes[rank][name]
        assert equal(sim["weights"][rank], dist["weights"][rank]), (name, rank, "weights")
        assert dist["sent"][rank] == sim["sent"][rank] > 0 and dist["received"][rank] == sim["received"][rank]
    assert equal(_by_rank(sim["state"], 0), _by_rank(dist_outcomes[0][name]["state"], 0)), (name, "state")
    assert sim["sent"][0] < 4 * STEPS * sum(p.numel() for p in model().parameters()), "compresses nothing"


def _by_rank(state, rank):
    """A method's state as rank ``rank`` keeps it: sim holds every rank's, dist its own (nested dicts keyed by
    rank, at any depth); other values as they are."""
    if isinstance(state, dict):
        if rank in state and all(isinstance(k, int) for k in state):
            return _by_rank(state[rank], rank)
        return {k: _by_rank(v, rank) for k, v in state.items()}
    return state
