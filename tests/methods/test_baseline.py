"""The baseline method: mean of the workers' gradients, weight decay after the exchange."""
from __future__ import annotations

import torch

from commbench.methods import Worker
from commbench.methods.baseline import Baseline
from commbench.methods.comm import SimCommunicator


def make_workers(n):
    workers = []
    for rank in range(n):
        params = {"w": torch.ones(3, requires_grad=True), "b": torch.zeros(2, requires_grad=True)}
        workers.append(Worker(rank, params, torch.optim.SGD(params.values(), lr=0.0)))
    return workers


def test_every_worker_applies_the_mean_gradient_plus_decay():
    n = 3
    comm = SimCommunicator(n)
    workers = make_workers(n)
    method = Baseline(comm, workers, Baseline.Params(), weight_decay={"w": 0.5, "b": 0.0})
    grads = [{"w": torch.full((3,), float(r)), "b": torch.full((2,), 2.0 * r)} for r in range(n)]
    method.step(grads, lr=0.1, step=0)
    mean_w, mean_b = 1.0, 2.0  # means of 0,1,2 and 0,2,4
    for w in workers:
        assert torch.allclose(w.params["w"], torch.full((3,), 1 - 0.1 * (mean_w + 0.5 * 1.0)))
        assert torch.allclose(w.params["b"], torch.full((2,), -0.1 * mean_b))
    # one flat allreduce per step: every worker sends and receives the whole gradient once
    assert comm.ledger.calls["allreduce"] == 1
    assert all(comm.ledger.sent[r] == comm.ledger.received[r] == 4 * 5 for r in range(n))
