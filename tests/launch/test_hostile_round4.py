"""The fourth round's hostile results folders: good records of an emulated-network grid beside every kind of
entry that is not one (a folder or a link where a record should be, FIFOs and links to /dev/zero where a reader
looks, truncated JSON, deep nesting, huge and non-finite numbers, wrong schema versions, lists and nulls and zeros
where a number is promised, job notes and checkpoint indexes that are not ones). Every reading command names each
bad entry in one line, goes on, exits 0, never hangs and never shows a traceback; a run into the folder moves the
folder named like its record aside and proceeds.

All the kinds share one folder (each command reads it once: some 10 commands, not 10 x 30), which is the harder
case: one bad entry must not make the others unreadable."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from ..conftest import REPO, commbench

GOOD = sorted(p for p in (REPO / "results" / "campaign" / "runs").glob("lenet-mnist_*_w2_*.json")
              if json.loads(p.read_text())["config"].get("net") in ("1gbit", "100mbit")
              and json.loads(p.read_text())["config"]["method"] in ("baseline", "fp16", "terngrad"))


def _variant(runs, template: dict, name: str, change) -> None:
    record = json.loads(json.dumps(template))
    record["run_id"] = name
    change(record)
    (runs / f"{name}.json").write_text(json.dumps(record))


def _history_without_steps(record):
    for point in record["history"]:
        point.pop("step", None)


# name -> how a copy of a good 1gbit record is spoiled (the round's tracebacks and hangs, each one)
SPOILED = {
    "resumed-list": lambda r: r["env"].update(resumed_at_steps=[1, "x"], devices_by_stretch=[[1], {}]),
    "bytes-null": lambda r: r["metrics"].update(bytes_sent=None),
    "no-steps-in-history": _history_without_steps,
    "steps-null": lambda r: r["metrics"].update(steps=None),
    "steps-zero": lambda r: r["metrics"].update(steps=0, samples_seen=0),
    "workers-zero": lambda r: r["config"].update(workers=0),
    "top1-huge": lambda r: r["metrics"].update(top1=1e308),
    "net-abc": lambda r: r["config"].update(net="abc"),
    "schema-2": lambda r: r.update(schema_version=2),
    "top1-nan-string": lambda r: r["metrics"].update(top1="NaN"),
    "history-null": lambda r: r.update(history=None),
}


# odd, but records by the schema: read as they are, never a crash (and never named)
ODD = {
    "bytes-huge": lambda r: r["metrics"].update(bytes_sent=1e308, bytes_received=1e308),
    "seconds-huge": lambda r: r["metrics"].update(train_s=1e308, wall_s=1e308, images_per_s=1e308),
}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    assert len(GOOD) >= 6, "the committed network-tta records are the good ones"
    root = tmp_path_factory.mktemp("hostile4")
    runs, outside = root / "runs", tmp_path_factory.mktemp("outside")
    runs.mkdir()
    for path in GOOD:
        shutil.copy(path, runs / path.name)
    template = json.loads(GOOD[0].read_text())
    for name, change in {**SPOILED, **ODD}.items():
        _variant(runs, template, name, change)
    (runs / "top1-inf.json").write_text(json.dumps({**template, "run_id": "top1-inf"}).replace(
        f'"top1": {json.dumps(template["metrics"]["top1"])}', '"top1": 1e999', 1))
    (runs / "truncated.json").write_text(json.dumps({**template, "run_id": "truncated"})[:500])
    (runs / "deep.json").write_text("[" * 200_000 + "]" * 200_000)
    (runs / "a-folder.json").mkdir()
    (runs / "etc-link.json").symlink_to("/etc")
    (runs / "zero.json").symlink_to("/dev/zero")
    os.mkfifo(runs / "fifo.json")
    (outside / "secret.json").write_text("not a record")
    (runs / "outside-link.json").symlink_to(outside / "secret.json")
    _hostile_notes_and_checkpoints(root, template)
    return root


def _hostile_notes_and_checkpoints(root, template) -> None:
    jobs = root / "slurm" / "jobs"
    jobs.mkdir(parents=True)
    os.mkfifo(jobs / "fifo-note.json")
    (jobs / "zero-note.json").symlink_to("/dev/zero")
    (jobs / "deep-note.json").write_text("[" * 200_000 + "]" * 200_000)
    (jobs / "dict-task.json").write_text(json.dumps({"run_id": "dict-task", "job_id": "12", "submitted_at": "x",
                                                     "config": {**template["config"], "task": {"x": 1}}}))
    for name, plant in (("fifo-ckpt", os.mkfifo), ("zero-ckpt", lambda p: p.symlink_to("/dev/zero"))):
        (root / "checkpoints" / name).mkdir(parents=True)
        plant(root / "checkpoints" / name / "latest.json")


# each bad entry, as the line that names it says it
NAMED = [*SPOILED, "top1-inf", "truncated", "deep", "a-folder", "etc-link", "zero", "fifo", "outside-link"]
NOTES = ["fifo-note", "zero-note", "deep-note", "dict-task"]
GRID = "base: {task: lenet-mnist, dataset: synthetic, method: baseline, backend: sim, steps: 1}\naxes: {seed: [1]}\n"


# Started from this small process, the command's peak memory is its own: Linux carries the peak of the memory a
# process was forked with into its ru_maxrss across exec, so a command forked straight from a test process that
# has grown large (pytest after other tests: gigabytes) would report that process's size, not its own.
MEASURE = """import os, sys
pid = os.posix_spawn(sys.executable, [sys.executable, "-m", "commbench", *sys.argv[2:]], os.environ)
timer = __import__("threading").Timer(float(sys.argv[1]), os.kill, (pid, 9))
timer.start()
_, status, usage = os.wait4(pid, 0)
timer.cancel()
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss, file=sys.stderr)
"""


def commbench_measured(*args: str, timeout: float) -> tuple[subprocess.CompletedProcess, int]:
    """``commbench ARGS`` as the tests' ``commbench`` runs it, and that one process's peak memory (KiB), which
    ``wait4`` reports for the child it waits for, started from a small process (``MEASURE``)."""
    proc = subprocess.run([sys.executable, "-c", MEASURE, str(timeout), *args], capture_output=True, text=True,
                          cwd=REPO, timeout=timeout + 60)
    *stderr, last = proc.stderr.rstrip("\n").split("\n")
    returncode, peak = (int(v) for v in last.split())
    assert returncode != -9, f"killed after {timeout} s: a hang"
    return subprocess.CompletedProcess(proc.args, returncode, proc.stdout, "\n".join(stderr)), peak


@pytest.mark.parametrize("command", [
    ["table"], ["table", "--format", "csv"], ["table", "--paper", "all"], ["status"], ["status", "--grid", "{grid}"],
    ["plot", "--out", "{tmp}/figures"], ["report", "--out", "{tmp}/report"],
    ["compare", "--factor", "method", "--reference", "baseline"],
    ["model", "tta", "--validate-on", "100mbit", "--format", "csv"],
], ids=lambda c: "-".join(a for a in c if not a.startswith("{")))
def test_every_reading_command_names_each_bad_entry_once_and_goes_on(hostile, tmp_path, command):
    grid = tmp_path / "g.yaml"
    grid.write_text(GRID)
    args = [a.replace("{tmp}", str(tmp_path)).replace("{grid}", str(grid)) for a in command]
    done, peak_kib = commbench_measured(*args, "--results", str(hostile), timeout=300)  # a hang fails, a timeout
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    # compare finds no pairs to compare in a folder of three methods: that is its one-line bad-input answer
    assert done.returncode == (2 if command[0] == "compare" and "no runs" in done.stderr else 0), done.stderr[-3000:]
    for name in NAMED:
        assert done.stderr.count(f"/{name}.json") == 1, (name, done.stderr[-3000:])
    for name in ODD:
        assert f"/{name}.json" not in done.stderr, done.stderr[-3000:]
    if command[0] == "status":
        for name in NOTES:
            assert done.stderr.count(f"/{name}.json") == 1, (name, done.stderr[-3000:])
    # no reader swallowed /dev/zero: the command's peak memory stays far below what reading it would take
    assert peak_kib < 4 * 2 ** 20, peak_kib  # 4 GiB


def test_a_run_into_the_folder_moves_a_folder_named_like_its_record_aside_and_proceeds(tmp_path):
    from commbench.config import resolve

    cfg = resolve({"task": "lenet-mnist", "dataset": "synthetic", "method": "baseline", "backend": "sim",
                   "steps": 1})
    (tmp_path / "runs" / f"{cfg.run_id}.json").mkdir(parents=True)
    (tmp_path / "checkpoints" / cfg.run_id).mkdir(parents=True)
    os.mkfifo(tmp_path / "checkpoints" / cfg.run_id / "latest.json")
    done = commbench("run", "--task", "lenet-mnist", "--dataset", "synthetic", "--method", "baseline", "--backend",
                     "sim", "--steps", "1", "--quiet", "--results", str(tmp_path), timeout=300)
    # the folder is moved aside (a line); the FIFO in the checkpoint's place is refused in one line (exit 2;
    # --force starts over), never waited on
    assert done.returncode == 2 and "a FIFO, not a regular file" in done.stderr, done.stderr
    assert "moved aside" in done.stderr and len(done.stderr.strip().splitlines()) == 2, done.stderr
    done = commbench("run", "--task", "lenet-mnist", "--dataset", "synthetic", "--method", "baseline", "--backend",
                     "sim", "--steps", "1", "--quiet", "--force", "--results", str(tmp_path), timeout=300)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert json.loads((tmp_path / "runs" / f"{cfg.run_id}.json").read_text())["status"] == "done"
    assert [p for p in (tmp_path / "runs").iterdir() if ".unreadable-" in p.name][0].is_dir()


if sys.platform != "linux":  # FIFOs, /dev/zero and /proc as this file uses them
    pytestmark = pytest.mark.skip(reason="Linux only")
