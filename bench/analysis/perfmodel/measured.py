"""Measured throughput on the emulated network beside the performance model's prediction for it.

For every done run with ``env.net`` (``--net RATE``), TernGrad's weak-scaling model (supplement Eq. 8-9)
is evaluated for the same setting: one worker per node (j = workers, i = 1), the link rate as C_nwd,
no CPU-GPU copy (CPU workers), the compute time of the 1-worker run of the same task, method and batch per
worker (its train_s / steps), and |g| = the bytes each worker actually sent per step (the run's ledger).
For SSD-SGD and the threshold methods this prices their averaged per-step bytes as one all-reduce, as
TernGrad's model prices every method; the error column shows how far that carries.

A run with parameter servers (SSD-SGD, or the baseline with ``method.topology=ps``) is not an all-reduce:
every push and pull crosses a server's link, which carries all the workers' traffic for its keys. Its
network term is therefore the time of the busiest links, from the ledger: the servers' bytes in and out over
S links at the rate, or each worker's own bytes, whichever takes longer; with no overlap of computation and
communication assumed (an upper bound for SSD-SGD, whose pushes may overlap the next iteration).

A run across nodes whose links are limited (``node_link``: the two-node cluster, several workers per node) is
the case TernGrad's model was written for: i workers per node talk over fast links, j nodes over slow ones.
:func:`two_level_comparison` prices it with i and j from the record (its nodes and workers), the node link as
C_nwd and the host's loopback as the fast level (its cost is in the loopback profile's step time), beside the
same model with every link slow (i = 1, j = N): which of the two the measurement follows says whether the
two-level form is needed. A third prediction is the harness's own: the bytes gloo's ring puts on each node's
link (one ring edge leaves each node), from the ledger: an all-gather's edge carries all that a worker receives,
(N-1) |g|; an all-reduce's (reduce-scatter, then all-gather) 2 (N-1) / N |g|; the model's log2 j rounds of |g|
count neither.

The model's compute term assumes each worker computes alone, as on the paper's GPUs. On one host the workers
share its cores, and each also decodes its peers' payloads, so a second prediction takes the compute time
from a run of the same workers on the host's loopback (``net`` unset: the same processes, the same sharing,
no rate limit) and adds the same network term. Where that one is close and the first is not, the model's
network term is right and the host's compute is what it missed. The loopback run's own (fast) exchange is
counted in its step time, so the second prediction slightly undercounts throughput.
"""
from __future__ import annotations

from pathlib import Path

from commbench.analysis.runs import Run, read_runs
from commbench.config import ConfigError, RunConfig, net_rate_bits
from commbench.store.records import UnreadableRecord, load_record
from commbench.analysis.perfmodel.terngrad import LATENCY_1GBE, predict

NO_COPY = 1e18  # bytes/s: CPU workers have no host-device copy to pay


def _key(c: RunConfig) -> tuple:
    # a record without a total batch keys as batch 0, as it always has
    return c.task, c.method, (c.global_batch or 0) // max(c.workers or 1, 1)


def _step_s(run: Run | None) -> float | None:
    m = run.metrics if run is not None else {}
    return m["train_s"] / m["steps"] if m.get("train_s") and m.get("steps") else None


def step_time_of(path: str) -> dict:
    """One worker's step time and batch from a run record (``--record``): metrics.train_s / metrics.steps, with
    the run's task, workers and backend (a multi-worker run's step time includes its exchange)."""
    try:
        run = Run.of(load_record(Path(path)))
    except UnreadableRecord as exc:
        raise ConfigError(f"--record: {exc}") from None
    metrics, c = run.metrics, run.config
    step_s = _step_s(run)
    if step_s is None or not step_s > 0:
        raise ConfigError(f"--record: {path} has no timed steps (train_s={metrics.get('train_s')}, "
                          f"steps={metrics.get('steps')})")
    return {"step_time_s": step_s, "batch": c.batch_per_worker, "task": c.task, "workers": c.workers,
            "backend": c.backend, "path": path}


