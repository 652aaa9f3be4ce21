"""Slurm cluster profiles (``slurm/profiles/*.yaml``) and the resource shape each run needs.

A profile says how to ask a cluster for resources: partition, account, GPUs per node, CPUs per task, memory,
time limit, extra #SBATCH options and setup lines. A grid's ``slurm:`` section names a profile and may
override any of its keys. A dist run needs one task per process (its workers plus its parameter servers),
one GPU each on a GPU cluster; a sim run needs one task.
"""
from __future__ import annotations

import dataclasses
import importlib.resources
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

from commbench.config import ConfigError, RunConfig, load_yaml, read_user_text

# the cluster profiles ship with the package (commbench.profiles: slurm/profiles in a checkout)
PROFILES_DIR = Path(str(importlib.resources.files("commbench.profiles")))


@dataclass(frozen=True)
class Profile:
    name: str
    description: str = ""
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    gpus_per_node: int = 0            # 0: a CPU cluster (gloo); else one task per GPU (NCCL)
    tasks_per_node: int | None = None  # CPU clusters: most tasks on one node (None: a run's tasks on one node)
    cpus_per_task: int = 1
    mem_gb: float | None = None       # per node
    time_min: int = 60
    signal_delay_s: int = 90          # SIGUSR2 this long before the time limit
    max_requeues: int = 3             # checkpoint-and-requeue cycles one job may make
    array_parallelism: int = 256
    sbatch: dict = field(default_factory=dict)  # other #SBATCH options
    setup: list = field(default_factory=list)   # shell lines before srun
    slurm_conf: str | None = None     # another cluster's slurm.conf for sbatch, squeue, sacct (SLURM_CONF)


_INTS = {"gpus_per_node": 0, "cpus_per_task": 1, "time_min": 1, "signal_delay_s": 0, "max_requeues": 0,
         "array_parallelism": 1}
_OPT_STR = ("description", "partition", "account", "qos", "constraint", "slurm_conf")


def known_profiles() -> list[str]:
    return sorted(p.stem for p in PROFILES_DIR.glob("*.yaml"))


def _one_line(source: str, key: str, value: Any) -> None:
    """Profile values become lines of a batch script: a newline or other control character would add lines."""
    texts = [value] if isinstance(value, str) else list(value) if isinstance(value, list) else \
        [*map(str, value.keys()), *map(str, value.values())] if isinstance(value, dict) else []
    for text in texts:
        if isinstance(text, str) and any(ord(ch) < 32 or ord(ch) == 127 for ch in text):
            raise ConfigError(f"{source}: {key}: {text!r} has a newline or control character (one line each)")


def _check(source: str, values: Mapping[str, Any]) -> dict:
    fields = {f.name for f in dataclasses.fields(Profile)} - {"name"}
    out = {}
    for key, v in values.items():
        _one_line(source, key, v)
        if key not in fields:
            raise ConfigError(f"{source}: unknown profile key {key!r} (known: {', '.join(sorted(fields))})")
        if key in _INTS:
            if isinstance(v, bool) or not isinstance(v, int) or v < _INTS[key]:
                raise ConfigError(f"{source}: {key} must be an integer >= {_INTS[key]}, got {v!r}")
        elif key == "tasks_per_node":
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise ConfigError(f"{source}: tasks_per_node must be a positive integer or null, got {v!r}")
        elif key == "mem_gb":
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
                                  or v <= 0):
                raise ConfigError(f"{source}: mem_gb must be a positive number or null, got {v!r}")
        elif key in _OPT_STR:
            if v is not None and not isinstance(v, str):
                raise ConfigError(f"{source}: {key} must be a string, got {v!r}")
        elif key == "sbatch":
            if not isinstance(v, dict) or not all(isinstance(k, str) for k in v) or \
                    not all(isinstance(x, (str, int, bool)) for x in v.values()):
                raise ConfigError(f"{source}: sbatch must map #SBATCH option names to values (a string, an integer, "
                                  f"or true for a flag)")
        elif key == "setup":
            if not isinstance(v, list) or not all(isinstance(line, str) for line in v):
                raise ConfigError(f"{source}: setup must be a list of shell lines")
        out[key] = v
    return out


