"""Which stored runs reproduce a reference row, the reproduced value in the paper's unit, and how the
reproduction's setting differs from the paper's (the markers).

A record matches a row when it is done and agrees on everything the row pins down: task (or the analogue the
campaign trains instead), method, workers, threshold, delay steps, warm-up, optimizer and the variant (no
clipping, global scaler, local rule). Batch size and learning rate do not filter; a difference is marked.

Matching runs are grouped by *setting* (the whole resolved configuration but the seed): a row's value is the
mean and spread over the seeds of one setting, never a pool of different settings. When several settings
match, the one closest to the paper's is used (:func:`closeness`: the paper's own model, real data, the
paper's batch, the most steps, real processes, the most seeds) and the others are counted in a marker.

Metrics that compare a method with another run (gains, losses, speed-ups) pair each run with the run of the
same setting and seed: the baseline, or the same method with the variant the row names (clipping on, GLU).
Rows that describe a model rather than a training run (sizes, gradients per iteration) come from any record
of the paper's own model, scaled to the row's nodes and iterations; byte totals of a method come from the
run's fraction of the fp32 bytes, scaled to the paper's own baseline (a stand-in model's gigabytes say
nothing about NiN's).
"""
from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable

from commbench.config import NOT_COMPARED
from commbench.analysis.papers.conditions import condition_markers
from commbench.analysis.papers.reference import Analogue, Reference
from commbench.store.records import Status

OPTIMIZERS = {"momentum": "momentum", "vanilla-sgd": "sgd", "sgd": "sgd", "vanilla": "sgd", "adam": "adam"}
# variant words that pin a method parameter; a row without the word asks for the other value
FLAGS: dict[str, dict[str, Callable[[dict], bool]]] = {
    "terngrad": {"noclip": lambda p: p.get("clip") == 0,
                 "global-scaler": lambda p: p.get("layerwise") is False},
}
LOCAL_RULES = {"glu": "glu", "local-sgd": "sgd", "sgd": "sgd", "no-local": "none", "dcasgd": "dcasgd"}
# the parts of a configuration that must agree between a run and the baseline run it is compared with
PAIR_KEYS = ("task", "dataset", "workers", "backend", "tier", "steps", "seed", "global_batch", "recipe", "net",
             "node_link")
# configuration fields that do not tell one setting from another (declared with each setting in config)
NOT_SETTING = NOT_COMPARED
# a best-k row names one k; a best-warm-up row one length, within 1 (Algorithm 1 rounds the warm-up to fit k)
CHOICE_ROUNDING = {"best_delay_steps": 0, "warmup_steps_chosen": 1}
NO_MATCH = "no matching run"  # a row with no record of its setting at all
BYTE_UNITS = {"B": 1.0, "KB": 1e3, "MB": 1e6, "GB": 1e9, "MiB": 2.0 ** 20}


@dataclass
class Cell:
    """The reproduction of one reference row."""

    ref: Reference
    values: list[float] = field(default_factory=list)  # one per matched run (or pair), in the row's unit
    markers: list[str] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)
    why_missing: str | None = None
    gap: float | None = None        # top-1/top-5 rows of a method: ours minus our baseline (same setting, seed)
    gap_std: float | None = None    # the spread of that gap over the seeds
    paper_gap: float | None = None  # the same gap in the paper (its baseline row of the same table)
    # best-k / best-warm-up rows: how many points the run(s) at the paper's choice trail the best here, and the
    # spread over seeds, so that a choice within noise of the best is not called wrong
    choice_shortfall: float | None = None
    choice_std: float | None = None
    records: list[dict] = field(default_factory=list)  # the matched runs (one per value)

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
    return record["config"].get("method_params") or {}


def _close(a, b) -> bool:
    return a is not None and b is not None and math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)


def setting_of(record: dict, drop_params: tuple[str, ...] = ()) -> str:
    """The run's setting: its resolved configuration without the seed (and without ``drop_params``)."""
    cfg = {k: v for k, v in record["config"].items() if k not in NOT_SETTING}
    cfg["method_params"] = {k: v for k, v in _params(record).items() if k not in drop_params}
    return json.dumps(cfg, sort_keys=True, default=str)


def target(ref: Reference, analogues: list[Analogue]) -> tuple[dict, Analogue | None]:
    """What to look for: the row's own setting, or the analogue trained in its place."""
    want = {"task": ref.task, "workers": ref.workers, "global_batch": ref.global_batch}
    for a in analogues:
        if a.paper == ref.paper and a.task == ref.task:
            return {**want, **a.use}, a
    return want, None


