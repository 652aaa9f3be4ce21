"""``sweep --set`` and ``--only``: running a part of a long campaign grid, as dry runs."""
from __future__ import annotations

import re

import pytest

from ..conftest import commbench

GRID = "bench/grids/campaign/terngrad-fig3.yaml"


def dry(*args: str):
    proc = commbench("sweep", GRID, "--dry-run", *args)
    return proc, [line.split() for line in proc.stdout.splitlines()]


def test_only_picks_axis_values_and_set_changes_every_run():
    _, every = dry()
    assert len(every) == 2 * 2 * 4  # recipes x methods x worker counts (one backend per count)
    proc, part = dry("--only", "workers=1,8", "--only", "recipe=momentum", "--set", "steps=500")
    assert proc.returncode == 0, proc.stderr
    assert len(part) == 2 * 2
    assert {p[3] for p in part} == {"workers=1", "workers=8"} and all("steps=500" in p for p in part)
    assert {p[4] for p in part if p[3] == "workers=8"} == {"backend=sim"}  # simulated beyond 2 workers
    full_ids = {p[0] for p in every}
    assert not {p[0] for p in part} & full_ids  # other steps, other runs


def test_bad_parts_are_named():
    proc, _ = dry("--only", "workers=3")
    assert proc.returncode == 2 and "workers: 3 not among the axis values" in proc.stderr
    proc, _ = dry("--only", "seed=1")
    assert proc.returncode == 2 and "not an axis" in proc.stderr
    proc, _ = dry("--set", "workers=4")
    assert proc.returncode == 2 and "--set workers: is an axis" in proc.stderr


def test_status_lists_what_is_left_of_a_grid(tmp_path):
    proc = commbench("status", "--out", str(tmp_path), "--grid", GRID, "--only", "workers=1,2", "--only", "recipe=vanilla")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 2 * 2 and all(line.startswith("to do") for line in lines)
    assert "4 to do" in proc.stderr


def test_status_of_a_grid_shows_only_that_grid(tmp_path):
    """Records of other runs in the same folder are not the grid's: they are neither listed nor counted."""
    from commbench.config.grid import expand, load_grid
    from commbench.store.records import make_record, write_record

    runs = expand(load_grid(GRID))
    mine, other = runs[0], {"task": "lenet-mnist", "method": "baseline", "workers": 3}
    for run_id, cfg in ((mine.run_id, mine.to_dict()), ("lenet-mnist_baseline_w3_0000000000", other)):
        write_record(tmp_path, make_record(run_id, "done", None, cfg, {}, {"top1": 0.5, "steps": 1, "bytes_sent": 0}, []))
    proc = commbench("status", "--out", str(tmp_path), "--grid", GRID)
    assert proc.returncode == 0, proc.stderr
    assert "lenet-mnist_baseline_w3_0000000000" not in proc.stdout
    assert proc.stdout.splitlines()[0].startswith(f"done      {mine.run_id}")
    assert f"1 done, {len(runs) - 1} to do" in proc.stderr


def test_list_grids_includes_the_campaign_grids():
    proc = commbench("list", "grids")
    assert proc.returncode == 0, proc.stderr
    names = {line.split()[0]: line.split()[1] for line in proc.stdout.splitlines()}
    assert names["terngrad-fig3"] == "campaign/terngrad-fig3.yaml" and names["smoke"] == "smoke.yaml"


def test_a_shipped_grid_runs_by_its_name_from_any_folder(tmp_path):
    by_name = commbench("sweep", "tour", "--dry-run", cwd=tmp_path)
    by_path = commbench("sweep", "bench/grids/tour.yaml", "--dry-run")
    assert by_name.returncode == 0 and by_name.stdout == by_path.stdout and by_name.stdout.count("\n") == 6
    unknown = commbench("sweep", "no-such-grid", cwd=tmp_path)
    assert unknown.returncode == 2 and "commbench list grids names them" in unknown.stderr


def test_a_tied_axis_moves_its_settings_together(tmp_path):
    from commbench.config import ConfigError
    from commbench.config.grid import expand, load_grid

    grid = tmp_path / "tied.yaml"
    grid.write_text("base: {task: lenet-mnist, method: baseline, dataset: synthetic}\n"
                    "axes:\n  seed: [1, 2]\n  'workers, global_batch, steps': [[2, 256, 10], [4, 512, 5]]\n")
    runs = expand(load_grid(grid))
    assert sorted((c.seed, c.workers, c.global_batch, c.steps) for c in runs) == \
        [(1, 2, 256, 10), (1, 4, 512, 5), (2, 2, 256, 10), (2, 4, 512, 5)]
    proc = commbench("sweep", str(grid), "--dry-run", "--only", "global_batch=512")
    assert proc.returncode == 0 and len(proc.stdout.strip().splitlines()) == 2, proc.stderr
    grid.write_text("base: {task: lenet-mnist, method: baseline}\naxes:\n  'workers, steps': [[2, 10], [4]]\n")
    with pytest.raises(ConfigError, match="ties 2 settings: each value must be a list of 2"):
        load_grid(grid)