def load_profile(name_or_path: str | None, overrides: Mapping[str, Any] | None = None) -> Profile:
    """The profile named (``slurm/profiles/NAME.yaml``) or at a path, with a grid's overrides applied."""
    if overrides is not None and not isinstance(overrides, Mapping):
        raise ConfigError(f"slurm: a grid's slurm section is a mapping (profile: NAME, ...), got {overrides!r}")
    overrides = dict(overrides or {})
    if overrides.get("profile") is not None and not isinstance(overrides["profile"], str):
        raise ConfigError(f"slurm: profile must be a profile's name or path, got {overrides['profile']!r}")
    name_or_path = name_or_path or overrides.pop("profile", None)
    overrides.pop("profile", None)
    if not name_or_path:
        raise ConfigError("slurm: no cluster profile; name one in the grid (slurm: {profile: NAME}) or with "
                          f"--profile (known: {', '.join(known_profiles())})")
    path = Path(name_or_path)
    if not path.suffix:
        path = PROFILES_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        raise ConfigError(f"slurm profile {name_or_path!r}: no such file {path} "
                          f"(known: {', '.join(known_profiles())})")
    try:
        doc = load_yaml(read_user_text(path), str(path)) or {}
    except yaml.YAMLError:
        raise ConfigError(f"{path}: not valid YAML") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: a profile is a mapping of keys to values")
    values = {**_check(str(path), doc), **_check("grid slurm section", overrides)}
    return Profile(name=path.stem, **values)


@dataclass(frozen=True)
class Shape:
    """What one run asks of the cluster. Runs of one shape go out as one job array."""

    nodes: int
    tasks_per_node: int
    tasks: int
    gpus_per_node: int
    cpus_per_task: int

    def describe(self) -> str:
        gpus = f", {self.gpus_per_node} GPUs per node" if self.gpus_per_node else ""
        return (f"{self.tasks} task{'s' * (self.tasks > 1)} on {self.nodes} node{'s' * (self.nodes > 1)} "
                f"({self.tasks_per_node} per node, {self.cpus_per_task} CPUs per task{gpus})")


def processes(cfg: RunConfig) -> int:
    from commbench.config.resolve import server_count

    return cfg.workers + server_count(cfg) if cfg.backend == "dist" else 1


def run_shape(cfg: RunConfig, profile: Profile) -> Shape:
    tasks = processes(cfg)
    per_node = profile.gpus_per_node or profile.tasks_per_node or tasks
    per_node = min(per_node, tasks)
    nodes = math.ceil(tasks / per_node)
    gpus = min(profile.gpus_per_node, per_node) if profile.gpus_per_node else 0
    return Shape(nodes, per_node, tasks, gpus, profile.cpus_per_task)


def executor_parameters(profile: Profile, shape: Shape, job_name: str, setup: list[str],
                        chdir: Path | None = None) -> dict:
    """submitit.SlurmExecutor parameters (its names) for runs of ``shape``; jobs start in ``chdir``."""
    extra = {"requeue": True, **profile.sbatch}  # requeue: the job may be put back in the queue
    if chdir is not None:
        extra["chdir"] = str(chdir)
    if shape.nodes * shape.tasks_per_node != shape.tasks:  # uneven: --ntasks wins, per-node is a maximum
        extra["ntasks"] = shape.tasks
    params = {"job_name": job_name, "partition": profile.partition, "account": profile.account,
              "qos": profile.qos, "constraint": profile.constraint, "time": profile.time_min,
              "nodes": shape.nodes, "ntasks_per_node": shape.tasks_per_node,
              "cpus_per_task": shape.cpus_per_task, "signal_delay_s": profile.signal_delay_s,
              "array_parallelism": profile.array_parallelism, "stderr_to_stdout": False,
              # one task failing ends the step at once (NCCL would otherwise wait for it until its timeout)
              "srun_args": ["--kill-on-bad-exit=1"],
              "setup": [*profile.setup, *setup], "additional_parameters": extra}
    if shape.gpus_per_node:
        params["gpus_per_node"] = shape.gpus_per_node
    if profile.mem_gb:
        params["mem"] = f"{int(profile.mem_gb)}GB" if float(profile.mem_gb).is_integer() else f"{profile.mem_gb}GB"
    return {k: v for k, v in params.items() if v is not None}


def sbatch_script(profile: Profile, shape: Shape, job_name: str, setup: list[str], chdir: Path,
                  folder: Path, runs: int = 1) -> str:
    """The batch script submitit writes for a job array of ``runs`` runs of ``shape`` (for review and tests)."""
    from submitit.slurm.slurm import _make_sbatch_string

    params = executor_parameters(profile, shape, job_name, setup, chdir=chdir)
    command = "python -u -m submitit.core._submit " + str(folder)  # what SlurmExecutor runs in each task
    return _make_sbatch_string(command=command, folder=folder, map_count=runs if runs > 1 else None, **params)