def matches(record: dict, ref: Reference, want: dict, method: str | None = None,
            ignore: tuple[str, ...] = ()) -> bool:
    """``ignore``: row settings not to filter on (``delay_steps``, ``warmup_steps``, ``variant``)."""
    cfg = record["config"]
    params = _params(record)
    method = method or ref.method
    if record.get("status") != Status.DONE or (record.get("metrics") or {}).get("top1") is None:
        return False
    if want["task"] and cfg.get("task") != want["task"]:
        return False
    if method and cfg.get("method") != method:
        return False
    if want["workers"] and cfg.get("workers") != want["workers"]:
        return False
    # the paper's own model at another total batch is another experiment (a 200-step speed measurement at 4 x 64
    # is no point of Figure 3's batch 64); a stand-in's batch may differ, and its row says so
    if want["global_batch"] and want["task"] == ref.task and cfg.get("global_batch") != want["global_batch"]:
        return False
    if method == ref.method:  # the row's own method parameters (a paired baseline has none of them)
        if ref.threshold is not None and not _close(params.get("threshold"), ref.threshold):
            return False
        if ref.delay_steps is not None and "delay_steps" not in ignore and params.get("k") != ref.delay_steps:
            return False
        # SSD-SGD's Algorithm 1 needs k to divide 1 + warm-up, so the paper's 500 runs as 499 for some k
        if ref.warmup_steps is not None and "warmup_steps" not in ignore and (
                params.get("warmup") is None or abs(params["warmup"] - ref.warmup_steps) > 1):
            return False
        if "variant" not in ignore:
            for word, test in FLAGS.get(method or "", {}).items():
                if test(params) != (word in ref.variants):
                    return False
            if method == "ssdsgd":
                rule = next((LOCAL_RULES[v] for v in ref.variants if v in LOCAL_RULES), "glu")
                if params.get("local_rule") != rule:
                    return False
    allowed = _optimizers(ref)
    if allowed and (cfg.get("optimizer") or {}).get("name") not in allowed:
        return False
    return True


def _optimizers(ref: Reference) -> set[str]:
    """The optimizers a row covers: its own, or those its variant names (``momentum+vanilla``); empty: any."""
    if ref.optimizer:
        return {OPTIMIZERS.get(ref.optimizer, ref.optimizer)}
    return {OPTIMIZERS[w] for v in ref.variants for w in v.split("+") if w in ("momentum", "vanilla")}


def _link_bits(record: dict) -> float:
    """The run's emulated link rate in bits/s; infinite on the host's loopback (no ``--net``)."""
    from commbench.config import net_rate_bits

    net = record["config"].get("net")
    return net_rate_bits(net) if net else math.inf


def closeness(group: list[dict], ref: Reference, want: dict) -> tuple:
    """How near a setting (its runs, one per seed) comes to the paper's, as a sort key: larger is nearer.
    A speed row takes the most communication-bound setting first (the slowest emulated link): the papers'
    speed-ups are claims about relieving that bottleneck."""
    cfg, data = group[0]["config"], group[0].get("data") or {}
    speed = (-_link_bits(group[0]), cfg.get("workers") or 0) if ref.metric in SPEED_METRICS else ()
    partnered = any(_pair_key(r, False) in want.get("partners", ()) for r in group)
    return speed + (cfg.get("task") == ref.task, not data.get("synthetic"), cfg.get("dataset") == ref.dataset,
            partnered,
            want["global_batch"] is None or cfg.get("global_batch") == want["global_batch"],
            ref.batch_per_worker is None or cfg.get("batch_per_worker") == ref.batch_per_worker,
            cfg.get("steps") or 0, cfg.get("backend") == "dist", len(group))


def nearest(pairs: list[tuple[float, dict]], ref: Reference, want: dict,
            drop_params: tuple[str, ...] = ()) -> tuple[list[tuple[float, dict]], list[list]]:
    """The (value, run) pairs of the setting nearest the paper's; and those of the other matching settings."""
    groups: dict[str, list] = defaultdict(list)
    for value, record in pairs:
        groups[setting_of(record, drop_params)].append((value, record))
    if not groups:
        return [], []
    ranked = sorted(groups.values(), key=lambda g: closeness([r for _, r in g], ref, want), reverse=True)
    return ranked[0], ranked[1:]


