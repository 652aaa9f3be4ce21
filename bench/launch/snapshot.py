"""A frozen copy of the code for jobs to run, as submitit's RsyncSnapshot makes one.

A Slurm job may start hours after its submission; by then the checkout may have moved on. Each submission
copies the code files (tracked ones as they are in the working tree, uncommitted edits included, and new files
git does not ignore; ``results/`` left out)
into ``OUT/slurm/code/<name>/``, laid out as the installed package (``commbench/``, with ``methods`` and
``tasks`` inside), and the jobs run from there (``PYTHONPATH``). The name is the commit plus, for a dirty tree, a
hash of the files, so submitting the same code twice reuses one copy. The jobs are told the commit and
whether the tree was dirty (COMMBENCH_GIT_SHA, COMMBENCH_GIT_DIRTY), which their records then carry.
"""
from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from commbench.layout import package_dirs
from commbench.store.safe_io import ensure_folder, remove_tree, write_text
from commbench.store.provenance import SOURCE_ROOT, git_state

PACKAGES = ("bench", "methods", "tasks", "slurm", "pyproject.toml")  # what a copy holds outside git


@dataclass(frozen=True)
class CodeSnapshot:
    path: Path
    git_sha: str | None
    git_dirty: bool | None

    def environment(self) -> dict[str, str]:
        env = {"PYTHONPATH": str(self.path)}
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


def snapshot_code(dest_root: Path, root: Path = SOURCE_ROOT) -> CodeSnapshot:
    """Copy the code under ``dest_root`` (reused if the same code was copied before)."""
    files = _git_files(root)
    if files is None:  # not a git checkout
        sha, dirty, new = None, None, []
        files = _untracked_copy_list(root)
    else:  # new files not yet added (but not ignored) are copied too: they may be code
        sha, dirty = git_state(root)
        new = _git_files(root, "--others", "--exclude-standard") or []
        files = sorted(files + new)
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.encode() + b"\0" + (root / f).read_bytes() + b"\0")
    # git_dirty means what it means for a local run: tracked files differ from the commit (git_state). The
    # copy's name still tells apart every set of files, new ones included, so that two copies never collide.
    name = (f"{sha[:12]}" if sha and not dirty and not new
            else f"{(sha or 'nogit')[:12]}-{digest.hexdigest()[:10]}")
    final = Path(dest_root) / name
    results = Path(dest_root).parent.parent  # ROOT/slurm/code: nothing below ROOT is written through a link
    ensure_folder(Path(dest_root), results)
    if not (final / ".complete").exists() or final.is_symlink():
        tmp = final.with_name(f".{name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        for f in files:
            target = tmp / installed_path(f)
            ensure_folder(target.parent, results)
            shutil.copy2(root / f, target)
        write_text(tmp / ".complete", f"{sha or ''} dirty={dirty}\n", results)
        remove_tree(final, results)
        os.replace(tmp, final)
    return CodeSnapshot(final.resolve(), sha, dirty)
