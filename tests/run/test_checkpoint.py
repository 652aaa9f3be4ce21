"""Checkpoint and resume: a run stopped by a signal and resumed computes exactly what an uninterrupted run
computes (sim), for every kind of method state: optimizer momentum, residuals, SSD-SGD's pre_weight and
servers, the harness EMA, the byte ledger, the random streams and the data position."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from commbench.run.checkpoint import Checkpoints, on_device, stop_signals
from commbench.config import resolve
from commbench.run.train import train
from commbench.methods.comm import SimCommunicator

from ..conftest import REPO, commbench

STEPS = 12

CASES = {
    "baseline-momentum-ema": ("baseline", {"optimizer.name": "momentum", "optimizer.momentum": 0.9, "ema": 0.99}),
    "baseline-ps-2-servers": ("baseline", {"method.topology": "ps", "method.servers": 2}),
    "terngrad": ("terngrad", {}),
    "wgt-residuals": ("wgt", {"method.threshold": 0.001}),
    "qgt-residuals": ("qgt", {"method.threshold": 0.001}),
    "ssdsgd-ps": ("ssdsgd", {"method.k": 2, "method.warmup": 3, "optimizer.name": "momentum",
                             "optimizer.momentum": 0.9}),
    "ssdsgd-allreduce-dcasgd": ("ssdsgd", {"method.k": 4, "method.warmup": 3, "method.topology": "allreduce",
                                           "method.local_rule": "dcasgd", "optimizer.name": "momentum",
                                           "optimizer.momentum": 0.9}),
    "topk-residuals": ("topk", {}),
    "randomk-residuals": ("randomk", {}),
    "dgc-momentum-warmup": ("dgc", {"optimizer.name": "momentum", "optimizer.momentum": 0.9,
                                    "method.warmup_steps": 8}),
    "qsgd-streams": ("qsgd", {"method.min_size": 1, "method.bucket": 128}),
    "natural-streams": ("natural", {}),
    "u8bit-residuals": ("u8bit", {"method.memory": "residual"}),
    "fp8": ("fp8", {}),
    "onebit-residuals": ("onebit", {}),
    "signsgd-vote": ("signsgd", {}),
    "signum-momentum": ("signum", {"optimizer.name": "momentum", "optimizer.momentum": 0.9}),
    "efsignsgd-residuals": ("efsignsgd", {}),
    "powersgd-memories": ("powersgd", {}),
}



def computed(history: list[dict]) -> list[dict]:
    """A history without its clock readings (train_s): what the run computed, which a resume must reproduce."""
    return [{k: v for k, v in point.items() if k != "train_s"} for point in history]

def config(method: str, extra: dict, **more):
    """On the CPU unless a test names the device: "auto" would train on a GPU where the host has one, and the
    tests that assert the devices a run's stretches trained on mean the CPU."""
    return resolve({"task": "lenet-mnist", "method": method, "dataset": "synthetic", "workers": 2,
                    "backend": "sim", "steps": STEPS, "eval.every": 4, "global_batch": 16, "device": "cpu",
                    **extra, **more})


def run(cfg, checkpoints=None, stop_after: int | None = None):
    """train() under sim; ``stop_after``: this process sends itself SIGUSR2 after that many steps."""
    def report(done, _total, _loss):
        if done == stop_after:
            os.kill(os.getpid(), signal.SIGUSR2)

    with stop_signals():
        return train(cfg, SimCommunicator(cfg.workers, num_servers=cfg.method_params.get("servers", 0)
                                          if cfg.method_params.get("topology") == "ps" else 0),
                     report=report, keep_weights=True, checkpoints=checkpoints)


@pytest.mark.parametrize("case", list(CASES))
def test_a_run_stopped_by_a_signal_and_resumed_equals_an_uninterrupted_run(case, tmp_path):
    method, extra = CASES[case]
    cfg = config(method, extra)
    whole = run(cfg)

    checkpoints = Checkpoints(tmp_path / "ckpt", every=0, poll=1)
    first = run(cfg, checkpoints, stop_after=5)
    assert first.status == "interrupted" and first.stopped_by == "SIGUSR2"
    assert first.metrics["steps"] == 5 and checkpoints.latest()["step"] == 5
    resumed = run(cfg, checkpoints)

    assert resumed.status == "done" and resumed.resumed_at == [5]
    assert resumed.devices == ["cpu", "cpu"] and resumed.metrics["images_per_s"] > 0
    assert computed(resumed.history) == computed(whole.history)  # losses, evaluations and bytes at every log point
    for key in ("top1", "top5", "final_train_loss", "bytes_sent", "bytes_received", "bytes_fp32_equiv",
                "samples_seen", "steps"):
        assert resumed.metrics[key] == whole.metrics[key], key
    assert resumed.weights.keys() == whole.weights.keys()
    for name, w in whole.weights.items():
        assert torch.equal(resumed.weights[name], w), name


