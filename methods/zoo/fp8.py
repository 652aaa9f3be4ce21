"""FP8 gradients with a scale per block: the OCP 8-bit floating-point formats (Micikevicius et al., 2022, "FP8
Formats for Deep Learning"), E4M3 (max 448) and E5M2 (max 57344), as torch.float8_e4m3fn and torch.float8_e5m2.

Algorithm: each tensor is cut into blocks of ``block`` elements (the last one shorter); per block the scale is
amax / FP8_MAX (float32), so the block's largest magnitude maps to the format's largest finite value, and each
element x / scale is cast to the format: round to nearest even, deterministic, biased (a small relative error,
2^-4 at most for E4M3 away from the subnormals, 2^-3 for E5M2). Fine-grained scaling is recent practice for FP8
training (DeepSeek-V3, 2024, Sec. 3.3: 1 x 128 tiles, all in E4M3); the default follows it. The receiver
multiplies each value back by its block's scale.

Wire format: the fp8 bytes (8 bits per element) and a float32 scale per block: 8 + 32 / block bits per element.
No error feedback. Collective: a same-size all-gather (no collective reduces fp8: the workers' scales differ), then
every worker decodes each payload to float32 and adds them in rank order.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..codecs.bits import as_bytes, from_bytes
from ..kit import Compressor, KitMethod
from .qcommon import BlockCache, mean_in_rank_order

FORMATS = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}


@dataclass(frozen=True)
class FP8Params:
    format: str = "e4m3"  # "e4m3" (3 mantissa bits, max 448) or "e5m2" (2 mantissa bits, max 57344)
    block: int = 128      # elements per scale

    def __post_init__(self):
        if self.format not in FORMATS:
            raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {self.format!r}")
        if self.block < 1:
            raise ValueError(f"block must be >= 1, got {self.block}")


class FP8Compressor(Compressor):
    """Per block a float32 scale (amax / FP8_MAX), per element one fp8 byte."""

    claims = {"bytes": "8 bits per element and a float32 scale per block"}

    def __init__(self, params: FP8Params, shapes, device="cpu"):
        super().__init__(params, shapes, device)
        self.dtype = FORMATS[params.format]
        self.largest = torch.finfo(self.dtype).max
        self.blocks = BlockCache()

    def encode(self, group, flat, local, shared, sender):
        blocks = self.blocks(group.sizes, self.params.block, flat.device)
        scales = blocks.rows(flat).abs().amax(dim=1).div_(self.largest)
        per = torch.where(scales > 0, scales, torch.ones_like(scales))[blocks.row]
        # the clamp keeps a rounding of amax / scale past the largest value from becoming NaN (E4M3 has no inf)
        q = (flat / per).clamp_(-self.largest, self.largest).to(self.dtype)
        return torch.cat([as_bytes(scales), q.view(torch.uint8)])

    def payload_bytes(self, group, sent=None):
        """4 bytes per block (its scale) and one byte per element."""
        return 4 * sum(-(-n // self.params.block) for n in group.sizes) + group.numel

    def decode(self, group, payloads, shared):
        return mean_in_rank_order(payloads, lambda p: self._values(group, p), group.workers)

    def _values(self, group, payload) -> torch.Tensor:
        blocks = self.blocks(group.sizes, self.params.block, payload.device)
        scales = from_bytes(payload[:4 * blocks.count], torch.float32)
        q = payload[4 * blocks.count:].view(self.dtype)
        return q.to(torch.float32).mul_(scales[blocks.row])


class FP8(KitMethod):
    name = "fp8"
    Params, compressor = FP8Params, FP8Compressor
    param_sources = {
        "format": "DeepSeek-V3 technical report (2024) Sec. 3.3: E4M3 for all tensors, with fine-grained scaling "
                  "(the hybrid recipe of Micikevicius et al. 2022 puts gradients in E5M2: format=e5m2)",
        "block": "DeepSeek-V3 technical report (2024) Sec. 3.3: 1 x 128 tile-wise scaling",
    }
