"""A results folder others can write to: links planted where commbench writes, removes or locks, and special
files where it would replace one, change nothing outside the folder. Each planted path is one that a shared
results folder could hold (issue: symlinks planted in a results folder made a run write, truncate or delete
outside it)."""
from __future__ import annotations

import os
import stat

import pytest
import torch

from commbench.launch.owner import claim
from commbench.launch.progress import ProgressFile
from commbench.run.checkpoint import CheckpointNotWritten, Checkpoints
from commbench.store.records import atomic_write
from commbench.store.safe_io import UnsafePath, open_new, remove_tree, write_bytes

from ..conftest import commbench


class Comm:
    def control_sum(self, t):
        return t


@pytest.fixture()
def outside(tmp_path):
    """A folder outside the results folder, with a file in it that must survive every test untouched."""
    folder = tmp_path / "victim"
    folder.mkdir()
    (folder / "precious.txt").write_text("keep me")
    (folder / "step-000000001").mkdir()
    (folder / "step-000000001" / "data").write_text("keep me too")
    return folder


def untouched(folder) -> bool:
    return ((folder / "precious.txt").read_text() == "keep me" and
            (folder / "step-000000001" / "data").read_text() == "keep me too" and
            sorted(p.name for p in folder.iterdir()) == ["precious.txt", "step-000000001"])


def test_a_run_folder_linked_outside_gets_no_checkpoint_and_loses_nothing(tmp_path, outside):
    results = tmp_path / "results"
    (results / "checkpoints").mkdir(parents=True)
    (results / "checkpoints" / "run").symlink_to(outside)
    ckpt = Checkpoints(results / "checkpoints" / "run")
    with pytest.raises(CheckpointNotWritten, match="a symbolic link inside the results folder"):
        ckpt.save(5, {"w": torch.zeros(2)}, Comm())
    ckpt.remove()  # the link is unlinked, not followed
    assert not (results / "checkpoints" / "run").exists() and untouched(outside)


def test_a_planted_step_link_is_unlinked_not_followed(tmp_path, outside):
    results = tmp_path / "results"
    ckpt = Checkpoints(results / "checkpoints" / "run")
    ckpt.directory.mkdir(parents=True)
    (ckpt.directory / "step-000000001").symlink_to(outside / "step-000000001")
    ckpt.save(7, {"w": torch.zeros(2)}, Comm())  # removes the older step folders: here, the link
    assert not (ckpt.directory / "step-000000001").exists() and (ckpt.directory / "step-000000007").is_dir()
    ckpt.remove()
    assert not ckpt.directory.exists() and untouched(outside)


def test_a_link_at_a_temporary_name_meets_nothing(tmp_path, outside):
    """The old checkpoint wrote ``.sim.pt.<pid>.tmp``: a link planted there now meets a random name instead."""
    ckpt = Checkpoints(tmp_path / "results" / "checkpoints" / "run")
    folder = ckpt.directory / "step-000000003"
    folder.mkdir(parents=True)
    (folder / f".sim.pt.{os.getpid()}.tmp").symlink_to(outside / "precious.txt")
    ckpt.save(3, {"w": torch.ones(2)}, Comm())
    assert torch.equal(torch.load(folder / "sim.pt")["w"], torch.ones(2)) and untouched(outside)


