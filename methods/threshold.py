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
from typing import ClassVar

import torch

from .codecs import fused_threshold, sparse
from .codecs.fused_threshold import add_into, encode_into, select  # noqa: F401 (select: the torch reference)
from .kit import Compressor, KitMethod, Residual


@dataclass(frozen=True)
class ThresholdParams:
    threshold: float = 1e-3

    def __post_init__(self):
        if not self.threshold > 0:
            raise ValueError(f"threshold must be > 0, got {self.threshold}")


class ThresholdCompressor(Compressor):
    """One worker's group: its share of the mean, g / N, added to its residual; the elements whose accumulated
    magnitude reaches T sent in the rule's wire format (:mod:`commbench.methods.codecs.sparse`: sparse or
    bitmap, whichever is smaller), the rest kept (one fused pass,
    :func:`commbench.methods.codecs.fused_threshold.encode_into`). The average is the sum of the workers' sent
    values, added in rank order (each already sent its share)."""

    same_size = False  # each worker sends what crossed T: a variable-size all-gather
    claims = {"residual": "sent + residual = accumulated gradient (Sec. 2.1)"}
    kind: ClassVar[str]

    def contribution(self, flat, workers):
        return flat / workers

    def warm_up(self):
        fused_threshold.warm_up(self.kind)

    def encode_accumulated(self, group, acc, flat, local, shared, sender):
        payload, sent = encode_into(self.kind, acc, flat.contiguous(), self.params.threshold)
        sender.ledger.add_extra("paper_bytes", sender.rank, sparse.paper_bytes(self.kind, sent))
        return payload.to(acc.device)

    def encode(self, group, flat, local, shared, sender):
        raise TypeError("the threshold rules keep what they do not send: they encode through their residual")

    def payload_bytes(self, group, sent=None):
        """An 8-byte header and the smaller of the two layouts for ``sent`` of the group's elements."""
        return sparse.HEADER + min(sparse.body_bytes(self.kind, group.numel, sent or 0).values())

    def decode(self, group, payloads, shared):
        """Sum of every worker's sent values, in rank order (float32, dense)."""
        total = torch.zeros(group.numel, dtype=torch.float32, device=self.device)
        for payload in payloads:
            add_into(self.kind, payload, group.numel, self.params.threshold, total)
        return total


class WGTCompressor(ThresholdCompressor):
    kind = "wgt"


class BGTCompressor(ThresholdCompressor):
    kind = "bgt"


class QGTCompressor(ThresholdCompressor):
    kind = "qgt"


class Threshold(KitMethod):
    kind: str
    family = "threshold"
    Params = ThresholdParams
    extra_metrics = ("paper_bytes",)
    memory = Residual

    @property
    def residual(self) -> dict[int, torch.Tensor]:
        """Each local worker's float64 residual, flat in parameter order."""
        return self.exchange.memory.residual


class WGT(Threshold):
    name, kind, compressor = "wgt", "wgt", WGTCompressor
    summary = "whole gradient transfer: send accumulated values with |G| >= T (index + float32)"


class BGT(Threshold):
    name, kind, compressor = "bgt", "bgt", BGTCompressor
    summary = "binarized gradient transfer: send sign * T where |G| >= T (31-bit index + sign)"


class QGT(Threshold):
    name, kind, compressor = "qgt", "qgt", QGTCompressor
    summary = "quantized gradient transfer: send sign * floor(|G|/T) * T, multiple capped at 255 (index + sign + uint8)"
