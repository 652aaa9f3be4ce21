"""The sweep's time-left estimate counts only whole runs: a resumed or interrupted run's seconds are a part of a run."""
from commbench.launch.sweep import remaining_note, times_a_whole_run


def test_only_a_finished_run_trained_from_step_zero_times_the_next_ones():
    assert times_a_whole_run({"status": "done", "env": {}})
    assert times_a_whole_run({"status": "diverged", "env": {"resumed_at_steps": None}})
    assert not times_a_whole_run({"status": "done", "env": {"resumed_at_steps": [398]}})  # trained only its rest
    assert not times_a_whole_run({"status": "interrupted", "env": {}})                    # stopped part-way
    assert not times_a_whole_run({"status": "failed", "env": {}})


def test_the_remaining_note_scales_the_whole_runs_mean_to_the_runs_left():
    assert remaining_note(7200.0, 2, 3) == "about 3h 0m left "
    assert remaining_note(90.0, 1, 1) == "about 1m left "
    assert remaining_note(5812.0, 0, 3) == ""  # no whole run yet: no estimate rather than a wrong one
    assert remaining_note(3600.0, 1, 0) == ""


def test_an_interrupted_run_is_not_counted_as_a_run_done(tmp_path, monkeypatch, capsys):
    """A sweep stopped by a checkpoint signal says so, and its progress line does not count the stopped run."""
    from commbench.config.grid import expand, load_grid
    from commbench.launch import runner
    from commbench.launch.sweep import run_local_sweep
    from commbench.store.records import EXIT_INTERRUPTED

    grid = tmp_path / "two.yaml"
    grid.write_text("name: two\nbase: {task: lenet-mnist, dataset: fashion-mnist, backend: sim, tier: smoke}\n"
                    "axes: {method: [baseline], workers: [1, 2]}\n")
    runs = expand(load_grid(grid))
    stopped = {"status": "interrupted", "env": {}, "metrics": {"wall_s": 12.0}}
    monkeypatch.setattr(runner, "execute", lambda cfg, out, show_progress: runner.RunResult(stopped, None))
    monkeypatch.setattr(runner, "summary", lambda cfg, record: f"{cfg.run_id} interrupted")

    assert run_local_sweep(runs, tmp_path / "out") == EXIT_INTERRUPTED
    err = capsys.readouterr().err
    assert "sweep stopped by a checkpoint signal" in err
    assert "1/2 runs" not in err and "0 already finished, 2 to run" in err
