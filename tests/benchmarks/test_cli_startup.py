"""Command-line start-up: the wall time of ``commbench --help`` and of ``commbench status`` on the committed
campaign's records (issue 72), each a fresh process as a user starts it, the median of ``RUNS`` after one untimed
run (which fills the file cache and the bytecode cache).

Twice: with a bytecode cache (in a private folder, so the checkout gets no __pycache__), as an installed package
starts from its second run on; and without one (PYTHONDONTWRITEBYTECODE, as some sessions and containers set it),
where every commbench module is compiled from source at each start.

Goals on a quiet machine: help under 0.3 s, status of results/campaign under 2 s. Reported, not asserted
(wall-clock numbers are for reading, not for failing CI): the figures land in
``results/benchmarks/cli-startup.json`` with the CPU that measured them and the load average around the
measurement (a busy machine's figures are slower, and say so). Run with ``make bench``.
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from . import write_result

from ..conftest import REPO

RUNS = 5
GOALS_S = {"help": 0.3, "status": 2.0}


def entry_point() -> list[str]:
    """``commbench`` as a user types it: the installed script beside this interpreter, else ``python -m``."""
    script = Path(sys.executable).parent / "commbench"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "commbench"]


def environment(bytecode_cache: Path | None) -> dict[str, str]:
    """This environment, with Python's bytecode cache in ``bytecode_cache``, or with none written."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    if bytecode_cache is None:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        env["PYTHONPYCACHEPREFIX"] = str(bytecode_cache)
    return env


def wall_times(args: list[str], env: dict[str, str], runs: int = RUNS) -> list[float]:
    """Seconds of each of ``runs`` fresh processes of ``commbench ARGS``, after one untimed run."""
    times = []
    for i in range(runs + 1):
        start = time.perf_counter()
        proc = subprocess.run([*entry_point(), *args], capture_output=True, text=True, cwd=REPO, env=env,
                              timeout=120)
        elapsed = time.perf_counter() - start
        assert proc.returncode == 0, proc.stderr[-2000:]
        if i:
            times.append(elapsed)
    return times


def heavy_imports(args: list[str]) -> list[str]:
    """Which of torch, numpy and pandas ``commbench ARGS`` imports (``-X importtime`` lists every module)."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "commbench", *args], capture_output=True,
                          text=True, cwd=REPO, timeout=120)
    modules = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    return [name for name in ("torch", "numpy", "pandas") if name in modules]


@pytest.mark.benchmark
def test_cli_startup(tmp_path):
    campaign = REPO / "results" / "campaign"
    commands = {"help": ["--help"], "status": ["status", "--results", str(campaign.relative_to(REPO))]}
    cached, uncached = environment(tmp_path / "pycache"), environment(None)
    load_before = os.getloadavg()
    times = {name: wall_times(args, cached) for name, args in commands.items()}
    compiling = {name: wall_times(args, uncached) for name, args in commands.items()}
    load_after = os.getloadavg()
    medians = {name: statistics.median(t) for name, t in times.items()}
    result = {
        "setup": f"fresh processes of {' '.join(Path(p).name for p in entry_point())}, cwd the checkout; the "
                 f"median of {RUNS} after one untimed run; with a bytecode cache, and without one",
        "commands": {name: " ".join(["commbench", *args]) for name, args in commands.items()},
        "campaign_records": len(list((campaign / "runs").glob("*.json"))),
        "median_s": medians,
        "runs_s": times,
        "median_s_without_bytecode_cache": {name: statistics.median(t) for name, t in compiling.items()},
        "runs_s_without_bytecode_cache": compiling,
        "goal_s": GOALS_S,
        "within_goal": {name: medians[name] < GOALS_S[name] for name in medians},
        "heavy_imports": {name: heavy_imports(args) for name, args in commands.items()},
        # the 1-minute load average before and after: above the core count, other work shared the CPUs
        "load_average_1min": [round(load_before[0], 2), round(load_after[0], 2)],
    }
    write_result("cli-startup", result)
    print("\n" + "  ".join(f"{name} {medians[name]:.3f} s (goal {GOALS_S[name]} s)" for name in medians)
          + f"  load {load_before[0]:.2f}/{load_after[0]:.2f} on {os.cpu_count()} cores")
