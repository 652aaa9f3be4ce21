"""Bad input: exit 2, one line on stderr naming the bad item, nothing written."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ..conftest import commbench

RUN = ["run", "--task", "lenet-mnist", "--method", "baseline", "--steps", "5"]


@pytest.mark.parametrize("args, item", [
    (["run", "--task", "resnet-9000", "--method", "baseline"], "resnet-9000"),
    (["run", "--task", "lenet-mnist", "--method", "zipper"], "zipper"),
    (RUN + ["--dataset", "imagenet"], "imagenet"),
    (RUN + ["--set", "no.such.key=1"], "no.such.key"),
    (RUN + ["--workers", "0"], "workers"),
    (RUN + ["--set", "method.clip=2"], "method.clip"),
    (RUN + ["--backend", "mpi"], "mpi"),
])
def test_run_bad_input(tmp_path, args, item):
    out = tmp_path / "out"
    proc = commbench(*args, "--out", str(out))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and item in lines[0], proc.stderr
    assert not out.exists()


@pytest.mark.parametrize("text, item", [
    ("base: {task: lenet-mnist\n", "YAML"),
    ("base: {task: lenet-mnist, method: baseline}\naxes: {workers: [1, 0]}", "workers"),
    ("base: {task: lenet-mnist, method: baseline}\naxes: {wrkers: [1]}", "wrkers"),
])
def test_sweep_bad_grid(tmp_path, text, item):
    grid, out = tmp_path / "g.yaml", tmp_path / "out"
    grid.write_text(text)
    for extra in ([], ["--dry-run"]):
        proc = commbench("sweep", str(grid), "--out", str(out), *extra)
        assert proc.returncode == 2
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and item in lines[0] and "g.yaml" in lines[0], proc.stderr
    assert not out.exists()


def test_missing_grid_file(tmp_path):
    proc = commbench("sweep", str(tmp_path / "absent.yaml"))
    assert proc.returncode == 2 and "absent.yaml" in proc.stderr


def test_dry_run_lists_run_ids_and_writes_nothing(tmp_path):
    out = tmp_path / "out"
    proc = commbench("sweep", "bench/grids/smoke.yaml", "--dry-run", "--out", str(out))
    assert proc.returncode == 0
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 2 and all(ln.startswith("lenet-mnist_baseline_w") for ln in lines)
    assert not out.exists()


def test_a_data_set_that_cannot_be_had_is_named_and_nothing_is_written(tmp_path):
    """The paper's data set by default (MNIST for LeNet): offline, with no mirror, exit 2 before any record,
    output folder or empty data folder exists."""
    out, root = tmp_path / "out", tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if k != "COMMBENCH_DATA_MIRROR"}
    proc = subprocess.run([sys.executable, "-m", "commbench", "run", "--task", "lenet-mnist", "--method", "baseline",
                           "--data-root", str(root), "--out", str(out)], capture_output=True, text=True,
                          env={**env, "COMMBENCH_OFFLINE": "1"}, timeout=120)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("commbench: error: mnist:") and "fashion-mnist" in line
    assert not out.exists() and not root.exists()


def test_every_option_of_every_command_says_what_it_does():
    import argparse

    from commbench.cli import build_parser

    silent = []

    def walk(parser, path):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, path + [name])
            elif action.help is None and action.dest != "help":
                silent.append(" ".join(path + action.option_strings))

    walk(build_parser(), ["commbench"])
    assert not silent, silent


def test_version_and_a_dry_run_that_writes_nothing(tmp_path):
    version = commbench("--version")
    assert version.returncode == 0 and version.stdout.startswith("commbench ")
    dry = commbench(*RUN, "--set", "lr_schedule.base_lr=0.05", "--dry-run", "--out", str(tmp_path / "out"))
    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.splitlines()
    assert lines[0].startswith("run id     lenet-mnist_baseline_w1_")
    assert any(line.startswith("lr_schedule.base_lr") and "0.05" in line and "set by user" in line for line in lines)
    assert any(line.startswith("optimizer.momentum ") and "TernGrad" in line for line in lines)  # the recipe's source
    assert not (tmp_path / "out").exists()
