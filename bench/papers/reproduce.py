"""Which stored runs reproduce a reference row, the reproduced value in the paper's unit, and how the
reproduction's setting differs from the paper's (the markers).

A record matches a row when it is done and agrees on everything the row pins down: task (or the analogue the
campaign trains instead), method, workers, threshold, delay steps, warm-up, optimizer and the variant (no
clipping, global scaler, local rule). Batch size and learning rate do not filter; a difference is marked.
Metrics that compare a method with the baseline (gains, speed-ups) pair each run with the baseline run of
the same setting and seed.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Callable

from .reference import Analogue, Reference

OPTIMIZERS = {"momentum": "momentum", "vanilla-sgd": "sgd", "sgd": "sgd", "vanilla": "sgd", "adam": "adam"}
# variant words that pin a method parameter; a row without the word asks for the other value
FLAGS: dict[str, dict[str, Callable[[dict], bool]]] = {
    "terngrad": {"noclip": lambda p: p.get("clip") == 0,
                 "global-scaler": lambda p: p.get("layerwise") is False},
}
LOCAL_RULES = {"glu": "glu", "local-sgd": "sgd", "sgd": "sgd", "no-local": "none", "dcasgd": "dcasgd"}
# the parts of a configuration that must agree between a run and the baseline run it is compared with
PAIR_KEYS = ("task", "dataset", "workers", "backend", "tier", "steps", "seed", "global_batch", "recipe")


@dataclass
class Cell:
    """The reproduction of one reference row."""

    ref: Reference
    values: list[float] = field(default_factory=list)  # one per matched run (or pair), in the row's unit
    markers: list[str] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)
    why_missing: str | None = None

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.values) if self.values else None

    @property
    def std(self) -> float | None:
        return statistics.stdev(self.values) if len(self.values) > 1 else None

    @property
    def delta(self) -> float | None:
        return None if self.mean is None else self.mean - self.ref.value


def _params(record: dict) -> dict:
    return record["config"].get("method_params", {})


def _close(a, b) -> bool:
    return a is not None and b is not None and math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)


def target(ref: Reference, analogues: list[Analogue]) -> tuple[dict, Analogue | None]:
    """What to look for: the row's own setting, or the analogue trained in its place."""
    want = {"task": ref.task, "workers": ref.workers, "global_batch": ref.global_batch}
    for a in analogues:
        if a.paper == ref.paper and a.task == ref.task:
            return {**want, **a.use}, a
    return want, None


def matches(record: dict, ref: Reference, want: dict, method: str | None = None) -> bool:
    cfg = record["config"]
    params = _params(record)
    method = method or ref.method
    if record.get("status") != "done" or (record.get("metrics") or {}).get("top1") is None:
        return False
    if want["task"] and cfg.get("task") != want["task"]:
        return False
    if method and cfg.get("method") != method:
        return False
    if want["workers"] and cfg.get("workers") != want["workers"]:
        return False
    if method == ref.method:  # the row's own method parameters (a paired baseline has none of them)
        if ref.threshold is not None and not _close(params.get("threshold"), ref.threshold):
            return False
        if ref.delay_steps is not None and params.get("k") != ref.delay_steps:
            return False
        # SSD-SGD's Algorithm 1 needs k to divide 1 + warm-up, so the paper's 500 runs as 499 for some k
        if ref.warmup_steps is not None and (params.get("warmup") is None
                                             or abs(params["warmup"] - ref.warmup_steps) > 1):
            return False
        for word, test in FLAGS.get(method or "", {}).items():
            if test(params) != (word in ref.variants):
                return False
        if method == "ssdsgd":
            rule = next((LOCAL_RULES[v] for v in ref.variants if v in LOCAL_RULES), "glu")
            if params.get("local_rule") != rule:
                return False
    optimizer = ref.optimizer or next((v for v in ref.variants if v in ("momentum", "vanilla")), None)
    if optimizer and (cfg.get("optimizer") or {}).get("name") != OPTIMIZERS.get(optimizer, optimizer):
        return False
    return True


