"""The acceptance run: 2 real gloo workers on Fashion-MNIST, against the same run in sim."""
from __future__ import annotations

import json

import pytest
import torch

from ..conftest import commbench

ACCEPTANCE = ["run", "--task", "lenet-mnist", "--dataset", "fashion-mnist", "--method", "baseline",
              "--workers", "2", "--steps", "300", "--save-weights", "--quiet"]
CONTRACT = {
    "record": {"schema_version", "run_id", "status", "error", "config", "env", "metrics", "history"},
    "config": {"task", "method", "method_params", "workers", "backend", "seed", "tier", "dataset", "optimizer",
               "lr_schedule", "batch_per_worker", "global_batch", "steps"},
    "env": {"python", "torch", "torchvision", "git_sha", "git_dirty", "hostname", "device", "gpu_name",
            "world_size", "dist_backend", "slurm_job_id", "started_at", "finished_at"},
    "metrics": {"top1", "top5", "final_train_loss", "steps", "samples_seen", "wall_s", "train_s", "images_per_s",
                "bytes_sent", "bytes_received", "bytes_fp32_equiv", "wire_bytes_measured"},
    "history": {"step", "train_loss", "top1", "bytes_sent"},
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory, data_root):
    out = tmp_path_factory.mktemp("acceptance")
    records = {}
    for backend in ("dist", "sim"):
        proc = commbench(*ACCEPTANCE, "--backend", backend, "--data-root", str(data_root), "--out", str(out))
        assert proc.returncode == 0, proc.stderr
        run_id = proc.stdout.split(":")[0].strip()
        records[backend] = json.loads((out / "runs" / f"{run_id}.json").read_text())
        records[backend]["weights"] = torch.load(out / "weights" / f"{run_id}.pt")
    return records


def test_dist_run_learns_and_has_every_contract_field(runs):
    rec = runs["dist"]
    assert rec["status"] == "done" and rec["error"] is None
    assert rec["metrics"]["top1"] > 0.70
    for part in ("config", "env", "metrics"):
        assert CONTRACT[part] <= set(rec[part]), CONTRACT[part] - set(rec[part])
    assert CONTRACT["record"] <= set(rec)
    assert all(CONTRACT["history"] <= set(point) for point in rec["history"])
    assert rec["env"]["world_size"] == 2 and rec["env"]["dist_backend"] == "gloo"
    assert rec["data"]["substitute_for"] == "mnist"


def test_bytes_are_the_full_gradient_every_step(runs):
    m = runs["dist"]["metrics"]
    params = sum(t.numel() for k, t in runs["dist"]["weights"].items())
    assert m["parameters"] == params == 1_256_080
    assert m["bytes_sent"] == m["bytes_fp32_equiv"] == 4 * params * 2 * 300
    assert m["bytes_received"] == m["bytes_sent"]
    assert runs["dist"]["history"][-1]["bytes_sent"] == m["bytes_sent"]
    assert runs["dist"]["history"][-1]["bytes_received"] == m["bytes_received"]


def test_sim_ends_with_the_same_weights_and_bytes(runs):
    dist, sim = runs["dist"], runs["sim"]
    diff = max((dist["weights"][k] - sim["weights"][k]).abs().max().item() for k in dist["weights"])
    assert diff < 1e-5
    for key in ("bytes_sent", "bytes_received", "bytes_fp32_equiv", "top1"):
        assert dist["metrics"][key] == sim["metrics"][key], key
    assert dist["run_id"] != sim["run_id"]


def test_under_torchrun_rank0_writes_the_record(tmp_path):
    import subprocess
    import sys

    from ..conftest import REPO

    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "-m", "commbench",
                           "run", "--task", "lenet-mnist", "--dataset", "synthetic", "--method", "baseline",
                           "--workers", "2", "--steps", "10", "--quiet", "--out", str(tmp_path)],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr
    (path,) = (tmp_path / "runs").glob("*.json")
    rec = json.loads(path.read_text())
    assert rec["status"] == "done", rec["error"]
    assert rec["env"]["world_size"] == 2 and rec["env"]["dist_backend"] == "gloo"
    assert rec["metrics"]["bytes_sent"] == 4 * 1_256_080 * 2 * 10
