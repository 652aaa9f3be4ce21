"""1-bit SGD (Seide et al., Interspeech 2014, "1-Bit Stochastic Gradient Descent and its Application to
Data-Parallel Distributed Training of Speech DNNs"), with error feedback.

Algorithm: each worker adds the quantization error it kept from its previous step to its gradient (error
feedback, "delayed update": p = g + e), quantizes p to one bit per element with threshold 0, and keeps
e <- p - D(C(p)). The reconstruction values are, per column of each gradient matrix, the means of its elements
on either side of the threshold (the paper's choice, which also minimizes the quantization error's square),
``granularity="column"``; GRACE takes them over the whole tensor (``"tensor"``). A column: the paper's (CNTK's)
matrices are output x input, so a column holds the weights leaving one input; here a tensor is viewed as the
matrix (shape[0], rest), and a column is one index of the rest (W[:, j] of a linear layer's weight, W[:, c, i, k]
of a convolution's), shape[0] elements; a 1-D tensor (a bias) is one column. Zero joins the positive side (GRACE's
choice: x < 0 is the negative group); a side without elements reconstructs as 0.

Wire format: per column two float32 values (the negative side's mean, then the positive side's), then one bit
per element (1: negative) packed 8 to a byte: 1 + 64 / rows bits per element (rows = shape[0]), or 1 + 64 / n
per tensor. Collective: a same-size all-gather (the paper's data-parallel exchange sends the bits and the
reconstruction values); every worker decodes each payload and adds them in rank order.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..codecs.bits import as_bytes, from_bytes, pack_bits, unpack_bits
from ..kit import Compressor, KitMethod, Residual
from .qcommon import mean_in_rank_order

GRANULARITIES = ("column", "tensor")


@dataclass(frozen=True)
class OneBitParams:
    granularity: str = "column"  # reconstruction values per "column" (the paper) or per "tensor" (GRACE)

    def __post_init__(self):
        if self.granularity not in GRANULARITIES:
            raise ValueError(f"granularity must be one of {', '.join(GRANULARITIES)}, got {self.granularity!r}")


class OneBitCompressor(Compressor):
    """Per column the two reconstruction values (float32), then the sign bits of the whole group."""

    claims = {"residual": "the quantization error of each minibatch is added to the next minibatch's gradient "
                          "before quantizing (error feedback)",
              "bytes": "1 bit per value, plus the reconstruction values per column"}

    def __init__(self, params, shapes, device="cpu"):
        super().__init__(params, shapes, device)
        self.column_of: dict[tuple, torch.Tensor] = {}

    def columns(self, name: str) -> int:
        """How many columns tensor ``name`` has (each with its own two reconstruction values)."""
        shape = torch.Size(self.shapes[name])
        if self.params.granularity == "tensor" or len(shape) < 2:
            return 1
        return shape.numel() // shape[0]

    def _layout(self, group) -> list[tuple[int, int]]:
        """(rows, columns) of each tensor of the group, as a row-major (rows, columns) matrix."""
        return [(n // self.columns(name), self.columns(name)) for name, n in zip(group.names, group.sizes)]

    def encode(self, group, flat, local, shared, sender):
        means, negative = [], flat < 0
        for (rows, cols), part, neg in zip(self._layout(group), flat.split(group.sizes),
                                           negative.split(group.sizes)):
            part, neg = part.view(rows, cols), neg.view(rows, cols)
            count = neg.sum(dim=0)
            low = torch.where(neg, part, 0).sum(dim=0) / count.clamp(min=1)
            high = torch.where(neg, 0, part).sum(dim=0) / (rows - count).clamp(min=1)
            means.append(torch.stack([low, high], dim=1).reshape(-1))  # per column: negative mean, positive mean
        return torch.cat([as_bytes(torch.cat(means).to(torch.float32)), pack_bits(negative)])

    def payload_bytes(self, group, sent=None):
        """Two float32 values per column and one bit per element, packed 8 to a byte."""
        return 8 * sum(self.columns(name) for name in group.names) + -(-group.numel // 8)

    def decode(self, group, payloads, shared):
        return mean_in_rank_order(payloads, lambda p: self._values(group, p), group.workers)

    def _values(self, group, payload) -> torch.Tensor:
        k = sum(self.columns(name) for name in group.names)
        means = from_bytes(payload[:8 * k], torch.float32)
        negative = unpack_bits(payload[8 * k:], group.numel)
        return means[2 * self._columns(group, payload.device) + (~negative).to(torch.int64)]  # negative, positive

    def _columns(self, group, device) -> torch.Tensor:
        """Each element's column among the group's: element (r, c) of a tensor is its column c (cached per group)."""
        key = (tuple(group.names), str(device))
        if key not in self.column_of:
            columns, at = [], 0
            for rows, cols in self._layout(group):
                columns.append(torch.arange(cols, device=device).repeat(rows) + at)
                at += cols
            self.column_of[key] = torch.cat(columns)
        return self.column_of[key]


class OneBit(KitMethod):
    name = "onebit"
    Params, compressor, memory = OneBitParams, OneBitCompressor, Residual
    param_sources = {"granularity": "Seide et al. 2014: reconstruction values per column (GRACE "
                                    "grace_dl/dist/compressor/onebit.py: per tensor)"}
