"""Synchronous full-precision SGD: the mean of the workers' gradients, then one optimizer step.

``topology=allreduce`` (default): one allreduce of the flat gradient per step, like one DDP bucket.
``topology=ps``: push to S parameter servers, which average and step, then pull the weights back every step:
SSGD on a parameter server, SSD-SGD's baseline (and bit for bit the same weights as the allreduce form).
"""
from __future__ import annotations

from dataclasses import dataclass

from .base import Method
from .ps import ParameterServer, ServerRole

TOPOLOGIES = ("allreduce", "ps")


@dataclass(frozen=True)
class BaselineParams:
    topology: str = "allreduce"  # allreduce | ps
    servers: int = 1             # parameter servers (ps topology)

    def __post_init__(self):
        if self.topology not in TOPOLOGIES:
            raise ValueError(f"topology must be one of {', '.join(TOPOLOGIES)}, got {self.topology!r}")
        if self.servers < 1:
            raise ValueError(f"servers must be >= 1, got {self.servers}")


class Baseline(Method):
    name = "baseline"
    summary = "synchronous fp32 SGD: mean of worker gradients by one allreduce (or a parameter server) per step"
    Params = BaselineParams

    @classmethod
    def replicas_agree(cls, params) -> bool:
        return True  # every worker applies the same exchanged update

    def __init__(self, comm, workers, params, weight_decay, **kwargs):
        super().__init__(comm, workers, params, weight_decay, **kwargs)
        self.ps = None
        if params.topology == "ps":
            template = self.workers[0]
            self.ps = ParameterServer(comm, template.params, template.optimizer, self.weight_decay,
                                      params.servers)

    @classmethod
    def servers_needed(cls, params):
        return params.servers if params.topology == "ps" else 0

    @classmethod
    def make_server(cls, comm, params, template, weight_decay, ema=0.0):
        # The workers pull every step, so worker 0's own weights are the global ones: no evaluation fetch.
        ps = ParameterServer(comm, template.params, template.optimizer, weight_decay, params.servers)
        return ServerRole(ps, lambda step: True, answers_eval=False)

    def state_dict(self):
        return {"servers": self.ps.state_dict()} if self.ps is not None else {}

    def load_state_dict(self, state):
        if self.ps is not None:
            self.ps.load_state_dict(state["servers"])

    @classmethod
    def can_bucket(cls, params) -> bool:
        return getattr(params, "topology", "allreduce") == "allreduce"

    @classmethod
    def why_not_bucketed(cls, params) -> str:
        return "a parameter server's push and pull take the whole model each step"

    def begin_bucket(self, names, grads, step):
        with self.timed("encode"):
            flats = [self.flatten(g, names) for g in grads]
        return names, self.comm.allreduce_async(flats)

    def finish_step(self, pending, grads, lr, step):
        n = self.comm.world_size
        self.finish_allreduce(pending, grads, lr, lambda total, own: total.div_(n) if own else total / n)

    def step(self, grads, lr, step):
        if self.ps is not None:  # timed as wait: a dist worker blocks in the push and the pull on the link
            with self.timed("wait"):
                self.ps.push_all(self.workers, grads, lr, answer_pull=True)
                for worker in self.workers:
                    self.ps.pull(worker.rank, worker.params)
            return
        # After backward (exchange=after-backward): the whole gradient as one flat buffer, one collective.
        self.finish_step([self.begin_bucket(self.names, grads, step)], grads, lr, step)
