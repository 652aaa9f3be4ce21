"""Cluster profiles for the time-to-accuracy projection: a YAML file a user writes about the cluster they have
(``bench/clusters/*.yaml`` ship the papers' own), named by its name or given as a path.

    name: terngrad-fig5
    description: ...
    nodes: 2
    gpus_per_node: 4
    link: 1gbit              # between nodes, each direction (tc's notation)
    within: 100gbit          # between the GPUs of one node (optional; default: as link)
    latency_us: 50           # per message
    compute:                 # one worker's forward+backward+update per step, by task, with its source
      lenet-mnist: {step_s: 0.004, source: "..."}
    codec_scale: 0.02        # the codecs' time here over their time measured on this machine (optional; 1)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import yaml

from commbench.config import ConfigError
from commbench.config.parsers import net_rate_bits
from commbench.config.userfiles import load_yaml, read_user_text

from .projection import Links

KEYS = {"name", "description", "nodes", "gpus_per_node", "link", "within", "latency_us", "compute", "codec_scale"}


@dataclass(frozen=True)
class Cluster:
    name: str
    links: Links
    link: str
    compute: dict = field(default_factory=dict)   # task -> {"step_s", "source"}
    codec_scale: float = 1.0
    description: str = ""
    path: str = ""

    def compute_s(self, task: str) -> tuple[float, str]:
        entry = self.compute.get(task)
        if entry is None:
            raise ConfigError(f"cluster {self.name}: no compute time for task {task} (declare compute: {task}: "
                              f"{{step_s: ..., source: ...}} in {self.path or 'its file'}, or pass --compute-s)")
        return float(entry["step_s"]), str(entry.get("source", ""))


def shipped() -> dict[str, Path]:
    folder = resources.files("commbench") / "clusters"
    return {Path(p.name).stem: Path(str(p)) for p in folder.iterdir() if p.name.endswith(".yaml")}


def _positive(where: str, key: str, value, kind=(int, float)):
    if isinstance(value, bool) or not isinstance(value, kind) or not value > 0:
        raise ConfigError(f"{where}: {key} must be a positive number, got {value!r}")
    return value


def load(name_or_path: str) -> Cluster:
    """A cluster by its shipped name (``terngrad-fig5``) or a YAML file's path; every key checked, named."""
    path = shipped().get(name_or_path) or Path(name_or_path)
    if not path.is_file():
        raise ConfigError(f"--cluster {name_or_path}: no such cluster (shipped: {', '.join(sorted(shipped()))}; "
                          f"or a YAML file's path)")
    try:
        doc = load_yaml(read_user_text(path), str(path))
    except yaml.YAMLError:
        raise ConfigError(f"{path}: not valid YAML") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: a cluster profile is a mapping")
    unknown = sorted(set(doc) - KEYS)
    if unknown:
        raise ConfigError(f"{path}: unknown key {unknown[0]!r} (known: {', '.join(sorted(KEYS))})")
    for key in ("nodes", "gpus_per_node", "link"):
        if key not in doc:
            raise ConfigError(f"{path}: {key} missing")
    nodes = _positive(str(path), "nodes", doc["nodes"], int)
    per_node = _positive(str(path), "gpus_per_node", doc["gpus_per_node"], int)
    between = net_rate_bits(str(doc["link"])) / 8
    within = net_rate_bits(str(doc["within"])) / 8 if doc.get("within") else None
    latency = _positive(str(path), "latency_us", doc.get("latency_us", 50)) * 1e-6
    compute = doc.get("compute") or {}
    if not isinstance(compute, dict) or not all(isinstance(v, dict) and "step_s" in v for v in compute.values()):
        raise ConfigError(f"{path}: compute maps a task to {{step_s: seconds, source: text}}")
    for task, entry in compute.items():
        _positive(str(path), f"compute.{task}.step_s", entry["step_s"])
    scale = _positive(str(path), "codec_scale", doc.get("codec_scale", 1.0))
    return Cluster(str(doc.get("name") or path.stem), Links(nodes, per_node, between, within, latency),
                   str(doc["link"]), compute, float(scale), str(doc.get("description", "")), str(path))
