"""A job's code copy says git_dirty as a local run does: tracked files differ from the commit. New files are
copied, and tell copies apart, but do not make the code dirty. A copy found at the name is run only where it holds
exactly the code, written by this user."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from commbench.launch.snapshot import snapshot_code
from commbench.store.safe_io import UnsafePath


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


# A results folder may be shared: a copy at the name the next submission will use (the commit's first 12 hex digits,
# which every record shows) must never be run as it was found.
def clean_repo(tmp_path):
    repo = tmp_path / "repo"
    (repo / "bench").mkdir(parents=True)
    (repo / "bench" / "__init__.py").write_text("VALUE = 'the real code'\n")
    git(repo, "init", "-q")
    git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "add", ".")
    git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "one")
    return repo


def plant(copies, name, files):
    folder = copies / name
    for rel, text in {**files, ".complete": "planted\n"}.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    return folder


def imported_value(code, tmp_path):
    """What ``import commbench`` gives a job run from the copy (with the job's environment), and whether planted
    code ran."""
    marker = tmp_path / "PWNED"
    done = subprocess.run([sys.executable, "-c", "import commbench; print(commbench.VALUE)"], capture_output=True,
                          text=True, env={**code.environment(), "MARKER": str(marker), "PATH": "/usr/bin"})
    return done.stdout.strip(), marker.exists()


PLANTED_INIT = "import os; open(os.environ['MARKER'], 'w').write('ran'); VALUE = 'planted'\n"


@pytest.mark.parametrize("planted", [
    {"commbench/__init__.py": PLANTED_INIT},                                           # altered code
    {"commbench/__init__.py": "VALUE = 'the real code'\n", "sitecustomize.py": PLANTED_INIT},  # a module beside it
    {"commbench/__init__.py": "VALUE = 'the real code'\n",
     "commbench/__pycache__/__init__.cpython-311.pyc": "not what Python compiled"},       # bytecode beside it
])
def test_a_planted_copy_at_the_commits_name_is_replaced_and_never_imported(tmp_path, capfd, planted):
    repo, copies = clean_repo(tmp_path), tmp_path / "results" / "slurm" / "code"
    sha = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    plant(copies, sha[:12], planted)
    code = snapshot_code(copies, root=repo)
    assert code.path == (copies / sha[:12]).resolve()
    assert "replaced by a fresh copy" in capfd.readouterr().err
    assert imported_value(code, tmp_path) == ("the real code", False)
    assert sorted(p.name for p in code.path.rglob("*") if p.is_file()) == [".complete", "__init__.py"]


def test_an_intact_copy_is_reused_as_it_is_and_jobs_write_nothing_into_it(tmp_path, capfd):
    repo, copies = clean_repo(tmp_path), tmp_path / "results" / "slurm" / "code"
    first = snapshot_code(copies, root=repo)
    inode = (first.path / "commbench" / "__init__.py").stat().st_ino
    again = snapshot_code(copies, root=repo)
    assert again.path == first.path and (again.path / "commbench" / "__init__.py").stat().st_ino == inode
    assert "replaced" not in capfd.readouterr().err
    env = again.environment()
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"


def test_a_link_at_the_copys_name_is_replaced_and_its_target_left_alone(tmp_path):
    repo, copies = clean_repo(tmp_path), tmp_path / "results" / "slurm" / "code"
    sha = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    elsewhere = plant(tmp_path, "elsewhere", {"commbench/__init__.py": PLANTED_INIT})
    copies.mkdir(parents=True)
    (copies / sha[:12]).symlink_to(elsewhere)
    code = snapshot_code(copies, root=repo)
    assert not (copies / sha[:12]).is_symlink() and imported_value(code, tmp_path) == ("the real code", False)
    assert (elsewhere / "commbench" / "__init__.py").read_text() == PLANTED_INIT


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to plant a folder owned by another user")
def test_a_copy_written_by_another_user_is_refused_in_one_line(tmp_path):
    repo, copies = clean_repo(tmp_path), tmp_path / "results" / "slurm" / "code"
    sha = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    folder = plant(copies, sha[:12], {"commbench/__init__.py": "VALUE = 'the real code'\n"})
    os.chown(folder / "commbench" / "__init__.py", 4242, 4242)
    with pytest.raises(UnsafePath, match=r"written by user 4242, not by you.*move .* away") as err:
        snapshot_code(copies, root=repo)
    assert "\n" not in str(err.value)
