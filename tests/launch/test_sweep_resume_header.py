"""The line a sweep prints before it runs says how many of its runs resume from a checkpoint (a run with
``OUT/checkpoints/<run_id>/latest.json``), beside those already finished and those to run."""
from __future__ import annotations

import json
import os

import pytest

from commbench.config.grid import expand, load_grid
from commbench.launch import runner
from commbench.launch.sweep import header, resumes_at, run_local_sweep

from ..helpers import write_record


@pytest.fixture
def runs(tmp_path):
    grid = tmp_path / "four.yaml"
    grid.write_text("name: four\nbase: {task: lenet-mnist, dataset: synthetic, backend: sim, tier: smoke}\n"
                    "axes: {method: [baseline], workers: [1, 2], seed: [1, 2]}\n")
    return expand(load_grid(grid))


def checkpoint(out, run_id: str, step: int) -> None:
    folder = out / "checkpoints" / run_id
    (folder / f"step-{step:09d}").mkdir(parents=True)
    (folder / f"step-{step:09d}" / "sim.pt").write_bytes(b"")
    (folder / "latest.json").write_text(json.dumps({"step": step, "folder": f"step-{step:09d}", "files": ["sim.pt"]}))


def test_the_header_counts_the_runs_that_resume_from_a_checkpoint(tmp_path, runs, monkeypatch, capsys):
    out = tmp_path / "out"
    finished, interrupted, carried_in, fresh = runs
    write_record(out, finished.run_id)                           # done: skipped
    write_record(out, interrupted.run_id, status="interrupted")  # stopped part-way, its checkpoint beside it
    checkpoint(out, interrupted.run_id, 120)
    checkpoint(out, carried_in.run_id, 40)                       # no record: a checkpoint from another machine
    trained = []

    def execute(cfg, out, show_progress):
        trained.append(cfg.run_id)
        return runner.RunResult({"status": "done", "env": {}, "metrics": {"wall_s": 1.0}}, None)

    monkeypatch.setattr(runner, "execute", execute)
    monkeypatch.setattr(runner, "summary", lambda cfg, record: f"{cfg.run_id} done")
    assert run_local_sweep(runs, out, show_progress=False) == 0
    err = capsys.readouterr().err
    assert "sweep: 4 runs, 1 already finished, 3 to run (2 resume from a checkpoint)" in err
    assert trained == [interrupted.run_id, carried_in.run_id, fresh.run_id]


def test_no_checkpoint_is_said_too(tmp_path, runs):
    expected = "sweep: 4 runs, 0 already finished, 4 to run (0 resume from a checkpoint)"
    assert header(len(runs), runs, tmp_path) == expected
    checkpoint(tmp_path, runs[0].run_id, 7)
    assert header(len(runs), runs[:2], tmp_path).endswith("2 to run (1 resumes from a checkpoint)")


def test_an_index_that_is_no_checkpoint_resumes_nothing_and_hangs_nothing(tmp_path, runs):
    """A FIFO planted at latest.json must not hang the sweep (read without blocking, as every checkpoint index),
    and an index that names no step is no checkpoint."""
    fifo, garbled, zero = (tmp_path / "checkpoints" / cfg.run_id for cfg in runs[:3])
    for folder in (fifo, garbled, zero):
        folder.mkdir(parents=True)
    os.mkfifo(fifo / "latest.json")
    (garbled / "latest.json").write_text("{not json")
    (zero / "latest.json").write_text(json.dumps({"step": "many"}))
    assert [resumes_at(tmp_path, cfg.run_id) for cfg in runs] == [None, None, None, None]
