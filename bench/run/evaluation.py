"""Evaluating a model: top-1 and top-5 over the evaluation split (with which images it got right), BatchNorm
statistics recomputed for weights that were never trained with them (a moving average, the servers' global
weights), and the steps after which a run evaluates."""
from __future__ import annotations

import torch

from commbench.config import RunConfig


@torch.no_grad()
def evaluate(model: torch.nn.Module, data, batch_size: int,
             device: torch.device) -> tuple[float, float | None, torch.Tensor]:
    """Top-1 and top-5 accuracy (fractions) over the whole evaluation split, and which images top-1 got right
    (in the split's order: the paired intervals of the paper tables compare runs image by image)."""
    was_training = model.training
    model.eval()
    top5 = total = 0
    correct = []
    for x, y in data.eval_batches(batch_size):
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        logits = model(x)
        k = min(5, logits.shape[1])
        best = logits.topk(k, dim=1).indices
        correct.append((best[:, 0] == y).cpu())
        top5 += (best == y[:, None]).any(dim=1).sum().item()
        total += len(y)
    model.train(was_training)
    hits = torch.cat(correct) if correct else torch.zeros(0, dtype=torch.bool)
    return int(hits.sum()) / total, (top5 / total if data.num_classes >= 5 else None), hits


def share_parameters(owner: torch.nn.Module, replica: torch.nn.Module) -> None:
    """Make ``replica`` (a copy of ``owner``) use ``owner``'s parameter tensors; its buffers stay its own."""
    for mine, theirs in zip(replica.modules(), owner.modules()):
        for name in list(mine._parameters):
            if mine._parameters[name] is not None:
                mine._parameters[name] = theirs._parameters[name]


@torch.no_grad()
def recompute_batch_norm(model: torch.nn.Module, batches, device: torch.device) -> None:
    """BatchNorm's running statistics for ``model``'s weights: reset, then the cumulative average over
    ``batches`` (momentum None), with the rest of the model in evaluation mode (no dropout). A model without
    BatchNorm is left as it is, and the batches are not read."""
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return
    was_training, momenta = model.training, [m.momentum for m in norms]
    model.eval()
    for m in norms:
        m.reset_running_stats()
        m.momentum = None
        m.train()
    for x, _ in batches:
        model(x.to(device, non_blocking=True))
    for m, momentum in zip(norms, momenta):
        m.momentum = momentum
    model.train(was_training)


def eval_steps(cfg: RunConfig) -> set[int]:
    """Steps (1-based counts) after which worker 0 evaluates; the last step always."""
    every = cfg.eval["every"] or max(1, cfg.steps // 4)
    return {s for s in range(every, cfg.steps + 1, every)} | {cfg.steps}

