"""Where a run happened and on what code: versions, git state, host, device, Slurm job."""
from __future__ import annotations

import datetime
import functools
import importlib.metadata
import json
import os
import platform
import socket
import subprocess
import sys
from pathlib import Path

SOURCE_ROOT = Path(__file__).resolve().parents[2]  # bench/store/provenance.py -> the checkout


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def git_state(root: Path = SOURCE_ROOT) -> tuple[str | None, bool | None]:
    """(commit SHA, dirty) of the code that ran. A job running from a snapshot is told its SHA in
    COMMBENCH_GIT_SHA / COMMBENCH_GIT_DIRTY, since the snapshot itself is not a git checkout."""
    if "COMMBENCH_GIT_SHA" in os.environ:
        return os.environ["COMMBENCH_GIT_SHA"], os.environ.get("COMMBENCH_GIT_DIRTY") == "1"
    try:
        sha = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10, check=True).stdout.strip()
        # Dirty means the code differs from the commit; records being written under results/ do not count.
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no",
                                "--", ".", ":(exclude)results"],
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip() != ""
        return sha, dirty
    except (OSError, subprocess.SubprocessError):
        return None, None


@functools.cache
def code_loaded(root: Path = SOURCE_ROOT) -> tuple[str | None, bool | None]:
    """(SHA, dirty) of the checkout when this process first asked: the code a long-lived process (a sweep)
    imported, which later commits and edits do not change in it."""
    return git_state(root)


def code_changed_since(sha: str, root: Path = SOURCE_ROOT) -> bool:
    """Whether the checkout's code differs from commit ``sha``, committed since or edited (results/ aside: the
    records written while a sweep runs are not code). False where git cannot tell."""
    try:
        return subprocess.run(["git", "-C", str(root), "diff", "--quiet", sha, "--", ".", ":(exclude)results"],
                              capture_output=True, timeout=10).returncode == 1
    except (OSError, subprocess.SubprocessError):
        return False


def slurm_job_id() -> str | None:
    """The id users type into scancel and sacct: ``ARRAYID_TASK`` for a task of a job array."""
    if os.environ.get("SLURM_ARRAY_JOB_ID") and os.environ.get("SLURM_ARRAY_TASK_ID"):
        return f"{os.environ['SLURM_ARRAY_JOB_ID']}_{os.environ['SLURM_ARRAY_TASK_ID']}"
    return os.environ.get("SLURM_JOB_ID")


def run_nodes() -> list[str]:
    """The hosts the run's processes ran on: a Slurm job's node list (expanded), else this host."""
    nodelist = os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST")
    if nodelist:
        try:
            out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True,
                                 timeout=10, check=True).stdout.split()
            if out:
                return out
        except (OSError, subprocess.SubprocessError):
            pass
        return [nodelist]
    return [socket.gethostname()]


def link_limits() -> dict[str, float]:
    """The rate limits (bits/s) on this network namespace's links, from tc: each interface but loopback whose
    root queue is a token bucket filter. Empty where there is none, or no tc to ask."""
    try:
        out = subprocess.run(["tc", "-j", "qdisc", "show"], capture_output=True, text=True, timeout=10, check=True)
        qdiscs = json.loads(out.stdout or "[]")
    except (OSError, subprocess.SubprocessError, ValueError):
        return {}
    return {q["dev"]: 8.0 * q["options"]["rate"] for q in qdiscs
            if q.get("kind") == "tbf" and q.get("root") and q.get("dev") != "lo" and "rate" in q.get("options", {})}


# the instruction sets that decide a CPU's training and codec speed here (bf16 autocast runs on AMX or
# AVX512-BF16 where the CPU has them, and far slower without; the codecs' loops vectorise to the widest)
SPEED_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")


def cpu_identity(cpuinfo: str | None = None) -> tuple[str | None, list[str] | None]:
    """(model name, the speed-deciding flags it has) from /proc/cpuinfo: two runs' times compare only on the
    same CPU. (None, None) where there is no /proc/cpuinfo to read."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            return platform.processor() or None, None
    fields = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() not in fields:
            fields[key.strip()] = value.strip()
    flags = set(fields.get("flags", "").split())
    name = fields.get("model name") or platform.processor() or None
    # a virtual machine's model name can be as vague as "AMD EPYC": the family and model tell the generation
    generation = ", ".join(f"{k} {fields[k]}" for k in ("cpu family", "model") if k in fields)
    if name and generation:
        name = f"{name} ({generation})"
    return name, [f for f in SPEED_FLAGS if f in flags]


def collect_env(world_size: int, dist_backend: str | None, device: str, started_at: str,
                parameter_servers: int = 0, code: tuple[str | None, bool | None] | None = None) -> dict:
    """``code``: (git SHA, dirty) taken when the run started (edits made while it ran are not its code)."""
    import torch

    try:  # the installed version, without importing torchvision (slow, and it may be broken)
        tv = importlib.metadata.version("torchvision")
    except importlib.metadata.PackageNotFoundError:
        tv = None
    sha, dirty = code if code is not None else git_state()
    gpu = torch.cuda.get_device_name(0) if device == "cuda" and torch.cuda.is_available() else None
    cpu_model, cpu_flags = cpu_identity()
    return {
        "python": platform.python_version(), "torch": torch.__version__, "torchvision": tv,
        "git_sha": sha, "git_dirty": dirty, "hostname": socket.gethostname(), "device": device,
        "gpu_name": gpu, "world_size": world_size, "dist_backend": dist_backend,
        "parameter_servers": parameter_servers,
        "slurm_job_id": slurm_job_id(), "nodes": run_nodes(),
        # Slurm's tasks per node ("2(x2)"): with its block distribution, ranks fill the nodes in order, so
        # the last ranks (a parameter-server run's servers) sit on the last nodes
        "slurm_tasks_per_node": os.environ.get("SLURM_TASKS_PER_NODE"),
        "started_at": started_at, "finished_at": now(),
        "argv": sys.argv[1:], "cpu_count": os.cpu_count(), "cpu_model": cpu_model, "cpu_flags": cpu_flags,
        # the host's load as the run ends: above cpu_count, the run shared its cores (another lane of the
        # campaign, a test suite) and its images/s are no measurement of speed
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