def markers(records: list[dict], ref: Reference, analogue: Analogue | None) -> list[str]:
    """How the runs' setting differs from the paper's, one short phrase each."""
    out: list[str] = []

    def add(text: str) -> None:
        if text not in out:
            out.append(text)

    for r in records:
        cfg, data = r["config"], r.get("data") or {}
        if ref.task and cfg.get("task") != ref.task:
            add(f"model: {cfg.get('task')} for {ref.task}")
        if data.get("synthetic"):
            add("synthetic data")
        elif data.get("substitute_for"):
            add(f"data: {data.get('dataset')} for {data['substitute_for']}")
        elif ref.dataset and cfg.get("dataset") != ref.dataset:
            add(f"data: {cfg.get('dataset')} for {ref.dataset}")
        steps = (cfg.get("overrides") or {}).get("steps")
        if cfg.get("tier") != "paper" or steps:
            paper_steps = steps["paper"] if steps else None
            add(f"shortened: {cfg.get('steps')} of {paper_steps} steps" if paper_steps else
                f"shortened ({cfg.get('tier')} tier)")
        if ref.workers and cfg.get("workers", 0) < ref.workers:
            add(f"fewer workers: {cfg.get('workers')} of {ref.workers}")
        if cfg.get("backend") == "sim":
            add("simulated workers")
        warmup = (cfg.get("method_params") or {}).get("warmup")
        if ref.warmup_steps is not None and warmup is not None and warmup != ref.warmup_steps:
            add(f"warm-up {warmup} for {ref.warmup_steps}")
        if ref.global_batch and cfg.get("global_batch") != ref.global_batch:
            add(f"batch {cfg.get('global_batch')} for {ref.global_batch}")
        if ref.batch_per_worker and cfg.get("batch_per_worker") != ref.batch_per_worker:
            add(f"{cfg.get('batch_per_worker')}/worker for {ref.batch_per_worker}")
    if analogue and analogue.reason:
        add(analogue.reason)
    return out


def _percent(value: float | None) -> float | None:
    return None if value is None else 100.0 * value


def _times(*factors) -> float | None:
    return None if any(f is None for f in factors) else math.prod(factors)


def _gigabytes(record: dict, paper_accounting: bool) -> float | None:
    m = record["metrics"]
    count = m.get("paper_bytes") if paper_accounting else m.get("bytes_sent")
    return None if count is None else count / 1e9


# metric -> value of one run, in the reference's unit
SINGLE: dict[str, Callable[[dict, Reference], float | None]] = {
    "top1": lambda r, ref: _percent(r["metrics"].get("top1")),
    "top5": lambda r, ref: _percent(r["metrics"].get("top5")),
    "gb_transferred": lambda r, ref: _gigabytes(r, "ours" not in ref.variants),
    "pct_per_gb": lambda r, ref: (None if not _gigabytes(r, True) else
                                 _percent(r["metrics"]["top1"]) / _gigabytes(r, True)),
    # the threshold paper counts gradients over all nodes together
    "gradients_per_iteration": lambda r, ref: _times(r["metrics"].get("parameters"), r["config"].get("workers")),
    "gradients_total": lambda r, ref: _times(r["metrics"].get("parameters"), r["config"].get("workers"),
                                             r["metrics"].get("steps")),
    "bytes_per_node_per_iteration": lambda r, ref: (
        r["metrics"]["paper_bytes"] / (r["config"]["workers"] * r["metrics"]["steps"])
        if r["metrics"].get("paper_bytes") is not None and r["metrics"].get("steps") else None),
    "throughput_images_per_s": lambda r, ref: r["metrics"].get("images_per_s"),
}
# metric -> value of a run compared with its baseline run (same setting and seed)
PAIRED: dict[str, Callable[[dict, dict], float | None]] = {
    "top1_gain": lambda r, b: _percent(r["metrics"]["top1"] - b["metrics"]["top1"]),
    "top1_loss": lambda r, b: _percent(b["metrics"]["top1"] - r["metrics"]["top1"]),
    "speedup": lambda r, b: _ratio(r, b),
    "speedup_pct": lambda r, b: None if _ratio(r, b) is None else 100.0 * (_ratio(r, b) - 1.0),
}
# metric -> (paired metric, extreme, grouping): the extreme over the groups of the mean paired value in each
# group (TernGrad Figure 3's largest gain over worker counts; SSD-SGD's speed-up range over delay steps)
EXTREMES = {"accuracy_gain_max": ("top1_gain", max, "workers"), "accuracy_loss_max": ("top1_loss", max, "workers"),
            "speedup_pct_max": ("speedup_pct", max, "k"), "speedup_pct_min": ("speedup_pct", min, "k")}