def _others(ref: Reference, others: list[list]) -> str | None:
    """The settings a row did not take: counted; for a speed, each named by its link with its value."""
    if not others:
        return None
    if ref.metric in SPEED_METRICS:
        several = len({g[0][1]["config"].get("workers") for g in others}) > 1

        def link(g):
            cfg = g[0][1]["config"]
            return (cfg.get("net") or "loopback") + (f" {cfg.get('workers')} workers" if several else "")
        return "other settings: " + ", ".join(f"{link(g)} {statistics.fmean(v for v, _ in g):+.1f}"
                                              if ref.unit == "%" else f"{link(g)} {statistics.fmean(v for v, _ in g):.3g}"
                                              for g in others)
    return f"{len(others)} other matching setting{'s' * (len(others) > 1)} not pooled"


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
        steps = cfg.get("steps")
        tier_steps = ((cfg.get("overrides") or {}).get("steps") or {}).get("paper")
        if ref.metric in SPEED_METRICS:  # a speed is an average over some steps on one link, not a training run
            add(f"measured over {steps} steps")
            add(f"link: {cfg['net']} to every process (emulated)" if cfg.get("net") else
                f"link: {cfg['node_link']} between nodes" if cfg.get("node_link") else "link: one host's loopback")
            add(f"{cfg.get('workers')} workers")
        elif ref.iterations and steps is not None and steps < ref.iterations:
            add(f"shortened: {steps:,} of {ref.iterations:,} iterations")
        elif not ref.iterations and tier_steps and steps is not None and steps < tier_steps:
            add(f"shortened: {steps:,} of the {tier_steps:,} steps of {cfg.get('task')}'s paper tier")
        elif not ref.iterations and cfg.get("tier") not in (None, "paper"):
            add(f"shortened ({cfg.get('tier')} tier)")
        if ref.workers and cfg.get("workers", 0) < ref.workers:
            add(f"fewer workers: {cfg.get('workers')} of {ref.workers}")
        if cfg.get("backend") == "sim":
            add("simulated workers")
        warmup = _params(r).get("warmup")
        if ref.warmup_steps is not None and warmup is not None and warmup != ref.warmup_steps:
            add(f"warm-up {warmup} for {ref.warmup_steps}")
        if ref.global_batch and cfg.get("global_batch") != ref.global_batch:
            add(f"batch {cfg.get('global_batch')} for {ref.global_batch}")
        if ref.batch_per_worker and cfg.get("batch_per_worker") != ref.batch_per_worker:
            add(f"{cfg.get('batch_per_worker')}/worker for {ref.batch_per_worker}")
        if ref.metric not in SPEED_METRICS:  # a speed does not depend on the recipe's schedule or averaging
            for phrase in condition_markers(cfg, ref):
                add(phrase)
    if analogue and analogue.reason:
        add(analogue.reason)
    return out


def _percent(value: float | None) -> float | None:
    return None if value is None else 100.0 * value


def fp32_fraction(record: dict, paper_accounting: bool) -> float | None:
    """Bytes sent over what fp32 gradients would have sent (the paper's accounting, or ours on the wire).
    A baseline has no paper_bytes: it sends fp32, its fraction is its own bytes over the fp32 count."""
    m = record["metrics"]
    count = m.get("paper_bytes") if paper_accounting and m.get("paper_bytes") is not None else m.get("bytes_sent")
    fp32 = m.get("bytes_fp32_equiv")
    return count / fp32 if count is not None and fp32 else None


def _paper_accounting(ref: Reference) -> bool:
    return "ours" not in ref.variants