def test_a_checkpoints_method_state_moves_to_the_runs_device_and_plain_values_stay():
    """Checkpoints load onto the CPU; a run on a GPU gets its method state there (the meta device stands in)."""
    saved = {"local": {0: {"updates": 3, "previous": {"w": torch.ones(2)}}},
             "rng": ("MT19937", torch.arange(3), 7, 0, 0.5), "memories": [torch.zeros(1), None], "name": "x"}
    moved = on_device(saved, torch.device("meta"))
    assert moved["local"][0]["previous"]["w"].is_meta and moved["rng"][1].is_meta and moved["memories"][0].is_meta
    assert moved["local"][0]["updates"] == 3 and moved["memories"][1] is None and moved["name"] == "x"
    assert moved["rng"][0] == "MT19937" and moved["rng"][2:] == (7, 0, 0.5) and type(moved["rng"]) is tuple
    assert saved["local"][0]["previous"]["w"].device.type == "cpu"  # the loaded state itself is not changed


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (the GPU check runs it)")
@pytest.mark.parametrize("saved_on, resumed_on", [("cpu", "cuda"), ("cuda", "cpu")])
@pytest.mark.parametrize("case", ["ssdsgd-ps", "ssdsgd-allreduce-dcasgd", "powersgd-memories", "wgt-residuals",
                                  "randomk-residuals", "dgc-momentum-warmup", "qsgd-streams", "onebit-residuals"])
def test_a_run_checkpointed_on_one_kind_of_device_resumes_on_the_other(case, saved_on, resumed_on, tmp_path):
    """Method state and the workers' random streams cross over: a GPU checkpoint carries CUDA generator states
    that a CPU run has no place for, and a CPU checkpoint method state that a GPU run needs on the GPU."""
    method, extra = CASES[case]
    checkpoints = Checkpoints(tmp_path / "ckpt", every=0, poll=1)
    first = run(config(method, extra, device=saved_on), checkpoints, stop_after=5)
    assert first.status == "interrupted"
    resumed = run(config(method, extra, device=resumed_on), checkpoints)
    assert resumed.status == "done" and resumed.resumed_at == [5], resumed.error


@pytest.mark.parametrize("saved_devices, expected", [
    (["cuda (NVIDIA H100 80GB HBM3)"], ["cuda (NVIDIA H100 80GB HBM3)", "cpu"]),
    (None, [None, "cpu"]),  # a checkpoint from before the field: the first stretch's device is unknown
])
def test_a_run_resumed_on_other_hardware_says_so_and_gives_no_speed(saved_devices, expected, tmp_path):
    """Its training seconds were spent on two machines: images/s would measure neither."""
    cfg = config("wgt", {"method.threshold": 0.001})
    checkpoints = Checkpoints(tmp_path / "ckpt", every=0, poll=1)
    run(cfg, checkpoints, stop_after=5)
    path = checkpoints.directory / checkpoints.latest()["folder"] / "sim.pt"
    state = torch.load(path, weights_only=True)
    assert state["loop"]["devices"] == ["cpu"]
    if saved_devices is None:
        del state["loop"]["devices"]
    else:
        state["loop"]["devices"] = saved_devices
    torch.save(state, path)
    resumed = run(cfg, checkpoints)
    assert resumed.status == "done" and resumed.devices == expected
    assert resumed.metrics["images_per_s"] is None and resumed.metrics["train_s"] > 0


def test_the_control_stops_differ_without_restoring_state(tmp_path):
    """The equality above needs the checkpoint: resuming at step 5 from fresh state (here, a checkpoint of
    another seed's run) does not give the uninterrupted run's weights."""
    cfg = config("wgt", {"method.threshold": 0.001})
    whole = run(cfg)
    checkpoints = Checkpoints(tmp_path / "ckpt", every=0, poll=1)
    run(config("wgt", {"method.threshold": 0.001}, seed=2), checkpoints, stop_after=5)
    resumed = run(cfg, checkpoints)
    assert any(not torch.equal(resumed.weights[n], w) for n, w in whole.weights.items())


