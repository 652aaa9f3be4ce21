"""Hostile and unlucky conditions: planted checkpoints, kills at the wrong moment, corrupt results folders, bad
output paths and inputs. Each is refused or survived with one line and no traceback; nothing runs code from a
results folder and no worker outlives its launcher."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from commbench.config import resolve

from ..conftest import REPO, commbench
from ..helpers import write_record

SIM = ["--task", "lenet-mnist", "--dataset", "synthetic", "--method", "baseline", "--workers", "1", "--backend",
       "sim", "--steps", "3", "--quiet"]


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


# -- a planted checkpoint -------------------------------------------------------------------------------------
class Payload:
    """What an attacker plants: unpickling it runs a shell command."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def plant(out: Path, folder: str, files: list[str], payload) -> Path:
    cfg = resolve({"task": "lenet-mnist", "dataset": "synthetic", "method": "baseline", "workers": 1,
                   "backend": "sim", "steps": 3})
    ckpt = out / "checkpoints" / cfg.run_id
    (ckpt / "step-000000002").mkdir(parents=True)
    torch.save({"step": 2, "evil": payload}, ckpt / "step-000000002" / "sim.pt")
    (ckpt / "latest.json").write_text(json.dumps({"step": 2, "folder": folder, "files": files}))
    return ckpt


def test_a_planted_pickle_checkpoint_is_refused_and_never_runs(tmp_path):
    marker = tmp_path / "pwned"
    out = tmp_path / "results"
    plant(out, "step-000000002", ["sim.pt"], Payload(marker))
    proc = commbench("run", *SIM, "--out", str(out))
    assert proc.returncode == 2
    line = one_line_error(proc)
    assert "refused" in line and "sim.pt" in line and "--force" in line
    assert not marker.exists()
    assert not (out / "runs").exists()
    # --force starts the run over: the planted folder is removed, never read
    assert commbench("run", *SIM, "--out", str(out), "--force").returncode == 0
    assert not marker.exists()


@pytest.mark.parametrize("folder,files", [("../../../tmp", ["sim.pt"]), ("step-000000002", ["../../x.pt"]),
                                          ("step-2", ["sim.pt"])])
def test_a_checkpoint_naming_folders_commbench_does_not_write_is_refused(tmp_path, folder, files):
    out = tmp_path / "results"
    plant(out, folder, files, [1, 2])
    proc = commbench("run", *SIM, "--out", str(out))
    assert proc.returncode == 2 and "commbench writes" in one_line_error(proc)