# metric -> value of one run, in the reference's unit
SINGLE: dict[str, Callable[[dict, Reference], float | None]] = {
    "top1": lambda r, ref: _percent(r["metrics"].get("top1")),
    "top5": lambda r, ref: _percent(r["metrics"].get("top5")),
    "data_fraction": lambda r, ref: _percent(fp32_fraction(r, _paper_accounting(ref))),
    "throughput_images_per_s": lambda r, ref: r["metrics"].get("images_per_s"),
    "gradient_zero_fraction": lambda r, ref: (_percent(r["metrics"]["zero_trits_largest"] / r["metrics"]["trits_largest"])
                                              if r["metrics"].get("trits_largest") else None),
}
# metrics that describe a model, not a run: from the parameter count of any record of the paper's own model
MODEL = ("model_size", "gradients_per_iteration", "gradients_total")
# byte metrics of a method's run, scaled to the paper's run through the paper's baseline value of the metric
SCALED = ("gb_transferred", "bytes_per_node_per_iteration", "pct_per_gb")
# metric -> value of a run compared with its baseline run (same setting and seed)
PAIRED: dict[str, Callable[[dict, dict], float | None]] = {
    "top1_gain": lambda r, b: _percent(r["metrics"]["top1"] - b["metrics"]["top1"]),
    "top1_loss": lambda r, b: _percent(b["metrics"]["top1"] - r["metrics"]["top1"]),
    "top5_loss": lambda r, b: _percent(b["metrics"]["top5"] - r["metrics"]["top5"]),
    "speedup": lambda r, b: _ratio(r, b),
    "speedup_pct": lambda r, b: None if _ratio(r, b) is None else 100.0 * (_ratio(r, b) - 1.0),
}
# metric -> (method parameter that differs, its value in the partner run): a loss against a sibling run of the
# same method and setting (TernGrad without vs with clipping; SSD-SGD's local SGD vs GLU or DC-ASGD-a)
SIBLING: dict[str, tuple[str, Callable[[object], bool]]] = {
    "top1_loss_vs_clipped": ("clip", lambda v: v not in (None, 0)),
    "top1_loss_vs_glu": ("local_rule", lambda v: v == "glu"),
    "top1_loss_vs_dcasgd": ("local_rule", lambda v: v == "dcasgd"),
}
# per-rule local learning rates differ too (GLU 4 x lr, SGD lr / 4, DC-ASGD-a lr): not part of the pairing
SIBLING_FREE = {"clip": ("clip",), "local_rule": ("local_rule", "local_lr_scale")}
# metric -> (paired metric, aggregate over the groups, grouping): TernGrad Figure 3's largest gain over worker
# counts, SSD-SGD's speed-up range over delay steps, GoogLeNet's mean top-5 loss
AGGREGATES = {"accuracy_gain_max": ("top1_gain", max, "workers"), "accuracy_loss_max": ("top1_loss", max, "workers"),
              "speedup_pct_max": ("speedup_pct", max, "k"), "speedup_pct_min": ("speedup_pct", min, "k"),
              "top5_loss_mean_upper_bound": ("top5_loss", statistics.fmean, "workers")}
# metric -> the total batch of the partner run: a loss against the same setting at a smaller batch (TernGrad
# Sec. 4.2: floating gradients at batch 1024 vs 256), everything else equal but what goes with the batch
BATCH_LOSS = {"top1_loss_vs_batch_256": 256}
BATCH_FREE = ("workers", "backend", "global_batch", "batch_per_worker", "steps", "lr_schedule")
# rows whose analogue at CPU scale does not exist, and why
NO_ANALOGUE: dict[str, str] = {}


def _ratio(r: dict, b: dict) -> float | None:
    mine, base = r["metrics"].get("images_per_s"), b["metrics"].get("images_per_s")
    return mine / base if mine and base else None


def _steps(pairs: list[tuple[float, dict]]) -> int:
    return min(r["config"].get("steps") or 0 for _, r in pairs)


def _group_value(record: dict, key: str):
    return record["config"].get(key) if key in record["config"] else _params(record).get(key)


def _exchange(record: dict) -> tuple:
    """How gradients travel: among the workers (a collective: TernGrad's all-gather of trits is compared with
    the baseline's all-reduce, as in the paper), or through S parameter servers (a PS method pairs with a PS
    baseline on as many servers)."""
    params = _params(record)
    if params.get("topology") == "ps":
        return "ps", params.get("servers")
    return "collective", None


def _pair_key(record: dict, exchange: bool) -> tuple:
    cfg = record["config"]
    key = tuple(str(cfg.get(k)) for k in PAIR_KEYS) + (str((cfg.get("optimizer") or {}).get("name")),)
    return key + _exchange(record) if exchange else key


# a speed-up is only fair against a baseline on the same exchange (a PS method against synchronous SGD on the
# same servers); an accuracy gap is not, because synchronous SGD computes the same weights on both
EXCHANGE_BOUND = ("speedup", "speedup_pct")


def learns_nothing(record: dict) -> bool:
    """A run whose accuracy, gradients or bytes say nothing about training: on synthetic data (random inputs
    and labels), or made to time a rate-limited link (``net``, ``node_link``: such runs stop after a few steps,
    and the same computation on an unlimited link is the run that counts)."""
    cfg = record["config"]
    return bool((record.get("data") or {}).get("synthetic") or cfg.get("net") or cfg.get("node_link"))


def overlapped_or_ps(record: dict) -> bool:
    """A baseline a speed-up may be measured against: an all-reduce that overlaps backward in buckets, as
    DistributedDataParallel does (records from before the overlap read as after backward), or synchronous
    SGD on parameter servers, which a PS method is compared with on the same servers."""
    return _exchange(record)[0] == "ps" or record["config"].get("exchange") == "overlapped"


