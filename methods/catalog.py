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
)}

# the class attributes an entry gives
FIELDS = ("version", "family", "summary")


def by_source(source: str) -> Entry | None:
    """The entry of the built-in class at ``module:qualname``, or None."""
    return next((e for e in CATALOG.values() if e.source == source), None)
