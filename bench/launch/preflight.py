"""What must hold before a run starts, checked before anything is written: exit 2 and one line, not a failed
record after the training (or an error at the end of it).

Static limits (a seed's range, a batch larger than the data set) are :func:`commbench.config.resolve`'s; these
are the checks against this machine: the output folder can be written, the data root is a folder, the data
set is on disk (or can be fetched now), a CUDA device exists where one is asked for (and one per process of a
dist run on NCCL), an emulated network can hold the run's processes.
"""
from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any

from commbench.tasks import TASKS
from commbench.tasks.data.base import DataUnavailable

from commbench.config import ConfigError, RunConfig
from commbench.config.resolve import server_count


# A newline in a path that goes into a Slurm batch script ends the line it is quoted on, and the rest runs as a
# command: no quoting carries a line break (nor a NUL) across, so such paths are refused, as are other controls.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def no_control_characters(what: str, value: Any) -> None:
    """ConfigError where ``value`` (a string, or strings inside lists and dicts) holds a control character."""
    if isinstance(value, dict):
        for key, item in value.items():
            no_control_characters(f"{what}.{key}", key)
            no_control_characters(f"{what}.{key}", item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            no_control_characters(what, item)
    elif isinstance(value, (str, Path)) and (found := _CONTROL.search(str(value))):
        shown = str(value)[:80] + ("..." if len(str(value)) > 80 else "")
        raise ConfigError(f"{what} {shown!r}: holds a control character ({found.group()!r}); refused, since it "
                          f"would go into a Slurm batch script or a log line")


def output_folder(out: str | Path, option: str = "--results") -> Path:
    """``out`` as a folder runs can be written into (it may not exist yet). Raises ConfigError if it is empty,
    holds a control character (its absolute path is written into batch scripts), is a file, or is under a folder
    this process cannot write; nothing is left behind by the check."""
    if str(out).strip() == "":
        raise ConfigError(f"{option}: an empty path; name a folder")
    no_control_characters(option, os.path.abspath(out))
    out = Path(out)
    try:
        if out.exists() and not out.is_dir():
            raise ConfigError(f"{option} {out}: is a file, not a folder")
        probe = out
        while not probe.exists():  # the nearest folder that exists: the one the run's folders are made in
            probe = probe.parent
        if not probe.is_dir():
            raise ConfigError(f"{option} {out}: {probe} is a file, not a folder")
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError as exc:
        raise ConfigError(f"{option} {out}: cannot write there ({exc.strerror or exc})") from None
    return out


class GpusTooFew(ConfigError):
    """A local dist run on NCCL with more processes than this machine has GPUs."""


def check_machine(cfg: RunConfig, local: bool = True) -> None:
    """The run's demands on this machine, other than its data: a data root that is a folder, a CUDA device
    where one is asked for, a GPU for each process of a dist run on NCCL, an emulated network that can be built
    and holds the run's processes."""
    if cfg.data_root is not None:
        root = Path(cfg.data_root)
        if root.exists() and not root.is_dir():
            raise ConfigError(f"data_root {root}: is a file, not a folder")
    if not local:
        return
    if cfg.net is not None:
        from commbench.launch.netns import MAX_RANKS, require_netns

        require_netns()
        processes = cfg.workers + server_count(cfg)
        if processes > MAX_RANKS:
            raise ConfigError(f"net: an emulated network holds at most {MAX_RANKS} processes; this run has "
                              f"{processes}")
    if cfg.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise ConfigError("device: cuda, but this machine has no CUDA device (device=auto uses one when there "
                              "is one)")
    # torchrun or srun started the processes, maybe on several machines: this one's GPUs need not hold them all
    if cfg.backend == "dist" and not under_outside_launcher():
        check_gpus(cfg)


def under_outside_launcher() -> bool:
    """torchrun, Slurm's srun or a user's own script already started one process per worker."""
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ and "COMMBENCH_WORKER" not in os.environ


def check_gpus(cfg: RunConfig) -> None:
    """GpusTooFew where the local launcher would start more processes of a dist run on NCCL than this machine
    has GPUs: NCCL refuses two processes on one GPU ("invalid usage"), but only once they all run."""
    from commbench.run.devices import dist_backend

    if dist_backend(cfg) != "nccl":
        return
    import torch

    processes, gpus = cfg.workers + server_count(cfg), torch.cuda.device_count()
    if processes > gpus:
        raise GpusTooFew(f"dist on NCCL takes one GPU per process: {processes} processes, {gpus} GPU(s) on this "
                         f"host; run the workers in one process (--backend sim) or on gloo (--set device=cpu)")


def check_data(cfg: RunConfig) -> None:
    """The data set is on disk, or is provisioned now (from Debian's package, a download): else ConfigError."""
    try:
        TASKS[cfg.task].prepare_data(cfg.dataset, Path(cfg.data_root or "data"))
    except DataUnavailable as exc:
        line = str(exc).splitlines()[0]
        raise ConfigError(line if line.startswith(f"{cfg.dataset}:") else f"{cfg.dataset}: {line}") from None


def check_runs(runs: list[RunConfig], out: str | Path, local: bool = True) -> Path:
    """Every check for a run or a sweep, before the first run starts: the machine, the output folder, then the
    data (provisioned once per data set; only where the runs execute here)."""
    for cfg in runs:
        check_machine(cfg, local)
    folder = output_folder(out)
    if local:
        for key in dict.fromkeys((c.task, c.dataset, c.data_root) for c in runs):
            check_data(next(c for c in runs if (c.task, c.dataset, c.data_root) == key))
    return folder
