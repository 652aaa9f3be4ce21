"""A results folder that others can write to, full of things that are not records: every reading command
names each bad file once, in one line, goes on, and never shows a traceback."""
from __future__ import annotations

import json
import os

import pytest

from ..conftest import commbench
from ..helpers import write_record


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    good = write_record(root, "good", top1=0.9)
    runs = root / "runs"

    def bad(name: str, change) -> None:
        record = json.loads(json.dumps(good))
        record["run_id"] = name
        change(record)
        (runs / f"{name}.json").write_text(json.dumps(record))

    bad("dict-metric", lambda r: r["metrics"].update(top1={"mean": 0.9}))
    bad("list-metric", lambda r: r["metrics"].update(images_per_s=[1, 2]))
    bad("params-string", lambda r: r["config"].update(method_params="threshold=0.1"))
    bad("optimizer-number", lambda r: r["config"].update(optimizer=7))
    bad("schedule-string", lambda r: r["config"].update(lr_schedule={"kind": "step", "base_lr": "fast"}))
    (runs / "nan-metric.json").write_text(json.dumps({**good, "run_id": "nan-metric"}).replace('"top5": 0.99',
                                                                                              '"top5": NaN'))
    (runs / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (runs / "huge-int.json").write_text(json.dumps({**good, "run_id": "huge-int"}).replace(
        '"seed": 1', '"seed": ' + "9" * 5000))
    (runs / "latin1.json").write_bytes('{"run_id": "caf\xe9"}'.encode("latin-1"))
    os.mkfifo(runs / "fifo.json")
    (runs / "zero.json").symlink_to("/dev/zero")
    (root / "claims").mkdir()
    (root / "claims" / "good.lock").write_text('{"pid": "not a number", "host": 5}')
    (root / "claims" / "good.progress").write_text('{"step": "3", "steps": [1]}')
    (root / "claims" / "x.progress").write_text("[" * 50_000)
    return root


BAD = ["dict-metric", "list-metric", "params-string", "optimizer-number", "schedule-string", "deep", "huge-int",
       "latin1", "fifo", "zero"]


@pytest.mark.parametrize("command", [["table"], ["table", "--format", "csv"], ["table", "--paper", "all"],
                                     ["status"], ["plot", "--out", "{tmp}/figures"],
                                     ["report", "--out", "{tmp}/report"]])
def test_reading_commands_name_each_bad_file_once_and_go_on(hostile, tmp_path, command):
    args = [a.replace("{tmp}", str(tmp_path)) for a in command]
    done = commbench(*args, "--results", str(hostile), timeout=300)
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.returncode == 0, done.stderr[-2000:]
    for name in BAD:
        assert done.stderr.count(f"{name}.json") == 1, (name, done.stderr)
    assert "nan-metric.json" not in done.stderr  # a bare NaN reads as null, as documented


def test_a_sweep_into_the_folder_sets_the_bad_records_aside_and_runs(hostile, tmp_path):
    grid = tmp_path / "g.yaml"
    grid.write_text("base: {task: lenet-mnist, dataset: synthetic, method: baseline, backend: sim, steps: 1}\n"
                    "axes: {seed: [1]}\n")
    done = commbench("sweep", str(grid), "--results", str(hostile), timeout=300)
    assert "Traceback" not in done.stderr and done.returncode == 0, done.stderr[-2000:]
