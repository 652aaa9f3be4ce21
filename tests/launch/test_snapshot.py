"""A job's code copy says git_dirty as a local run does: tracked files differ from the commit. New files are
copied, and tell copies apart, but do not make the code dirty."""
from __future__ import annotations

import subprocess

from commbench.launch.snapshot import snapshot_code


def git(root, *args):
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def test_untracked_files_are_copied_and_do_not_make_the_code_dirty(tmp_path):
    repo = tmp_path / "repo"
    (repo / "bench").mkdir(parents=True)
    (repo / "bench" / "a.py").write_text("A = 1\n")
    git(repo, "init", "-q")
    git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "add", ".")
    git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "one")
    clean = snapshot_code(tmp_path / "copies", root=repo)
    assert clean.git_dirty is False and (clean.path / "commbench" / "a.py").exists()

    (repo / "notes.txt").write_text("a file the tour made\n")
    with_new = snapshot_code(tmp_path / "copies", root=repo)
    assert with_new.git_dirty is False and (with_new.path / "notes.txt").exists()
    assert with_new.path != clean.path  # another set of files: another copy

    (repo / "bench" / "a.py").write_text("A = 2\n")
    edited = snapshot_code(tmp_path / "copies", root=repo)
    assert edited.git_dirty is True and (edited.path / "commbench" / "a.py").read_text() == "A = 2\n"
    assert edited.environment()["COMMBENCH_GIT_DIRTY"] == "1"
