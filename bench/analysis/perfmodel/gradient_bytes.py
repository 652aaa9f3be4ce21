"""Bytes a worker sends (and receives) in one step of a method, read from the byte ledger, not from a formula.

:func:`gradient_bytes` builds the parameter tensors of a task's model (shapes from a model built on the meta
device, so no weights are initialised), runs ONE step of the real method code on the ``sim`` transport with
``workers`` logical workers, and reads the ledger. What the step is fed:

* baseline, terngrad, ssdsgd: random normal gradients (seeded). Their byte counts do not depend on the values
  (fixed-width encodings), only on shapes and method parameters.
* wgt, bgt, qgt: what they send depends on the values. ``fraction_sent`` (required) says which fraction of
  the elements cross the threshold in this step: the first ``round(fraction * n)`` elements of the flat
  gradient are set to 2 T N (so each worker's share g / N is 2 T, over the threshold T) and the rest to 0.
  The method's own encoder then chooses its layout (index list or bitmap) and the ledger counts it.

Method parameters are those the task's paper recipe uses for the method (``Task.method_overlay``, e.g.
AlexNet keeps its last layer and small tensors in float32 under TernGrad), then the caller's overrides.
The step index is 0, which for SSD-SGD is a warm-up step (push and pull); its ``received`` is the pull.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import torch

from commbench.methods import Worker, registry
from commbench.methods.comm import SimCommunicator
from commbench.tasks import TASKS

from commbench.config import ConfigError, method_params_of
from commbench.config.resolve import method_class


@dataclass(frozen=True)
class GradientBytes:
    """One step's traffic of one worker (mean over the workers), bytes."""

    task: str
    method: str
    method_params: dict = field(hash=False)
    workers: int
    elements: int               # gradient elements (trainable parameters)
    tensors: int                # parameter tensors
    sent: float                 # bytes one worker hands to the network in the step
    received: float             # bytes one worker takes from the network in the step
    by_op: dict = field(hash=False)  # bytes sent per collective kind, summed over workers
    gradients: str              # what the step was fed

    @property
    def fp32_bytes(self) -> int:
        """4 bytes x elements: the full-precision gradient."""
        return 4 * self.elements

    @property
    def ratio(self) -> float:
        """fp32 bytes / sent bytes (the compression ratio on the sending side)."""
        return self.fp32_bytes / self.sent


def parameter_shapes(task_name: str, variant: str | None = None) -> dict[str, torch.Size]:
    """Named trainable parameter shapes of a task's model, in model order (built on the meta device)."""
    task = _task(task_name)
    with torch.device("meta"):
        model = task.build_model(variant or task.variants[0], task.classes)
    return {n: p.shape for n, p in model.named_parameters() if p.requires_grad}


def resolve_method_params(task_name: str, method: str, overrides: Mapping[str, Any] | None = None,
                          recipe: str | None = None) -> dict:
    """The task recipe's parameters for ``method`` (paper values), then ``overrides`` ({name: value})."""
    task = _task(task_name)
    method_class(method)  # an unknown name: the registry's one message, as ConfigError
    recipe = recipe or next(iter(task.recipes))
    settings = {f"method.{k.removeprefix('method.')}": v for k, v in (overrides or {}).items()}
    params, _sources = method_params_of(task, recipe, method, settings)
    return params


def gradient_bytes(task: str, method: str, method_params: Mapping[str, Any] | None = None, *, workers: int = 2,
                   fraction_sent: float | None = None, seed: int = 0) -> GradientBytes:
    """Bytes per worker of one step of ``method`` on ``task``'s parameter shapes (see the module docstring).

    ``method_params``: overrides of the task's paper parameters for the method (names with or without the
    ``method.`` prefix). ``workers`` >= 2 (one worker sends nothing). Cached per arguments."""
    params = resolve_method_params(task, method, method_params)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 2:
        raise ConfigError(f"workers: the ledger counts traffic between at least 2 workers, got {workers!r}")
    if registry.family_of(method) == registry.THRESHOLD:
        if fraction_sent is None:
            raise ConfigError(f"fraction_sent: method {method} sends a value-dependent number of elements; "
                              "give the fraction of elements sent per step (0..1)")
        if not (isinstance(fraction_sent, (int, float)) and 0 <= fraction_sent <= 1):
            raise ConfigError(f"fraction_sent: must be in [0, 1], got {fraction_sent!r}")
    elif fraction_sent is not None:
        raise ConfigError(f"fraction_sent: only for the threshold methods "
                          f"({', '.join(registry.members(registry.THRESHOLD))}), "
                          f"not {method}")
    key = tuple(sorted(params.items()))
    return _measure(task, method, key, workers, fraction_sent, seed)


