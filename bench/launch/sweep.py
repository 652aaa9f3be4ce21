"""Run a grid's configurations one after another on this machine, skipping those already done."""
from __future__ import annotations

import sys
from pathlib import Path

from ..config import RunConfig
from ..progress import Progress
from ..records import read_record


def run_local_sweep(runs: list[RunConfig], out: Path, show_progress: bool = True) -> int:
    """Exit code: 0 when every run is done or diverged, 1 when any failed."""
    from ..cli import summary
    from ..runner import execute

    todo = [c for c in runs if (read_record(out, c.run_id) or {}).get("status") != "done"]
    print(f"sweep: {len(runs)} runs, {len(runs) - len(todo)} already done, {len(todo)} to run", file=sys.stderr)
    bar = Progress("sweep", len(todo), unit="run", every_s=0.0, enabled=show_progress)
    failed = 0
    for i, cfg in enumerate(todo):
        result = execute(cfg, out, show_progress=show_progress)
        failed += result.record["status"] == "failed"
        print(summary(cfg, result.record), flush=True)
        bar.update(i + 1)
    bar.close()
    return 1 if failed else 0
