"""Half-precision all-reduce: the gradient cast to fp16 or bf16 for the wire, as torch's DDP communication hooks
``fp16_compress_hook`` and ``bf16_compress_hook`` do (torch.distributed.algorithms.ddp_comm_hooks.default_hooks).

Per bucket, exactly their steps: cast the bucket to the half type and divide by the world size there, sum
over the workers in that type (the all-reduce), cast back to float32. Weight decay and the optimizer step then
run in float32 as for the baseline. 2 bytes per element each way instead of 4. What the cheap alternative to
a compression method costs in accuracy and buys in speed, beside it in every table.

A kit compressor: linear (the workers' halves add up in the half type, within one rounding of the sum of their
float32 shares), so one all-reduce carries them; its DDP hook is the kit's, over the same code.
"""
from __future__ import annotations

from typing import ClassVar

import torch

from .base import NoParams
from .kit import Compressor, KitMethod


class HalfCast(Compressor):
    dtype: ClassVar[torch.dtype]
    linear = True
    claims = {"linear": "an all-reduce of the halves sums them (torch's hook: the cast, / N, all-reduce)",
              "bytes": "2 bytes per element"}

    def encode(self, group, flat, local, shared, sender):
        return flat.to(self.dtype).div_(group.workers)  # the hook's order: cast, then divide in the half type

    def decode(self, group, payloads, shared):
        return payloads.to(torch.float32)  # the sum of the shares: the mean, back in float32

    def payload_bytes(self, group, sent=None):
        return torch.finfo(self.dtype).bits // 8 * group.numel


class FP16Cast(HalfCast):
    dtype = torch.float16


class BF16Cast(HalfCast):
    dtype = torch.bfloat16


class FP16(KitMethod):
    name = "fp16"
    summary = "fp16 all-reduce: the gradient cast to float16 for the wire (torch's fp16_compress_hook)"
    Params, compressor = NoParams, FP16Cast


class BF16(KitMethod):
    name = "bf16"
    summary = "bf16 all-reduce: the gradient cast to bfloat16 for the wire (torch's bf16_compress_hook)"
    Params, compressor = NoParams, BF16Cast
