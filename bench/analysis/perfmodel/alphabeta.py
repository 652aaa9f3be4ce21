"""Alpha-beta (latency-bandwidth) model of a collective: t = alpha + beta * bytes, fitted by least squares to
timings measured on the transport the harness really uses (torch.distributed gloo on CPU, 127.0.0.1).

``bytes`` is the message size per worker: the tensor each rank passes to ``all_reduce``, or the payload each
rank contributes to ``all_gather`` (it receives world_size - 1 of them back). alpha is in seconds, beta in
seconds per byte, so 1 / beta is an effective bandwidth in bytes/s.
"""
from __future__ import annotations

import datetime
import json
import math
import os
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

from commbench.store.safe_io import read_small_text, write_text
from commbench.config import ConfigError
from commbench.config.parsers import binary_size

OPS = ("allreduce", "allgather")
DEFAULT_SIZES = tuple(4 ** e for e in range(5, 13))  # 1 KiB .. 16 MiB, bytes per worker
# What one calibration may ask of the machine it runs on. Each process holds its message and the all-gather's
# world-size receive buffers, twice (the timed op and the check of its values): world x 2 (world + 1) x size in
# all. 256 MiB on 2 processes is 3 GiB, within a 2-core, 24 GiB laptop; a GPU node's 64 processes get 1 MiB each.
MAX_SIZE_BYTES = 256 * 2 ** 20
MAX_WORLD_SIZE = 64            # processes on one machine, each a torch import of some 300 MB
MAX_MEMORY_BYTES = 8 * 2 ** 30
MAX_REPEATS = 10_000           # repeats or warm-up calls per size
CALIBRATION_FILE_BYTES = 4 * 2 ** 20  # a calibration file is a few KiB of fits and samples


WEIGHTINGS = ("ols", "relative")


@dataclass(frozen=True)
class Fit:
    """Least squares of seconds on bytes over ``n`` samples (``weighting`` ols: plain; relative: each
    residual divided by its measured time, so that small messages, and hence alpha, are not swamped by
    the largest ones when sizes span decades)."""

    alpha_s: float
    beta_s_per_byte: float
    r2: float              # 1 - SS_res / SS_tot of the unweighted residuals
    residual_rms_s: float  # sqrt(mean squared unweighted residual), seconds
    n: int
    weighting: str = "ols"

    @property
    def bandwidth_bytes_per_s(self) -> float:
        return 1.0 / self.beta_s_per_byte if self.beta_s_per_byte > 0 else math.inf

    def predict(self, nbytes: float) -> float:
        return self.alpha_s + self.beta_s_per_byte * nbytes

    def to_dict(self) -> dict:
        return {**asdict(self), "bandwidth_bytes_per_s": self.bandwidth_bytes_per_s}


def load_fit(path: str | Path, op: str = "allreduce") -> Fit:
    """The ``op`` fit of a calibration file (``commbench model calibrate``), checked to be a latency and a
    bandwidth; ConfigError naming the file otherwise."""
    try:
        text = read_small_text(Path(path), CALIBRATION_FILE_BYTES, ConfigError)  # no FIFO wait, no endless device
    except ConfigError as exc:
        if not Path(path).exists():
            raise ConfigError(f"--calibration: no file {path}") from None
        raise ConfigError(f"--calibration: {exc}") from None
    try:
        data = json.loads(text)
        f = data["fits"][op]
        loaded = Fit(float(f["alpha_s"]), float(f["beta_s_per_byte"]), float(f["r2"]), float(f["residual_rms_s"]),
                     int(f["n"]), str(f.get("weighting", "ols")))
    except (ValueError, KeyError, TypeError, RecursionError):
        raise ConfigError(f"--calibration: {path} has no {op} fit (write one with: commbench model calibrate)") \
            from None
    if not (math.isfinite(loaded.alpha_s) and math.isfinite(loaded.beta_s_per_byte)) or loaded.alpha_s < 0 \
            or loaded.beta_s_per_byte <= 0:  # JSON's NaN and Infinity read as floats too
        raise ConfigError(f"--calibration: the {op} fit in {path} has alpha {loaded.alpha_s:.3g} s, beta "
                          f"{loaded.beta_s_per_byte:.3g} s/B; a latency and a bandwidth need alpha >= 0 and beta > 0 "
                          "(refit with --weighting relative, or give --network and --latency-us)")
    return loaded


