"""Schedules, optimizers and the EMA against the frameworks' formulas."""
from __future__ import annotations

import math

import pytest
import torch

from commbench.run.optim import EMA, lr_at, make_optimizer


def sched(kind, **kw):
    return {"kind": kind, "base_lr": 0.1, "gamma": 0.1, "power": 1.0, "end_lr": 0.0, "step_size": None,
            "milestones": [], **kw}


@pytest.mark.parametrize("schedule, step, expected", [
    (sched("fixed"), 999, 0.1),
    (sched("step", step_size=10), 9, 0.1),
    (sched("step", step_size=10), 10, 0.01),
    (sched("multistep", milestones=[80, 120]), 79, 0.1),
    (sched("multistep", milestones=[80, 120]), 120, 0.001),
    (sched("exp", step_size=20), 45, 0.001),
    (sched("poly", power=0.5), 0, 0.1),
    (sched("poly", power=0.5), 75, 0.1 * math.sqrt(0.25)),
    (sched("poly", power=0.5, end_lr=0.01), 100, 0.01),
])
def test_lr_schedules(schedule, step, expected):
    assert lr_at(schedule, step, 100) == pytest.approx(expected)


def test_momentum_matches_tf_momentum_optimizer():
    w = torch.zeros(1, requires_grad=True)
    opt = make_optimizer({"name": "momentum", "momentum": 0.9}, [w])
    opt.param_groups[0]["lr"] = 0.5
    accum, ref = 0.0, 0.0
    for g in (1.0, 2.0, -1.0):  # TF: accum = m * accum + g; var -= lr * accum
        w.grad = torch.tensor([g])
        opt.step()
        accum = 0.9 * accum + g
        ref -= 0.5 * accum
    assert w.item() == pytest.approx(ref)


def test_vanilla_sgd_ignores_momentum_setting():
    w = torch.zeros(1, requires_grad=True)
    opt = make_optimizer({"name": "sgd", "momentum": 0.9}, [w])
    opt.param_groups[0]["lr"] = 1.0
    for _ in range(2):
        w.grad = torch.ones(1)
        opt.step()
    assert w.item() == pytest.approx(-2.0)


def test_ema_uses_tf_num_updates_warmup():
    model = torch.nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(0.0)
    ema = EMA(model, 0.9999)
    with torch.no_grad():
        model.weight.fill_(1.0)
    ema.update(model)  # n = 1: decay = min(0.9999, 2/11)
    assert ema.shadow["weight"].item() == pytest.approx(1 - 2 / 11)
    target = torch.nn.Linear(1, 1, bias=False)
    ema.apply_to(target)
    assert target.weight.item() == pytest.approx(1 - 2 / 11)