def _paired(runs: list[dict], baselines: list[dict], how, exchange: bool = False) -> list[tuple[float, dict]]:
    """(how(run, baseline), run) for each run with a baseline of the same setting and seed; ``exchange``: and
    on the same exchange, against a baseline people run (``EXCHANGE_BOUND`` metrics: a speed-up over an
    all-reduce that waits for the whole backward pass would flatter the method)."""
    by_key = {_pair_key(b, exchange): b for b in baselines if not exchange or overlapped_or_ps(b)}
    out = []
    for r in runs:
        b = by_key.get(_pair_key(r, exchange))
        if b is not None and (v := how(r, b)) is not None:
            out.append((v, r))
    return out


def _siblings(runs: list[dict], records: list[dict], param: str, wanted: Callable) -> list[tuple[float, dict]]:
    """(partner top-1 - run top-1, run) for each run with a partner: the same setting and seed, except
    ``param`` (and what goes with it), whose value in the partner passes ``wanted``."""
    free = SIBLING_FREE[param]

    def key(r):
        return setting_of(r, free), r["config"].get("seed")

    partners = {key(r): r for r in records if r.get("status") == Status.DONE and wanted(_params(r).get(param))
                and (r.get("metrics") or {}).get("top1") is not None}
    return [(_percent(partners[key(r)]["metrics"]["top1"] - r["metrics"]["top1"]), r)
            for r in runs if key(r) in partners]


def _batch_partners(runs: list[dict], records: list[dict], batch: int) -> list[tuple[float, dict]]:
    """(partner top-1 - run top-1, run) for each run with a done partner of the same seed and setting, except the
    total batch (``batch``) and what scales with it (workers, steps at equal epochs, the learning rate)."""
    def key(r):
        cfg = {k: v for k, v in r["config"].items() if k not in NOT_SETTING + BATCH_FREE}
        return json.dumps(cfg, sort_keys=True, default=str), r["config"].get("seed")

    partners = {key(r): r for r in records if r.get("status") == Status.DONE and r["config"].get("global_batch") == batch
                and (r.get("metrics") or {}).get("top1") is not None}
    return [(_percent(partners[key(r)]["metrics"]["top1"] - r["metrics"]["top1"]), r)
            for r in runs if key(r) in partners and r["config"].get("global_batch") != batch]


# speeds of a stand-in model say nothing about the paper's model
SPEED_METRICS = {"throughput_images_per_s", "speedup", "speedup_pct", "speedup_pct_min", "speedup_pct_max"}


def _model_value(ref: Reference, parameters: int) -> float | None:
    if ref.metric == "model_size":
        return 4 * parameters / BYTE_UNITS.get(ref.unit, 1e6)
    nodes = ref.workers or 1
    if ref.metric == "gradients_per_iteration":
        return float(parameters * nodes)
    if ref.metric == "bytes_per_node_per_iteration":
        return 4 * parameters / BYTE_UNITS.get(ref.unit, 1.0)
    if ref.iterations is None:
        return None
    if ref.metric == "gradients_total":
        return float(parameters * nodes * ref.iterations)
    if ref.metric == "gb_transferred":
        return 4 * parameters * nodes * ref.iterations / 1e9
    return None


def _from_model(cell: Cell, ref: Reference, records: list[dict]) -> Cell:
    """A row that describes the paper's model (its size, gradients per iteration, the baseline's bytes)."""
    own = [r for r in records if r.get("status") == Status.DONE and r["config"].get("task") == ref.task
           and (r.get("metrics") or {}).get("parameters")]
    if not own:
        cell.why_missing = (f"a property of {ref.task} itself, which the stand-in cannot give: any run of it "
                            f"fills this row (bench/grids/campaign/model-sizes.yaml)")
        return cell
    record = own[0]
    parameters = int(record["metrics"]["parameters"])
    value = _model_value(ref, parameters)
    if value is None:
        cell.why_missing = "the paper states no iteration count for this total"
        return cell
    cell.values, cell.run_ids, cell.records = [value], [record["run_id"]], [record]
    per_node = ref.metric in ("model_size", "bytes_per_node_per_iteration")
    scale = [f"{ref.workers} nodes" if ref.workers and not per_node else "",
             f"{ref.iterations:,} iterations" if ref.metric in ("gradients_total", "gb_transferred") else ""]
    scale = " x ".join(s for s in scale if s)
    cell.markers = [f"from {ref.task}'s {parameters:,} float32 gradients (biases included)"
                    + (f" x the paper's {scale}" if scale else "")]
    return cell


