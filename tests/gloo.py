"""Run a function on several real gloo processes from a test, failing fast when one of them breaks."""
from __future__ import annotations

import queue as queue_module
import time

import pytest
import torch.multiprocessing as mp

from bench.launch.local import free_port


def spawn(target, world: int, timeout_s: float = 120) -> dict[int, object]:
    """Run ``target(rank, port, queue)`` on ``world`` spawned processes; return what each put on the queue
    as ``(rank, result)``, by rank. A worker that puts a string (a formatted traceback) or dies without a
    result fails the test at once, instead of leaving the others to wait out a collective's timeout."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=target, args=(r, port, queue)) for r in range(world)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + timeout_s
    try:
        results = {}
        while len(results) < world:
            try:
                rank, result = queue.get(timeout=1.0)
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
