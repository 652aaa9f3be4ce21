"""Golden values of the methods the compressor kit rebuilds (TernGrad, WGT, BGT, QGT and their DDP hooks; the fp16
and bf16 all-reduce), recorded before the rebuild (tests/golden/methods.json): each fixed short run's final-weights digest and bytes
sent, which must stay identical, since no method version changes.

The sim runs (every configuration: topology, scaler, exchange) run in ``make test``; the dist runs (2 gloo
processes each) and the hooks are the same numbers once more over real processes (sim == dist is proved per method
elsewhere) and run in the slow tier. ``COMMBENCH_UPDATE_GOLDEN=1`` rewrites the file (only before a rebuild: a
change of these numbers is a change of what a method computes, and needs a new method version).

Every golden run computes in child processes whose float kernels are pinned to AVX2 (:data:`PINNED`): torch's and
oneDNN's kernels differ by CPU (an AVX-512 machine's convolutions round otherwise), and the numbers were recorded
on an AVX2 machine, so pinned, every x86-64 machine this suite runs on computes them bit for bit (checked on an
AMD EPYC Zen 3 and a Zen 5).
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from commbench.config import resolve

from ..conftest import REPO, run_and_load
from ..gloo import spawn

# read by torch and oneDNN when they load: set for the child processes that compute the golden runs
PINNED = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "methods.json"
BASE = {"task": "lenet-mnist", "dataset": "synthetic", "workers": 2, "steps": 3, "global_batch": 32, "seed": 7}
TERNGRAD = {"shared": {"method": "terngrad"},
            "own": {"method": "terngrad", "method.scaler_sharing": False, "method.scaler": "std"},
            "ps": {"method": "terngrad", "method.topology": "ps"}}
RUNS = {f"{name}-{exchange}": {**settings, "exchange": exchange}
        for name, settings in {**TERNGRAD, "wgt": {"method": "wgt", "method.threshold": 1e-3},
                               "bgt": {"method": "bgt", "method.threshold": 1e-3},
                               "qgt": {"method": "qgt", "method.threshold": 1e-3},
                               "fp16": {"method": "fp16"}, "bf16": {"method": "bf16"}}.items()
        for exchange in ("after-backward", "overlapped") if not (name == "ps" and exchange == "overlapped")}


def _golden() -> dict:
    return json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}


def _check(key: str, value: dict) -> None:
    if os.environ.get("COMMBENCH_UPDATE_GOLDEN") == "1":
        golden = _golden()
        golden[key] = value
        GOLDEN.write_text(json.dumps(dict(sorted(golden.items())), indent=1) + "\n")
        return
    assert key in _golden(), f"no golden value for {key}: record it (COMMBENCH_UPDATE_GOLDEN=1) before a rebuild"
    assert value == _golden()[key], key


def _record_values(record: dict) -> dict:
    m = record["metrics"]
    return {"weights": m["final_weights"]["sha256"], "bytes_sent": m["bytes_sent"]}


@pytest.fixture
def pinned(monkeypatch):
    for key, value in PINNED.items():
        monkeypatch.setenv(key, value)


SIM_SCRIPT = """
import json, sys
from pathlib import Path
from commbench.config import resolve
from commbench.launch.runner import execute
runs, out = json.loads(sys.argv[1]), Path(sys.argv[2])
for name, settings in runs.items():
    record = execute(resolve(settings), out / name, show_progress=False).record
    m = record["metrics"]
    print(json.dumps({name: {"status": record["status"], "error": record.get("error"),
                             "weights": m.get("final_weights", {}).get("sha256"), "bytes_sent": m.get("bytes_sent")}}))
"""


@pytest.fixture(scope="module")
def sim_values(tmp_path_factory) -> dict:
    """Every sim golden run, computed in one child process with the kernels pinned (one start, not fifteen)."""
    runs = {name: {**BASE, "backend": "sim", **settings} for name, settings in RUNS.items()}
    done = subprocess.run([sys.executable, "-c", SIM_SCRIPT, json.dumps(runs), str(tmp_path_factory.mktemp("sim"))],
                          capture_output=True, text=True, cwd=REPO, env={**os.environ, **PINNED}, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return {k: v for line in done.stdout.splitlines() if line.startswith("{") for k, v in json.loads(line).items()}


@pytest.mark.parametrize("name", sorted(RUNS))
def test_the_sim_runs_keep_their_golden_weights_and_bytes(sim_values, name):
    value = dict(sim_values[name])
    assert value.pop("status") == "done", value.pop("error")
    value.pop("error")
    _check(f"sim/{name}", value)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(RUNS))
def test_the_dist_runs_keep_their_golden_weights_and_bytes(tmp_path, name, pinned):
    cfg = resolve({**BASE, "backend": "dist", **RUNS[name]})
    flags = [f"--{k}={v}" if k in ("task", "dataset", "workers", "steps", "seed") else f"--set={k}={v}"
             for k, v in {**BASE, **RUNS[name]}.items() if k != "method"]
    record, _ = run_and_load("--method", RUNS[name]["method"], "--backend", "dist", *flags,
                             "--results", str(tmp_path))
    assert record["run_id"] == cfg.run_id
    _check(f"dist/{name}", _record_values(record))


HOOKS = {"terngrad-shared": ("terngrad", {"wd_in_grad": False}),
         "terngrad-own": ("terngrad", {"wd_in_grad": False, "scaler_sharing": False, "scaler": "std"}),
         "wgt": ("wgt", {}), "bgt": ("bgt", {}), "qgt": ("qgt", {})}


def _hook_run(name: str, rank: int, port: int, queue) -> None:
    """Two gloo processes train LeNet for 3 steps under DDP with the hook; rank 0 reports the digest of its final
    weights and the bytes its ledger counted."""
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    from commbench.methods.comm import ByteLedger
    from commbench.methods.ddp_hooks import TernGradHookState, ThresholdHookState, terngrad_hook, threshold_hook
    from commbench.methods.terngrad import TernGradParams
    from commbench.tasks.data import make_synthetic
    from commbench.tasks.models import LeNet

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        torch.manual_seed(0)
        model = torch.nn.parallel.DistributedDataParallel(LeNet("tf"), bucket_cap_mb=0.1)
        ledger = ByteLedger()
        method, params = HOOKS[name]
        if method == "terngrad":
            ddp_state, hook = TernGradHookState(model, TernGradParams(**params), 1000 + rank, ledger=ledger), \
                terngrad_hook
        else:
            ddp_state, hook = ThresholdHookState(model, method, 1e-3, ledger=ledger), threshold_hook
        model.register_comm_hook(ddp_state, hook)
        data = make_synthetic((1, 28, 28), 10, 96, 16)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        for step in range(3):
            x, y = data.train_batch(range(32 * step + 16 * rank, 32 * step + 16 * rank + 16))
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
        digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.module.parameters()))
        queue.put((rank, {"weights": digest.hexdigest(), "bytes_sent": ledger.total_sent()}))
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(HOOKS))
def test_the_ddp_hooks_keep_their_golden_weights_and_bytes(name, pinned):
    import functools

    results = spawn(functools.partial(_hook_run, name), 2)
    _check(f"hook/{name}", results[0])
