"""Whose is this? Processes named by pid and kernel start time (a pid alone may have been reused), and SIGTERM
unwinding a run like Ctrl-C, so that whatever the run built is taken down and its record says why."""
from __future__ import annotations

import contextlib
import os
import signal
import threading
from pathlib import Path
from typing import Iterator


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
