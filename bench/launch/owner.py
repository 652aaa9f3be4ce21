"""Whose is this? Processes named by pid and kernel start time (a pid alone may have been reused), and SIGTERM
unwinding a run like Ctrl-C, so that whatever the run built is taken down and its record says why."""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Iterator

from commbench.store.safe_io import read_small_text
from commbench.store.safe_io import UnsafePath, open_lock
from commbench.store.schema import CLAIM, problem


def start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (field 22 of /proc/PID/stat), to tell a live owner from a reused pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def alive(pid: int, started: str | None) -> bool:
    now = start_time(pid)
    return now is not None and (started is None or now == started)


def me() -> dict:
    """This process, as an owner record: ``{"pid": ..., "pid_started": ...}``."""
    return {"pid": os.getpid(), "pid_started": start_time(os.getpid())}


class Terminated(KeyboardInterrupt):
    """SIGTERM: unwinds like Ctrl-C, so worker processes are stopped, networks torn down, temporary folders
    removed, and the run gets a failed record that says it was terminated."""

    exit_code = 128 + signal.SIGTERM
    reason = "terminated (SIGTERM)"


@contextlib.contextmanager
def unwind_on_sigterm() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(_signum, _frame):
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class Claimed(RuntimeError):
    """Another live process holds the claim; ``str(err)`` names it (pid, host, since when)."""


def _describe(who: dict) -> str:
    return f"pid {who.get('pid')} on {who.get('host')} since {who.get('since')}" if who else "another process"


def _holder(fd: int) -> str:
    try:
        who = json.loads(os.pread(fd, 4096, 0) or b"{}")
        return _describe(who if problem(who, CLAIM) is None else {})
    except (ValueError, RecursionError):
        return _describe({})


@contextlib.contextmanager
def claim(folder: Path, name: str) -> Iterator[None]:
    """Hold ``folder/name.lock`` for the block, or raise :class:`Claimed` at once if a live process holds it.

    Two sweeps over one results folder (``make campaign`` runs lanes in parallel) must never train the same
    run at the same time: the second would overwrite the first's record and checkpoints. The kernel drops an
    flock with its holder however it ends, so a run killed with SIGKILL leaves nothing claimed."""
    path = folder / f"{name}.lock"
    while True:
        try:
            fd = open_lock(path, root=folder.parent)  # ROOT/claims: never through a link
        except UnsafePath:
            raise
        except OSError:  # a full disk or a read-only folder: the run goes on unclaimed, and its record's write
            fd = None    # will say what is wrong with the folder
        if fd is None:
            yield
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise Claimed(holder) from None
        try:  # the last holder may have removed the file between our open and our lock: hold the one on disk
            if os.fstat(fd).st_ino == os.stat(path).st_ino:
                break
        except FileNotFoundError:
            pass
        os.close(fd)
    try:
        with contextlib.suppress(OSError):  # who holds it is for the others' messages: a full disk leaves it out
            os.ftruncate(fd, 0)
            since = time.strftime("%Y-%m-%dT%H:%M:%S%z")
            os.write(fd, json.dumps({**me(), "host": socket.gethostname(), "since": since}).encode())
        yield
    finally:
        path.unlink(missing_ok=True)  # while still locked: a waiter that opened this file sees it is gone
        os.close(fd)


def holders(folder: Path) -> dict[str, str]:
    """name -> who holds it, for the claims in ``folder`` whose holder is alive (read only: never locks, so
    looking cannot make a sweep skip a run)."""
    out = {}
    for path in sorted(Path(folder).glob("*.lock")) if Path(folder).is_dir() else []:
        try:
            who = json.loads(read_small_text(path, 2 ** 16, ValueError) or "{}")
        except (ValueError, RecursionError, MemoryError):
            continue
        if problem(who, CLAIM) is not None:  # not what a claim holds: nobody's
            continue
        if who.get("pid") and who.get("host") == socket.gethostname() and alive(who["pid"], who.get("pid_started")):
            out[path.stem] = _describe(who)
    return out
