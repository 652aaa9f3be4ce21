"""Sweeps on a real Slurm cluster (``slurm/local/up.sh``): submission, skip, failures, cancel, requeue.

These tests need the local cluster. Without one they skip with the reason, except under
``COMMBENCH_REQUIRE_SLURM=1`` (set by ``.ci/run``), where a missing cluster fails them.

The time-limit job is submitted when the module starts, so its minute of waiting for Slurm's warning signal
overlaps the other tests; its test, last in the file, waits for it.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from ..conftest import REPO, commbench

pytestmark = pytest.mark.slurm

TINY = {"task": "lenet-mnist", "method": "baseline", "dataset": "synthetic", "global_batch": 16, "eval.every": 10}



def computed(history: list[dict]) -> list[dict]:
    """A history without its clock readings (train_s): what the run computed."""
    return [{k: v for k, v in point.items() if k != "train_s"} for point in history]

def cluster_missing() -> str | None:
    """Why the local cluster cannot take jobs, or None when it can."""
    for command in ("sbatch", "squeue", "sacct", "sinfo", "scontrol"):
        if shutil.which(command) is None:
            return f"no Slurm here ({command} not on PATH; start one with: sudo bash slurm/local/up.sh)"
    try:
        proc = subprocess.run(["sinfo", "-h", "-p", "debug", "-o", "%T"], capture_output=True, text=True,
                              timeout=20)
    except subprocess.SubprocessError as exc:
        return f"sinfo failed: {exc}"
    states = proc.stdout.split()
    if proc.returncode != 0 or not any(s.rstrip("*") in ("idle", "mixed", "allocated") for s in states):
        return f"the Slurm partition debug has no usable node (sinfo: {proc.stdout.strip() or proc.stderr.strip()})"
    acct = subprocess.run(["sacct", "-n", "-X", "-j", "1"], capture_output=True, text=True, timeout=20)
    if acct.returncode != 0:  # without accounting a cancelled job is never seen to end
        return f"sacct does not work (slurmdbd down?): {acct.stderr.strip()}"
    return None


@pytest.fixture(scope="module", autouse=True)
def cluster():
    reason = cluster_missing()
    if reason is not None:
        if os.environ.get("COMMBENCH_REQUIRE_SLURM") == "1":
            pytest.fail(f"COMMBENCH_REQUIRE_SLURM=1 but {reason}", pytrace=False)
        pytest.skip(reason)


def write_grid(path: Path, base: dict, axes: dict | None = None, slurm: dict | None = None) -> Path:
    path.write_text(yaml.safe_dump({"base": base, "axes": axes or {},
                                    "slurm": {"profile": "local", **(slurm or {})}}))
    return path


def record_of(out: Path, run_id: str) -> dict:
    return json.loads((out / "runs" / f"{run_id}.json").read_text())


def dry_run_ids(grid: Path) -> list[str]:
    proc = commbench("sweep", str(grid), "--launcher", "slurm", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    return [line.split()[0] for line in proc.stdout.splitlines()]


def submitted(proc: subprocess.CompletedProcess) -> dict[str, str]:
    """run id -> job id, from the lines ``JOBID  RUN_ID`` a submission prints."""
    return {line.split()[1]: line.split()[0] for line in proc.stdout.splitlines()
            if len(line.split()) == 2 and line.split()[0][0].isdigit()}


def job_state(job_id: str) -> str:
    proc = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True, timeout=20)
    return proc.stdout.strip()


def lengthen_after_first_requeue(job_id: str, minutes: int, stop: threading.Event) -> dict:
    """Watch ``job_id``; once Slurm has requeued it (Restarts >= 1), raise its time limit to ``minutes`` so the
    next start finishes. Returns a dict that gets ``restarts_seen`` and ``lengthened`` (the outcome)."""
    outcome: dict = {}

    def watch() -> None:
        while not stop.wait(0.5):
            shown = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True,
                                   timeout=20)
            if shown.returncode != 0 or "JobState=COMPLETED" in shown.stdout or "JobState=FAILED" in shown.stdout:
                return
            restarts = next((int(f.split("=")[1]) for f in shown.stdout.split() if f.startswith("Restarts=")), 0)
            if restarts >= 1:
                update = subprocess.run(["scontrol", "update", f"JobId={job_id}", f"TimeLimit={minutes}"],
                                        capture_output=True, text=True, timeout=20)
                outcome.update(restarts_seen=restarts, lengthened=update.returncode == 0,
                               why=update.stderr.strip())
                return

    threading.Thread(target=watch, daemon=True, name=f"lengthen-{job_id}").start()
    return outcome


@pytest.fixture(scope="module", autouse=True)
def time_limited(cluster, tmp_path_factory):
    """A run of about 30 s of steps under a 1-minute limit, warned 20 s before it. Slurm sends the warning
    from a 30-second timer; on the local cluster it reached each start of the job 17-27 s in (about 7 s of
    that is Python starting, far more on a loaded machine), so the first start cannot do all 100 steps: it is
    warned, checkpoints and is requeued (Slurm holds a requeued job about 10 s).

    How many starts the rest would take depends on the machine's load (each does at least the 10 steps to the
    next stop check; a loaded CI machine once needed more than 9), so once the job has been requeued its limit
    is raised to 5 minutes and the next start finishes. Without that (scontrol update refused), max_requeues
    12 still bounds the starts: 10 of 10 steps each would do."""
    tmp = tmp_path_factory.mktemp("time-limit")
    config = {**TINY, "backend": "sim", "workers": 2, "steps": 100, "step_sleep_s": 0.3, "eval.every": 50}
    grid = write_grid(tmp / "grid.yaml", config,
                      slurm={"time_min": 1, "signal_delay_s": 20, "max_requeues": 12})
    proc = commbench("sweep", str(grid), "--launcher", "slurm", "--out", str(tmp / "out"))
    assert proc.returncode == 0, proc.stderr
    jobs = submitted(proc)
    stop = threading.Event()
    lengthened = lengthen_after_first_requeue(next(iter(jobs.values())), 5, stop)
    yield {"out": tmp / "out", "grid": grid, "config": config, "jobs": jobs, "lengthened": lengthened}
    stop.set()


def test_a_sweep_goes_out_as_one_array_and_a_second_submission_sends_nothing(tmp_path):
    grid = write_grid(tmp_path / "grid.yaml", {**TINY, "backend": "sim", "workers": 2, "steps": 20},
                      axes={"seed": [1, 2]})
    out = tmp_path / "out"
    proc = commbench("sweep", str(grid), "--launcher", "slurm", "--out", str(out), "--wait", "--quiet",
                     timeout=300)
    assert proc.returncode == 0, proc.stderr
    jobs = submitted(proc)
    assert set(jobs) == set(dry_run_ids(grid)) and len(jobs) == 2
    arrays = {j.split("_")[0] for j in jobs.values()}
    assert len(arrays) == 1 and sorted(j.split("_")[1] for j in jobs.values()) == ["0", "1"]  # one job array
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    for run_id, job_id in jobs.items():
        record = record_of(out, run_id)
        assert record["status"] == "done" and record["env"]["slurm_job_id"] == job_id
        assert record["env"]["git_sha"] == head.strip()  # the submitted code's commit (its snapshot ran)
        assert record["metrics"]["steps"] == 20

    again = commbench("sweep", str(grid), "--launcher", "slurm", "--out", str(out))
    assert again.returncode == 0, again.stderr
    assert "2 already finished" in again.stderr and "0 to submit" in again.stderr
    assert submitted(again) == {}
    status = commbench("status", "--out", str(out))
    assert status.stdout.count("done") == 2 and all(j in status.stdout for j in jobs.values())


def test_jobs_run_the_code_as_submitted(tmp_path):
    """The snapshot is a copy: editing the checkout after submitting does not change what the job runs."""
    from commbench.launch.snapshot import snapshot_code

    code = snapshot_code(tmp_path / "code")
    runner = "launch/runner.py"
    assert (code.path / "commbench" / runner).read_bytes() == (REPO / "bench" / runner).read_bytes()
    assert (code.path / "commbench" / "methods" / "base.py").exists()  # laid out as the installed package
    assert not (code.path / "results").exists() and not (code.path / ".venv").exists()
    assert snapshot_code(tmp_path / "code").path == code.path  # the same code: one copy


def test_a_two_task_dist_run_through_srun_matches_the_same_run_launched_locally(tmp_path, data_root):
    config = {**TINY, "dataset": "fashion-mnist", "data_root": str(data_root), "backend": "dist", "workers": 2,
              "steps": 20, "eval.every": 20}
    grid = write_grid(tmp_path / "grid.yaml", config)
    out = tmp_path / "slurm"
    proc = commbench("sweep", str(grid), "--launcher", "slurm", "--out", str(out), "--wait", "--quiet",
                     timeout=300)
    assert proc.returncode == 0, proc.stderr
    [(run_id, job_id)] = submitted(proc).items()
    local = commbench("sweep", str(grid), "--out", str(tmp_path / "local"), "--quiet")
    assert local.returncode == 0, local.stderr

    on_slurm, here = record_of(out, run_id), record_of(tmp_path / "local", run_id)
    assert on_slurm["env"]["slurm_job_id"] == job_id and here["env"]["slurm_job_id"] is None
    assert on_slurm["env"]["world_size"] == 2 and on_slurm["env"]["dist_backend"] == "gloo"
    assert computed(on_slurm["history"]) == computed(here["history"])  # every loss, evaluation and byte count
    for key in ("top1", "top5", "final_train_loss", "bytes_sent", "bytes_received", "steps"):
        assert on_slurm["metrics"][key] == here["metrics"][key], key


def test_a_failing_job_leaves_a_failed_record_with_the_error(tmp_path):
    grid = write_grid(tmp_path / "grid.yaml", {**TINY, "backend": "dist", "workers": 2, "steps": 30,
                                               "fail_at_step": 3})
    out = tmp_path / "out"
    t0 = time.monotonic()
    proc = commbench("sweep", str(grid), "--launcher", "slurm", "--out", str(out), "--wait", "--quiet",
                     timeout=240)
    assert proc.returncode == 1, proc.stderr
    [run_id] = submitted(proc)
    record = record_of(out, run_id)
    assert record["status"] == "failed"
    assert record["error"].startswith("worker 1: RuntimeError: fail_at_step=3: worker 1 fails on purpose")
    assert "error: worker 1" in proc.stdout
    assert time.monotonic() - t0 < 200


def test_a_cancelled_job_leaves_a_failed_record_saying_cancelled_and_the_waiting_side_returns(tmp_path):
    grid = write_grid(tmp_path / "grid.yaml", {**TINY, "backend": "sim", "workers": 2, "steps": 1000,
                                               "step_sleep_s": 0.5})
    out = tmp_path / "out"
    [run_id] = dry_run_ids(grid)
    waiting = subprocess.Popen([sys.executable, "-m", "commbench", "sweep", str(grid), "--launcher", "slurm", "--out",
                                str(out), "--wait", "--quiet"], cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        note = out / "slurm" / "jobs" / f"{run_id}.json"
        deadline = time.monotonic() + 120
        while not note.exists() or job_state(json.loads(note.read_text())["job_id"]) != "RUNNING":
            assert time.monotonic() < deadline and waiting.poll() is None, "the job never started"
            time.sleep(0.5)
        job_id = json.loads(note.read_text())["job_id"]
        subprocess.run(["scancel", job_id], check=True, timeout=30)
        stdout, stderr = waiting.communicate(timeout=180)
    finally:
        waiting.kill()
    assert waiting.returncode == 1, stderr
    record = record_of(out, run_id)
    assert record["status"] == "failed" and record["error"].startswith(f"cancelled: slurm job {job_id}")
    assert record["env"]["slurm_job_id"] == job_id
    assert f"failed   {run_id}  error: cancelled" in stdout
    status = commbench("status", "--out", str(out))
    assert "failed" in status.stdout and "cancelled" in status.stdout


def test_a_job_that_reaches_its_time_limit_is_requeued_from_its_checkpoint_and_finishes(time_limited):
    out, grid = time_limited["out"], time_limited["grid"]
    [(run_id, job_id)] = time_limited["jobs"].items()
    proc = commbench("sweep", str(grid), "--launcher", "slurm", "--out", str(out), "--wait", "--quiet",
                     timeout=420)
    assert proc.returncode == 0, proc.stderr
    record = record_of(out, run_id)
    assert record["status"] == "done", (record.get("error"), time_limited["lengthened"])
    assert record["env"]["slurm_job_id"] == job_id  # the same job, requeued
    resumed = record["env"]["resumed_at_steps"]
    assert resumed and all(0 < s < 100 for s in resumed)
    if time_limited["lengthened"].get("lengthened"):  # a 5-minute start does the rest: one requeue in all
        assert len(resumed) == 1, (resumed, time_limited["lengthened"])
    assert not (out / "checkpoints" / run_id).exists()

    reference = commbench("run", "--task", "lenet-mnist", "--method", "baseline",
                          *[f"--set={k}={v}" for k, v in time_limited["config"].items()
                            if k not in ("task", "method", "step_sleep_s")],
                          "--out", str(out.parent / "reference"), "--quiet")
    assert reference.returncode == 0, reference.stderr
    uninterrupted = record_of(out.parent / "reference", run_id)  # step_sleep_s is not part of the run id
    assert computed(record["history"]) == computed(uninterrupted["history"])
    for key in ("top1", "top5", "final_train_loss", "bytes_sent", "bytes_received", "steps"):
        assert record["metrics"][key] == uninterrupted["metrics"][key], key
