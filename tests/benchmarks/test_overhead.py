"""Harness overhead: commbench's baseline step against a plain DDP loop, alternated in one session.

Reported, not asserted (wall-clock numbers are for reading, not for failing CI): the ratio lands in
``results/benchmarks/harness_overhead.json``. Run with ``make bench``.
"""
from __future__ import annotations

import json
import statistics

import pytest

from . import write_result

from ..conftest import commbench
from .ddp_loop import measure

STEPS, ROUNDS = 300, 3


@pytest.mark.benchmark
def test_harness_step_vs_hand_written_ddp(tmp_path, data_root):
    ours, ddp = [], []
    for r in range(ROUNDS):
        out = tmp_path / f"round{r}"
        proc = commbench("run", "--task", "lenet-mnist", "--dataset", "fashion-mnist", "--method", "baseline",
                         "--workers", "2", "--backend", "dist", "--steps", str(STEPS), "--set", "ema=0",
                         "--set", f"eval.every={STEPS}", "--data-root", str(data_root), "--out", str(out),
                         "--quiet")
        assert proc.returncode == 0, proc.stderr
        (path,) = (out / "runs").glob("*.json")
        ours.append(json.loads(path.read_text())["metrics"]["images_per_s"])
        ddp.append(measure(STEPS, str(data_root)))
    ratio = statistics.median(o / d for o, d in zip(ours, ddp))
    result = {"steps": STEPS, "rounds": ROUNDS, "commbench_images_per_s": ours, "ddp_images_per_s": ddp,
              "median_ratio_commbench_over_ddp": ratio,
              "setup": "LeNet (tf), Fashion-MNIST, 2 gloo workers x 1 thread, batch 32/worker, momentum SGD"}
    write_result("harness_overhead", result)
    print(f"\ncommbench {ours} vs DDP {ddp} images/s: median ratio {ratio:.3f}")