def fit(samples: Sequence[tuple[float, float]], weighting: str = "ols") -> Fit:
    """Least squares t = alpha + beta * b over (bytes, seconds) samples; needs two distinct sizes.

    ``ols`` minimises sum (t - alpha - beta b)^2; ``relative`` minimises sum ((t - alpha - beta b) / t)^2."""
    if weighting not in WEIGHTINGS:
        raise ConfigError(f"weighting: must be one of {', '.join(WEIGHTINGS)}, got {weighting!r}")
    if len({b for b, _ in samples}) < 2:
        raise ConfigError(f"samples: an alpha-beta fit needs at least two distinct message sizes, got {len(samples)} "
                          "sample(s)")
    if weighting == "relative" and any(not t > 0 for _, t in samples):
        raise ConfigError("samples: a relative fit needs positive times")
    w = [1.0 / (t * t) if weighting == "relative" else 1.0 for _, t in samples]
    sw = sum(w)
    mean_b = sum(wi * b for wi, (b, _) in zip(w, samples)) / sw
    mean_t = sum(wi * t for wi, (_, t) in zip(w, samples)) / sw
    sbb = sum(wi * (b - mean_b) ** 2 for wi, (b, _) in zip(w, samples))
    sbt = sum(wi * (b - mean_b) * (t - mean_t) for wi, (b, t) in zip(w, samples))
    beta = sbt / sbb
    alpha = mean_t - beta * mean_b
    n = len(samples)
    plain_mean = sum(t for _, t in samples) / n
    ss_res = sum((t - alpha - beta * b) ** 2 for b, t in samples)
    ss_tot = sum((t - plain_mean) ** 2 for _, t in samples)
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0
    return Fit(alpha, beta, r2, math.sqrt(ss_res / n), n, weighting)