def _paper_baseline(ref: Reference, references: list[Reference], metric: str) -> Reference | None:
    """The paper's own baseline value of ``metric`` (the threshold paper's 53,433 GB; its 30 MB per node)."""
    hits = [r for r in references if r.paper == ref.paper and r.method == "baseline" and r.metric == metric
            and r.task == ref.task]
    return hits[0] if len(hits) == 1 else None


def _scaled(cell: Cell, ref: Reference, pairs: list[tuple[float, dict]], references: list[Reference]):
    """A method's byte total at the paper's scale: its fp32 fraction times the paper's baseline bytes."""
    metric = "gb_transferred" if ref.metric == "pct_per_gb" else ref.metric
    base = _paper_baseline(ref, references, metric)
    if base is None:
        cell.why_missing = f"no baseline value of {metric} in the paper to scale to"
        return [], None
    factor = BYTE_UNITS.get(base.unit, 1.0) / BYTE_UNITS.get(ref.unit, 1.0) if ref.metric != "pct_per_gb" else 1.0
    out = []
    for fraction, r in pairs:
        bytes_at_scale = fraction * base.value * factor
        out.append((r["metrics"]["top1"] * 100 / bytes_at_scale if ref.metric == "pct_per_gb" else bytes_at_scale, r))
    fractions = [f for f, _ in pairs]
    what = "top-1 over " if ref.metric == "pct_per_gb" else ""
    note = (f"scaled: {what}our {statistics.fmean(fractions) * 100:.3g}% of the fp32 bytes x the paper's baseline "
            f"{base.value:,g} {base.unit}") if fractions else None
    return out, note


