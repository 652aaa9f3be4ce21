"""A local dist run on NCCL takes one GPU per process: with more processes than this machine has GPUs, the
preflight refuses it (exit 2, one line naming both counts) before any process starts or anything is written,
not the launcher once the run has begun (a failed record).

This machine may have no GPU: the tests make torch see one."""
from __future__ import annotations

import subprocess

import pytest

from commbench import cli

TWO_DIST_WORKERS = ["--task", "lenet-mnist", "--dataset", "synthetic", "--method", "baseline", "--workers", "2",
                    "--backend", "dist", "--steps", "2", "--quiet"]


@pytest.fixture
def one_gpu(monkeypatch):
    """torch sees one CUDA device (so device=auto computes on it, over NCCL), and no process may start."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: pytest.fail("a process was started"))
    for name in ("RANK", "WORLD_SIZE", "COMMBENCH_WORKER"):  # not under torchrun, srun or the launcher
        monkeypatch.delenv(name, raising=False)


def refused(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_run_with_more_gpu_workers_than_gpus_exits_2_before_anything_starts(tmp_path, capsys, one_gpu):
    out = tmp_path / "results"
    line = refused(capsys, ["run", *TWO_DIST_WORKERS, "--results", str(out)])
    assert line.startswith("commbench: error: dist on NCCL takes one GPU per process: 2 processes, 1 GPU(s)")
    assert "--backend sim" in line and "device=cpu" in line
    assert not out.exists()  # no record, no log folder


def test_parameter_servers_count_as_processes(tmp_path, capsys, one_gpu):
    out = tmp_path / "results"
    argv = ["run", *TWO_DIST_WORKERS, "--set", "method.topology=ps", "--set", "method.servers=2", "--results",
            str(out)]
    line = refused(capsys, argv)
    assert "takes one GPU per process: 4 processes, 1 GPU(s)" in line  # 2 workers and 2 parameter servers
    assert not out.exists()


def test_a_sweep_is_refused_before_its_first_run(tmp_path, capsys, one_gpu):
    grid = tmp_path / "g.yaml"
    grid.write_text("base: {task: lenet-mnist, method: baseline, dataset: synthetic, steps: 2}\n"
                    "axes: {workers: [1, 2], backend: [dist]}\n")
    out = tmp_path / "results"
    line = refused(capsys, ["sweep", str(grid), "--results", str(out)])
    assert "2 processes, 1 GPU(s)" in line
    assert not out.exists()  # the one-worker run, which fits, did not start either


def test_runs_the_gpus_can_hold_pass(one_gpu):
    from commbench.config import resolve
    from commbench.launch.preflight import check_machine

    base = {"task": "lenet-mnist", "dataset": "synthetic", "method": "baseline", "workers": 2, "steps": 2}
    check_machine(resolve({**base, "backend": "sim"}))  # one process, whatever the workers
    check_machine(resolve({**base, "backend": "dist", "device": "cpu"}))  # gloo: no GPU per process
    check_machine(resolve({**base, "backend": "dist", "workers": 1}))
    check_machine(resolve({**base, "backend": "dist"}), local=False)  # a Slurm job's GPUs are the cluster's


def test_under_an_outside_launcher_the_gpus_are_not_counted_here(one_gpu, monkeypatch):
    """torchrun or srun started the processes, maybe on several machines: this one need not hold them all."""
    from commbench.config import resolve
    from commbench.launch.preflight import check_machine

    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    check_machine(resolve({"task": "lenet-mnist", "dataset": "synthetic", "method": "baseline", "workers": 2,
                           "backend": "dist", "steps": 2}))
