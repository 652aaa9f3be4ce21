"""Progress for long work: a bar on a terminal, plain periodic lines otherwise (logs, CI, Slurm), and for a
run launched here a small file that says where it stands, for ``commbench status`` in another shell."""
from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Callable

from commbench.store.safe_io import read_small_text
from commbench.store.schema import PROGRESS, problem
from commbench.store.results_folder import ResultsFolder
from commbench.store.safe_io import write_text


class Progress:
    """``update(done, total, loss)`` from the training loop; ``close()`` at the end."""

    def __init__(self, desc: str, total: int, unit: str = "step", every_s: float = 10.0, enabled: bool = True,
                 also: Callable[[int], None] | None = None):
        self.desc, self.total, self.unit, self.every_s = desc, total, unit, every_s
        self.enabled, self.also = enabled, also  # also: told every count, shown or not (a ProgressFile)
        self.done = 0  # the last count reported, shown or not (what a stopped run had reached)
        self._bar = None
        self._last_line = 0.0
        self._start = time.monotonic()
        if enabled and sys.stderr.isatty():
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=desc, unit=unit, leave=False, dynamic_ncols=True)

    def update(self, done: int, total: int | None = None, loss: float | None = None, note: str = "") -> None:
        self.done = done
        if self.also is not None:
            self.also(done)
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.n = done
            if loss is not None:
                self._bar.set_postfix(loss=f"{loss:.4f}", refresh=False)
            self._bar.refresh()
            return
        now = time.monotonic()
        if now - self._last_line >= self.every_s or done >= self.total:
            self._last_line = now
            extra = f" loss {loss:.4f}" if loss is not None else ""
            print(f"[{self.desc}] {done}/{self.total} {self.unit}s{extra} {note}({now - self._start:.0f}s)",
                  file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


class ProgressFile:
    """``OUT/claims/<run_id>.progress``: the step a run has reached and its pace since this process took it up,
    rewritten at most every ``every_s`` (atomically: a reader never sees half a file). A run whose steps were
    never timed (a grid's first CifarNet run) is what the time estimate needs most, before any record exists."""

    def __init__(self, path: Path, total: int, every_s: float = 15.0):
        self.path, self.total, self.every_s = Path(path), total, every_s
        self._first: tuple[float, int] | None = None  # (time, step) of the first report: start-up not counted
        self._written = float("-inf")

    def __call__(self, done: int) -> None:
        now = time.monotonic()
        if self._first is None:
            self._first = (now, done)
        if now - self._written < self.every_s:
            return
        self._written = now
        seconds, steps = now - self._first[0], done - self._first[1]
        state = {"step": done, "steps": self.total, "step_s": seconds / steps if steps > 0 else None,
                 "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        # ROOT/claims/<id>.progress: a random temporary name, never through a link (safe_io); progress is for
        # people watching, so a full disk or a refused path must not stop the run
        with contextlib.suppress(OSError):
            write_text(self.path, json.dumps(state), root=ResultsFolder.holding(self.path).root)

    def remove(self) -> None:
        for path in (self.path,):
            path.unlink(missing_ok=True)


def read_progress(path: Path) -> dict | None:
    """What a :class:`ProgressFile` last wrote (``step``, ``steps``, ``step_s``: seconds a step, or None), or
    None where there is none or it cannot be read."""
    try:
        state = json.loads(read_small_text(Path(path), 2 ** 16, ValueError))
    except (ValueError, RecursionError, MemoryError):
        return None
    return state if problem(state, PROGRESS) is None and "step" in state and "steps" in state else None
