"""Records, sweeps that skip what is done, status and the comparison table."""
from __future__ import annotations

import json

import pandas as pd

from commbench.store.records import make_record, write_record
from commbench.analysis.table import comparison, records_frame, render

from ..conftest import commbench


def fake(run_id, method, seed, top1, sent, workers=2, steps=10, params=None):
    cfg = {"task": "lenet-mnist", "dataset": "fashion-mnist", "method": method, "workers": workers,
           "backend": "sim", "tier": "smoke", "seed": seed, "steps": steps, "method_params": params or {},
           "sources": {f"method.{k}": "set by user" for k in (params or {})}}
    metrics = {"top1": top1, "steps": steps, "bytes_sent": sent, "bytes_fp32_equiv": 4000 * workers * steps,
               "images_per_s": 100.0 * seed}
    return make_record(run_id, "done", None, cfg, {}, metrics, [], {"substitute_for": "mnist"})


def test_table_groups_seeds_and_computes_ratios(tmp_path):
    write_record(tmp_path, fake("a", "baseline", 1, 0.80, 4000 * 2 * 10))
    write_record(tmp_path, fake("b", "baseline", 2, 0.90, 4000 * 2 * 10))
    write_record(tmp_path, fake("c", "terngrad", 1, 0.85, 250 * 2 * 10))
    table = comparison(records_frame(tmp_path))
    base = table[table.method == "baseline"].iloc[0]
    assert base["n"] == 2 and base["top1"] == "0.8500 ± 0.0707"
    assert base["bytes/worker/step"] == "4,000" and base["fp32/sent"] == "1.00x"
    tern = table[table.method == "terngrad"].iloc[0]
    assert tern["fp32/sent"] == "16.00x" and tern["dataset"] == "fashion-mnist (for mnist)"
    csv = render(table, "csv")
    assert pd.read_csv(__import__("io").StringIO(csv)).shape == (2, len(table.columns))
    assert "| baseline" in render(table, "md")


def test_runs_that_differ_in_method_parameters_get_their_own_rows(tmp_path):
    write_record(tmp_path, fake("a", "wgt", 1, 0.80, 100, params={"threshold": 0.001}))
    write_record(tmp_path, fake("b", "wgt", 1, 0.70, 10, params={"threshold": 0.01}))
    table = comparison(records_frame(tmp_path))
    assert sorted(table["params"]) == ["threshold=0.001", "threshold=0.01"]
    assert sorted(table["top1"]) == ["0.7000", "0.8000"]


def test_atomic_write_leaves_only_the_record_readable_by_others(tmp_path):
    import os
    import stat

    path = write_record(tmp_path, fake("a", "baseline", 1, 0.8, 1))
    assert [p.name for p in (tmp_path / "runs").iterdir()] == ["a.json"]
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask


def test_sweep_runs_then_skips_done_runs(tmp_path):
    grid = tmp_path / "g.yaml"
    grid.write_text("base: {task: lenet-mnist, method: baseline, dataset: synthetic, backend: sim, steps: 4}\n"
                    "axes: {workers: [1, 2]}\n")
    out = tmp_path / "out"
    first = commbench("sweep", str(grid), "--out", str(out), "--quiet")
    assert first.returncode == 0, first.stderr
    paths = sorted((out / "runs").glob("*.json"))
    assert len(paths) == 2 and all(json.loads(p.read_text())["status"] == "done" for p in paths)
    stamps = [p.stat().st_mtime_ns for p in paths]
    second = commbench("sweep", str(grid), "--out", str(out), "--quiet")
    assert "2 already finished, 0 to run" in second.stderr
    assert [p.stat().st_mtime_ns for p in paths] == stamps

    status = commbench("status", "--out", str(out))
    assert status.stdout.count("done") == 2
    table = commbench("table", "--results", str(out), "--format", "csv")
    assert table.returncode == 0 and table.stdout.count("lenet-mnist") == 2
