"""The built-in methods' metadata, readable without torch: name -> where the class lives, its version, family and
summary (``python -X importtime -c "import commbench.methods.catalog"`` imports no torch).

The method classes carry the same values as class attributes; a built-in class that leaves one of them unset
takes it from here (:meth:`commbench.methods.base.Method.__init_subclass__`), and ``tests/methods/
test_registry.py`` holds the two equal. The registry (:mod:`commbench.methods.registry`) imports and registers
the built-ins from ``source``, in this order. This module imports nothing.
"""
from __future__ import annotations

from typing import NamedTuple

# the families the harness asks about (a method's ``family`` class attribute; None: none of them)
THRESHOLD = "threshold"                    # WGT, BGT, QGT: send what crosses a threshold (the threshold paper)
ALLREDUCE_BASELINE = "all-reduce baseline"  # what people run instead of compressing: the strongest baseline


class Entry(NamedTuple):
    name: str
    source: str           # "module:qualname" of the class
    version: int
    family: str | None
    summary: str


CATALOG: dict[str, Entry] = {e.name: e for e in (
    Entry("baseline", "commbench.methods.baseline:Baseline", 1, ALLREDUCE_BASELINE,
          "synchronous fp32 SGD: mean of worker gradients by one allreduce (or a parameter server) per step"),
    Entry("terngrad", "commbench.methods.terngrad:TernGrad", 5, None,
          "TernGrad: stochastic ternary gradients with scaler sharing, packed 2 bits (or 1.6 bits) each"),
    Entry("wgt", "commbench.methods.threshold:WGT", 1, THRESHOLD,
          "whole gradient transfer: send accumulated values with |G| >= T (index + float32)"),
    Entry("bgt", "commbench.methods.threshold:BGT", 1, THRESHOLD,
          "binarized gradient transfer: send sign * T where |G| >= T (31-bit index + sign)"),
    Entry("qgt", "commbench.methods.threshold:QGT", 1, THRESHOLD,
          "quantized gradient transfer: send sign * floor(|G|/T) * T, multiple capped at 255 (index + sign + uint8)"),
    Entry("ssdsgd", "commbench.methods.ssdsgd:SSDSGD", 3, None,
          "SSD-SGD: push every step, pull every k steps, local GLU updates between pulls"),
    Entry("fp16", "commbench.methods.lowprec:FP16", 1, ALLREDUCE_BASELINE,
          "fp16 all-reduce: the gradient cast to float16 for the wire (torch's fp16_compress_hook)"),
    Entry("bf16", "commbench.methods.lowprec:BF16", 1, ALLREDUCE_BASELINE,
          "bf16 all-reduce: the gradient cast to bfloat16 for the wire (torch's bf16_compress_hook)"),
    Entry("powersgd", "commbench.methods.powersgd:PowerSGD", 1, None,
          "PowerSGD: rank-r approximation of each gradient matrix, error feedback, warm start (torch's hook)"),
    Entry("powersgd-batched", "commbench.methods.powersgd:BatchedPowerSGD", 1, None,
          "batched PowerSGD: the whole bucket as one square matrix at rank r (torch's batched_powerSGD_hook)"),
    # the field's compressors (methods/zoo/), under GRACE's names where GRACE has them
    # -- the zoo: sparsifiers --
    Entry("topk", "commbench.methods.zoo.topk:TopK", 1, None,
          "top-k: the k = ratio x n largest-magnitude elements per tensor (index + float32), error feedback"),
    Entry("randomk", "commbench.methods.zoo.randomk:RandomK", 1, None,
          "random-k: k shared random coordinates per tensor, values x n/k (unbiased), one all-reduce, no index"),
    Entry("dgc", "commbench.methods.zoo.dgc:DGC", 1, None,
          "Deep Gradient Compression: momentum correction, sampled threshold at 99.9% sparsity, warm-up"),
    # -- the zoo: quantizers and the sign family --
    Entry("qsgd", "commbench.methods.zoo.qsgd:QSGD", 1, None,
          "QSGD: stochastic rounding to s levels per bucket of d (s=7, d=512: 4 bits + a float32 norm), unbiased"),
    Entry("natural", "commbench.methods.zoo.natural:Natural", 1, None,
          "natural compression: stochastic rounding to a power of two, sign + 8-bit exponent (9 bits), unbiased"),
    Entry("u8bit", "commbench.methods.zoo.u8bit:U8bit", 1, None,
          "8-bit approximation: Dettmers' dynamic tree data type, scaled by each tensor's maximum"),
    Entry("fp8", "commbench.methods.zoo.fp8:FP8", 1, None,
          "fp8: E4M3 (or E5M2) with a float32 scale per block of 128 elements, all-gathered"),
    Entry("onebit", "commbench.methods.zoo.onebit:OneBit", 1, None,
          "1-bit SGD: one bit per element, per-column means of each side as its values, error feedback"),
    Entry("signsgd", "commbench.methods.zoo.signsgd:SignSGD", 1, None,
          "signSGD with majority vote: 1-bit signs, the update is the sign of their sum"),
    Entry("signum", "commbench.methods.zoo.signsgd:Signum", 1, None,
          "Signum with majority vote: the sign of each worker's own momentum, 1 bit, majority vote"),
    Entry("efsignsgd", "commbench.methods.zoo.efsignsgd:EFSignSGD", 1, None,
          "EF-signSGD: scaled sign (||p||_1/d per tensor, 1 bit per element) with error feedback"),
)}

# the class attributes an entry gives
FIELDS = ("version", "family", "summary")


def by_source(source: str) -> Entry | None:
    """The entry of the built-in class at ``module:qualname``, or None."""
    return next((e for e in CATALOG.values() if e.source == source), None)