# -- kills at the wrong moment ---------------------------------------------------------------------------------
def processes_with(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def start_dist_run(out: Path, tmp: Path) -> subprocess.Popen:
    env = {**os.environ, "TMPDIR": str(tmp)}
    return subprocess.Popen([sys.executable, "-m", "commbench", "run", "--task", "lenet-mnist", "--dataset", "synthetic",
                             "--method", "baseline", "--workers", "2", "--steps", "100000", "--quiet", "--out",
                             str(out)], cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


@pytest.mark.parametrize("repeat", [1, 2])
def test_a_launcher_killed_right_after_starting_its_workers_leaves_none(tmp_path, repeat):
    """SIGKILL the driver 0, 5, 10, 20 and 50 ms after its first worker appears: PR_SET_PDEATHSIG covers a launcher
    that dies after a worker set it, the worker's parent check one that died before."""
    for delay_ms in (0, 5, 10, 20, 50):
        tmp = tmp_path / f"tmp-{delay_ms}"
        tmp.mkdir()
        driver = start_dist_run(tmp_path / "out", tmp)
        try:
            deadline = time.monotonic() + 60
            while not processes_with(f"{tmp}/commbench-"):
                assert driver.poll() is None and time.monotonic() < deadline, driver.stderr.read().decode()
            time.sleep(delay_ms / 1000)
            driver.kill()
            killed = time.monotonic()
            driver.wait()
            while processes_with(f"{tmp}/commbench-") and time.monotonic() - killed < 2.0:
                time.sleep(0.05)
            left = processes_with(f"{tmp}/commbench-")
            for pid in left:
                os.kill(pid, signal.SIGKILL)
            assert not left, f"{len(left)} worker(s) outlived their launcher by 2 s (killed {delay_ms} ms in)"
        finally:
            if driver.poll() is None:
                driver.kill()


def test_stale_run_folders_of_killed_launchers_are_removed_at_the_next_start(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    driver = start_dist_run(tmp_path / "out", tmp)
    deadline = time.monotonic() + 60
    while not processes_with(f"{tmp}/commbench-"):
        assert driver.poll() is None and time.monotonic() < deadline
    time.sleep(1.0)
    driver.kill()
    driver.wait()
    assert list(tmp.glob("commbench-*")), "SIGKILL leaves the launcher's folder behind"
    live = tmp / "commbench-someone-elses"  # a folder whose owner lives is left alone
    live.mkdir()
    (live / "launcher.json").write_text(json.dumps({"pid": os.getpid(), "pid_started": None}))
    proc = subprocess.run([sys.executable, "-m", "commbench", "run", "--task", "lenet-mnist", "--dataset", "synthetic",
                           "--method", "baseline", "--workers", "2", "--steps", "2", "--quiet", "--out",
                           str(tmp_path / "out2")], cwd=REPO, env={**os.environ, "TMPDIR": str(tmp)},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert [p.name for p in tmp.glob("commbench-*")] == [live.name]


def test_sigterm_records_the_stop_and_leaves_nothing_behind(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "commbench", "run", "--task", "lenet-mnist", "--dataset", "synthetic",
                             "--method", "baseline", "--workers", "2", "--steps", "100000", "--out", str(out)],
                            cwd=REPO, env={**os.environ, "TMPDIR": str(tmp)}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not any(tmp.glob("commbench-*/progress.json")):  # training is under way
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.1)
    time.sleep(1.0)  # the launcher reads the progress every 0.1 s
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 143
    (path,) = (out / "runs").glob("*.json")
    record = json.loads(path.read_text())
    assert record["status"] == "failed" and record["error"].startswith("terminated (SIGTERM) at step ")
    assert not processes_with(f"{tmp}/commbench-") and not list(tmp.glob("commbench-*"))


# -- corrupt and hostile results folders ------------------------------------------------------------------------
GRID = "base: {task: lenet-mnist, dataset: synthetic, method: baseline, workers: 1, backend: sim, steps: 3}\n" \
       "axes: {seed: [1, 2]}\n"


def test_unreadable_records_are_named_skipped_and_a_sweep_runs_their_runs_again(tmp_path):
    grid, out = tmp_path / "grid.yaml", tmp_path / "results"
    grid.write_text(GRID)
    assert commbench("sweep", str(grid), "--out", str(out), "--quiet").returncode == 0
    first, second = sorted((out / "runs").glob("*.json"))
    first.write_text(first.read_text()[:200])  # truncated
    record = json.loads(second.read_text())
    stranger = dict(record, run_id="lenet-mnist_baseline_w1_0123456789",
                    metrics={**record["metrics"], "top1": "very high"})  # a string where a number belongs
    (out / "runs" / f"{stranger['run_id']}.json").write_text(json.dumps(stranger))
    del record["metrics"]
    second.write_text(json.dumps(record))
    bad = {first.name, second.name, f"{stranger['run_id']}.json"}
    for command in (["table", "--results", str(out)], ["table", "--paper", "all", "--results", str(out)],
                    ["status", "--out", str(out)], ["plot", "--results", str(out), "--out", str(tmp_path / "f")],
                    ["report", "--results", str(out), "--out", str(tmp_path / "r")]):
        proc = commbench(*command)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, (command, proc.stderr)
        named = [ln for ln in proc.stderr.splitlines() if ln.startswith("commbench: skip ")]
        assert {name for name in bad if any(name in ln for ln in named)} == bad, (command, proc.stderr)
        assert len(named) == 3, (command, named)
    proc = commbench("sweep", str(grid), "--out", str(out), "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert "0 already finished, 2 to run" in proc.stderr and proc.stderr.count("moved aside") == 2
    assert len(list((out / "runs").glob("*.json.unreadable-*"))) == 2  # kept, never deleted
    assert all(json.loads(p.read_text())["status"] == "done" for p in (first, second))


def test_a_diverged_record_is_strict_json_and_is_not_run_again(tmp_path):
    grid, out = tmp_path / "grid.yaml", tmp_path / "results"
    grid.write_text("base: {task: lenet-mnist, dataset: synthetic, method: baseline, workers: 1, backend: sim, "
                    "steps: 200, lr_schedule.kind: fixed, lr_schedule.base_lr: 1.0e+12}\n")
    assert commbench("sweep", str(grid), "--out", str(out), "--quiet").returncode == 0
    (path,) = (out / "runs").glob("*.json")

    def refuse(name):
        raise ValueError(f"non-standard JSON constant {name}")

    record = json.loads(path.read_text(), parse_constant=refuse)
    assert record["status"] == "diverged" and record["metrics"]["final_train_loss"] is None
    proc = commbench("sweep", str(grid), "--out", str(out), "--quiet")
    assert proc.returncode == 0 and "1 already finished, 0 to run" in proc.stderr


# -- bad output paths and inputs -------------------------------------------------------------------------------
@pytest.mark.parametrize("extra,says", [
    (["--seed", str(2 ** 64)], "seed: must be <="),
    (["--data-root", "FILE"], "is a file, not a folder"),
    (["--set", "global_batch=100000"], "more than the 12,800 training images"),
    (["--set", "device=cuda"], "no CUDA device"),
    (["--out", "FILE"], "is a file, not a folder"),
    (["--out", ""], "an empty path"),
    (["--out", "/proc/commbench"], "cannot write there"),
    (["--set", "steps=1.0e+23"], "steps: must be <="),
    (["--workers", "300", "--backend", "dist", "--set", "global_batch=600", "--net", "1gbit"], "at most 254"),
])
def test_bad_inputs_exit_2_with_one_line_and_write_nothing(tmp_path, extra, says):
    if "device=cuda" in extra and torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    if "--net" in extra and os.geteuid() != 0:
        pytest.skip("--net needs root, refused earlier")
    afile = tmp_path / "afile"
    afile.write_text("x")
    extra = [str(afile) if e == "FILE" else e for e in extra]
    base = [a for a in SIM if a != "--steps" and a != "3"] if any(e.startswith("steps=") for e in extra) else SIM
    base = base if "--workers" not in extra else [a for a in base if a not in ("--workers", "1", "--backend", "sim")]
    out = ["--out", str(tmp_path / "results")] if "--out" not in extra else []
    proc = commbench("run", *base, *out, *extra, cwd=tmp_path)
    assert proc.returncode == 2 and says in one_line_error(proc)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_a_missing_cifar10_is_refused_before_anything_is_written(tmp_path):
    (tmp_path / "data").mkdir()
    proc = commbench("run", "--task", "cifarnet-cifar10", "--dataset", "cifar10", "--method", "baseline", "--steps",
                     "2", "--data-root", str(tmp_path / "data"), "--out", str(tmp_path / "results"), "--quiet")
    assert proc.returncode == 2 and "cifar10:" in one_line_error(proc)
    assert not (tmp_path / "results").exists() and not any((tmp_path / "data").iterdir())


def test_a_huge_grid_is_refused_with_how_to_allow_it(tmp_path):
    grid = tmp_path / "big.yaml"
    grid.write_text("base: {task: lenet-mnist, method: baseline}\naxes:\n"
                    f"  seed: {list(range(1, 1001))}\n  workers: {list(range(1, 1001))}\n")
    proc = commbench("sweep", str(grid), "--dry-run")
    line = one_line_error(proc)
    assert proc.returncode == 2 and "1,000,000 runs" in line and "--max-runs 1000000" in line


def test_a_yaml_alias_bomb_is_refused_at_once(tmp_path):
    grid = tmp_path / "bomb.yaml"
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi"):
        lines.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]")
    lines.append(f"name: [{', '.join(['*i'] * 9)}]")
    grid.write_text("\n".join(lines) + "\n")
    started = time.monotonic()
    proc = commbench("sweep", str(grid), "--dry-run")
    assert proc.returncode == 2 and "aliases expand to more than" in one_line_error(proc)
    assert time.monotonic() - started < 60  # not the minutes and gigabytes of expanding it (no tight bound)


def test_a_grid_name_with_a_newline_cannot_reach_a_batch_script(tmp_path):
    grid = tmp_path / "g.yaml"
    grid.write_text('name: "x\\n#SBATCH --wrap=evil"\nbase: {task: lenet-mnist, method: baseline}\n')
    proc = commbench("sweep", str(grid), "--dry-run")
    assert proc.returncode == 2 and "letters, digits" in one_line_error(proc)


def test_job_notes_with_unsafe_ids_are_skipped(tmp_path):
    from commbench.launch.queue import submissions
    from commbench.store.results_folder import ResultsFolder

    folder = ResultsFolder(tmp_path).slurm_jobs
    folder.mkdir(parents=True)
    (folder / "evil.json").write_text(json.dumps({"run_id": "../../etc/passwd", "job_id": "1", "config": {}}))
    (folder / "x.json").write_text(json.dumps({"run_id": "x", "job_id": "1; rm -rf /", "config": {}}))
    config = {"task": "lenet-mnist", "method": "baseline", "workers": 1, "steps": 1}
    (folder / "ok.json").write_text(json.dumps({"run_id": "ok", "job_id": "12_3", "config": config}))
    (folder / "no-task.json").write_text(json.dumps({"run_id": "no-task", "job_id": "12_4", "config": {}}))
    (folder / "dict-task.json").write_text(json.dumps({"run_id": "dict-task", "job_id": "12_5",
                                                       "config": {**config, "task": {"x": 1}}}))
    assert list(submissions(tmp_path)) == ["ok"]


def test_a_profile_line_with_a_newline_is_refused(tmp_path):
    from commbench.config import ConfigError
    from commbench.launch.profile import load_profile

    profile = tmp_path / "p.yaml"
    profile.write_text('partition: "cpu\\n#SBATCH --uid=0"\n')
    with pytest.raises(ConfigError, match="newline or control character"):
        load_profile(str(profile), {})


@pytest.fixture
def full_disk(tmp_path):
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root to mount a small tmpfs")
    mount = tmp_path / "small"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)]).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)])


