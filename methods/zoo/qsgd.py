"""QSGD (Alistarh et al., NeurIPS 2017): stochastic quantization to s levels per bucket, Sec. 3.1 and Sec. 4.

Algorithm: each tensor of at least ``min_size`` elements (Sec. 5: smaller ones, under 10K elements, travel
unquantized) is cut into buckets of d = ``bucket`` consecutive elements (Sec. 4; the last one shorter); per bucket
v, element i becomes ||v|| * sgn(v_i) * xi_i / s with xi_i = floor(s |v_i| / ||v|| + u_i), u_i uniform in [0, 1)
from the worker's own stream: the upper of the two levels around s |v_i| / ||v|| with probability equal to the
distance from the lower one. ||v|| is the 2-norm (Sec. 3.1, and GRACE); ``norm="max"`` takes the bucket's largest
magnitude instead, as the paper's experiments do (Sec. 4). With the 2-norm, E[Q(v)] = v and
E||Q(v) - v||^2 <= min(d / s^2, sqrt(d) / s) ||v||^2 (Lemma 3.1); with the max, still unbiased, and the variance
at most d / (4 s^2) ||v||^2.

Wire format (``coding="none"``, the default): per bucket its scale as float32 (32 bits), per element the signed
level sgn * xi + s in [0, 2s], in ceil(log2(2s + 1)) bits: with s = 7 (the paper's "4bit") 4 bits, two to a
byte; with s = 127 ("8bit") one byte; other widths as bit planes (:func:`~commbench.methods.codecs.bits.pack_uint`).
So 4 + 32 / d bits per quantized element by default. ``coding="elias"``: the paper's code (Sec. 3.1, "Efficient
Coding of Gradients"): the scales, then for each nonzero level the recursive Elias code of its distance from the
previous nonzero, a sign bit, and the Elias code of |level| (:mod:`commbench.methods.codecs.elias`), so each
worker's payload has its own size.

No error feedback (the paper has none). Collective: a same-size all-gather (``coding="none"``), or a variable-size
one (``"elias"``); each worker decodes every payload and adds them in rank order, then divides by N.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..codecs import elias
from ..codecs.bits import as_bytes, from_bytes, level_bits, pack_uint, unpack_uint
from ..kit import Compressor, KitMethod
from .qcommon import BlockCache, mean_in_rank_order, uniforms

CODINGS = ("none", "elias")
NORMS = ("l2", "max")
MAX_LEVELS = 2 ** 14 - 1  # the signed codes, 0 .. 2s, stay within int16


@dataclass(frozen=True)
class QSGDParams:
    levels: int = 7      # s: 7 is the paper's "4bit QSGD" (sign + 3-bit level), 127 its "8bit"
    bucket: int = 512    # d: elements per bucket (each has its own norm)
    coding: str = "none"  # "none": fixed-width levels; "elias": Sec. 3.1's Elias code (variable size)
    norm: str = "l2"     # the bucket's scale: "l2" (Sec. 3.1, Lemma 3.1) or "max" (the experiments, Sec. 4)
    min_size: int = 10000  # tensors with fewer elements travel as float32 (Sec. 5: "< 10K elements")

    def __post_init__(self):
        if not 1 <= self.levels <= MAX_LEVELS:
            raise ValueError(f"levels must be in 1 .. {MAX_LEVELS}, got {self.levels}")
        if self.bucket < 1:
            raise ValueError(f"bucket must be >= 1, got {self.bucket}")
        if self.coding not in CODINGS:
            raise ValueError(f"coding must be one of {', '.join(CODINGS)}, got {self.coding!r}")
        if self.norm not in NORMS:
            raise ValueError(f"norm must be one of {', '.join(NORMS)}, got {self.norm!r}")
        if self.min_size < 1:
            raise ValueError(f"min_size must be >= 1, got {self.min_size}")


class QSGDCompressor(Compressor):
    """Per bucket a float32 norm, per element its signed level in ceil(log2(2s + 1)) bits. ``coding="elias"``
    picks the :class:`QSGDEliasCompressor` instead (:meth:`QSGD.compressor_for`: the collective is a class's
    declaration)."""

    unbiased = "the input"
    claims = {"unbiased": "Lemma 3.1 (i): E[Q_s(v)] = v",
              "variance": "Lemma 3.1 (ii): E||Q_s(v) - v||^2 <= min(n/s^2, sqrt(n)/s) ||v||^2 (n: the bucket size)"}

    def __init__(self, params: QSGDParams, shapes, device="cpu"):
        super().__init__(params, shapes, device)
        self.width = level_bits(params.levels)  # 2s + 1 codes
        self.blocks = BlockCache()

    def compresses(self, name):
        return torch.Size(self.shapes[name]).numel() >= self.params.min_size

    def levels(self, group, flat, sender) -> tuple[torch.Tensor, torch.Tensor]:
        """(each bucket's float32 scale, its l2 norm or max, and each element's signed level in [-s, s], int16)."""
        s, blocks = self.params.levels, self.blocks(group.sizes, self.params.bucket, flat.device)
        rows = blocks.rows(flat)
        norms = rows.norm(dim=1) if self.params.norm == "l2" else rows.abs().amax(dim=1)
        per = (s / torch.where(norms > 0, norms, torch.ones_like(norms)))[blocks.row]  # a zero bucket stays zero
        # xi = floor(s|v_i|/||v|| + u): the upper level with probability equal to the distance from the lower;
        # the clamp only catches float rounding of |v_i| = ||v|| (a bucket's lone nonzero) past s
        level = flat.abs().mul_(per).add_(uniforms(group, sender.seed, flat.device)).floor_().clamp_(max=s)
        return norms, torch.copysign(level, flat).to(torch.int16)

    def encode(self, group, flat, local, shared, sender):
        norms, level = self.levels(group, flat, sender)
        codes = level.add_(self.params.levels)  # [0, 2s]
        packed = codes.to(torch.uint8) if self.width == 8 else pack_uint(codes, self.width)
        return torch.cat([as_bytes(norms), packed])

    def payload_bytes(self, group, sent=None):
        """4 bytes per bucket (its norm) and ceil(n * width / 8) for the n levels."""
        buckets = sum(-(-n // self.params.bucket) for n in group.sizes)
        return 4 * buckets + -(-group.numel * self.width // 8)

    def decode(self, group, payloads, shared):
        return mean_in_rank_order(payloads, lambda p: self._values(group, p), group.workers)

    def _values(self, group, payload) -> torch.Tensor:
        blocks = self.blocks(group.sizes, self.params.bucket, payload.device)
        norms = from_bytes(payload[:4 * blocks.count], torch.float32)
        body = payload[4 * blocks.count:]
        codes = body if self.width == 8 else unpack_uint(body, group.numel, self.width)
        level = codes.to(torch.float32).sub_(self.params.levels)
        return level.mul_(norms[blocks.row]).div_(self.params.levels)


class QSGDEliasCompressor(QSGDCompressor):
    """QSGD with the paper's Elias code (Sec. 3.1): the scales, then per nonzero level Elias(gap), sign, Elias(level).
    Its size depends on the levels drawn: a variable-size all-gather, and no byte formula to declare."""

    same_size = False

    def encode(self, group, flat, local, shared, sender):
        norms, level = self.levels(group, flat, sender)
        return torch.cat([as_bytes(norms), elias.encode_levels(level)])

    def payload_bytes(self, group, sent=None):
        return None  # the code's length depends on the gaps and levels, not only on how many are sent

    def _values(self, group, payload) -> torch.Tensor:
        blocks = self.blocks(group.sizes, self.params.bucket, payload.device)
        norms = from_bytes(payload[:4 * blocks.count], torch.float32)
        level = elias.decode_levels(payload[4 * blocks.count:], group.numel, self.params.levels).float()
        return level.mul_(norms[blocks.row]).div_(self.params.levels)


class QSGD(KitMethod):
    name = "qsgd"
    Params, compressor = QSGDParams, QSGDCompressor
    param_sources = {
        "levels": "QSGD Table 1 and Sec. 5: 4-bit QSGD, the setting of most of its results; s = 7 fills 4 bits with "
                  "sign and level (8-bit: s = 127, GRACE's quantum_num, grace_dl/dist/helper.py)",
        "bucket": "QSGD Sec. 5: 4-bit and 8-bit quantization with bucket size 512 (2-bit: 128; GRACE: 128)",
        "coding": "QSGD Sec. 3.1 describes the Elias code; the default sends fixed-width levels, the b bits per "
                  "element of the experiments' 4-bit and 8-bit variants (Sec. 5)",
        "norm": "QSGD Sec. 3.1 and Lemma 3.1: the 2-norm (GRACE too); Sec. 4: the experiments scale by the max",
        "min_size": "QSGD Sec. 5: small gradient matrices (< 10K elements) are not quantized",
    }

    @classmethod
    def compressor_for(cls, params):
        return QSGDEliasCompressor if params.coding == "elias" else QSGDCompressor