def _ratio(r: dict, b: dict) -> float | None:
    mine, base = r["metrics"].get("images_per_s"), b["metrics"].get("images_per_s")
    return mine / base if mine and base else None


def _group_value(record: dict, key: str):
    return record["config"].get(key) if key in record["config"] else _params(record).get(key)


def _pair_key(record: dict) -> tuple:
    cfg = record["config"]
    return tuple(str(cfg.get(k)) for k in PAIR_KEYS) + (str((cfg.get("optimizer") or {}).get("name")),)


def _paired(runs: list[dict], baselines: list[dict], how) -> list[tuple[float, dict]]:
    by_key = {_pair_key(b): b for b in baselines}
    out = []
    for r in runs:
        b = by_key.get(_pair_key(r))
        if b is not None and (v := how(r, b)) is not None:
            out.append((v, r))
    return out


# speeds of a stand-in model say nothing about the paper's model
SPEED_METRICS = {"throughput_images_per_s", "speedup", "speedup_pct", "speedup_pct_min", "speedup_pct_max"}


def reproduce(ref: Reference, records: list[dict], analogues: list[Analogue]) -> Cell:
    want, analogue = target(ref, analogues)
    cell = Cell(ref)
    if "performance-model" in ref.variants:
        cell.why_missing = "modelled in the paper: see commbench model and the report's emulated-network runs"
        return cell
    if analogue is not None and ref.metric in SPEED_METRICS:
        cell.why_missing = f"a speed: not comparable on the stand-in {analogue.use.get('task')}"
        return cell
    runs = [r for r in records if matches(r, ref, want)]
    if not runs and analogue is None and ref.task:
        cell.why_missing = "no matching run"
    baselines = [r for r in records if matches(r, ref, want, method="baseline")]
    metric = ref.metric
    if metric in SINGLE:
        pairs = [(v, r) for r in runs if (v := SINGLE[metric](r, ref)) is not None]
    elif metric in PAIRED:
        pairs = _paired(runs, baselines, PAIRED[metric])
        if runs and not pairs:
            cell.why_missing = "no baseline run of the same setting to compare with"
    elif metric in EXTREMES:
        how, pick, key = EXTREMES[metric]
        groups: dict = {}
        for v, r in _paired(runs, baselines, PAIRED[how]):
            groups.setdefault(_group_value(r, key), []).append((v, r))
        pairs = []
        if groups:
            best = pick(groups, key=lambda g: statistics.fmean(v for v, _ in groups[g]))
            pairs = groups[best]
            cell.markers.append(f"at {key} {best} (of {', '.join(map(str, sorted(groups)))})")
    elif metric == "best_delay_steps":  # the k with the highest mean accuracy
        groups = {}
        for r in runs:
            groups.setdefault(_params(r).get("k"), []).append(r)
        pairs = []
        if len(groups) > 1:
            best = max(groups, key=lambda k: statistics.fmean(r["metrics"]["top1"] for r in groups[k]))
            pairs = [(float(best), groups[best][0])]
            cell.markers.append(f"of k in {', '.join(map(str, sorted(groups)))}")
    else:
        cell.why_missing = f"no analogue for metric {metric!r} in the records"
        return cell
    cell.values = [v for v, _ in pairs]
    cell.run_ids = [r["run_id"] for _, r in pairs]
    cell.markers = markers([r for _, r in pairs], ref, analogue) + cell.markers
    if not cell.values and cell.why_missing is None:
        cell.why_missing = "no matching run"
    return cell
