"""Where a run computes: the device (CUDA where asked or available, else the CPU), the process group's backend
that goes with it, and each worker's share of the host's threads."""
from __future__ import annotations

import os

import torch

from commbench.config import RunConfig
from commbench.methods.comm import Communicator
from commbench.run.precision import strict_fp32


def describe_device(device: torch.device) -> str:
    return f"cuda ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else device.type


def auto_device_type() -> str:
    """What ``device: auto`` trains on here: the GPU where CUDA is, else the CPU."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def wants_cuda(cfg: RunConfig) -> bool:
    return cfg.device == "cuda" or (cfg.device == "auto" and auto_device_type() == "cuda")


def dist_backend(cfg: RunConfig) -> str:
    """The process group's backend: NCCL where the run computes on GPUs, gloo on the CPU (``device=cpu`` on a
    GPU host too: NCCL moves GPU memory only)."""
    return "nccl" if wants_cuda(cfg) else "gloo"


def pick_device(cfg: RunConfig, comm: Communicator) -> torch.device:
    if not wants_cuda(cfg):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise RuntimeError("device=cuda but CUDA is not available")
    device = getattr(comm, "device", None) or torch.device("cuda", 0)
    strict_fp32(device, cfg.precision)
    return device


def set_threads(cfg: RunConfig) -> None:
    """Each worker computes with its share of the host's cores, in both transports: kernels split their
    reductions by thread count, so equal counts are what make sim and dist agree bit for bit."""
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    else:
        per_host = int(os.environ.get("LOCAL_WORLD_SIZE", cfg.workers)) if cfg.backend == "dist" else cfg.workers
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // max(1, per_host)))
    if cfg.deterministic:
        torch.use_deterministic_algorithms(True)

