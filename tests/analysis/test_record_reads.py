"""Records are read in one place (bench/analysis/runs.py: typed runs, implicit values filled once). This test counts
the raw reaches into a record elsewhere in bench/analysis and bench/cli (``["config"]``, ``["metrics"]``,
``.get("config")``, ``.get("metrics")``), as tests/test_layering.py counts imports. The goal is zero. Until every
reader is moved, each file has a budget that may only shrink: a new raw reach, or a new file with one, fails, and
a file that drops below its budget must lower it here, so the count cannot creep back up."""
from __future__ import annotations

import re

from .test_golden_outputs import REPO

READER = "bench/analysis/runs.py"
RAW = re.compile(r"""\[\s*["'](config|metrics)["']\s*\]|\.get\(\s*["'](config|metrics)["']""")
# file -> raw reaches left (the reading of issue 72 moved them to typed runs; the paper tables' were the last)
BUDGET: dict[str, int] = {}


def raw_reaches() -> dict[str, int]:
    found = {}
    for folder in ("bench/analysis", "bench/cli"):
        for path in sorted((REPO / folder).rglob("*.py")):
            name = path.relative_to(REPO).as_posix()
            count = len(RAW.findall(path.read_text()))
            if count and name != READER:
                found[name] = count
    return found


def test_the_pattern_finds_each_kind_of_raw_reach():
    text = 'r["config"]; r.get("metrics"); r[ "metrics" ]; r.get(\'config\', {}); r["configs"]; cfg.get("config_x")'
    assert len(RAW.findall(text)) == 4


def test_no_file_reads_records_raw_beyond_its_shrinking_budget():
    found = raw_reaches()
    over = {f: (n, BUDGET.get(f, 0)) for f, n in found.items() if n > BUDGET.get(f, 0)}
    assert not over, f"raw record reads (now, allowed): {over}; read typed runs (bench/analysis/runs.py) instead"
    under = {f: (found.get(f, 0), n) for f, n in BUDGET.items() if found.get(f, 0) < n}
    assert not under, f"fewer raw reads than budgeted (now, budget): {under}; lower the budget to the count"
