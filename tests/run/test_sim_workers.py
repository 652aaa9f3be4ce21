"""Simulated workers near one process's cost: a synchronous method's workers hold one set of parameters and one
optimizer (their values agree by construction), each its own buffers and gradients; and they still compute what
real gloo processes compute, bit for bit, on a BatchNorm model too."""
from __future__ import annotations

import pytest
import torch

from commbench.config import resolve
from commbench.methods.comm import SimCommunicator
from commbench.config.resolve import server_count
from commbench.run.train import Trainer

from ..conftest import run_and_load


def sim_trainer(method: str, **settings) -> Trainer:
    cfg = resolve({"task": "resnet20-cifar10", "dataset": "synthetic", "method": method, "backend": "sim",
                   "workers": 3, "global_batch": 12, "steps": 2, "threads": 1, **settings})
    return Trainer(cfg, SimCommunicator(3, num_servers=server_count(cfg)), checkpoints=None)


@pytest.mark.parametrize("method", ["baseline", "terngrad", "bgt", "fp16", "powersgd"])
def test_a_synchronous_methods_simulated_workers_share_parameters_and_optimizer_not_buffers(method):
    t = sim_trainer(method)
    owner, *others = t.workers
    assert owner.shares is None and all(w.shares == owner.rank for w in others)
    assert all(w.optimizer is owner.optimizer for w in others)
    assert all(w.params[n] is owner.params[n] for w in others for n in owner.params)
    t.step(0)
    buffers = [dict(m.named_buffers()) for m in t.models]
    name = next(n for n in buffers[0] if n.endswith("running_mean"))
    assert not torch.equal(buffers[0][name], buffers[1][name])  # each worker's BatchNorm saw its own images


def test_ssdsgds_workers_keep_their_own_parameters():
    t = sim_trainer("ssdsgd", **{"method.k": 1, "method.warmup": 0})
    assert all(w.shares is None for w in t.workers)
    name = next(iter(t.workers[0].params))
    assert t.workers[0].params[name] is not t.workers[1].params[name]
    assert t.workers[0].optimizer is not t.workers[1].optimizer


@pytest.mark.parametrize("method", [pytest.param("baseline", marks=pytest.mark.slow), "terngrad"])
def test_sim_and_dist_agree_on_a_batch_norm_model(tmp_path, method):
    """ResNet-20 (BatchNorm) for 3 steps, 2 workers: the same weights and BatchNorm statistics in one process
    as in two gloo processes."""
    (sim, w_sim), (dist, w_dist) = (
        run_and_load("--task", "resnet20-cifar10", "--dataset", "synthetic", "--method", method, "--workers", "2",
                     "--backend", backend, "--steps", "3", "--set", "global_batch=8", "--set", "eval.every=3",
                     "--out", str(tmp_path / backend))
        for backend in ("sim", "dist"))
    m_sim, m_dist = sim["metrics"], dist["metrics"]
    assert any("running_mean" in k for k in w_sim)
    assert all(torch.equal(w_sim[k], w_dist[k]) for k in w_sim)
    assert m_sim["final_weights"] == m_dist["final_weights"] and m_sim["bytes_sent"] == m_dist["bytes_sent"]
