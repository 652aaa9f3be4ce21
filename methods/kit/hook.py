"""Any kit method as a DistributedDataParallel communication hook, built from the same parts as the method
(its compressor and memory) and run by the same exchange (:mod:`.exchange`), over DDP's process group::

    ddp = DistributedDataParallel(model)
    ledger = ByteLedger()  # optional: counts this rank's bytes as the harness counts its own
    state = KitHookState(ddp, TernGrad, TernGradParams(wd_in_grad=False), worker_seed=1000 + rank, ledger=ledger)
    ddp.register_comm_hook(state, kit_hook)

For the same local gradients and seeds the averaged gradient the hook hands back to DDP is bit for bit the one
the harness computes (before its weight decay): only the grouping differs (DDP's buckets), and a tensor's payload
does not depend on its group. Everything kept per tensor (its compressed index, a residual) is keyed by the
parameter's name, so DDP's rebuilt buckets after the first iteration change nothing.

Limits: a method whose math spans the whole gradient (``can_bucket`` false) or that puts weight decay into the
compressed gradient is refused at construction (keep weight decay in the optimizer: SGD's ``weight_decay=``
adds it after the exchange, as the harness does); parameters with ``requires_grad=False`` are left out (DDP
never buckets them); DDP's ``join`` for uneven inputs is not supported.
"""
# No ``from __future__ import annotations``: DDP's register_comm_hook inspects the hook's annotations and
# accepts only the objects dist.GradBucket and torch.futures.Future[torch.Tensor], not their strings.
import torch
import torch.distributed as dist
from torch import nn

from ..comm.dist import GroupCommunicator
from ..comm.ledger import ByteLedger

TensorFuture = torch.futures.Future[torch.Tensor]  # the return annotation DDP requires of a hook


def trainable(model: nn.Module) -> list:
    """(name, parameter) in model order, without DDP's ``module.`` prefix, trainable ones only."""
    if isinstance(model, nn.parallel.DistributedDataParallel):
        model = model.module
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if not named:
        raise ValueError("the model has no trainable parameters")
    return named


class KitHookState:
    """State of :func:`kit_hook`: the method's exchange for this rank, the step counter (it advances after the
    bucket DDP marks last; set it when resuming), and each parameter's name. ``method``: a kit method class
    (``commbench.methods.kit.KitMethod``); ``params`` its parameters; ``worker_seed`` this rank's seed (the harness's
    ``Worker.seed``); ``shared_seed`` the seed every rank shares (the harness's ``Method.shared_seed``)."""

    def __init__(self, model: nn.Module, method, params, worker_seed: int = 0,
                 process_group: dist.ProcessGroup | None = None, ledger: ByteLedger | None = None,
                 shared_seed: int = 0):
        if not method.can_bucket(params):
            raise ValueError(f"{method.name} with these parameters cannot run as a DDP hook: "
                             f"{method.why_not_bucketed(params)}, and DDP hands over one bucket at a time")
        if method.decay_before_exchange(params):
            raise ValueError(f"{method.name}: weight decay inside the compressed gradient is not supported by the DDP "
                             f"hook, which sees only the data-loss gradient; put weight decay in the optimizer")
        named = trainable(model)
        device = named[0][1].device
        self.name_of = {id(p): n for n, p in named}
        self._params = [p for _, p in named]  # keeps the ids valid for the state's lifetime
        self.ledger = ledger if ledger is not None else ByteLedger()
        comm = GroupCommunicator(process_group, self.ledger, device)
        self.exchange = method.build_exchange(comm, params, {n: p.shape for n, p in named}, device,
                                              [int(worker_seed)], shared_seed=int(shared_seed))
        self.method, self.params, self.step = method, params, 0

    def names(self, bucket: dist.GradBucket) -> list[str]:
        try:
            return [self.name_of[id(p)] for p in bucket.parameters()]
        except KeyError:
            raise KeyError("a bucket parameter is not among the parameters the hook state was built from: build "
                           "the state from the model that DistributedDataParallel wraps") from None

    def memory(self) -> dict:
        """The method's memory (a residual), for checkpoints or inspection."""
        return self.exchange.memory.state_dict()


def kit_hook(state: KitHookState, bucket: dist.GradBucket) -> TensorFuture:
    """The kit method's exchange of one DDP bucket; the future's value is the averaged bucket buffer."""
    buffer = bucket.buffer()
    if buffer.dtype != torch.float32:
        raise TypeError(f"the {state.method.name} DDP hook takes float32 gradients, got {buffer.dtype}")
    names = state.names(bucket)
    grads = [g.reshape(-1) for g in bucket.gradients()]
    if sum(g.numel() for g in grads) != buffer.numel():
        raise RuntimeError("bucket gradients do not tile the bucket buffer; cannot lay the result out")
    pending = state.exchange.start(names, [dict(zip(names, grads))], state.step)
    if bucket.is_last():
        state.step += 1

    def assemble(_fut) -> torch.Tensor:
        means = state.exchange.finish(pending, ready=True)[0]
        return torch.cat([means[n].reshape(-1) for n in names])

    handles = pending.handles()
    if not handles:
        done = torch.futures.Future()
        done.set_result(None)
        return done.then(assemble)
    return torch.futures.collect_all([h.future() for h in handles]).then(assemble)
