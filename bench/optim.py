"""Learning-rate schedules, optimizers and the evaluation EMA, as the papers' frameworks define them."""
from __future__ import annotations

from typing import Iterable, Mapping

import torch

from methods.averaging import MovingAverage


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


def make_optimizer(spec: Mapping, params: Iterable[torch.Tensor]) -> torch.optim.Optimizer:
    """Weight decay is never given to the optimizer: methods add it to the gradient themselves, where the
    reference recipe puts it (before or after the exchange). The lr is set by the method every step."""
    params = list(params)
    if spec["name"] in ("sgd", "momentum"):
        momentum = spec["momentum"] if spec["name"] == "momentum" else 0.0
        # torch's SGD momentum (buf = m*buf + g; w -= lr*buf) is TF's MomentumOptimizer.
        return torch.optim.SGD(params, lr=0.0, momentum=momentum)
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
