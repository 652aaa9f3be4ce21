"""Throughput a systems researcher would trust: on the emulated network (every process in its own network
namespace, links limited to 1 Gbit/s by tc tbf), commbench's overlapped baseline against a hand-written
DistributedDataParallel loop, and TernGrad, fp16, bf16 and PowerSGD against that baseline, alternated round by
round in one session. AlexNet-BN on synthetic ImageNet-shaped data, 8 images per worker, 2 gloo workers.

Reported, not asserted: the ratios land in results/benchmarks/network_speed.json (``make bench``; needs root).
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys

import pytest

from commbench.methods.comm.dist import free_port
from . import write_result

from ..conftest import REPO, commbench

STEPS, ROUNDS, RATE = 6, 3, "1gbit"
METHODS = {"baseline": [], "terngrad": [], "fp16": [], "bf16": [], "powersgd": ["--set", "method.start_iter=2"]}


def ddp_step_s() -> float:
    from commbench.launch.netns import emulated_network

    with emulated_network(2, RATE) as net:
        port = free_port()
        procs = [subprocess.Popen(net.exec_prefix(r) + [sys.executable, "-m", "tests.benchmarks.ddp_alexnet", "--rank",
                                                        str(r), "--world", "2", "--addr", net.address(0), "--port",
                                                        str(port), "--steps", str(STEPS)],
                                  cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for r in range(2)]
        outs = [p.communicate(timeout=900) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    return float(outs[0][0].split()[1])


def commbench_run(tmp_path, method: str, extra: list[str], round_: int) -> dict:
    out = tmp_path / f"{method}-{round_}"
    proc = commbench("run", "--task", "alexnet-imagenet", "--dataset", "synthetic", "--method", method, "--workers",
                     "2", "--backend", "dist", "--steps", str(STEPS), "--set", "global_batch=16", "--set",
                     f"eval.every={STEPS}", "--net", RATE, *extra, "--quiet", "--out", str(out), timeout=900)
    assert proc.returncode == 0, proc.stderr
    (path,) = (out / "runs").glob("*.json")
    record = json.loads(path.read_text())
    m = record["metrics"]
    return {"step_s": m["train_s"] / m["steps"], "breakdown": m["time_breakdown"], "exchange": record["config"]["exchange"],
            "bytes_sent_per_step": m["bytes_sent"] / m["steps"] / 2}


@pytest.mark.benchmark
@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("tc") is None,
                    reason="the emulated network needs root and iproute2")
def test_overlapped_baseline_against_ddp_and_compression_against_it(tmp_path):
    rounds = []
    for r in range(ROUNDS):
        row = {"ddp": {"step_s": ddp_step_s()}}
        for method, extra in METHODS.items():
            row[method] = commbench_run(tmp_path, method, extra, r)
        rounds.append(row)
    median = {k: statistics.median(row[k]["step_s"] for row in rounds) for k in rounds[0]}
    ratio_vs_ddp = statistics.median(row["baseline"]["step_s"] / row["ddp"]["step_s"] for row in rounds)
    speedups = {m: statistics.median(row["baseline"]["step_s"] / row[m]["step_s"] for row in rounds)
                for m in METHODS if m != "baseline"}
    result = {"setup": f"alexnet-imagenet (AlexNet-BN, 61M parameters), synthetic data, 8 images per worker, 2 gloo "
                       f"workers, each in its own network namespace, links at {RATE} (tc tbf), {STEPS} steps a "
                       f"run, {ROUNDS} rounds alternated",
              "median_step_s": median, "baseline_step_over_ddp": ratio_vs_ddp,
              "speedup_over_baseline": speedups, "rounds": rounds}
    write_result("network_speed", result)
    print(f"\nbaseline / DDP step time {ratio_vs_ddp:.3f}; speed-ups over the baseline: "
          + ", ".join(f"{m} {v:.2f}x" for m, v in speedups.items()))
