"""Where the processes of a run meet: the steps after which workers and parameter servers all join the control
channel (history, divergence, evaluation), and the totals they sum at the end. Both loops (``train`` and
``serve``) read them from here, so the two cannot fall out of step."""
from __future__ import annotations

import math

import torch

from commbench.config import RunConfig
from commbench.methods import registry
from commbench.methods.comm import Communicator


def log_stride(cfg: RunConfig) -> int:
    return max(1, math.ceil(cfg.steps / 100))


def is_log_point(done: int, stride: int, evals: set[int]) -> bool:
    """Steps after which all processes meet on the control channel (history, divergence, evaluation)."""
    return done % stride == 0 or done in evals


def final_totals(cfg: RunConfig, comm: Communicator) -> torch.Tensor:
    """Summed over processes: worker bytes sent and received, server bytes sent and received, method extras."""
    ledger = comm.ledger
    sent, received = ledger.total_sent(cfg.workers), ledger.total_received(cfg.workers)
    return comm.control_sum(torch.tensor(
        [sent, received, ledger.total_sent() - sent, ledger.total_received() - received,
         *(ledger.total_extra(e) for e in registry.get(cfg.method).extra_metrics)], dtype=torch.float64))
