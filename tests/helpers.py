"""What several test modules share: writers of real file formats and of records, and process probes."""
from __future__ import annotations

import gzip
import json
import os
import struct
from pathlib import Path

import numpy as np

from commbench.config import resolve
from commbench.methods import METHODS
from commbench.store.records import SCHEMA_VERSION


def write_idx(path, array: np.ndarray, compress: bool) -> None:
    """IDX: magic (0, 0, dtype 0x08 = ubyte, ndim), big-endian int32 dims, then the bytes."""
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    data = header + array.astype(np.uint8).tobytes()
    if compress:
        path = path.with_name(path.name + ".gz")
        data = gzip.compress(data)
    path.write_bytes(data)


def fake_mnist(folder, n_train=30, n_test=10, compress=True):
    rng = np.random.default_rng(0)
    folder.mkdir(parents=True, exist_ok=True)
    images = {"train": rng.integers(0, 256, (n_train, 28, 28)), "t10k": rng.integers(0, 256, (n_test, 28, 28))}
    labels = {"train": rng.integers(0, 10, n_train), "t10k": rng.integers(0, 10, n_test)}
    for split in ("train", "t10k"):
        write_idx(folder / f"{split}-images-idx3-ubyte", images[split], compress)
        write_idx(folder / f"{split}-labels-idx1-ubyte", labels[split], compress)
    return images, labels


def write_record(root: Path, run_id: str, *, task="lenet-mnist", method="baseline", workers=2, seed=1, top1=0.9,
                 status="done", backend="dist", tier="paper", dataset="mnist", substitute=None, params=None,
                 optimizer="momentum", steps=10000, overrides=None, images_per_s=100.0, paper_bytes=None,
                 bytes_sent=1000, config=None) -> dict:
    """``config``: further configuration keys (``net``, ``global_batch``) over the defaults. The training
    conditions (schedule, weight decay, averaging) are the task's own published recipe, as a run of it has."""
    recipe = resolve({"task": task, "method": method if method in METHODS else "baseline"}).to_dict()
    record = {
        "schema_version": SCHEMA_VERSION, "run_id": run_id, "status": status, "error": None,
        "config": {"task": task, "method": method, "dataset": dataset, "workers": workers, "backend": backend,
                   "seed": seed, "tier": tier, "recipe": "momentum", "steps": steps, "global_batch": 64,
                   "batch_per_worker": 64 // workers, "optimizer": {**recipe["optimizer"], "name": optimizer},
                   "lr_schedule": recipe["lr_schedule"], "weight_decay": recipe["weight_decay"], "ema": recipe["ema"],
                   "method_params": params or {}, "overrides": overrides or {}, "exchange": "overlapped",
                   "method_version": METHODS[method].version if method in METHODS else 1},
        "data": {"dataset": dataset, "synthetic": dataset == "synthetic", "substitute_for": substitute},
        "metrics": {"top1": top1, "top5": 0.99, "images_per_s": images_per_s, "bytes_sent": bytes_sent,
                    "bytes_received": bytes_sent, "bytes_fp32_equiv": 4 * bytes_sent,
                    "paper_bytes": paper_bytes, "parameters": 1234, "steps": steps},
        "history": [], "env": {},
    }
    record["config"].update(config or {})
    (root / "runs").mkdir(parents=True, exist_ok=True)
    (root / "runs" / f"{run_id}.json").write_text(json.dumps(record))
    return record


def record_of(out: Path) -> dict:
    """The one record of a run's output folder."""
    (path,) = (out / "runs").glob("*.json")
    return json.loads(path.read_text())


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