def servers_of(run: Run) -> int:
    """How many parameter servers the run had (0: an all-reduce run)."""
    if run.metrics.get("server_bytes_received") is None:
        return 0
    return int(run.env.get("parameter_servers") or run.params.get("servers") or 1)


def ps_link_seconds(run: Run) -> float:
    """Seconds per step on the busiest links of a parameter-server run: the servers' bytes in and out over
    their S links, or one worker's own bytes in and out, at the run's link rate (bytes/s, each direction)."""
    c, m = run.config, run.metrics
    rate = net_rate_bits(c.net) / 8
    servers = (m["server_bytes_received"] + m["server_bytes_sent"]) / servers_of(run)
    worker = (m["bytes_sent"] + m["bytes_received"]) / c.workers
    return max(servers, worker) / rate / m["steps"]


def _predict(run: Run, batch: int, step_s: float) -> tuple[float, float]:
    """(images/s, error % against the measurement) with compute time ``step_s``: Eq. 8-9 for an all-reduce
    run, the parameter servers' links for a PS run."""
    c, m = run.config, run.metrics
    if servers_of(run):
        images_per_s = c.workers * batch / (step_s + ps_link_seconds(run))
    else:
        grad = m["bytes_sent"] / (c.workers * m["steps"])
        p = predict(c.task, c.method, c.workers, net_rate_bits(c.net) / 8, step_time_s=step_s,
                    batch=batch, gpus_per_node=1, latency_s=LATENCY_1GBE.value, cpu_gpu_bytes_per_s=NO_COPY,
                    gpu_gpu_bytes_per_s=NO_COPY, grad_bytes=grad)
        images_per_s = p.images_per_s  # over all workers: Eq. 9 gives N * K / T_weak
    return images_per_s, 100.0 * (images_per_s - m["images_per_s"]) / m["images_per_s"]


def done_runs(results: Path) -> list[Run]:
    """The finished runs under ``results``."""
    return [r for r in read_runs(results) if r.done]


def comparison(results: Path) -> list[dict]:
    """One row per emulated-network run: measured images/s and the model's prediction with the 1-worker
    profile (as the paper) and with the loopback profile of the same worker count, each with its error (%)."""
    runs = done_runs(results)
    unlimited = [r for r in runs if not r.config.net and r.config.backend == "dist"]
    single = {_key(r.config): r for r in unlimited if r.config.workers == 1}
    loopback = {(_key(r.config), r.config.workers): r for r in unlimited}
    rows = []
    for r in sorted(runs, key=lambda r: (r.config.task, r.config.method, r.config.net or "", r.config.workers)):
        c, m = r.config, r.metrics
        if not c.net or not m.get("images_per_s") or not m.get("steps"):
            continue
        batch = c.global_batch // c.workers
        row = {"task": c.task, "method": c.method, "workers": c.workers, "net": c.net,
               "network_term": "PS links (ledger)" if servers_of(r) else "all-reduce (Eq. 8-9)",
               "batch_per_worker": batch, "measured_images_per_s": m["images_per_s"],
               "wire_bytes_per_step": (m["wire_bytes_measured"] / m["steps"]
                                       if m.get("wire_bytes_measured") is not None else None),
               "modelled_images_per_s": None, "model_error_pct": None,
               "loopback_modelled_images_per_s": None, "loopback_model_error_pct": None, "run_id": r.run_id}
        if (step_s := _step_s(single.get(_key(c)))) is not None:
            row["modelled_images_per_s"], row["model_error_pct"] = _predict(r, batch, step_s)
        if (step_s := _step_s(loopback.get((_key(c), c.workers)))) is not None:
            row["loopback_modelled_images_per_s"], row["loopback_model_error_pct"] = _predict(r, batch, step_s)
        rows.append(row)
    return rows


