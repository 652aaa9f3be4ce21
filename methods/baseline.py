"""Synchronous full-precision SGD: every worker's gradient is summed by allreduce and divided by N."""
from __future__ import annotations

from .base import Method


class Baseline(Method):
    name = "baseline"
    summary = "synchronous fp32 SGD: mean of worker gradients by one allreduce per step"

    def step(self, grads, lr, step):
        # One flat buffer per worker: one collective per step, like one DDP bucket.
        summed = self.comm.allreduce([self.flatten(g) for g in grads])
        n = self.comm.world_size
        for worker, total, g in zip(self.workers, summed, grads):
            mean = self.unflatten(total / n, g)
            self.apply_update(worker, self.add_weight_decay(worker, mean), lr)