def test_status_shows_a_checkpoint_carried_in_with_no_record(tmp_path):
    """A fresh checkout of a campaign has the committed checkpoints of its unfinished runs, not their records: a
    run to do with a checkpoint says how far it got, and the estimate counts only the steps left."""
    import json

    from commbench.config.grid import expand, load_grid

    run = expand(load_grid(GRID))[0]
    folder = tmp_path / "checkpoints" / run.run_id
    (folder / "step-000000040").mkdir(parents=True)
    (folder / "step-000000040" / "sim.pt").write_bytes(b"")
    (folder / "latest.json").write_text(json.dumps({"step": 40, "folder": "step-000000040", "files": ["sim.pt"]}))
    proc = commbench("status", "--out", str(tmp_path), "--grid", GRID)
    assert proc.returncode == 0, proc.stderr
    first = proc.stdout.splitlines()[0]
    assert first.startswith(f"to do     {run.run_id}") and f"steps=40/{run.steps} (checkpoint)" in first
    assert all("(checkpoint)" not in line for line in proc.stdout.splitlines()[1:])


def test_status_of_a_speed_grid_says_which_done_runs_were_timed_on_another_cpu(tmp_path):
    """A speed grid is timed on one machine, whole: runs timed here pair with none timed on another CPU, so a
    campaign resumed on another machine says so before it spends hours on runs that answer nothing."""
    from commbench.config.grid import expand, load_grid
    from commbench.store.provenance import cpu_identity
    from commbench.store.records import make_record, write_record

    here = cpu_identity()[0]
    speed, accuracy = "bench/grids/campaign/network-fig5.yaml", GRID
    for grid in (speed, accuracy):
        runs = expand(load_grid(grid))
        for run, cpu in zip(runs, ("Other CPU (family 1)", "Other CPU (family 1)", here, None)):
            write_record(tmp_path, make_record(run.run_id, "done", None, run.to_dict(),
                                               {"device": "cpu", "cpu_model": cpu}, {"top1": 0.1, "steps": 4, "bytes_sent": 0}, []))
    proc = commbench("status", "--out", str(tmp_path), "--grid", speed)
    assert proc.returncode == 0, proc.stderr
    assert (f"timed on another CPU: 2 done runs on Other CPU (family 1), 1 done run on unknown CPU; this machine is "
            f"{here}, and times compare only within one CPU" in proc.stderr)
    proc = commbench("status", "--out", str(tmp_path), "--grid", accuracy)  # no emulated links: no speed grid
    assert proc.returncode == 0 and "timed on another CPU" not in proc.stderr, proc.stderr


def counts(estimate: str) -> tuple[int, int]:
    """(runs timed, runs without a time) of a status estimate line."""
    timed = re.search(r"left for (\d+) run", estimate)
    untimed = re.search(r"(\d+) runs? without a finished", estimate)
    return int(timed[1]) if timed else 0, int(untimed[1]) if untimed else 0


def test_status_of_several_grids_reads_the_folder_once_and_sums_up_each(tmp_path):
    """``make campaign-status``: each grid's counts and estimate under its name, then one estimate over all of them
    in which a run two grids share counts once."""
    from commbench.config.grid import expand, load_grid
    from commbench.store.records import make_record, write_record

    other = "bench/grids/campaign/terngrad-fig3-seed2.yaml"
    runs, others = expand(load_grid(GRID)), expand(load_grid(other))
    assert not {c.run_id for c in runs} & {c.run_id for c in others}
    done = runs[0]  # its step time times the runs of its kind still to do
    write_record(tmp_path, make_record(done.run_id, "done", None, done.to_dict(), {"device": "cpu"},
                                       {"top1": 0.5, "steps": done.steps, "bytes_sent": 0,
                                        "train_s": 2.0 * done.steps}, []))
    proc = commbench("status", "--out", str(tmp_path), "--summary", "--grid", GRID, "--grid", other, "--grid", GRID)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"{GRID}:" and lines[1] == f"  1 done, {len(runs) - 1} to do"
    assert lines[2].startswith("  about ") and "(from the pace" not in lines[2]
    assert f"{other}:" in lines and f"  {len(others)} to do" in lines
    assert lines[-1].startswith("all 3 grids: about ") and "(from the pace" in lines[-1]
    timed = [counts(line) for line in lines if line.startswith("  about ") or line.startswith("  no estimate")]
    assert len(timed) == 3 and timed[0] == timed[2]
    assert counts(lines[-1]) == (timed[0][0] + timed[1][0], timed[0][1] + timed[1][1])  # GRID's runs once
    assert "done      " not in proc.stdout  # no line per run

    proc = commbench("status", "--out", str(tmp_path), "--grid", GRID, "--grid", other)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == f"{GRID}:" and f"{other}:" in proc.stdout.splitlines()
    assert f"{GRID}: 1 done, {len(runs) - 1} to do" in proc.stderr and f"{other}: {len(others)} to do" in proc.stderr


def test_status_with_a_bad_grid_among_several_prints_nothing_but_the_error(tmp_path):
    proc = commbench("status", "--out", str(tmp_path), "--summary", "--grid", GRID, "--grid", "no-such-grid")
    assert proc.returncode == 2 and proc.stdout == "" and "no-such-grid: no such grid file" in proc.stderr