def test_periodic_checkpoints_keep_only_the_latest_step(tmp_path):
    cfg = config("wgt", {"method.threshold": 0.001}, **{"checkpoint.every": 4})
    checkpoints = Checkpoints(tmp_path / "ckpt", every=4, poll=1)
    run(cfg, checkpoints, stop_after=10)
    assert checkpoints.latest()["step"] == 10  # 4 and 8 were saved, then 10 on the signal
    assert [p.name for p in (tmp_path / "ckpt").glob("step-*")] == ["step-000000010"]
    assert checkpoints.latest()["files"] == ["sim.pt"]


def test_a_checkpoint_without_this_process_file_is_refused_by_name(tmp_path):
    cfg = config("baseline", {})
    run(cfg, Checkpoints(tmp_path / "ckpt", poll=1), stop_after=3)
    with pytest.raises(RuntimeError, match="has no state for rank1"):
        Checkpoints(tmp_path / "ckpt", key="rank1").load()


def _signal_when_started(proc: subprocess.Popen, log: Path, wait_s: float = 120) -> None:
    """SIGUSR2 to the launcher once training is under way (its progress log shows a step)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and proc.poll() is None:
        if "steps" in log.read_text(errors="replace"):
            proc.send_signal(signal.SIGUSR2)
            return
        time.sleep(0.2)
    raise AssertionError(f"the run never showed progress: {log.read_text()[-500:]}")


# A sim run stopped by a signal and resumed: test_a_run_stopped_by_a_signal_and_resumed_equals_an_uninterrupted_run
# (in this process); through the command line it repeats in the slow tier.
@pytest.mark.parametrize("backend", [pytest.param("sim", marks=pytest.mark.slow), "dist"])
def test_cli_run_stopped_by_sigusr2_leaves_an_interrupted_record_and_the_same_command_resumes(backend, tmp_path):
    args = ["run", "--task", "lenet-mnist", "--method", "ssdsgd", "--dataset", "synthetic", "--workers", "2",
            "--backend", backend, "--steps", "60", "--set", "method.k=2", "--set", "method.warmup=3",
            "--set", "eval.every=20", "--set", "global_batch=16"]
    plain = commbench(*args, "--out", str(tmp_path / "plain"), "--quiet")
    assert plain.returncode == 0, plain.stderr

    out = tmp_path / "stopped"
    log = tmp_path / "stderr.log"
    with open(log, "w") as err:  # progress lines every second while not on a terminal
        proc = subprocess.Popen([sys.executable, "-m", "commbench", *args, "--out", str(out),
                                 "--set", "step_sleep_s=0.1"], cwd=REPO, stdout=subprocess.PIPE, stderr=err,
                                text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        _signal_when_started(proc, log)
        stdout, _ = proc.communicate(timeout=300)
    assert proc.returncode == 75, stdout  # interrupted, resumable: not a failed run (1)
    [record_path] = (out / "runs").glob("*.json")
    stopped = json.loads(record_path.read_text())
    assert stopped["status"] == "interrupted" and "stopped by SIGUSR2 at step" in stopped["error"]
    assert "run it again to resume" in stopped["error"]
    at = stopped["metrics"]["steps"]
    assert 0 < at < 60 and (backend == "sim" or at % 10 == 0)  # dist: the processes meet every 10 steps

    again = commbench(*args, "--out", str(out), "--quiet")
    assert again.returncode == 0, again.stderr
    resumed = json.loads(record_path.read_text())
    reference = json.loads(next((tmp_path / "plain" / "runs").glob("*.json")).read_text())
    assert resumed["env"]["resumed_at_steps"] == [at] and resumed["env"]["devices_by_stretch"] == ["cpu", "cpu"]
    assert computed(resumed["history"]) == computed(reference["history"])
    for key in ("top1", "final_train_loss", "bytes_sent", "bytes_received", "server_bytes_received"):
        assert resumed["metrics"][key] == reference["metrics"][key], key
    assert not (out / "checkpoints" / resumed["run_id"]).exists()  # a finished run keeps no checkpoint
