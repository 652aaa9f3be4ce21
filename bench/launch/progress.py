"""Progress for long work: a bar on a terminal, plain periodic lines otherwise (logs, CI, Slurm)."""
from __future__ import annotations

import sys
import time


class Progress:
    """``update(done, total, loss)`` from the training loop; ``close()`` at the end."""

    def __init__(self, desc: str, total: int, unit: str = "step", every_s: float = 10.0, enabled: bool = True):
        self.desc, self.total, self.unit, self.every_s = desc, total, unit, every_s
        self.enabled = enabled
        self.done = 0  # the last count reported, shown or not (what a stopped run had reached)
        self._bar = None
        self._last_line = 0.0
        self._start = time.monotonic()
        if enabled and sys.stderr.isatty():
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=desc, unit=unit, leave=False, dynamic_ncols=True)

    def update(self, done: int, total: int | None = None, loss: float | None = None, note: str = "") -> None:
        self.done = done
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
