"""A method composed from a compressor and a memory: what the harness calls (``step`` after backward, or
``begin_bucket`` / ``finish_step`` while backward runs), weight decay, the optimizer's step, the checkpointed
memory. A subclass names its parts::

    class MyTopK(KitMethod):
        name, summary = "my-topk", "top-k with error feedback"
        Params = TopKParams
        compressor = TopK           # a Compressor subclass
        memory = Residual           # or Memory (none); a method may choose per its Params (memory_for)

and is registered like any method. Its DDP communication hook comes from the same parts
(``commbench.methods.kit.hook``).
"""
from __future__ import annotations

from typing import ClassVar, Sequence

import torch

from ..base import Method
from .compressor import Compressor
from .exchange import Exchange
from .memory import Memory


class KitMethod(Method):
    compressor: ClassVar[type[Compressor]]
    memory: ClassVar[type[Memory]] = Memory

    @classmethod
    def compressor_for(cls, params) -> type[Compressor]:
        """The compressor a configuration uses (a parameter may choose a variant whose declarations differ,
        such as random-k scaled, which is unbiased, or not)."""
        return cls.compressor

    @classmethod
    def memory_for(cls, params) -> type[Memory]:
        """The memory a configuration uses (a parameter may choose it)."""
        return cls.memory

    @classmethod
    def decay_before_exchange(cls, params) -> bool:
        """Whether weight decay joins the gradient before it is compressed (TernGrad's official code) rather
        than after the exchange (the optimizer's way, and the default)."""
        return False

    @classmethod
    def replicas_agree(cls, params) -> bool:
        return True  # every worker applies the same exchanged update; memories stay per worker

    @classmethod
    def can_bucket(cls, params) -> bool:
        return cls.compressor_for(params).per_tensor

    @classmethod
    def build_exchange(cls, comm, params, shapes: dict[str, torch.Size], device, seeds: Sequence[int],
                       timed=None, shared_seed: int = 0) -> Exchange:
        """The exchange of ``comm``'s local workers (``seeds`` in its order; ``shared_seed`` the run's, which
        every worker knows) over tensors of ``shapes`` (in parameter order) on ``device``."""
        compressor = cls.compressor_for(params)(params, shapes, device)
        compressed = [n for n in shapes if n in compressor.index]
        memory = cls.memory_for(params)(shapes, compressed, list(comm.local_ranks), device)
        return Exchange(comm, compressor, memory, seeds, timed, shared_seed)

    def __init__(self, comm, workers, params, weight_decay, **kwargs):
        super().__init__(comm, workers, params, weight_decay, **kwargs)
        tensors = self.workers[0].params
        self.exchange = self.build_exchange(comm, params, {n: t.shape for n, t in tensors.items()},
                                            next(iter(tensors.values())).device, [w.seed for w in self.workers],
                                            self.timed, self.shared_seed)

    def warm_up(self) -> None:
        """The compressor's kernels compiled before the clock (the CPU fast path; CUDA tensors take torch's)."""
        if self.exchange.compressor.device.type == "cpu":
            self.exchange.compressor.warm_up()

    def begin_bucket(self, names, grads, step):
        if self.decay_before_exchange(self.params):
            with self.timed("encode"):
                grads = [self.add_weight_decay(w, {n: g[n] for n in names}) for w, g in zip(self.workers, grads)]
        return self.exchange.start(names, grads, step)

    def finish_step(self, pending, grads, lr, step):
        out = [{} for _ in self.workers]
        for exchange in pending:
            for o, means in zip(out, self.exchange.finish(exchange)):
                o.update(means)
        with self.timed("update"):
            for worker, o in zip(self.workers, out):
                if not self.decay_before_exchange(self.params):
                    o = self.add_weight_decay(worker, o)
                self.apply_update(worker, o, lr)

    def step(self, grads, lr, step):
        """After backward: the whole gradient as one group, in parameter order."""
        self.finish_step([self.begin_bucket(self.names, grads, step)], grads, lr, step)

    def state_dict(self):
        return self.exchange.memory.state_dict()

    def load_state_dict(self, state):
        self.exchange.memory.load_state_dict(state)

