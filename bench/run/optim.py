"""Learning-rate schedules, optimizers and the evaluation EMA, as the papers' frameworks define them."""
from __future__ import annotations

from typing import Iterable, Mapping

import torch

from commbench.methods.averaging import MovingAverage


def lr_at(schedule: Mapping, step: int, total_steps: int) -> float:
    """Learning rate for iteration ``step`` (0-based) of ``total_steps``.

    fixed: base. step: base * gamma^floor(step/step_size). multistep: base * gamma^(milestones passed).
    poly (TF polynomial_decay): (base - end) * (1 - step/total)^power + end.
    exp (TF exponential_decay, staircase): base * gamma^floor(step/step_size).
    ``warmup_steps`` W (optional): the first W steps rise linearly to the schedule's value (Goyal et al.'s
    gradual warm-up, MXNet's ``warmup_epochs``): lr * (step + 1) / W.
    """
    warmup = schedule.get("warmup_steps") or 0
    if step < warmup:
        return _scheduled(schedule, step, total_steps) * (step + 1) / warmup
    return _scheduled(schedule, step, total_steps)


def _scheduled(schedule: Mapping, step: int, total_steps: int) -> float:
    base, kind = schedule["base_lr"], schedule["kind"]
    if kind == "fixed":
        return base
    if kind in ("step", "exp"):
        return base * schedule["gamma"] ** (step // schedule["step_size"])
    if kind == "multistep":
        return base * schedule["gamma"] ** sum(step >= m for m in schedule["milestones"])
    if kind == "poly":
        frac = min(step, total_steps) / total_steps
        return (base - schedule["end_lr"]) * (1.0 - frac) ** schedule["power"] + schedule["end_lr"]
    raise ValueError(f"unknown lr schedule {kind!r}")


MOMENTUM_FORMS = ("lr_outside", "lr_inside")


class LrInsideMomentum(torch.optim.Optimizer):
    """Momentum SGD as Caffe and MXNet compute it: v = m v - lr g; w = w + v (g already holds the weight decay:
    Caffe's V = m V + lr (g + wd w), MXNet's sgd_mom_update). torch and TF keep lr outside the momentum
    (buf = m buf + g; w = w - lr buf): the two agree while the learning rate is constant; after a change, this
    form's velocity still carries the old rate's steps, torch's rescales them at once. SSD-SGD's grad_sync
    (Sec. 3.2.1) is derived for this form."""

    def __init__(self, params, lr: float = 0.0, momentum: float = 0.0):
        super().__init__(params, {"lr": lr, "momentum": momentum})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            lr, momentum = group["lr"], group["momentum"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "velocity" not in state:
                    state["velocity"] = torch.zeros_like(p)
                velocity = state["velocity"]
                velocity.mul_(momentum).sub_(p.grad, alpha=lr)
                p.add_(velocity)


def make_optimizer(spec: Mapping, params: Iterable[torch.Tensor]) -> torch.optim.Optimizer:
    """Weight decay is never given to the optimizer: methods add it to the gradient themselves, where the
    reference recipe puts it (before or after the exchange). The lr is set by the method every step. Parameter
    servers build their own optimizer of the same class and settings, so they use the same momentum form."""
    params = list(params)
    if spec["name"] == "momentum" and spec.get("momentum_form", "lr_outside") == "lr_inside":
        return LrInsideMomentum(params, lr=0.0, momentum=spec["momentum"])
    if spec["name"] in ("sgd", "momentum"):
        momentum = spec["momentum"] if spec["name"] == "momentum" else 0.0
        # torch's SGD momentum (buf = m*buf + g; w -= lr*buf) is TF's MomentumOptimizer, and with Nesterov
        # (w -= lr*(g + m*buf)) TF's use_nesterov=True
        return torch.optim.SGD(params, lr=0.0, momentum=momentum, nesterov=bool(spec.get("nesterov", False)))
    if spec["name"] == "adam":
        return torch.optim.Adam(params, lr=0.0, betas=(spec["beta1"], spec["beta2"]), eps=spec["eps"])
    raise ValueError(f"unknown optimizer {spec['name']!r}")


class EMA(MovingAverage):
    """TF's ExponentialMovingAverage with num_updates over a model: decay_n = min(decay, (1 + n) / (10 + n)).

    Averages parameters and floating buffers (BN statistics: TernGrad's "double average").
    """

    def __init__(self, model: torch.nn.Module, decay: float):
        # state_dict() tensors share storage with the parameters and buffers, which training updates in
        # place: the average keeps the references rather than rebuilding the dict on every step.
        super().__init__({k: v for k, v in model.state_dict().items() if v.is_floating_point()}, decay)

    def update(self, model: torch.nn.Module | None = None) -> None:  # noqa: ARG002 - the model it was made for
        super().update()

    def apply_to(self, model: torch.nn.Module) -> None:
        model.load_state_dict({**model.state_dict(), **self.shadow})
