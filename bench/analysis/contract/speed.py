"""Encode and decode time relative to a memory copy of the same tensor, on the CPU and, where there is one, on
CUDA: the median of a few repeats after one untimed call (which compiles or loads a kernel, or warms a cache).

Encode is the worker's agreement and its memory's encode (a fresh memory each time, made outside the clock);
decode is the decode of its own payload. Both are ratios, so the machine's speed cancels out; on the CPU all three
run on one thread (the report's, :func:`~.findings.one_thread`), as the fused codecs' kernels do.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch

from .fixture import Fixture
from .inputs import InputSet

REPEATS = 9  # a median of 9: the ratios stay put on a machine that other work shares


@dataclass(frozen=True)
class Speed:
    device: str
    copy_s: float
    encode_s: float
    decode_s: float

    @property
    def encode_ratio(self) -> float:
        return self.encode_s / self.copy_s

    @property
    def decode_ratio(self) -> float:
        return self.decode_s / self.copy_s


def devices() -> list[str]:
    return ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"]


def speed(method, params, inputs: InputSet, device: str = "cpu", repeats: int = REPEATS) -> Speed:
    fx = Fixture.of(method, params, inputs.shapes, device)
    x = fx.flat(inputs.tensors)
    group, buffer = fx.group(0), torch.empty_like(x)
    encoded = []

    def encode(memory):
        encoded.append(fx.encode(group, x, 1, memory))

    copy_s = _median(lambda _: buffer.copy_(x), lambda: None, device, repeats)
    encode_s = _median(encode, lambda: fx.memory([0]), device, repeats)
    decode_s = _median(lambda _: fx.compressor.decode_own(group, encoded[-1].payload, encoded[-1].local,
                                                          encoded[-1].shared), lambda: None, device, repeats)
    return Speed(device, copy_s, encode_s, decode_s)


def _median(call, prepare, device: str, repeats: int) -> float:
    """Median seconds of ``call(prepare())`` (``prepare`` outside the clock), after one untimed call."""
    times = []
    for r in range(repeats + 1):
        state = prepare()
        _sync(device)
        start = time.perf_counter()
        call(state)
        _sync(device)
        if r:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()
