"""A sweep runs the code it imported when it started: each record names that commit, and once the checkout's code
moves on (a commit or an edit outside results/) the sweep stops before the next run rather than train code that
its record would not name."""
from __future__ import annotations

from commbench.config.grid import expand, load_grid
from commbench.launch import runner
from commbench.launch.sweep import run_local_sweep
from commbench.store.records import read_record

LOADED = "0123456789abcdef" * 2 + "01234567"  # the commit the sweep found: not this checkout's HEAD


def two_runs(tmp_path):
    grid = tmp_path / "two.yaml"
    grid.write_text("name: two\nbase: {task: lenet-mnist, dataset: synthetic, backend: sim, steps: 3, "
                    "method: baseline}\naxes: {workers: [1, 2]}\n")
    return expand(load_grid(grid))


def test_a_moved_checkout_stops_the_sweep_before_its_next_run_and_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("COMMBENCH_GIT_SHA", raising=False)
    monkeypatch.setattr(runner, "code_loaded", lambda: (LOADED, False))
    monkeypatch.setattr(runner, "code_changed_since", lambda sha: sha == LOADED)
    out = tmp_path / "results"
    assert run_local_sweep(two_runs(tmp_path), out, show_progress=False) == 1
    err = capsys.readouterr().err
    assert f"the code changed since this process started at {LOADED[:12]}" in err and "sweep stopped" in err
    assert not list(out.glob("runs/*.json"))  # nothing half-written: no record of a run that did not run
    assert not list((out / "claims").glob("*.lock"))  # the claim went with the refused run


def test_an_unmoved_checkout_names_the_code_the_sweep_loaded(tmp_path, monkeypatch):
    """A results-only commit moves HEAD, not the code: the runs go on, and name the commit the sweep started on."""
    monkeypatch.delenv("COMMBENCH_GIT_SHA", raising=False)
    monkeypatch.setattr(runner, "code_loaded", lambda: (LOADED, False))
    monkeypatch.setattr(runner, "code_changed_since", lambda sha: False)
    out = tmp_path / "results"
    runs = two_runs(tmp_path)
    assert run_local_sweep(runs, out, show_progress=False) == 0
    for cfg in runs:
        record = read_record(out, cfg.run_id)
        assert record["status"] == "done" and record["env"]["git_sha"] == LOADED and record["env"]["git_dirty"] is False
