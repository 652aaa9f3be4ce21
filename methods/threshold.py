"""The threshold methods of Anoosheh et al., "Thresholded Gradient Synchronization" (Sec. 2.1).

Each worker adds its gradient contribution to a residual, sends the elements whose accumulated magnitude
reaches the threshold T, and keeps what it did not send for the next step (pseudo-code (a), (b), (c)):

* WGT (a): send the accumulated value itself; the residual there becomes 0.
* BGT (b): send sign * T (Strom's scheme); the residual keeps the rest.
* QGT (c): send sign * m * T with m = floor(|G| / T), the whole multiples of T, capped at 255 so that m
  fits one byte. The paper's text says the multiple is restricted to less than 256; its pseudo-code caps
  m * T at 255, in gradient units, which would never bind for gradients of order 1e-3. We follow the
  stated intent (cap the count), and use |G| so that a negative G sends -m * T rather than overshooting
  by one multiple (floor(G / T) of a negative G rounds away from zero).

What a worker thresholds is its share of the global mean gradient, g_i / N: the paper simulates n = 8
nodes by cutting one Caffe batch-mean gradient into n parts, so T is tuned for that share and the shares
are summed. The residual is kept in float64 so that sent + residual == accumulated input holds exactly
(sent is the float32 value the receivers reconstruct). Weight decay is applied after the exchange, as
Caffe's solver does.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .base import Method
from .codecs import sparse


@dataclass(frozen=True)
class ThresholdParams:
    threshold: float = 1e-3

    def __post_init__(self):
        if not self.threshold > 0:
            raise ValueError(f"threshold must be > 0, got {self.threshold}")


def select(kind: str, acc: torch.Tensor, threshold: float) -> tuple[sparse.Sent, torch.Tensor]:
    """Apply the rule to an accumulated float64 vector. Returns what is sent and, per sent element, the
    float64 value of the float32 number receivers will add (so the caller can subtract it exactly)."""
    t32 = float(torch.tensor(threshold, dtype=torch.float32))
    mask = acc.abs() >= t32
    indices = mask.nonzero().squeeze(1)
    picked = acc[indices]
    if kind == "wgt":
        sent = sparse.Sent(indices, values=picked.to(torch.float32), mask=mask)
    else:
        negative = picked < 0
        sent = sparse.Sent(indices, negative=negative, mask=mask)
        if kind == "qgt":
            sent.multiples = torch.floor(picked.abs() / t32).clamp_(max=255).to(torch.uint8)
    return sent, sparse.values_of(kind, sent, threshold).double()


class Threshold(Method):
    kind: str
    Params = ThresholdParams
    extra_metrics = ("paper_bytes",)

    def __init__(self, comm, workers, params, weight_decay, **kwargs):
        super().__init__(comm, workers, params, weight_decay, **kwargs)
        self.numel = sum(p.numel() for p in self.workers[0].params.values())
        self.device = next(iter(self.workers[0].params.values())).device
        self.residual = {w.rank: torch.zeros(self.numel, dtype=torch.float64, device=self.device)
                         for w in self.workers}

    def encode(self, rank: int, contribution: torch.Tensor) -> torch.Tensor:
        """Accumulate, select, keep the rest; return the wire payload. ``contribution`` is float32."""
        acc = self.residual[rank]
        acc += contribution.double()
        sent, values = select(self.kind, acc, self.params.threshold)
        acc[sent.indices] -= values
        self.comm.ledger.add_extra("paper_bytes", rank, sparse.paper_bytes(self.kind, sent.indices.numel()))
        return sparse.encode(self.kind, sent, self.numel)

    def aggregate(self, payloads: list[torch.Tensor]) -> torch.Tensor:
        """Sum of every worker's sent values, in rank order (float32, dense)."""
        total = torch.zeros(self.numel, dtype=torch.float32, device=self.device)
        for payload in payloads:
            sparse.add_into(self.kind, payload, self.numel, self.params.threshold, total)
        return total

    def step(self, grads, lr, step):
        n = self.comm.world_size
        payloads = [self.encode(w.rank, self.flatten(g) / n) for w, g in zip(self.workers, grads)]
        totals = self.per_worker(self.comm.allgather(payloads), self.aggregate)
        for worker, g, total in zip(self.workers, grads, totals):
            self.apply_update(worker, self.add_weight_decay(worker, self.unflatten(total, g)), lr)

    def state_dict(self):
        return {"residual": {r: t.clone() for r, t in self.residual.items()}}

    def load_state_dict(self, state):
        for r, t in state["residual"].items():
            self.residual[int(r)].copy_(t)


class WGT(Threshold):
    name, kind = "wgt", "wgt"
    summary = "whole gradient transfer: send accumulated values with |G| >= T (index + float32)"


class BGT(Threshold):
    name, kind = "bgt", "bgt"
    summary = "binarized gradient transfer: send sign * T where |G| >= T (31-bit index + sign)"


class QGT(Threshold):
    name, kind = "qgt", "qgt"
    summary = "quantized gradient transfer: send sign * floor(|G|/T) * T, multiple capped at 255 (index + sign + uint8)"
