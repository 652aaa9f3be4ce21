"""A frozen copy of the code for jobs to run, as submitit's RsyncSnapshot makes one.

A Slurm job may start hours after its submission; by then the checkout may have moved on. Each submission
copies the code files (tracked ones as they are in the working tree, uncommitted edits included, and new files
git does not ignore; ``results/`` left out)
into ``OUT/slurm/code/<name>/``, laid out as the installed package (``commbench/``, with ``methods`` and
``tasks`` inside), and the jobs run from there (``PYTHONPATH``). The name is the commit plus, for a dirty tree, a
hash of the files, so submitting the same code twice reuses one copy. The jobs are told the commit and
whether the tree was dirty (COMMBENCH_GIT_SHA, COMMBENCH_GIT_DIRTY), which their records then carry.

A results folder may be shared, and its name for a copy (the commit's first 12 hex digits) is in every record:
anyone who can write there could plant a copy that every later job would import. So a copy is reused only after
it is checked against the code being submitted: the same files, byte for byte (SHA-256), nothing more (no module,
``sitecustomize.py`` or ``.pth`` beside them), no links, every entry written by this user. A copy of this user's
that differs is replaced by a fresh one; a copy of another user's is refused, in one line. Jobs write nothing into
their copy (no bytecode, numba's cache kept in the user's own cache folder), so a copy stays as it was made.
"""
from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from commbench.layout import package_dirs
from commbench.store.safe_io import UnsafePath, ensure_folder, remove_tree, write_text
from commbench.store.provenance import SOURCE_ROOT, git_state

PACKAGES = ("bench", "methods", "tasks", "slurm", "pyproject.toml")  # what a copy holds outside git
MARKER = ".complete"  # written last: a copy without it was cut short
# numba caches compiled kernels as pickles beside their modules: a job keeps them in its user's own cache instead
# (a shell expression: the home folder is the job's, on its node)
NUMBA_CACHE_SHELL = '"${HOME:-/tmp}/.cache/commbench/numba"'


@dataclass(frozen=True)
class CodeSnapshot:
    path: Path
    git_sha: str | None
    git_dirty: bool | None

    def environment(self) -> dict[str, str]:
        # no bytecode is written into the copy (it is checked, byte for byte, before its next use); numba's cache
        # goes elsewhere too: the batch script's setup lines (launch/slurm.py) point NUMBA_CACHE_DIR at it
        env = {"PYTHONPATH": str(self.path), "PYTHONDONTWRITEBYTECODE": "1"}
        if self.git_sha:
            env["COMMBENCH_GIT_SHA"] = self.git_sha
            env["COMMBENCH_GIT_DIRTY"] = "1" if self.git_dirty else "0"
        return env


def _git_files(root: Path, *options: str) -> list[str] | None:
    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files", "-z", *options], capture_output=True,
                             check=True, timeout=30).stdout.decode()
    except (OSError, subprocess.SubprocessError):
        return None
    return [f for f in out.split("\0") if f and not f.startswith("results/") and (root / f).is_file()]


def _untracked_copy_list(root: Path) -> list[str]:
    files = []
    for entry in PACKAGES:
        path = root / entry
        if path.is_file():
            files.append(entry)
        elif path.is_dir():
            files += [str(p.relative_to(root)) for p in path.rglob("*")
                      if p.is_file() and "__pycache__" not in p.parts]
    return sorted(files)


def installed_path(f: str) -> str:
    """Where a checkout's file goes in a copy: laid out as the installed ``commbench`` package (bench/ is
    ``commbench``, methods/ and tasks/ its subpackages), so that PYTHONPATH=<copy> imports the copy."""
    for package, folder in sorted(package_dirs().items(), key=lambda kv: -len(kv[1])):  # the deepest folder first
        if f.startswith(folder + "/"):
            return package.replace(".", "/") + f[len(folder):]
    return f


def _files_to_copy(root: Path) -> tuple[list[str], str | None, bool | None, bool]:
    """(files, commit, dirty, new files present): what a copy of ``root`` holds, and its git state."""
    files = _git_files(root)
    if files is None:  # not a git checkout
        return _untracked_copy_list(root), None, None, False
    sha, dirty = git_state(root)  # new files not yet added (but not ignored) are copied too: they may be code
    new = _git_files(root, "--others", "--exclude-standard") or []
    return sorted(files + new), sha, dirty, bool(new)