def reproduce(ref: Reference, records: list[dict], analogues: list[Analogue],
              references: list[Reference] = ()) -> Cell:
    """``references``: the paper's other rows (baselines to scale bytes to and to take accuracy gaps from)."""
    want, analogue = target(ref, analogues)
    if analogue is not None:  # the paper's own model, where its runs fill the row, before any stand-in
        own = reproduce(ref, records, [a for a in analogues if a is not analogue], references)
        if own.values:
            return own
    cell = Cell(ref)
    metric = ref.metric
    stand_in = analogue
    if metric in SPEED_METRICS:  # a speed only from the paper's own model in real processes: a stand-in's
        want, analogue = target(ref, [])  # or a simulation's images/s say nothing about the paper's
        records = [r for r in records if r["config"].get("backend") == "dist"]
    modelled = "performance-model" in ref.variants
    if modelled:  # the paper modelled this speed; here it is measured on the emulated network, if it was run
        if metric not in SPEED_METRICS:
            cell.why_missing = "modelled in the paper: see commbench model"
            return cell
        records = [r for r in records if r["config"].get("net")]
        want = {**want, "workers": None}  # 2 cores host a few workers, not the paper's 8 or 128
    if metric in MODEL or (metric in ("gb_transferred", "bytes_per_node_per_iteration") and ref.method == "baseline"):
        return _from_model(cell, ref, records)
    if metric not in SPEED_METRICS:  # what training does, from runs that learn from data: not from synthetic
        records = [r for r in records if not learns_nothing(r)]  # inputs nor from runs made to time a link
    if metric in SPEED_METRICS:  # a row over several models: never from a model that only stands in for one
        stand_ins = {a.use.get("task") for a in analogues if a.paper == ref.paper} - {ref.task}
        records = [r for r in records if r["config"].get("task") not in stand_ins]
    if metric in NO_ANALOGUE:
        cell.why_missing = NO_ANALOGUE[metric]
        return cell
    ignore: tuple[str, ...] = ()
    if metric == "warmup_steps_chosen":
        ignore = ("delay_steps", "warmup_steps")
    elif metric in SPEED_METRICS:  # a speed is measured over the delayed steps, whatever came before
        ignore = ("warmup_steps",)
    runs = [r for r in records if matches(r, ref, want, ignore=ignore)]
    baselines = [r for r in records if matches(r, ref, want, method="baseline")]
    extra: list[str] = []
    others: list[list] = []
    if metric in SINGLE:
        if ref.method == "baseline":  # a baseline row takes the setting its table's methods ran in, where one did
            methods = {r.method for r in references if r.paper == ref.paper and r.source == ref.source
                       and r.method not in (None, "baseline")}
            want = {**want, "partners": {_pair_key(r, False) for r in records if r["config"].get("method") in methods
                                         and r.get("status") == Status.DONE}}
        pairs, others = nearest([(v, r) for r in runs if (v := SINGLE[metric](r, ref)) is not None], ref, want)
    elif metric in SCALED:
        fractions, others = nearest([(f, r) for r in runs if (f := fp32_fraction(r, _paper_accounting(ref)))],
                                    ref, want)
        pairs, note = _scaled(cell, ref, fractions, references)
        extra += [note] if note else []
    elif metric in PAIRED:
        pairs, others = nearest(_paired(runs, baselines, PAIRED[metric], metric in EXCHANGE_BOUND), ref, want)
        if runs and not pairs:
            cell.why_missing = "no baseline run of the same setting to compare with" + (
                " (a speed-up counts only against a baseline that overlaps its exchange with backward, as DDP, or "
                "synchronous SGD on the same parameter servers)" if metric in EXCHANGE_BOUND else "")
    elif metric in BATCH_LOSS:
        pairs, others = nearest(_batch_partners(runs, records, BATCH_LOSS[metric]), ref, want)
        if runs and not pairs:
            cell.why_missing = (f"no run of the same setting at batch {BATCH_LOSS[metric]} to compare with "
                                f"(bench/grids/campaign/terngrad-table2.yaml has both)")
    elif metric in SIBLING:
        param, wanted = SIBLING[metric]
        pairs, others = nearest(_siblings(runs, records, param, wanted), ref, want)
        if runs and not pairs:
            cell.why_missing = f"no run of the same setting with the {metric.rsplit('_vs_', 1)[1]} variant"
    elif metric in AGGREGATES:
        how, aggregate, key = AGGREGATES[metric]
        # one group per optimizer and value of the key: a row over momentum and vanilla SGD takes its extreme
        # over both; a mean is over one optimizer's groups (the one with the most)
        groups: dict = defaultdict(list)
        for v, r in _paired(runs, baselines, PAIRED[how], how in EXCHANGE_BOUND):
            groups[((r["config"].get("optimizer") or {}).get("name"), _group_value(r, key))].append((v, r))
        groups = {k: nearest(g, ref, want)[0] for k, g in groups.items()}
        optimizers = sorted({o for o, _ in groups}, key=lambda o: (-sum(g[0] == o for g in groups), o))
        if aggregate is statistics.fmean and optimizers:
            groups = {k: g for k, g in groups.items() if k[0] == optimizers[0]}
        several = len({o for o, _ in groups}) > 1

        def label(k):
            return f"{k[1]}, {k[0]}" if several else str(k[1])

        pairs = []
        # where some groups ran the paper's iterations, the verdict is theirs; the shortened ones are said beside
        # it (TernGrad Figure 3: 10,000 iterations at 1-8 workers, 2,000 at 16-64 on 2 cores)
        full = {k: g for k, g in groups.items() if ref.iterations and _steps(g) >= ref.iterations}
        if full and len(full) < len(groups):
            short = {k: g for k, g in groups.items() if k not in full}
            means = {k: statistics.fmean(v for v, _ in g) for k, g in short.items()}
            worst = aggregate(means, key=means.get)
            extra.append(f"not judged: {key} {', '.join(str(w) for w in sorted({k[1] for k in short}))} shortened to "
                         f"{min(_steps(g) for g in short.values()):,} iterations (there {metric} "
                         f"{means[worst]:+.2f} at {key} {label(worst)})")
            groups = full
        if groups:
            means = {k: statistics.fmean(v for v, _ in g) for k, g in groups.items()}
            if aggregate is statistics.fmean:
                pairs = [(means[k], g[0][1]) for k, g in sorted(groups.items())]
                extra.append(f"mean over {key} {', '.join(label(k) for k in sorted(groups))}")
            else:
                best = aggregate(means, key=means.get)
                pairs = groups[best]
                values = sorted({k[1] for k in groups})
                extra.append(f"at {key} {label(best)} (of {', '.join(map(str, values))}"  # no "; " in a marker
                             + (f", with {' and '.join(sorted({k[0] for k in groups}))})" if several else ")"))
    elif metric in ("best_delay_steps", "warmup_steps_chosen"):  # the k (or warm-up) with the best mean top-1
        key = "k" if metric == "best_delay_steps" else "warmup"
        if key == "k":  # the warm-up goes with k (Algorithm 1: (1 + warm-up) % k == 0)
            family, others = nearest([(0.0, r) for r in runs], ref, want, drop_params=("k", "warmup"))
        else:  # one k, the family that swept the most warm-up lengths
            families: dict[str, list] = defaultdict(list)
            for r in runs:
                families[setting_of(r, ("warmup",))].append((0.0, r))
            ranked = sorted(families.values(), reverse=True, key=lambda g: (
                len({_params(r).get("warmup") for _, r in g}), closeness([r for _, r in g], ref, want)))
            family, others = (ranked[0], ranked[1:]) if ranked else ([], [])
        groups = defaultdict(list)
        for _, r in family:
            groups[_params(r).get(key)].append(r)
        pairs = []
        if len(groups) > 1:
            top1 = {g: [_percent(r["metrics"]["top1"]) for r in runs_] for g, runs_ in groups.items()}
            means = {g: statistics.fmean(v) for g, v in top1.items()}
            swept = ', '.join(map(str, sorted(groups)))
            chosen = min((g for g in groups if g is not None and abs(g - ref.value) <= CHOICE_ROUNDING[metric]),
                         key=lambda g: abs(g - ref.value), default=None)
            if chosen is not None:  # a best-of sweep without the paper's own choice cannot say whether it is best
                best = max(means, key=means.get)
                pairs = [(float(best), groups[best][0])]
                extra.append(f"of {key} in {swept}")
                cell.choice_shortfall = means[best] - means[chosen]
                stds = [statistics.stdev(top1[g]) for g in (best, chosen) if len(top1[g]) > 1]
                cell.choice_std = max(stds) if stds else None
                k = _params(groups[best][0]).get("k")
                if metric == "warmup_steps_chosen" and ref.delay_steps is not None and k != ref.delay_steps:
                    extra.append(f"swept at k={k}, not the paper's k={ref.delay_steps}")
            else:
                cell.why_missing = f"the paper's {key} = {ref.value:g} did not run here ({key} in {swept})"
    else:
        cell.why_missing = f"no analogue for metric {metric!r} in the records"
        return cell
    cell.values = [v for v, _ in pairs]
    cell.run_ids = [r["run_id"] for _, r in pairs]
    cell.records = [r for _, r in pairs]
    if (note := _others(ref, others)) is not None:
        extra.append(note)
    warmups = {(_params(r).get("warmup"), r["config"].get("steps")) for _, r in pairs if _params(r).get("warmup")}
    if metric in SPEED_METRICS and warmups:
        (warmup, steps), *_ = sorted(warmups)
        extra.append(f"throughput over all {steps} steps, {min(warmup + 1, steps)} of them the synchronous warm-up")
    if metric == "gradient_zero_fraction" and pairs:
        extra.append("in the largest ternarized tensor (AlexNet's fc6 is its largest)")
    if modelled and pairs:
        extra.insert(0, "measured on the emulated network, where the paper's value is modelled")
    cell.markers = markers([r for _, r in pairs], ref, analogue) + extra
    if metric in ("top1", "top5") and ref.method != "baseline" and pairs:
        gaps = _paired([r for _, r in pairs], baselines, lambda r, b: _percent(r["metrics"][metric] - b["metrics"][metric]))
        cell.gap = statistics.fmean(v for v, _ in gaps) if gaps else None
        cell.gap_std = statistics.stdev(v for v, _ in gaps) if len(gaps) > 1 else None
    if not cell.values and cell.why_missing is None and modelled:
        cell.why_missing = f"modelled in the paper (commbench model); no run of {ref.task} on the emulated network"
    if not cell.values and cell.why_missing is None and stand_in is not None and metric in SPEED_METRICS:
        cell.why_missing = (f"a speed of {ref.task}: its CPU stand-in {stand_in.use.get('task')} says nothing "
                            f"about it, and {ref.task} itself has no matching run in real processes")
    if not cell.values and cell.why_missing is None:
        cell.why_missing = NO_MATCH if analogue is None or runs else "no run of the stand-in yet"
    return cell


def paper_gap(ref: Reference, references: list[Reference]) -> float | None:
    """The paper's own gap of a method's top-1/top-5 to its baseline row of the same table and setting."""
    if ref.metric not in ("top1", "top5") or ref.method in (None, "baseline"):
        return None
    same = [r for r in references if r.paper == ref.paper and r.method == "baseline"
            and r.metric == ref.metric and r.task == ref.task and r.workers == ref.workers
            and r.global_batch == ref.global_batch and r.batch_per_worker == ref.batch_per_worker]
    # the same table's baseline; else the paper's one plain baseline of that setting (the threshold paper
    # states its baseline in Section 3.1, not in its Tables 1-3)
    hits = [r for r in same if r.source == ref.source] or [r for r in same if not r.variants]
    return ref.value - hits[0].value if len(hits) == 1 else None
