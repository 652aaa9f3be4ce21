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
from .codecs.fused_threshold import add_into, encode_into, select  # noqa: F401 (select: the torch reference)


@dataclass(frozen=True)
class ThresholdParams:
    threshold: float = 1e-3

    def __post_init__(self):
        if not self.threshold > 0:
            raise ValueError(f"threshold must be > 0, got {self.threshold}")


class Threshold(Method):
    kind: str
    Params = ThresholdParams
    extra_metrics = ("paper_bytes",)

    @classmethod
    def replicas_agree(cls, params) -> bool:
        return True  # every worker applies the same exchanged update

    def __init__(self, comm, workers, params, weight_decay, **kwargs):
        super().__init__(comm, workers, params, weight_decay, **kwargs)
        self.numel = sum(p.numel() for p in self.workers[0].params.values())
        self.device = next(iter(self.workers[0].params.values())).device
        self.residual = {w.rank: torch.zeros(self.numel, dtype=torch.float64, device=self.device)
                         for w in self.workers}
        # where each tensor's residual lies in the flat residual (parameter order)
        self.at, offset = {}, 0
        for name, t in self.workers[0].params.items():
            self.at[name] = (offset, offset + t.numel())
            offset += t.numel()

    @classmethod
    def can_bucket(cls, params) -> bool:
        return True  # every element is thresholded on its own residual

    def begin_bucket(self, names, grads, step):
        """The bucket's elements: accumulate, select and keep the rest in the bucket's part of the residual, encode
        the bucket's payload and start its all-gather (the sizes are exchanged first, as they vary)."""
        n = self.comm.world_size
        with self.timed("encode"):
            numel = sum(self.at[k][1] - self.at[k][0] for k in names)
            payloads = []
            for w, g in zip(self.workers, grads):
                residual = self.residual[w.rank]
                acc = torch.cat([residual[slice(*self.at[k])] for k in names])
                payloads.append(self._encode(w.rank, acc, self.flatten(g, names) / n, numel))
                at = 0
                for k in names:  # what was not sent waits in the residual
                    lo, hi = self.at[k]
                    residual[lo:hi].copy_(acc[at:at + hi - lo])
                    at += hi - lo
        with self.timed("wait"):  # the payload sizes are exchanged (blocking) before the payloads go out
            return names, numel, self.comm.allgather_async(payloads)

    def finish_step(self, pending, grads, lr, step):
        out = [{} for _ in self.workers]
        for names, numel, handle in pending:
            with self.timed("wait"):
                everyone = handle.wait()
            with self.timed("decode"):
                totals = self.per_worker(everyone, lambda payloads: self._aggregate(payloads, numel))
                for o, total, g in zip(out, totals, grads):
                    o.update(self.unflatten(total, g, names))
        with self.timed("update"):
            for worker, o in zip(self.workers, out):
                self.apply_update(worker, self.add_weight_decay(worker, o), lr)

    def _encode(self, rank: int, acc: torch.Tensor, contribution: torch.Tensor, numel: int) -> torch.Tensor:
        """Accumulate into ``acc`` (float64, in place), select, keep the rest (one fused pass, the same numbers as
        :func:`select`); return the wire payload."""
        payload, sent = encode_into(self.kind, acc, contribution.contiguous(), self.params.threshold)
        self.comm.ledger.add_extra("paper_bytes", rank, sparse.paper_bytes(self.kind, sent))
        return payload.to(acc.device)

    def _aggregate(self, payloads: list[torch.Tensor], numel: int) -> torch.Tensor:
        """Sum of every worker's sent values, in rank order (float32, dense)."""
        total = torch.zeros(numel, dtype=torch.float32, device=self.device)
        for payload in payloads:
            add_into(self.kind, payload, numel, self.params.threshold, total)
        return total

    def step(self, grads, lr, step):
        """After backward: the whole gradient as one payload per worker."""
        n = self.comm.world_size
        with self.timed("encode"):
            payloads = [self._encode(w.rank, self.residual[w.rank], self.flatten(g) / n, self.numel)
                        for w, g in zip(self.workers, grads)]
        with self.timed("wait"):
            everyone = self.comm.allgather(payloads)
        with self.timed("decode"):
            totals = self.per_worker(everyone, lambda payloads: self._aggregate(payloads, self.numel))
        with self.timed("update"):
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