def test_a_full_disk_at_the_end_is_one_line_and_exit_1(full_disk):
    (full_disk / "results" / "runs").mkdir(parents=True)
    fd = os.open(full_disk / "filler", os.O_WRONLY | os.O_CREAT)  # fill every block; empty files still fit
    try:
        while True:
            os.write(fd, b"\0" * 512)
    except OSError:
        pass
    finally:
        os.close(fd)
    proc = commbench("run", *SIM, "--out", str(full_disk / "results"))
    assert proc.returncode == 1
    line = one_line_error(proc)
    assert "record could not be written" in line and "No space left on device" in line


# -- round two: inputs that once gave a traceback, a failed record, or were taken ---------------------------------
ONE_RUN_GRID = "base: {task: lenet-mnist, dataset: synthetic, method: baseline, backend: sim, steps: 1}\naxes: {seed: [1]}\n"
DEEP = "[" * 5000 + "]" * 5000
HUGE = "9" * 5000


@pytest.mark.parametrize("args,files,says", [
    (["run", *SIM, "--data-root", "/proc"], {}, "a system folder"),
    (["data", "--data-root", "/dev/null"], {}, "is a file, not a folder"),
    (["run", *SIM, "--set", "threads=1e10"], {}, "threads: expected an integer"),
    (["run", *SIM, "--set", f"seed={HUGE}"], {}, "integer string conversion"),
    (["run", *SIM, "--set", f"method.x={DEEP}"], {}, "nested more than 100 levels"),
    (["run", *SIM, "--method", "{a: 1}"], {}, "unknown method"),
    (["run", *SIM, "--workers", "２"], {}, "invalid integer value"),
    (["sweep", "G"], {"G": ("latin-1", ONE_RUN_GRID + "# caf\xe9\n")}, "not UTF-8 text"),
    (["sweep", "G"], {"G": ("utf-16", ONE_RUN_GRID)}, "not UTF-8 text"),
    (["sweep", "G"], {"G": ("utf-8", ONE_RUN_GRID.replace("seed: [1]", f"seed: [{HUGE}]"))}, "integer string conversion"),
    (["sweep", "G"], {"G": ("utf-8", ONE_RUN_GRID + f"exclude: {DEEP}\n")}, "nested more than 100 levels"),
    (["sweep", "G", "--launcher", "slurm", "--dry-run"], {"G": ("utf-8", ONE_RUN_GRID + "slurm: [1, 2]\n")},
     "slurm must be a mapping"),
    (["sweep", "G", "--launcher", "slurm", "--dry-run"], {"G": ("utf-8", ONE_RUN_GRID + "slurm: {profile: 5}\n")},
     "slurm must be a mapping"),
    (["sweep", "G", "--launcher", "slurm", "--profile", "P", "--dry-run"],
     {"G": ("utf-8", ONE_RUN_GRID), "P.yaml": ("latin-1", "partition: caf\xe9\n")}, "not UTF-8 text"),
    (["sweep", "G", "--launcher", "slurm", "--profile", "P", "--dry-run"],
     {"G": ("utf-8", ONE_RUN_GRID), "P.yaml": ("utf-8", "mem_gb: .nan\n")}, "mem_gb must be a positive number"),
    (["sweep", "G", "--launcher", "slurm", "--profile", "P", "--dry-run"],
     {"G": ("utf-8", ONE_RUN_GRID), "P.yaml": ("utf-8", "mem_gb: .inf\n")}, "mem_gb must be a positive number"),
    (["sweep", "G", "--launcher", "slurm", "--profile", "P", "--dry-run"],
     {"G": ("utf-8", ONE_RUN_GRID), "P.yaml": ("utf-8", "sbatch: {exclusive: [1]}\n")}, "sbatch must map"),
    (["table", "--target", "1.5"], {}, "in (0, 1]"),
    (["table", "--target", "nan"], {}, "invalid number value"),
    (["plot", "--results", "R", "--out", "F"], {"F": ("utf-8", "a file")}, "not a folder"),
    (["report", "--results", "R", "--out", "F"], {"F": ("utf-8", "a file")}, "not a folder"),
])
def test_round_two_bad_inputs_exit_2_with_one_line_and_write_nothing(tmp_path, args, files, says):
    for name, (encoding, text) in files.items():
        (tmp_path / name).write_bytes(text.encode(encoding))
    if "R" in args:
        write_record(tmp_path / "R", "r")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    paths = {"G": tmp_path / "G", "P": tmp_path / "P.yaml", "F": tmp_path / "F", "R": tmp_path / "R"}
    args = [str(paths[a]) if a in paths else a for a in args]
    if args[0] == "table":
        args += ["--results", str(REPO / "results" / "compression-lenet")]
    proc = commbench(*args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-1500:]
    assert says in one_line_error(proc)
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing written


