"""Sweeps side by side over one results folder: a run is trained by one process at a time, the others take the
next run no one holds, and a killed holder leaves nothing claimed."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from commbench.launch.owner import Claimed, claim, holders
from commbench.launch.progress import ProgressFile, read_progress
from commbench.store.results_folder import ResultsFolder

from ..conftest import REPO, commbench

HOLD = """
import sys, time
from pathlib import Path
from commbench.launch.owner import claim
with claim(Path(sys.argv[1]), "run-a"):
    print("held", flush=True)
    time.sleep(60)
"""


def test_a_second_claim_is_refused_and_names_the_holder(tmp_path):
    with claim(tmp_path, "run-a"):
        with pytest.raises(Claimed, match=f"pid {os.getpid()} on "):
            with claim(tmp_path, "run-a"):
                pass
        with claim(tmp_path, "run-b"):  # another run is another claim
            assert set(holders(tmp_path)) == {"run-a", "run-b"}
    assert not list(tmp_path.iterdir()) and holders(tmp_path) == {}
    with claim(tmp_path, "run-a"):  # released: it can be taken again
        pass


def test_a_holder_killed_with_sigkill_leaves_the_run_free(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(Claimed, match=f"pid {proc.pid} on "):
            with claim(tmp_path, "run-a"):
                pass
        assert list(holders(tmp_path)) == ["run-a"]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert holders(tmp_path) == {}  # its lock file is still there, but no live process holds it
    with claim(tmp_path, "run-a"):
        pass


GRID = ("base: {task: lenet-mnist, dataset: synthetic, method: baseline, workers: 1, backend: sim, steps: 4, "
        "step_sleep_s: 0.5, eval.every: 100}\naxes: {seed: [1, 2, 3]}\n")


def test_two_sweeps_over_one_grid_share_its_runs_and_run_none_twice(tmp_path):
    grid, out = tmp_path / "grid.yaml", tmp_path / "results"
    grid.write_text(GRID)
    lanes = [subprocess.Popen([sys.executable, "-m", "commbench", "sweep", str(grid), "--out", str(out), "--quiet"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
             for _ in range(2)]
    outputs = [lane.communicate(timeout=300) for lane in lanes]
    assert [lane.returncode for lane in lanes] == [0, 0], outputs
    ran = [line.split(":")[0] for stdout, _ in outputs for line in stdout.splitlines() if ": done " in line]
    skipped = [line for stdout, _ in outputs for line in stdout.splitlines() if line.startswith("skip: ")]
    records = {p.stem: json.loads(p.read_text()) for p in (out / "runs").glob("*.json")}
    assert sorted(ran) == sorted(records) and len(records) == 3  # each run trained once, by one lane
    assert all(r["status"] == "done" and len(r["env"]["load_average"]) == 3 for r in records.values())
    # "being run by another process" when the holder has locked but not yet written who it is
    assert skipped and all(" being run by " in line or " already done, since this sweep began" in line
                           for line in skipped)
    assert all(": done " in stdout for stdout, _ in outputs)  # both lanes trained: they ran side by side
    assert not list((out / "claims").glob("*.lock"))


def test_a_run_another_process_is_training_is_refused_with_who_has_it(tmp_path):
    out = tmp_path / "results"
    args = ["run", "--task", "lenet-mnist", "--dataset", "synthetic", "--method", "baseline", "--backend", "sim",
            "--steps", "120", "--set", "step_sleep_s=0.5", "--results", str(out), "--quiet"]
    first = subprocess.Popen([sys.executable, "-m", "commbench", *args], cwd=REPO, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not holders(out / "claims") and time.monotonic() < deadline:
            time.sleep(0.1)
        second = commbench(*args)
        assert second.returncode == 1 and f"being run by pid {first.pid} on " in second.stderr, second.stderr
        (run_id,) = holders(out / "claims")
        while read_progress(ResultsFolder(out).progress(run_id)) is None and time.monotonic() < deadline:
            time.sleep(0.1)  # the run reports its first step once its data is ready
        status = commbench("status", "--out", str(out))
        line = next(line for line in status.stdout.splitlines() if run_id in line)
        assert status.returncode == 0 and line.startswith("running   lenet-mnist_baseline_w1"), status.stdout
        assert re.search(r" steps=\d+/120[ (]", line), line  # the step it has reached, from its progress file
    finally:
        first.terminate()
        first.wait(timeout=60)
    assert not list((out / "claims").iterdir())  # claim and progress file gone with the run (SIGTERM unwinds)


def test_a_progress_file_says_the_step_and_the_pace_since_the_first_report(tmp_path):
    path = tmp_path / "run-a.progress"
    pace = ProgressFile(path, total=100, every_s=0.0)
    pace(10)  # resumed at step 10: its pace counts from here
    assert read_progress(path)["step"] == 10 and read_progress(path)["step_s"] is None
    time.sleep(0.2)
    pace(14)
    state = read_progress(path)
    assert state["step"] == 14 and state["steps"] == 100 and 0.05 <= state["step_s"] < 1.0  # 0.2 s over 4 steps
    held = ProgressFile(path, total=100, every_s=3600.0)
    held(20)
    held(30)  # within every_s of the last write: not rewritten
    assert read_progress(path)["step"] == 20
    path.write_text("{half")
    assert read_progress(path) is None  # unreadable: no progress, not an error
    pace.remove()
    assert not path.exists() and read_progress(path) is None
