"""The one way commbench reads, writes, replaces and removes files: safe in a results folder that others can write to.

A results folder is shared (a group's scratch space, a Slurm cluster's file system), so anything in it may have
been planted: a run folder that is a symbolic link to someone's home, a ``step-*`` link, a link at the name a
temporary file will take, a FIFO or a device node where a table is to be written. The rules:

* below a results folder (``root``), no folder on the way to a file is a symbolic link (the results folder
  itself may be one: that is the user's choice, not a plant); a folder that is one is refused, named;
* a file is written under a random temporary name created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` beside its
  target, flushed to disk, then renamed over it; the temporary file goes whatever fails;
* only a regular file (or nothing) is ever replaced: a symbolic link, FIFO, device, socket or folder at the
  target's name is refused (``-`` for standard output is the caller's business);
* a tree is removed only through folders that are not links, and a link found where a tree was is unlinked,
  never followed.

Every refusal is :class:`UnsafePath`, one line naming the path.

Reading is bounded the same way: :func:`read_small_text` reads only a regular file, opened without blocking (a
FIFO cannot hang the reader), and at most a stated number of bytes (a link to ``/dev/zero`` cannot exhaust
memory); a folder or device at the name is refused in one line.
"""
from __future__ import annotations

import errno
import os
import secrets
import shutil
import stat
from pathlib import Path
from typing import IO, Callable


class UnsafePath(OSError):
    """A path commbench refuses to write, replace or remove through; ``str(err)`` names it, in one line."""

    def __str__(self) -> str:
        return self.args[0] if self.args else "unsafe path"


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder")):
        if test(mode):
            return name
    return "not a regular file"


def _below(root: Path | None, path: Path) -> list[Path]:
    """The folders from just below ``root`` down to ``path``'s parent (all of its parents without a root)."""
    path = Path(os.path.abspath(path))
    parents = list(reversed(path.parents))
    if root is None:
        return []
    root = Path(os.path.abspath(root))
    return [p for p in parents if p != root and root in p.parents]


def ensure_folder(folder: Path, root: Path | None = None) -> Path:
    """Make ``folder`` (and its missing parents) below ``root``; refuse a symbolic link or a non-folder on the way."""
    folder = Path(folder)
    if root is not None:  # the results folder itself: the user's to choose (it may be a link)
        if Path(root).exists() and not Path(root).is_dir():
            raise UnsafePath(f"{root}: not a folder (a results folder holds runs/, logs/, ...)")
        Path(root).mkdir(parents=True, exist_ok=True)
    for part in _below(root, folder / "x"):
        try:
            mode = os.lstat(part).st_mode
        except FileNotFoundError:
            try:
                os.mkdir(part)
            except FileExistsError:
                pass
            mode = os.lstat(part).st_mode
        if not stat.S_ISDIR(mode):
            raise UnsafePath(f"{part}: {_kind(mode)} inside the results folder {root}, where commbench writes its "
                             f"own folders; refusing to write through it")
    if root is None:
        if folder.exists() and not folder.is_dir():
            raise UnsafePath(f"{folder}: not a folder (a folder is where this writes its files)")
        folder.mkdir(parents=True, exist_ok=True)
    return folder


def output_root(out: Path, results: Path) -> Path:
    """The folder below which nothing is written through a link, for output ``out`` made from ``results``: the
    results folder where ``out`` lies inside it (``RESULTS/report`` may have been planted as a link by anyone who
    writes there), else ``out`` itself (a folder the user named: the user's choice, even a link)."""
    out, results = Path(os.path.abspath(out)), Path(os.path.abspath(results))
    return results if results in out.parents else out