def snapshot_code(dest_root: Path, root: Path = SOURCE_ROOT) -> CodeSnapshot:
    """Copy the code under ``dest_root``; a copy made before is reused only where it still holds exactly this code,
    written by this user (:func:`copy_problem`). Raises :class:`UnsafePath` for another user's copy."""
    files, sha, dirty, new = _files_to_copy(root)
    expected = {installed_path(f): hashlib.sha256((root / f).read_bytes()).hexdigest() for f in files}
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.encode() + b"\0" + expected[installed_path(f)].encode() + b"\0")
    # git_dirty means what it means for a local run: tracked files differ from the commit (git_state). The
    # copy's name still tells apart every set of files, new ones included, so that two copies never collide.
    name = f"{sha[:12]}" if sha and not dirty and not new else f"{(sha or 'nogit')[:12]}-{digest.hexdigest()[:10]}"
    final = Path(dest_root) / name
    results = Path(dest_root).parent.parent  # ROOT/slurm/code: nothing below ROOT is written through a link
    ensure_folder(Path(dest_root), results)
    why = copy_problem(final, expected) if os.path.lexists(final) else "none yet"
    if why is not None:
        if why != "none yet":
            print(f"commbench: {final}: {why}; replaced by a fresh copy of the code", file=sys.stderr)
        tmp = final.with_name(f".{name}.{os.getpid()}.{secrets.token_hex(8)}.tmp")
        os.mkdir(tmp)  # made here, now (never a folder planted at the name: mkdir fails if one is there)
        for f in files:
            target = tmp / installed_path(f)
            ensure_folder(target.parent, results)
            shutil.copy2(root / f, target)
        write_text(tmp / MARKER, f"{sha or ''} dirty={dirty}\n", results)
        remove_tree(final, results)
        os.replace(tmp, final)
    return CodeSnapshot(final.resolve(), sha, dirty)


def copy_problem(folder: Path, expected: dict[str, str]) -> str | None:
    """Why the copy at ``folder`` must not run jobs, or None: ``expected`` maps each file (as laid out in a copy)
    to its SHA-256. Raises :class:`UnsafePath` where another user wrote it (it cannot be replaced by this one)."""
    folder = Path(folder)
    if not stat.S_ISDIR(_mine(folder, folder).st_mode):  # a link is not walked into: replaced, never followed
        return "not a folder"
    found: dict[str, Path] = {}
    for path in [folder, *_entries(folder)]:
        info = _mine(path, folder)
        if stat.S_ISDIR(info.st_mode):
            continue
        if not stat.S_ISREG(info.st_mode):
            return f"{path.relative_to(folder)} is not a regular file"
        found[path.relative_to(folder).as_posix()] = path
    if MARKER not in found:
        return "not complete (cut short while it was made)"
    found.pop(MARKER)
    if extra := sorted(set(found) - set(expected)):
        return f"holds {extra[0]}, which is not in the code"
    if missing := sorted(set(expected) - set(found)):
        return f"lacks {missing[0]}"
    for rel, path in sorted(found.items()):
        if hashlib.sha256(path.read_bytes()).hexdigest() != expected[rel]:
            return f"{rel} differs from the code"
    return None


def _mine(path: Path, folder: Path) -> os.stat_result:
    """``path``'s lstat, or :class:`UnsafePath` where another user wrote it: a copy made by someone else is not
    run (nor could this user replace it)."""
    info, me = os.lstat(path), os.geteuid()
    if info.st_uid != me:
        raise UnsafePath(f"{path}: written by user {info.st_uid}, not by you ({me}); jobs run only from code copies "
                         f"you made: move {folder} away")
    return info


def _entries(folder: Path) -> list[Path]:
    """Every entry below ``folder``, links not followed (a link is an entry, never a way in)."""
    out = []
    for top, dirs, files in os.walk(folder):
        out += [Path(top) / d for d in dirs] + [Path(top) / f for f in files]
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(top, d))]
    return out
