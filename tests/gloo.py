"""Run a function on several real gloo processes from a test, failing fast when one of them breaks."""
from __future__ import annotations

import io
import queue as queue_module
import time

import pytest
import torch
import torch.multiprocessing as mp

from commbench.methods.comm.dist import free_port


class _BytesQueue:
    """Puts what a worker returns as torch.save bytes: a tensor on a torch.multiprocessing queue is shared
    through its sender's file descriptors, which vanish if the worker exits before the parent reads it."""

    def __init__(self, queue):
        self.queue = queue

    def put(self, item) -> None:
        buffer = io.BytesIO()
        torch.save(item, buffer)
        self.queue.put(buffer.getvalue())


def _as_bytes(target, rank: int, port: int, queue) -> None:
    target(rank, port, _BytesQueue(queue))


def spawn(target, world: int, timeout_s: float = 120) -> dict[int, object]:
    """Run ``target(rank, port, queue)`` on ``world`` spawned processes; return what each put on the queue
    as ``(rank, result)``, by rank. A worker that puts a string (a formatted traceback) or dies without a
    result fails the test at once, instead of leaving the others to wait out a collective's timeout."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_as_bytes, args=(target, r, port, queue)) for r in range(world)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + timeout_s
    try:
        results = {}
        while len(results) < world:
            try:
                rank, result = torch.load(io.BytesIO(queue.get(timeout=1.0)), weights_only=False)
            except queue_module.Empty:
                dead = [r for r, p in enumerate(procs) if p.exitcode not in (None, 0) and r not in results]
                if dead:
                    pytest.fail(f"worker {dead[0]} exited with code {procs[dead[0]].exitcode} and no result")
                if time.monotonic() > deadline:
                    pytest.fail(f"no result from the workers within {timeout_s} s")
                continue
            if isinstance(result, str):
                pytest.fail(f"worker {rank} failed:\n{result}")
            results[rank] = result
        for p in procs:
            p.join(timeout_s)
            assert p.exitcode == 0
        return results
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
