"""TernGrad, the threshold methods (WGT/BGT/QGT) and a counted plain all-reduce as PyTorch DDP communication
hooks: the kit's hook (:mod:`commbench.methods.kit.hook`) for each, with the settings each accepts checked first.

Usage (one state per DDP model; the state keeps the method's memory and the step counter)::

    ddp = DistributedDataParallel(model)
    ledger = ByteLedger()  # optional: counts this rank's bytes as the harness counts its own
    state = TernGradHookState(ddp, TernGradParams(wd_in_grad=False), worker_seed=1000 + rank, ledger=ledger)
    ddp.register_comm_hook(state, terngrad_hook)
    ...
    print(ledger.total_sent(), "bytes sent")

For the same local gradients and seeds, the averaged gradient a hook hands back to DDP is bit for bit the one the
harness's :class:`commbench.methods.terngrad.TernGrad` / :class:`commbench.methods.threshold.Threshold`
compute (before their weight decay): the hooks run the harness's own exchange (compressor, memory, collectives)
over DDP's process group, one DDP bucket at a time. What differs is only the grouping: DDP's buckets (whose order changes when DDP rebuilds
them after the first iteration) instead of the harness's, and a tensor's payload does not depend on its group.

Limits: float32 gradients only (as the harness); weight decay is not part of any hook, so keep it in the
optimizer (``weight_decay=`` of SGD adds ``wd * w`` after the exchange, as the harness's ``wd_in_grad=False`` and
threshold methods do); parameters with ``requires_grad=False`` are left out (the harness assumes every parameter
trains); DDP's ``join`` for uneven inputs is not supported.
"""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from .base import NoParams
from .codecs import sparse
from .comm.ledger import ByteLedger
from .kit import Compressor, KitHookState, KitMethod, kit_hook
from .terngrad import TernGrad, TernGradParams
from .threshold import BGT, QGT, WGT, ThresholdParams

__all__ = ["AllReduceHookState", "TernGradHookState", "ThresholdHookState", "allreduce_hook", "terngrad_hook",
           "threshold_hook"]

terngrad_hook = threshold_hook = allreduce_hook = kit_hook  # one exchange for all: the state says which method


class TernGradHookState(KitHookState):
    """State of :func:`terngrad_hook`. ``model``: the module DDP wraps or the DDP model itself. ``worker_seed``:
    this rank's own seed (the harness's ``Worker.seed``); each tensor's Bernoulli draws come from
    ``mix_seed(worker_seed, step, j)``, j its index among the ternarized tensors (model parameter order).
    ``step`` starts at 0 and counts backward passes; set it when resuming from a checkpoint. ``ledger``: a
    :class:`commbench.methods.comm.ByteLedger` that counts every byte this rank sends and receives, as the harness
    counts its own (``ledger.total_sent()``)."""

    def __init__(self, model: nn.Module, params: TernGradParams, worker_seed: int,
                 process_group: dist.ProcessGroup | None = None, ledger: ByteLedger | None = None):
        if params.wd_in_grad:
            raise ValueError("TernGradParams.wd_in_grad=True is not supported by the DDP hook: the hook sees only "
                             "the data-loss gradient; pass wd_in_grad=False and put weight decay in the optimizer")
        if not params.layerwise:
            raise ValueError("TernGradParams.layerwise=False is not supported by the DDP hook: one scaler for the "
                             "whole gradient needs every bucket at once, and DDP hands over one bucket at a time")
        super().__init__(model, TernGrad, params, worker_seed, process_group, ledger)
        self.index = _ByParameter(self, self.exchange.compressor.index)


class ThresholdHookState(KitHookState):
    """State of :func:`threshold_hook`: the rule (``kind`` in wgt, bgt, qgt), the threshold T, and this worker's
    float64 residual (``residuals()`` by parameter name, for checkpoints or inspection)."""

    def __init__(self, model: nn.Module, kind: str, threshold: float,
                 process_group: dist.ProcessGroup | None = None, ledger: ByteLedger | None = None):
        if kind not in sparse.KINDS:
            raise ValueError(f"kind must be one of {', '.join(sparse.KINDS)}, got {kind!r}")
        method = {"wgt": WGT, "bgt": BGT, "qgt": QGT}[kind]
        super().__init__(model, method, ThresholdParams(float(threshold)), 0, process_group, ledger)
        self.kind, self.threshold = kind, self.params.threshold

    def residuals(self) -> dict[str, torch.Tensor]:
        memory = self.exchange.memory
        (residual,) = memory.residual.values()
        return {name: residual[lo:hi] for name, (lo, hi) in memory.at.items()}


class _Identity(Compressor):
    """Sends the gradient as it is: a linear compressor (an all-reduce sums the payloads)."""

    linear = True
    unbiased = "the input"
    claims = {"linear": "the payloads are the gradients: one all-reduce sums them (the baseline's exchange)"}

    def encode(self, group, flat, local, shared, sender):
        return flat

    def decode(self, group, payloads, shared):
        return payloads / group.workers

    def payload_bytes(self, group, sent=None):
        return 4 * group.numel


class PlainAllReduce(KitMethod):
    """The baseline's exchange as a kit method (not registered: the harness's own ``baseline`` runs it already):
    the mean of the workers' gradients, one all-reduce per bucket."""

    name, summary, Params = "allreduce", "plain all-reduce of the gradients, counted", NoParams
    compressor = _Identity


class AllReduceHookState(KitHookState):
    """State of :func:`allreduce_hook`: DDP's own all-reduce of each bucket (the mean of the gradients), with its
    bytes counted in ``ledger`` as the harness counts the baseline's, so a user's DDP script can report them."""

    def __init__(self, model: nn.Module, process_group: dist.ProcessGroup | None = None,
                 ledger: ByteLedger | None = None):
        super().__init__(model, PlainAllReduce, NoParams(), 0, process_group, ledger)


class _ByParameter:
    """A parameter's index among the compressed tensors (None: it travels as a float), by the parameter object."""

    def __init__(self, state: KitHookState, index: dict[str, int]):
        self.state, self.index = state, index

    def __getitem__(self, p: torch.Tensor) -> int | None:
        try:
            return self.index.get(self.state.name_of[id(p)])
        except KeyError:
            raise KeyError("a bucket parameter is not among the parameters the hook state was built from") from None


