"""One rank of a plain hand-written DistributedDataParallel loop on AlexNet-BN with synthetic ImageNet-shaped data:
the yardstick for commbench's overlapped baseline on the emulated network. Run inside a rank's network namespace
by tests/benchmarks/test_network_speed.py; prints the mean step time on rank 0.

    python -m tests.benchmarks.ddp_alexnet --rank 0 --world 2 --addr 10.213.0.1 --port 29500 --steps 6
"""
from __future__ import annotations

import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from commbench.tasks import TASKS


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--addr", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--per-worker", type=int, default=8)
    args = ap.parse_args()
    os.environ.update(MASTER_ADDR=args.addr, MASTER_PORT=str(args.port), GLOO_SOCKET_IFNAME="eth0")
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // args.world))  # as commbench splits the cores
    dist.init_process_group("gloo", rank=args.rank, world_size=args.world)
    torch.manual_seed(1)
    model = DDP(TASKS["alexnet-imagenet"].build_model("tf", 1000))  # bucket_cap_mb=25, DDP's defaults
    # the same update as commbench's recipe: momentum 0.9, weight decay 5e-4 on the kernels only (TF-slim)
    decayed = [p for p in model.parameters() if p.ndim > 1]
    rest = [p for p in model.parameters() if p.ndim <= 1]
    opt = torch.optim.SGD([{"params": decayed, "weight_decay": 5e-4}, {"params": rest, "weight_decay": 0.0}],
                          lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(args.rank)
    x = torch.randn(args.per_worker, 3, 224, 224, generator=g)
    y = torch.randint(0, 1000, (args.per_worker,), generator=g)
    start = time.perf_counter()
    for _ in range(args.steps):  # every step timed, the first included, as commbench's train_s
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()
    if args.rank == 0:
        print(f"step_s {(time.perf_counter() - start) / args.steps:.6f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
