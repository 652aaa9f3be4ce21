"""A plain hand-written DistributedDataParallel loop: the yardstick for the harness's own overhead.

Same model (TernGrad's LeNet), data (Fashion-MNIST in memory), batch (32 per worker), optimizer (momentum SGD)
and backend (gloo, one thread per process) as ``commbench run ... --backend dist --workers 2``. Prints the
training throughput in images/s, timed like commbench's ``train_s``: every step, no evaluation.

    python tests/benchmarks/ddp_loop.py --steps 300 --data-root data
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from commbench.tasks.data import load_mnist_format
from commbench.tasks.models import LeNet


def worker(rank: int, world: int, port: int, steps: int, root: str, queue) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    data = load_mnist_format("fashion-mnist", Path(root))
    torch.manual_seed(1)
    model = DDP(LeNet("tf"))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    per_worker, g = 32, torch.Generator().manual_seed(0)
    perm = torch.randperm(data.train_size, generator=g)
    start = time.perf_counter()
    for step in range(steps):
        idx = perm[(step * per_worker * world) % (data.train_size - 64):][:per_worker * world]
        x, y = data.train_batch(idx[rank * per_worker:(rank + 1) * per_worker])
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()
    elapsed = time.perf_counter() - start
    if rank == 0:
        queue.put(steps * per_worker * world / elapsed)
    dist.destroy_process_group()


def measure(steps: int, root: str, world: int = 2) -> float:
    from commbench.methods.comm.dist import free_port

    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    port = free_port()
    procs = [ctx.Process(target=worker, args=(r, world, port, steps, root, queue)) for r in range(world)]
    for p in procs:
        p.start()
    rate = queue.get()
    for p in procs:
        p.join()
    return rate


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--data-root", default="data")
    args = ap.parse_args()
    print(f"{measure(args.steps, args.data_root):.1f} images/s")
