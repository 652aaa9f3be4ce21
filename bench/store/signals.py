"""Signals held back while something must not be cut in half: a record being written, a network being torn
down, worker processes being started. A held signal is not lost: it arrives the moment the block ends.

Torch-free and at the bottom of the rooms, so that the store, the training loop and the launchers share it.
"""
from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterable, Iterator

# what asks a commbench process to stop: Ctrl-C, a kill or a hang-up, and a checkpoint request (Slurm's warning)
STOP_AND_END = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)


@contextlib.contextmanager
def signals_held(signals: Iterable[signal.Signals]) -> Iterator[None]:
    """While inside, ``signals`` wait (blocked) instead of arriving; processes started inside inherit the block
    across exec. Only the main thread holds signals (Python runs handlers there); elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, set(signals))
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)  # a signal that came meanwhile arrives now


@contextlib.contextmanager
def signals_deferred(signals: Iterable[signal.Signals]) -> Iterator[None]:
    """While inside, ``signals`` are noted, not acted on; when the block ends each one noted is raised again, under
    the handler that was in force before (a default action then ends the process, Python's SIGINT handler raises
    KeyboardInterrupt). Blocking alone would not do in a process with threads (torch's): the kernel hands a
    process's signal to any thread that does not block it, and a default action kills the whole process."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    noted: list[int] = []
    previous = {s: signal.getsignal(s) for s in signals}
    previous = {s: h for s, h in previous.items() if h is not None}  # None: a handler set outside Python, kept
    for s in previous:
        signal.signal(s, lambda signum, _frame: noted.append(signum))
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        for signum in dict.fromkeys(noted):
            signal.raise_signal(signum)