def _check(op: str, sizes: Sequence[int], world_size: int, repeats: int, warmup: int) -> None:
    if op not in OPS:
        raise ConfigError(f"op: must be one of {', '.join(OPS)}, got {op!r}")
    if isinstance(world_size, bool) or not isinstance(world_size, int) or not 2 <= world_size <= MAX_WORLD_SIZE:
        raise ConfigError(f"world size: a collective on this machine takes 2 to {MAX_WORLD_SIZE} processes, got "
                          f"{world_size!r}")
    if not sizes:
        raise ConfigError("sizes: no message sizes given")
    for s in sizes:
        if isinstance(s, bool) or not isinstance(s, int) or s < 4 or s % 4:
            raise ConfigError(f"sizes: each size must be a positive multiple of 4 bytes (float32 elements), got {s!r}")
        if s > MAX_SIZE_BYTES:
            raise ConfigError(f"sizes: {s:,} bytes is more than {binary_size(MAX_SIZE_BYTES)} per worker, the largest "
                              f"a calibration measures")
    if (need := world_size * 2 * (world_size + 1) * max(sizes)) > MAX_MEMORY_BYTES:
        raise ConfigError(f"sizes: {max(sizes):,} bytes on {world_size} processes would hold about "
                          f"{need / 2 ** 30:.0f} GiB at once, more than {binary_size(MAX_MEMORY_BYTES)}; measure "
                          f"smaller sizes or fewer processes")
    for name, value, least in (("repeats", repeats, 1), ("warmup", warmup, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= MAX_REPEATS:
            raise ConfigError(f"{name}: must be an integer from {least} to {MAX_REPEATS:,}, got {value!r}")


def _worker(rank: int, world: int, port: int, ops: list[str], sizes: list[int], repeats: int, warmup: int,
            out_path: str) -> None:
    """One gloo process: time each op at each size; rank 0 writes {op: [[bytes, median seconds], ...]}."""
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)  # one core each, as a harness worker on a shared host would have
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    results: dict[str, list[list[float]]] = {}
    for op in ops:
        results[op] = []
        for size in sizes:
            numel = size // 4
            tensor = torch.zeros(numel)  # zeros: repeated sums stay finite
            outputs = [torch.empty(numel) for _ in range(world)]

            def once():
                if op == "allreduce":
                    dist.all_reduce(tensor)
                else:
                    dist.all_gather(outputs, tensor)

            for _ in range(warmup):
                once()
            times = []
            for _ in range(repeats):
                dist.barrier()  # start together, so one rank's lateness is not timed as the collective's
                t0 = time.perf_counter()
                once()
                times.append(time.perf_counter() - t0)
            _verify(op, numel, rank, world)
            results[op].append([numel * 4, statistics.median(times)])
    dist.barrier()
    if rank == 0:
        write_text(Path(out_path), json.dumps(results))
    dist.destroy_process_group()


def _verify(op: str, numel: int, rank: int, world: int) -> None:
    """Run the op once more, untimed, on known values: what was timed is the named collective on ``numel``
    elements across ``world`` ranks (a broken or mis-sized call fails here, not silently in a fit)."""
    import torch
    import torch.distributed as dist

    tensor = torch.full((numel,), float(rank + 1))
    if op == "allreduce":
        dist.all_reduce(tensor)
        ok = bool(torch.all(tensor == world * (world + 1) / 2))
    else:
        outputs = [torch.empty(numel) for _ in range(world)]
        dist.all_gather(outputs, tensor)
        ok = all(bool(torch.all(o == r + 1)) for r, o in enumerate(outputs))
    if not ok:
        raise RuntimeError(f"{op} of {numel} float32 on {world} ranks returned wrong values")


def measure_many(ops: Sequence[str], sizes: Sequence[int], world_size: int = 2, repeats: int = 10, warmup: int = 3,
                 timeout_s: float = 300.0) -> dict[str, list[tuple[int, float]]]:
    """Like :func:`measure` for several ops in one set of processes (one start-up cost)."""
    for op in ops:
        _check(op, sizes, world_size, repeats, warmup)
    import torch.multiprocessing as mp

    from commbench.methods.comm.dist import free_port

    with tempfile.TemporaryDirectory(prefix="commbench-calibrate-") as tmp:
        out_path = os.path.join(tmp, "samples.json")
        context = mp.start_processes(_worker, args=(world_size, free_port(), list(ops), list(sizes), repeats, warmup,
                                                    out_path),
                                     nprocs=world_size, join=False, start_method="spawn")
        deadline = time.monotonic() + timeout_s
        try:
            while not context.join(timeout=0.5):  # raises if a process failed
                if time.monotonic() > deadline:
                    raise TimeoutError(f"gloo measurement did not finish within {timeout_s} s")
        finally:
            for p in context.processes:  # only the processes started here
                if p.is_alive():
                    p.terminate()
                    p.join(5)
        raw = json.loads(Path(out_path).read_text())
    return {op: [(int(b), float(t)) for b, t in raw[op]] for op in ops}


def measure(op: str, sizes: Sequence[int], world_size: int = 2, repeats: int = 10, warmup: int = 3,
            timeout_s: float = 300.0) -> list[tuple[int, float]]:
    """Time ``op`` (allreduce | allgather) on ``world_size`` gloo processes over 127.0.0.1.

    For each size (bytes per worker, a multiple of 4: float32 tensors) the processes run ``warmup``
    untimed calls, then ``repeats`` timed ones, each after a barrier; rank 0's median is the sample.
    Returns [(bytes, seconds), ...] in the order of ``sizes``."""
    return measure_many([op], sizes, world_size, repeats, warmup, timeout_s)[op]
