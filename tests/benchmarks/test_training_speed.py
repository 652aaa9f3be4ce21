"""Training speed on these CPUs: forward + backward + update per task at fp32 and bf16 autocast, at 1 and 2
threads; and the cost of simulated workers (8 workers in one process against 1, the same global batch).

Reported, not asserted (numbers for reading, ratios taken within one session): results land in
``results/benchmarks/training.json``. Run with ``make bench``; run alone on the machine.
"""
from __future__ import annotations

import json
import statistics
import time

import pytest
import torch

from commbench.config import resolve
from commbench.methods.comm import SimCommunicator
from commbench.config.resolve import server_count
from commbench.run.train import Trainer
from . import write_result


TASKS = {"resnet20-cifar10": 128, "cifarnet-cifar10": 128, "lenet-mnist": 64}  # task -> one worker's batch
PRECISIONS = ("fp32", "bf16-autocast")
ROUNDS, STEPS = 3, 6
RESULTS: dict = {}


def trainer(task: str, batch: int, precision: str, workers: int, threads: int, method: str = "baseline") -> Trainer:
    cfg = resolve({"task": task, "dataset": "synthetic", "method": method, "backend": "sim", "workers": workers,
                   "global_batch": batch, "steps": 1000, "threads": threads, "precision": precision, "ema": 0.0})
    return Trainer(cfg, SimCommunicator(workers, num_servers=server_count(cfg)), checkpoints=None)


def seconds_per_step(t: Trainer, steps: int) -> float:
    t.step(0)  # warm-up: allocations, first-call paths
    start = time.perf_counter()
    for s in range(1, steps + 1):
        t.step(s)
    return (time.perf_counter() - start) / steps


@pytest.fixture(scope="module", autouse=True)
def report():
    yield
    if RESULTS:
        write_result("training", RESULTS)
        print("\n" + json.dumps(RESULTS, indent=1))


@pytest.mark.benchmark
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("task", sorted(TASKS))
def test_images_per_second_at_each_precision(task, threads):
    """Rounds alternate the precisions, so both see the same machine state; the ratio is per round."""
    batch = TASKS[task]
    torch.set_num_threads(threads)
    times = {p: [] for p in PRECISIONS}
    for _ in range(ROUNDS):
        for precision in PRECISIONS:
            times[precision].append(seconds_per_step(trainer(task, batch, precision, 1, threads), STEPS))
    out = {p: {"images_per_s": batch / statistics.median(ts), "s_per_step": statistics.median(ts)}
           for p, ts in times.items()}
    out["speedup_bf16_over_fp32"] = statistics.median(f / b for f, b in zip(times["fp32"], times["bf16-autocast"]))
    RESULTS.setdefault("images_per_s", {}).setdefault(task, {})[f"{threads} thread(s)"] = out


@pytest.mark.benchmark
def test_simulated_workers_cost_near_one_process():
    """LeNet, global batch 64, 8 simulated workers against 1, one thread, paired rounds: the median ratio of
    their seconds per step (the goal: at most 2)."""
    torch.set_num_threads(1)
    ratios, one, eight = [], [], []
    for _ in range(ROUNDS):
        a = seconds_per_step(trainer("lenet-mnist", 64, "fp32", 1, 1), 50)
        b = seconds_per_step(trainer("lenet-mnist", 64, "fp32", 8, 1), 50)
        one.append(a)
        eight.append(b)
        ratios.append(b / a)
    RESULTS["simulated_workers"] = {"setup": "lenet-mnist, baseline, global batch 64, 1 thread, 50 steps a round",
                                    "s_per_step_1_worker": one, "s_per_step_8_workers": eight,
                                    "median_ratio_8_over_1": statistics.median(ratios)}