@pytest.mark.parametrize("command", [["table", "--out", "{disk}/table.md"], ["report", "--out", "{disk}/report"]])
def test_a_table_or_report_on_a_full_disk_is_one_line_and_exit_1(full_disk, command):
    fd = os.open(full_disk / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\0" * 512)
    except OSError:
        pass
    finally:
        os.close(fd)
    args = [a.replace("{disk}", str(full_disk)) for a in command]
    proc = commbench(*args, "--results", str(REPO / "results" / "compression-lenet"))
    assert proc.returncode == 1 and "No space left on device" in one_line_error(proc)
    assert not [p for p in full_disk.rglob("*") if p.name.endswith(".tmp")]


def test_a_checkpoint_on_a_full_disk_names_the_checkpoint_and_leaves_no_temporary_file(full_disk):
    from commbench.run.checkpoint import CheckpointNotWritten, Checkpoints

    class Comm:
        def control_sum(self, t):
            return t

    ckpt = Checkpoints(full_disk / "results" / "checkpoints" / "run")
    ckpt.directory.mkdir(parents=True)
    fd = os.open(full_disk / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\0" * 512)
    except OSError:
        pass
    finally:
        os.close(fd)
    with pytest.raises(CheckpointNotWritten, match=r"checkpoint at step 10 could not be written to .*sim\.pt: "
                                                   r"No space left on device"):
        ckpt.save(10, {"w": torch.zeros(100_000)}, Comm())
    assert not [p for p in full_disk.rglob("*") if p.name.endswith(".tmp")]


def test_a_device_node_as_out_is_never_replaced(tmp_path):
    before = os.stat("/dev/null")
    proc = commbench("table", "--results", str(REPO / "results" / "compression-lenet"), "--out", "/dev/null")
    assert proc.returncode == 2 and "a device, not a regular file" in one_line_error(proc)
    after = os.stat("/dev/null")
    assert (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)


def test_a_checkpoint_larger_than_the_room_left_says_no_space_left_on_device(full_disk):
    """torch's writer reports a disk that fills up under it as its own RuntimeError ('enforce fail at
    inline_container.cc'): the checkpoint names the disk as the cause, as a full disk at the start does."""
    from commbench.run.checkpoint import CheckpointNotWritten, Checkpoints

    class Comm:
        def control_sum(self, t):
            return t

    ckpt = Checkpoints(full_disk / "results" / "checkpoints" / "run")
    with pytest.raises(CheckpointNotWritten, match=r"could not be written to .*sim\.pt: No space left on device"):
        ckpt.save(10, {f"w{i}": torch.zeros(5000) for i in range(20)}, Comm())  # 400 KB on a 64 KB disk
    assert not [p for p in full_disk.rglob("*") if p.name.endswith(".tmp")]


# -- the record-write boundary: a stop signal while a finished run's record is written -------------------------
SIGNAL_DURING_WRITE = """
import os, signal, sys
from pathlib import Path
# Python's own SIGINT handler, as an interactive run has it: a shell starts a background job with SIGINT ignored,
# and Python then installs none (the test would measure how it was launched)
signal.signal(signal.SIGINT, signal.default_int_handler)
from commbench.config import resolve
from commbench.launch import runner

real = runner.write_record
def write_record(out, record):  # the signal arrives while the record is being written
    os.kill(os.getpid(), getattr(signal, sys.argv[2]))
    return real(out, record)
runner.write_record = write_record
cfg = resolve({"task": "lenet-mnist", "dataset": "synthetic", "method": "baseline", "workers": 1,
               "backend": "sim", "steps": 2})
try:
    runner.execute(cfg, Path(sys.argv[1]), show_progress=False)
except KeyboardInterrupt:
    print("interrupted after", file=sys.stderr)
    sys.exit(130)
"""


@pytest.mark.parametrize("name,code", [("SIGTERM", -signal.SIGTERM), ("SIGINT", 130), ("SIGUSR1", -signal.SIGUSR1)])
def test_a_stop_signal_while_the_record_is_written_completes_the_write_then_stops(tmp_path, name, code):
    """The signal acts as it would have (the default action, KeyboardInterrupt), once the record is whole: before,
    SIGTERM there killed the process with no record, and SIGINT dropped the finished run's record."""
    proc = subprocess.run([sys.executable, "-c", SIGNAL_DURING_WRITE, str(tmp_path), name], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == code, proc.stderr[-2000:]
    (record,) = (tmp_path / "runs").glob("*.json")
    assert json.loads(record.read_text())["status"] == "done"
    assert not list((tmp_path / "runs").glob(".*.tmp"))


def test_a_killed_writers_temporary_files_are_removed_at_the_next_start(tmp_path):
    cfg = resolve({"task": "lenet-mnist", "dataset": "synthetic", "method": "baseline", "workers": 1,
                   "backend": "sim", "steps": 1})
    runs = tmp_path / "runs"
    runs.mkdir()
    dead = subprocess.Popen(["true"])
    dead.wait()  # a pid that has ended (reused only after the pid space wraps)
    stale = runs / f".{cfg.run_id}.json.{dead.pid}.0123456789abcdef.tmp"
    live = runs / f".{cfg.run_id}.json.{os.getpid()}.0123456789abcdef.tmp"  # a writer that is still at it
    other = runs / f".other.json.{dead.pid}.0123456789abcdef.tmp"  # another run's: not this run's to clean
    for path in (stale, live, other):
        path.write_text("{")
    proc = commbench("run", *SIM[:-3], "--steps", "1", "--quiet", "--results", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert not stale.exists() and live.exists() and other.exists()


def test_weights_refused_by_a_planted_link_say_the_record_was_written(tmp_path):
    cfg = resolve({"task": "lenet-mnist", "dataset": "synthetic", "method": "baseline", "workers": 1,
                   "backend": "sim", "steps": 1})
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / f"{cfg.run_id}.pt").symlink_to(tmp_path / "elsewhere.pt")
    proc = commbench("run", *SIM[:-3], "--steps", "1", "--quiet", "--save-weights", "--results", str(tmp_path))
    line = one_line_error(proc)
    assert "its record written, but its weights could not be written" in line and "symbolic link" in line
    assert json.loads((tmp_path / "runs" / f"{cfg.run_id}.json").read_text())["status"] == "done"
    assert not (tmp_path / "elsewhere.pt").exists()