def test_weights_logs_locks_and_progress_refuse_a_planted_link(tmp_path, outside):
    results = tmp_path / "results"
    victim = outside / "precious.txt"
    for path in (results / "weights" / "run.pt", results / "logs" / "run" / "rank0.log",
                 results / "claims" / "run.lock", results / "claims" / "run.progress"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to(victim)
    with pytest.raises(UnsafePath):
        write_bytes(results / "weights" / "run.pt", b"weights", root=results)
    with pytest.raises(UnsafePath):
        open_new(results / "logs" / "run" / "rank0.log", root=results)
    with pytest.raises(UnsafePath, match="a symbolic link"):
        with claim(results / "claims", "run"):
            pass
    ProgressFile(results / "claims" / "run.progress", 10, every_s=0)(3)  # for watchers: refused quietly
    assert untouched(outside)


def test_a_claims_folder_linked_outside_is_refused(tmp_path, outside):
    results = tmp_path / "results"
    results.mkdir()
    (results / "claims").symlink_to(outside)
    with pytest.raises(UnsafePath):
        with claim(results / "claims", "run"):
            pass
    assert untouched(outside)


def test_special_files_are_never_replaced(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(UnsafePath, match="a FIFO, not a regular file"):
        atomic_write(fifo, "table")
    null_link = tmp_path / "null"
    null_link.symlink_to("/dev/null")
    with pytest.raises(UnsafePath, match="a symbolic link"):
        atomic_write(null_link, "table")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # nothing left behind


def test_table_out_onto_a_special_file_exits_2_in_one_line(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    done = commbench("table", "--paper", "ssdsgd", "--out", str(fifo), timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "a FIFO" in done.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_run_writes_nothing_through_a_planted_weights_link(tmp_path, outside):
    results = tmp_path / "results"
    (results / "weights").mkdir(parents=True)
    done = commbench("run", "--task", "lenet-mnist", "--dataset", "synthetic", "--method", "baseline", "--backend",
                     "sim", "--steps", "2", "--save-weights", "--out", str(results), "--quiet", "--dry-run")
    run_id = done.stdout.split()[2]
    (results / "weights" / f"{run_id}.pt").symlink_to(outside / "precious.txt")
    done = commbench("run", "--task", "lenet-mnist", "--dataset", "synthetic", "--method", "baseline", "--backend",
                     "sim", "--steps", "2", "--save-weights", "--out", str(results), "--quiet")
    assert done.returncode != 0 and "a symbolic link" in done.stderr
    assert untouched(outside)


def test_removing_a_tree_never_follows_links(tmp_path, outside):
    results = tmp_path / "results"
    (results / "checkpoints" / "run").mkdir(parents=True)
    (results / "checkpoints" / "run" / "inner").symlink_to(outside)
    remove_tree(results / "checkpoints" / "run", root=results)
    assert not (results / "checkpoints" / "run").exists() and untouched(outside)


# -- the writers of round four: report, plot, the Slurm job notes, the requeue count ----------------------------
def _report(results, _out):
    from commbench.analysis.report import write_report

    write_report(results, results / "report")


def _plot(results, _out):
    from commbench.analysis.plots import plot_all

    plot_all(results, results / "figures", formats=("png",))


def _job_note(results, _out):
    from commbench.launch.queue import note_submission

    note_submission(results, {"run_id": "r", "job_id": "1", "config": {}})


def _requeue(results, _out):
    from commbench.run.checkpoint import count_requeue

    count_requeue(results / "checkpoints" / "r")


# (writer, the folder it writes in, the file it writes there)
WRITERS = [(_report, "report", "report.md"), (_plot, "figures", None), (_job_note, "slurm/jobs", "r.json"),
           (_requeue, "checkpoints/r", "latest.json")]


def _results_with_a_record(tmp_path):
    from ..helpers import write_record

    results = tmp_path / "results"
    write_record(results, "r")
    return results


@pytest.mark.parametrize("writer,folder,_name", WRITERS, ids=[w[0].__name__ for w in WRITERS])
def test_each_writer_refuses_a_planted_folder_link(tmp_path, outside, writer, folder, _name):
    results = _results_with_a_record(tmp_path)
    (results / folder).parent.mkdir(parents=True, exist_ok=True)
    (results / folder).symlink_to(outside)
    (outside / "latest.json").write_text('{"step": 1, "folder": "step-000000001", "files": [], "requeues": 0}')
    before = {p: p.read_bytes() for p in outside.rglob("*") if p.is_file()}
    with pytest.raises(OSError, match="symbolic link"):
        writer(results, outside)
    assert {p: p.read_bytes() for p in outside.rglob("*") if p.is_file()} == before  # nothing new, nothing changed


@pytest.mark.parametrize("writer,folder,name", [w for w in WRITERS if w[2]], ids=[w[0].__name__ for w in WRITERS
                                                                                   if w[2]])
def test_each_writer_refuses_a_special_file_at_its_file(tmp_path, writer, folder, name):
    results = _results_with_a_record(tmp_path)
    (results / folder).mkdir(parents=True, exist_ok=True)
    os.mkfifo(results / folder / name)
    with pytest.raises((OSError, ValueError), match="FIFO"):  # refused as a write, or as a read (latest.json)
        writer(results, None)
    assert stat.S_ISFIFO(os.lstat(results / folder / name).st_mode)


def test_the_plot_refuses_a_special_file_at_a_figures_name(tmp_path):
    import shutil

    from commbench.analysis.plots import plot_all

    from ..conftest import REPO

    results = tmp_path / "results"
    shutil.copytree(REPO / "results" / "compression-lenet" / "runs", results / "runs")
    first = plot_all(results, tmp_path / "probe", formats=("png",))  # the names this folder's figures take
    assert first, "the record should give a figure"
    (results / "figures").mkdir()
    os.mkfifo(results / "figures" / first[0].name)
    with pytest.raises(OSError, match="FIFO"):
        plot_all(results, results / "figures", formats=("png",))