def check_target(path: Path) -> None:
    """Refuse to replace anything at ``path`` that is not a regular file."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        raise UnsafePath(f"{path}: {_kind(mode)}, not a regular file; commbench replaces only regular files")


def write_with(path: Path, write: Callable[[IO[bytes]], None], root: Path | None = None) -> None:
    """Write ``path`` through ``write(file)`` (binary), atomically: a random temporary name beside it, created
    exclusively and never through a link, flushed, renamed over the target. Nothing is left behind on failure."""
    path = Path(path)
    ensure_folder(path.parent, root)
    check_target(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(8)}.tmp")
    # mode 0o666, not mkstemp's 0o600: results are shared, and the umask decides
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            try:
                write(f)
            except Exception as exc:  # torch's writer reports a full disk as its own RuntimeError
                if not isinstance(exc, OSError) and _disk_full(f.fileno()):
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path)) from exc
                raise
            f.flush()
            os.fsync(f.fileno())
        check_target(path)  # checked again: it may have been planted while we wrote
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def remove_stale_temporaries(path: Path) -> list[Path]:
    """Remove the temporary files a killed writer (SIGKILL, a lost node) left beside ``path``: those named as
    :func:`write_with` names them whose process no longer lives on this host. Returns what was removed."""
    path, removed = Path(path), []
    for tmp in path.parent.glob(f".{glob_escape(path.name)}.*.tmp"):
        pid = tmp.name[len(path.name) + 2:].split(".")[0]
        if pid.isdigit() and not _alive(int(pid)) and stat.S_ISREG(os.lstat(tmp).st_mode):
            try:
                os.unlink(tmp)
                removed.append(tmp)
            except FileNotFoundError:
                pass
    return removed


def glob_escape(name: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's: alive
        return True
    return True


def _disk_full(fd: int) -> bool:
    """Whether the file system of ``fd`` has (next to) no room left: what a writer that failed there ran into."""
    try:
        info = os.fstatvfs(fd)
    except OSError:
        return False
    return info.f_bavail * info.f_frsize < 64 * 1024


def write_bytes(path: Path, data: bytes, root: Path | None = None) -> None:
    write_with(path, lambda f: f.write(data), root)


def write_text(path: Path, text: str, root: Path | None = None) -> None:
    write_bytes(path, text.encode(), root)


def _open_no_link(path: Path, flags: int) -> int:
    """os.open with O_NOFOLLOW (and O_NONBLOCK, so that a FIFO cannot hang the opener): a link is refused."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePath(f"{path}: a symbolic link; commbench does not write through links") from None
        raise


def open_new(path: Path, root: Path | None = None) -> IO[bytes]:
    """A file to write from the start (a log), created or truncated, never through a link nor onto a special
    file: for output that is written as it comes, where a rename at the end would not do."""
    path = Path(path)
    ensure_folder(path.parent, root)
    check_target(path)
    fd = _open_no_link(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafePath(f"{path}: not a regular file; commbench writes only regular files")
    return os.fdopen(fd, "wb")


def open_lock(path: Path, root: Path | None = None) -> int:
    """A file descriptor on ``path`` for a lock (created if missing), never through a link nor on a special file."""
    path = Path(path)
    ensure_folder(path.parent, root)
    fd = _open_no_link(path, os.O_RDWR | os.O_CREAT)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafePath(f"{path}: not a regular file; commbench locks only regular files")
    return fd


def remove_tree(path: Path, root: Path | None = None) -> None:
    """Remove ``path`` (a folder commbench made), never through a link: a link there is unlinked, not followed,
    and a folder on the way that is a link is refused."""
    path = Path(path)
    for part in _below(root, path):
        try:
            if stat.S_ISLNK(os.lstat(part).st_mode):
                raise UnsafePath(f"{part}: a symbolic link inside the results folder {root}; refusing to remove "
                                 f"through it")
        except FileNotFoundError:
            return
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISDIR(mode):
        shutil.rmtree(path, ignore_errors=True)  # rmtree unlinks links inside, never follows them
    else:
        os.unlink(path)


def read_small_text(path: Path, limit: int, error: type[Exception]) -> str:
    """The UTF-8 text of ``path`` if it is a regular file of at most ``limit`` bytes; else ``error``, one line
    naming the file. A FIFO at the name must not hang a reader, a link to /dev/zero exhaust its memory, nor a
    folder escape as ``IsADirectoryError`` naming a file descriptor."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise error(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # checked on the open file, before anything reads it
            raise error(f"{path}: {_kind(info.st_mode)}, not a regular file")
        if info.st_size > limit:
            raise error(f"{path}: {info.st_size:,} bytes, larger than the {_size(limit)} such a file can be")
        chunks, size = [], 0
        while size <= limit and (chunk := os.read(fd, limit + 1 - size)):  # a file may grow as it is read
            chunks.append(chunk)
            size += len(chunk)
        data = b"".join(chunks)
    except OSError as exc:
        raise error(f"{path}: cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise error(f"{path}: larger than the {_size(limit)} such a file can be")
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise error(f"{path}: not text (not UTF-8)") from None


def _size(limit: int) -> str:
    return f"{limit // 2 ** 20} MiB" if limit >= 2 ** 20 else f"{limit // 2 ** 10} KiB"


def tail_lines(path: Path, limit: int = 64 * 1024) -> list[str]:
    """The non-empty lines of the last ``limit`` bytes of ``path`` (a log), stripped; [] where it is not a
    regular file that can be read (a log's path may come from a note in a shared folder: a FIFO or a link to
    /dev/zero there must neither hang nor fill the reader)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (OSError, TypeError, ValueError):
        return []
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return []
        os.lseek(fd, max(0, info.st_size - limit), os.SEEK_SET)
        data = os.read(fd, limit)
    except OSError:
        return []
    finally:
        os.close(fd)
    return [line.strip() for line in data.decode(errors="replace").splitlines() if line.strip()]
