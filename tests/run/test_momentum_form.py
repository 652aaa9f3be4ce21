"""The two momentum forms against hand computation across a learning-rate change, on workers and servers."""
from __future__ import annotations

import pytest
import torch

from commbench.config import resolve
from commbench.run.optim import LrInsideMomentum, make_optimizer
from commbench.methods.ps import ServerShard, Piece

# m = 0.9, g = 1 every step, lr 0.1, 0.1, then 0.01; w starts at 0.
#   lr outside (torch, TF): buf = m buf + g; w -= lr buf    -> buf 1, 1.9, 2.71;  w -0.1, -0.29, -0.3171
#   lr inside (Caffe, MXNet): v = m v - lr g; w += v         -> v -0.1, -0.19, -0.181; w -0.1, -0.29, -0.471
EXPECTED = {"lr_outside": [-0.1, -0.29, -0.3171], "lr_inside": [-0.1, -0.29, -0.471]}
LRS = [0.1, 0.1, 0.01]


def steps(optimizer, w) -> list[float]:
    out = []
    for lr in LRS:
        for group in optimizer.param_groups:
            group["lr"] = lr
        w.grad = torch.ones_like(w)
        optimizer.step()
        out.append(w.item())
    return out


@pytest.mark.parametrize("form", sorted(EXPECTED))
def test_each_form_by_hand_across_an_lr_change(form):
    w = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    optimizer = make_optimizer({"name": "momentum", "momentum": 0.9, "momentum_form": form}, [w])
    assert isinstance(optimizer, LrInsideMomentum) is (form == "lr_inside")
    assert steps(optimizer, w) == pytest.approx(EXPECTED[form], abs=1e-12)


def test_the_servers_take_the_workers_form():
    """A parameter server copies the workers' optimizer class and settings (MXNet pickles it to the servers)."""
    w = torch.zeros(1, dtype=torch.float64)
    template = make_optimizer({"name": "momentum", "momentum": 0.9, "momentum_form": "lr_inside"},
                              [torch.zeros(1, requires_grad=True)])
    shard = ServerShard(1, [Piece("w", 0, 1)], {"w": w}, template, {}, num_workers=2)
    got = []
    for lr in LRS:
        shard.apply([torch.ones(1, dtype=torch.float64), torch.ones(1, dtype=torch.float64)], lr)  # mean g = 1
        got.append(shard.weights[0].item())
    assert got == pytest.approx(EXPECTED["lr_inside"], abs=1e-12)


def test_recipes_of_caffe_and_mxnet_papers_use_lr_inside():
    assert resolve({"task": "nin-imagenet", "method": "wgt"}).optimizer["momentum_form"] == "lr_inside"
    assert resolve({"task": "resnet20-cifar10", "method": "ssdsgd"}).optimizer["momentum_form"] == "lr_inside"
    assert resolve({"task": "resnet50-imagenet", "method": "baseline"}).optimizer["momentum_form"] == "lr_inside"
    assert resolve({"task": "alexnet-imagenet", "method": "ssdsgd"}).optimizer["momentum_form"] == "lr_inside"
    # TernGrad trains in TF: lr outside, and a run at the default keeps the run id it had before the key existed
    cfg = resolve({"task": "lenet-mnist", "method": "terngrad"})
    assert cfg.optimizer["momentum_form"] == "lr_outside"
    assert cfg.run_id == resolve({"task": "lenet-mnist", "method": "terngrad",
                                  "optimizer.momentum_form": "lr_outside"}).run_id
    assert cfg.run_id != resolve({"task": "lenet-mnist", "method": "terngrad",
                                  "optimizer.momentum_form": "lr_inside"}).run_id