@functools.lru_cache(maxsize=64)
def _measure(task: str, method: str, params_key: tuple, workers: int, fraction: float | None,
             seed: int) -> GradientBytes:
    params = dict(params_key)
    method_cls, method_params = registry.get(method), registry.params_for(method, params)
    shapes = parameter_shapes(task)
    elements = sum(math.prod(s) for s in shapes.values())

    comm = SimCommunicator(workers, num_servers=method_cls.servers_needed(method_params))
    # Separate (zero) weights per worker; the gradient tensors are shared, since no method writes into them.
    worker_list = []
    for rank in range(workers):
        weights = {n: torch.nn.Parameter(torch.zeros(s)) for n, s in shapes.items()}
        worker_list.append(Worker(rank, weights, torch.optim.SGD(list(weights.values()), lr=0.0), seed=seed + rank))
    flat, described = _gradients(method, method_params, elements, workers, fraction, seed)
    grads, offset = {}, 0
    for n, s in shapes.items():
        numel = math.prod(s)
        grads[n] = flat[offset:offset + numel].view(s)
        offset += numel
    instance = method_cls(comm, worker_list, method_params, weight_decay={})
    with torch.no_grad():
        instance.step([grads] * workers, lr=0.01, step=0)

    ledger = comm.ledger
    return GradientBytes(task=task, method=method, method_params=params, workers=workers, elements=elements,
                         tensors=len(shapes), sent=ledger.total_sent(workers) / workers,
                         received=ledger.total_received(workers) / workers, by_op=dict(ledger.by_op),
                         gradients=described)


def _gradients(method: str, params, elements: int, workers: int, fraction: float | None,
               seed: int) -> tuple[torch.Tensor, str]:
    if registry.family_of(method) == registry.THRESHOLD:
        sent = round(fraction * elements)
        flat = torch.zeros(elements)
        flat[:sent] = 2.0 * params.threshold * workers
        return flat, (f"{sent} of {elements} elements over the threshold (fraction_sent={fraction}), "
                      "the rest 0")
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(elements, generator=generator), f"random normal N(0, 1), seed {seed}"


def _task(name: str):
    if name not in TASKS:
        raise ConfigError(f"task: unknown task {name!r} (known: {', '.join(TASKS)})")
    return TASKS[name]


# -- model facts from the meta device -------------------------------------------------------------------
def input_shape(task_name: str, variant: str | None = None) -> tuple[int, int, int]:
    """(channels, height, width) of one training sample as the task feeds it to its model."""
    task = _task(task_name)
    variant = variant or task.variants[0]
    if hasattr(task, "crop"):  # ImageNet tasks: square crops
        return (3, task.crop, task.crop)
    if hasattr(task, "input_size"):  # CIFAR-10 tasks: crop size depends on the variant's augmentation
        size = task.input_size(variant)
        return (3, size, size)
    if task_name == "lenet-mnist":
        return (1, 28, 28)
    raise ConfigError(f"task: no input shape known for {task_name!r}")


@functools.lru_cache(maxsize=32)
def flops_per_sample(task_name: str, variant: str | None = None) -> tuple[float, float]:
    """(forward, backward) floating-point operations per training sample, counted by torch's
    ``FlopCounterMode`` on the meta device (matmuls and convolutions; element-wise ops are not counted).
    The input does not require a gradient, as in training, so the first layer's input gradient is not
    counted."""
    from torch.utils.flop_counter import FlopCounterMode

    task = _task(task_name)
    batch = 2
    with torch.device("meta"):
        model = task.build_model(variant or task.variants[0], task.classes)
        x = torch.empty(batch, *input_shape(task_name, variant))
        with FlopCounterMode(display=False) as forward:
            out = model(x)
        with FlopCounterMode(display=False) as backward:
            out.float().sum().backward()
    return forward.get_total_flops() / batch, backward.get_total_flops() / batch


def layer_groups(task_name: str) -> list[list[str]]:
    """The model's parameter tensors grouped by the module that owns them (its layers), in model order."""
    groups: dict[str, list[str]] = {}
    for name in parameter_shapes(task_name):
        groups.setdefault(name.rsplit(".", 1)[0], []).append(name)
    return list(groups.values())
