"""Golden values of the methods the compressor kit rebuilds (TernGrad, WGT, BGT, QGT and their DDP hooks; the fp16
and bf16 all-reduce), recorded before the rebuild (tests/golden/methods.json): each fixed short run's final-weights digest and bytes
sent, which must stay identical, since no method version changes.

The sim runs (every configuration: topology, scaler, exchange) run in ``make test``; the dist runs (2 gloo
processes each) and the hooks are the same numbers once more over real processes (sim == dist is proved per method
elsewhere) and run in the slow tier. ``COMMBENCH_UPDATE_GOLDEN=1`` rewrites the file (only before a rebuild: a
change of these numbers is a change of what a method computes, and needs a new method version).
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from commbench.config import resolve

from ..conftest import execute_and_load, run_and_load
from ..gloo import spawn

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


@pytest.mark.parametrize("name", sorted(RUNS))
def test_the_sim_runs_keep_their_golden_weights_and_bytes(tmp_path, name):
    record, _ = execute_and_load(resolve({**BASE, "backend": "sim", **RUNS[name]}), tmp_path)
    _check(f"sim/{name}", _record_values(record))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(RUNS))
def test_the_dist_runs_keep_their_golden_weights_and_bytes(tmp_path, name):
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
def test_the_ddp_hooks_keep_their_golden_weights_and_bytes(name):
    import functools

    results = spawn(functools.partial(_hook_run, name), 2)
    _check(f"hook/{name}", results[0])
