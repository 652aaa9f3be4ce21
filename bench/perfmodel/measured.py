"""Measured throughput on the emulated network beside the performance model's prediction for it.

For every done run with ``env.net`` (``--net RATE``), TernGrad's weak-scaling model (supplement Eq. 8-9)
is evaluated for the same setting: one worker per node (j = workers, i = 1), the link rate as C_nwd,
no CPU-GPU copy (CPU workers), the compute time of the 1-worker run of the same task, method and batch per
worker (its train_s / steps), and |g| = the bytes each worker actually sent per step (the run's ledger).
For SSD-SGD and the threshold methods this prices their averaged per-step bytes as one all-reduce, as
TernGrad's model prices every method; the error column shows how far that carries.
"""
from __future__ import annotations

from pathlib import Path

from ..records import iter_records
from .command import parse_rate
from .terngrad import LATENCY_1GBE, predict

NO_COPY = 1e18  # bytes/s: CPU workers have no host-device copy to pay


def _key(cfg: dict) -> tuple:
    return cfg.get("task"), cfg.get("method"), cfg.get("global_batch", 0) // max(cfg.get("workers", 1), 1)


def comparison(results: Path) -> list[dict]:
    """One row per emulated-network run: measured and modelled images/s and the model's error (%)."""
    records = [r for r in iter_records(results) if r.get("status") == "done" and isinstance(r.get("config"), dict)]
    single = {_key(r["config"]): r for r in records
              if r["config"].get("workers") == 1 and not r["config"].get("net")}
    rows = []
    for r in sorted(records, key=lambda r: (r["config"]["task"], r["config"]["method"], r["config"].get("net") or "",
                                            r["config"]["workers"])):
        cfg, m = r["config"], r["metrics"]
        if not cfg.get("net") or not m.get("images_per_s") or not m.get("steps"):
            continue
        batch = cfg["global_batch"] // cfg["workers"]
        ref = single.get(_key(cfg))
        row = {"task": cfg["task"], "method": cfg["method"], "workers": cfg["workers"], "net": cfg["net"],
               "batch_per_worker": batch, "measured_images_per_s": m["images_per_s"],
               "wire_bytes_per_step": (m["wire_bytes_measured"] / m["steps"]
                                       if m.get("wire_bytes_measured") is not None else None),
               "modelled_images_per_s": None, "model_error_pct": None, "run_id": r["run_id"]}
        if ref is not None and ref["metrics"].get("train_s") and ref["metrics"].get("steps"):
            step_s = ref["metrics"]["train_s"] / ref["metrics"]["steps"]
            grad = m["bytes_sent"] / (cfg["workers"] * m["steps"])
            p = predict(cfg["task"], cfg["method"], cfg["workers"], parse_rate(cfg["net"]), step_time_s=step_s,
                        batch=batch, gpus_per_node=1, latency_s=LATENCY_1GBE.value, cpu_gpu_bytes_per_s=NO_COPY,
                        gpu_gpu_bytes_per_s=NO_COPY, grad_bytes=grad)
            # images/s over all workers: Eq. 9 gives N * K / T_weak
            row["modelled_images_per_s"] = p.images_per_s
            row["model_error_pct"] = 100.0 * (p.images_per_s - m["images_per_s"]) / m["images_per_s"]
        rows.append(row)
    return rows
