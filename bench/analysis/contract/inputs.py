"""What the contract report feeds the compressors: named gradient tensors, as a method sees them.

Two kinds, each with fixed seeds so that a report is the same on every run on one machine:

* synthetic heavy-tailed vectors: Student-t with 3 degrees of freedom (gradients' elements have heavy tails,
  which is what clipping and thresholds are for), scaled by 1e-3, the order of a gradient's elements, so that a
  threshold of 1e-3 sends a part of them and keeps the rest; a few tensors of different sizes, one of them
  small (a bias);
* real gradients: a task's own model and data (built by the tasks package, as a run builds them), trained by
  plain SGD on small batches, its per-parameter gradients of the data loss taken at a few steps.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

SYNTHETIC_SHAPES = {"dense.weight": (256, 128), "conv.weight": (32, 3, 3, 3), "out.weight": (10, 256),
                    "dense.bias": (256,), "out.bias": (10,)}
SCALE = 1e-3
SEED = 20240701
STEPS = (0, 50, 100)  # where the real gradients are taken: at the start, and after the model has learnt a little
BATCH = 32            # samples per step: a small batch, so 100 steps of LeNet cost about a second


@dataclass(frozen=True)
class InputSet:
    """One worker's gradients: ``label`` says where they come from; ``tensors`` by parameter name, in order."""

    label: str
    tensors: dict[str, torch.Tensor]
    key: str = ""  # a short name for a column (``synthetic``, ``step50``)

    @property
    def shapes(self) -> dict[str, torch.Size]:
        return {n: t.shape for n, t in self.tensors.items()}


def student_t(shape, generator: torch.Generator) -> torch.Tensor:
    """Student-t(3) samples: a normal over the root of a chi-square(3) / 3 (torch's StudentT takes no generator)."""
    z = torch.randn(shape, generator=generator)
    chi2 = torch.randn((3, *shape), generator=generator).pow(2).sum(0)
    return z / (chi2 / 3).sqrt()


def synthetic(seed: int = 0, shapes: dict[str, tuple] | None = None) -> InputSet:
    """The synthetic tensors of stream ``seed`` (another seed: another worker's, or another step's)."""
    generator = torch.Generator().manual_seed(SEED + seed)
    tensors = {n: (SCALE * student_t(s, generator)).float() for n, s in (shapes or SYNTHETIC_SHAPES).items()}
    return InputSet(f"synthetic t3 (seed {seed})", tensors, "synthetic" if seed == 0 else f"synthetic{seed}")


def stream(steps: int, shapes: dict[str, tuple] | None = None) -> list[InputSet]:
    """A fixed gradient stream for error feedback, as SGD's: a persistent part (the synthetic tensors of seed 0)
    plus fresh noise of the same law at each step (seeds 100, 101, ...)."""
    base = synthetic(0, shapes).tensors
    return [InputSet(f"synthetic stream, step {t}",
                     {n: base[n] + v for n, v in synthetic(100 + t, shapes).tensors.items()}, f"stream{t}")
            for t in range(steps)]


def task_gradients(task_name: str, dataset: str, root: Path | str = "data", steps=STEPS, batch: int = BATCH,
                   seed: int = 0) -> list[InputSet]:
    """The gradients of ``task_name``'s default model on ``dataset`` at ``steps`` of a plain SGD loop (the
    recipe's base learning rate, no momentum or weight decay: only the data loss's gradient is wanted)."""
    from commbench.tasks import TASKS

    task = TASKS[task_name]
    variant = task.variants[0]
    task.prepare_data(dataset, Path(root))
    data = task.load_data(dataset, Path(root), variant)
    torch.manual_seed(seed)
    model = task.make_model(variant, data.num_classes, data.input_shape[0], {}).train()
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    lr, generator, taken = _base_lr(task), torch.Generator().manual_seed(SEED + seed), []
    for step in range(max(steps) + 1):
        x, y = data.train_batch(torch.randint(data.train_size, (batch,), generator=generator), step, seed)
        model.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        if step in steps:
            taken.append(InputSet(f"{task_name} on {dataset}, step {step}",
                                  {n: p.grad.detach().float().clone() for n, p in named}, f"step{step}"))
        with torch.no_grad():  # by hand: torch.optim's import alone costs seconds (torch._dynamo)
            for _, p in named:
                p.add_(p.grad, alpha=-lr)
    return taken


def _base_lr(task) -> float:
    recipe = next(iter(task.recipes.values()))
    cited = recipe.get("lr_schedule.base_lr")
    return float(cited.value) if cited is not None else 0.01


@dataclass(frozen=True)
class Inputs:
    """Everything one report feeds every compressor: the input sets (bias, spread), the pairs of workers (one
    exchange each, and linearity), the error-feedback stream, and the tensors timed."""

    sets: list[InputSet]
    pairs: list[tuple[str, list[InputSet]]]
    stream: list[InputSet]

    @property
    def timed(self) -> InputSet:
        """The largest input set: a model's gradient, where there is one."""
        return max(self.sets, key=lambda s: sum(t.numel() for t in s.tensors.values()))


def inputs(task_name: str | None = "lenet-mnist", dataset: str = "synthetic", root: Path | str = "data",
           feedback_steps: int = 20, shapes: dict[str, tuple] | None = None) -> Inputs:
    """The synthetic tensors and, with ``task_name``, its gradients at :data:`STEPS`; the workers of each exchange
    are two synthetic seeds, and consecutive steps of the task."""
    a, b = synthetic(0, shapes), synthetic(1, shapes)
    sets, pairs = [a], [("synthetic", [a, b])]
    if task_name is not None:
        taken = task_gradients(task_name, dataset, root)
        sets += taken
        pairs += [(f"{u.key}+{v.key}", [u, v]) for u, v in zip(taken, taken[1:])]
    return Inputs(sets, pairs, stream(feedback_steps, shapes))
