"""The sweep's time-left estimate counts only whole runs: a resumed or interrupted run's seconds are a part of a run."""
from commbench.launch.sweep import time_left, times_a_whole_run


def test_only_a_finished_run_trained_from_step_zero_times_the_next_ones():
    assert times_a_whole_run({"status": "done", "env": {}})
    assert times_a_whole_run({"status": "diverged", "env": {"resumed_at_steps": None}})
    assert not times_a_whole_run({"status": "done", "env": {"resumed_at_steps": [398]}})  # trained only its rest
    assert not times_a_whole_run({"status": "interrupted", "env": {}})                    # stopped part-way
    assert not times_a_whole_run({"status": "failed", "env": {}})


def test_time_left_scales_the_whole_runs_mean_to_the_runs_left():
    assert time_left(7200.0, 2, 3) == "about 3h 0m left "
    assert time_left(90.0, 1, 1) == "about 1m left "
    assert time_left(5812.0, 0, 3) == ""  # no whole run yet: no estimate rather than a wrong one
    assert time_left(3600.0, 1, 0) == ""