def ring_link_bytes(run: Run) -> float:
    """Bytes per step on each node's link when the workers exchange in one ring (gloo's all-reduce and
    all-gather), from the ledger: an all-gather (a worker receives more than it sends) puts on every ring edge
    all that a worker receives; an all-reduce 2 (N-1) / N of what a worker sends."""
    m = run.metrics
    n, steps = run.config.workers, m["steps"]
    sent, received = m["bytes_sent"] / (n * steps), m["bytes_received"] / (n * steps)
    return received if received > sent else 2 * (n - 1) / n * sent


def _nodes(run: Run) -> list:
    return sorted(set(run.env.get("nodes") or []))


def _two_level_row(r: Run, per_node: int) -> dict:
    """The measured part of a two-level row; the predictions are filled in where a loopback profile exists."""
    c, m = r.config, r.metrics
    return {"task": c.task, "method": c.method, "workers": c.workers, "nodes": len(_nodes(r)),
            "workers_per_node": per_node, "node_link": c.node_link, "batch_per_worker": c.global_batch // c.workers,
            "grad_bytes_per_step": m["bytes_sent"] / (c.workers * m["steps"]),
            "measured_images_per_s": m["images_per_s"], "two_level_images_per_s": None,
            "two_level_error_pct": None, "one_level_images_per_s": None, "one_level_error_pct": None,
            "ring_link_bytes_per_step": ring_link_bytes(r), "ring_images_per_s": None, "ring_error_pct": None,
            "profile_run_id": None, "run_id": r.run_id}


def _two_level_predictions(row: dict, c: RunConfig, measured: float, step_s: float) -> None:
    """The two-level, one-level and ring predictions with compute time ``step_s``, and their errors (%)."""
    batch, rate = row["batch_per_worker"], net_rate_bits(c.node_link) / 8
    for level, i in (("two_level", row["workers_per_node"]), ("one_level", 1)):
        p = predict(c.task, c.method, c.workers, rate, step_time_s=step_s, batch=batch, gpus_per_node=i,
                    latency_s=LATENCY_1GBE.value, cpu_gpu_bytes_per_s=NO_COPY, gpu_gpu_bytes_per_s=NO_COPY,
                    grad_bytes=row["grad_bytes_per_step"])
        row[f"{level}_images_per_s"] = p.images_per_s
    row["ring_images_per_s"] = c.workers * batch / (step_s + row["ring_link_bytes_per_step"] / rate)
    for level in ("two_level", "one_level", "ring"):
        row[f"{level}_error_pct"] = 100.0 * (row[f"{level}_images_per_s"] - measured) / measured


def two_level_comparison(results: Path) -> list[dict]:
    """One row per done all-reduce run across nodes with limited links (``node_link``): measured images/s beside
    the weak-scaling model with i workers per node and j nodes (two levels), and with every link slow (one
    level), each with the loopback profile (the same workers on one host, no limit) and its error (%)."""
    runs = done_runs(results)
    loopback = {(_key(r.config), r.config.workers): r for r in runs
                if not r.config.net and not r.config.node_link and r.config.backend == "dist"
                and len(r.env.get("nodes") or [None]) == 1}
    rows = []
    for r in sorted(runs, key=lambda r: (r.config.task, r.config.method, r.config.node_link or "",
                                         r.config.workers, r.run_id)):
        c, nodes = r.config, _nodes(r)
        if not c.node_link or len(nodes) < 2 or servers_of(r) or not r.metrics.get("images_per_s"):
            continue
        if c.workers % len(nodes):
            continue  # an uneven spread: the model has i workers on every node
        row = _two_level_row(r, c.workers // len(nodes))
        profile = loopback.get((_key(c), c.workers))
        if (step_s := _step_s(profile)) is not None:
            row["profile_run_id"] = profile.run_id
            _two_level_predictions(row, c, r.metrics["images_per_s"], step_s)
        rows.append(row)
    return rows
