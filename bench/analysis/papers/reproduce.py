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
from commbench.analysis.papers.conditions import condition_markers, samples_seen
from commbench.analysis.papers.reference import PEER_RECIPES, Analogue, Reference
from commbench.analysis.table import cpu_of
from commbench.store.records import Status

OPTIMIZERS = {"momentum": "momentum", "vanilla-sgd": "sgd", "sgd": "sgd", "vanilla": "sgd", "adam": "adam"}
# variant words that pin a method parameter; a row without the word asks for the other value
FLAGS: dict[str, dict[str, Callable[[dict], bool]]] = {
    "terngrad": {"noclip": lambda p: p.get("clip") == 0,
                 "global-scaler": lambda p: p.get("layerwise") is False,
                 "unshared-scaler": lambda p: p.get("scaler_sharing") is False},  # GRACE's: no Eq. 4
}
LOCAL_RULES = {"glu": "glu", "local-sgd": "sgd", "sgd": "sgd", "no-local": "none", "dcasgd": "dcasgd"}
# the paper's GLU as its text states it (Eq. 8) and as the authors' CIFAR-10 code runs it (COSDCASGD): a row of
# GLU takes either, the authors' first (what the paper's experiments ran), and names the text's where it is used
RULE_FORMS = {"glu": ("glu_code", "glu")}
# the parts of a configuration that must agree between a run and the baseline run it is compared with
PAIR_KEYS = ("task", "dataset", "workers", "backend", "tier", "steps", "seed", "global_batch", "recipe", "net",
             "node_link")
# configuration fields that do not tell one setting from another (declared with each setting in config)
NOT_SETTING = NOT_COMPARED
# a best-k row names one k; a best-warm-up row one length, within 1 (Algorithm 1 rounds the warm-up to fit k)
CHOICE_ROUNDING = {"best_delay_steps": 0, "warmup_steps_chosen": 1}
NO_MATCH = "no matching run"  # a row with no record of its setting at all
BYTE_UNITS = {"B": 1.0, "KB": 1e3, "MB": 1e6, "GB": 1e9, "MiB": 2.0 ** 20}


# one term of a value: (weight, run, partner). A value is the weighted sum over its terms of (run - partner), or of
# the run alone where the partner is None (an absolute value); the terms say which runs' test images it rests on
Term = tuple[float, dict, "dict | None"]


@dataclass
class Cell:
    """The reproduction of one reference row, and the runs behind each of its values (for the verdict's errors)."""

    ref: Reference
    values: list[float] = field(default_factory=list)  # one per matched run (or pair, or seed), in the row's unit
    markers: list[str] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)
    why_missing: str | None = None
    records: list[dict] = field(default_factory=list)  # the matched runs (one per value)
    backing: list[list[Term]] = field(default_factory=list)  # per value: the runs it is computed from
    # top-1/top-5 rows of a method: ours minus our baseline (same setting and seed), per seed, and their runs
    gap_values: list[float] = field(default_factory=list)
    gap_backing: list[list[Term]] = field(default_factory=list)
    paper_gap: float | None = None       # the same gap in the paper (its baseline row of the same table)
    paper_baseline: float | None = None  # the paper's baseline accuracy of the row's setting, where it states one
    # best-k / best-warm-up rows: the runs of each choice swept, and the choice the paper names
    choices: dict = field(default_factory=dict)
    chosen: object = None
    # speed rows: the setting declared to stand for the paper's (config.grid.Declaration), and per declared link
    # the (speed-up, run, baseline) of each launch
    declared: object = None
    links: dict = field(default_factory=dict)
    untestable: str | None = None  # why the runs that exist cannot be compared with this row (the verdict says it)

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
    def gap(self) -> float | None:
        return statistics.fmean(self.gap_values) if self.gap_values else None

    @property
    def gap_std(self) -> float | None:
        return statistics.stdev(self.gap_values) if len(self.gap_values) > 1 else None

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
    """``ignore``: row settings not to filter on (``threshold``, ``delay_steps``, ``warmup_steps``, ``variant``)."""
    cfg = record["config"]
    params = _params(record)
    method = method or ref.method
    if record.get("status") != Status.DONE or (record.get("metrics") or {}).get("top1") is None:
        return False
    if want["task"] and cfg.get("task") != want["task"]:
        return False
    if ref.paper in PEER_RECIPES and cfg.get("recipe") != PEER_RECIPES[ref.paper]:
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
        if ref.threshold is not None and "threshold" not in ignore and not _close(params.get("threshold"),
                                                                                  ref.threshold):
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
                if params.get("local_rule") not in RULE_FORMS.get(rule, (rule,)):
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


def as_the_authors_ran(record: dict) -> bool:
    """SSD-SGD as the paper's experiments ran it: the authors' COSDCASGD at MXNet's local gradient scale (not
    the paper text's Eq. 8, unscaled). True for every other method."""
    if record["config"].get("method") != "ssdsgd":
        return True
    params = _params(record)
    return params.get("local_rule") != "glu" and params.get("local_grad_scale", "paper") == "code"


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
            partnered, as_the_authors_ran(group[0]),
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
        if cfg.get("method") == "ssdsgd" and _params(r).get("local_rule") == "glu":
            add("local rule: GLU as the paper's Eq. 8 states it (the authors' code runs COSDCASGD, glu_code)")
        if cfg.get("method") == "ssdsgd" and _params(r).get("local_grad_scale", "paper") == "paper" and \
                _params(r).get("local_rule") != "none":
            add("local gradient unscaled, as the paper's text (the authors' code: 1/workers, MXNet's rescale_grad)")
        warmup = _params(r).get("warmup")
        if ref.warmup_steps is not None and warmup is not None and warmup != ref.warmup_steps:
            add(f"warm-up {warmup} for {ref.warmup_steps}")
        if ref.global_batch and cfg.get("global_batch") != ref.global_batch:
            add(f"batch {cfg.get('global_batch')} for {ref.global_batch}")
        if ref.batch_per_worker and cfg.get("batch_per_worker") != ref.batch_per_worker:
            bn_batch = (cfg.get("model_options") or {}).get("bn_batch")
            # one simulated worker may stand for a machine of several GPUs: its BatchNorm over the paper's slices
            slices = f", BatchNorm over {bn_batch}-image slices" if bn_batch == ref.batch_per_worker else ""
            add(f"{cfg.get('batch_per_worker')}/worker for {ref.batch_per_worker}{slices}")
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
    "top1_loss_vs_glu": ("local_rule", lambda v: v in RULE_FORMS["glu"]),
    "top1_loss_vs_dcasgd": ("local_rule", lambda v: v == "dcasgd"),
    # SSD-SGD Figure 4: a warm-up of 200 iterations against one of 100 (99 where k needs (1 + warm-up) % k == 0)
    "top1_gain_vs_warmup_100": ("warmup", lambda v: v in (99, 100)),
}
SIBLING_GAINS = {"top1_gain_vs_warmup_100"}  # a gain over the partner (run - partner), not a loss
# per-rule local learning rates differ too (GLU 4 x lr, SGD lr / 4, DC-ASGD-a lr): not part of the pairing
SIBLING_FREE = {"clip": ("clip",), "local_rule": ("local_rule", "local_lr_scale"), "warmup": ("warmup",)}
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


def _pair_key(record: dict, exchange: bool, cpu: bool = True) -> tuple:
    """``exchange``: a speed-up's pairing, which also needs the same exchange and, where ``cpu``, the same CPU (a
    step's compute on one CPU against a baseline's on another measures the machines, not the method)."""
    cfg = record["config"]
    key = tuple(str(cfg.get(k)) for k in PAIR_KEYS) + (str((cfg.get("optimizer") or {}).get("name")),)
    if not exchange:
        return key
    return key + _exchange(record) + ((cpu_of(record),) if cpu else ())


def _other_cpu(runs: list[dict], baselines: list[dict]) -> str | None:
    """Why runs found no baseline to time against, where one ran in their setting but on another CPU."""
    by_key = {_pair_key(b, True, cpu=False): b for b in baselines if overlapped_or_ps(b)}
    for r in runs:
        b = by_key.get(_pair_key(r, True, cpu=False))
        if b is not None and cpu_of(b) != cpu_of(r):
            return (f"the baseline of the same setting was timed on another CPU ({cpu_of(b)}, the method on "
                    f"{cpu_of(r)}): speeds compare only on one CPU; re-run both on one machine")
    return None


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


def _paired(runs: list[dict], baselines: list[dict], how, exchange: bool = False,
            into: dict | None = None) -> list[tuple[float, dict]]:
    """(how(run, baseline), run) for each run with a baseline of the same setting and seed; ``exchange``: and
    on the same exchange, against a baseline people run (``EXCHANGE_BOUND`` metrics: a speed-up over an
    all-reduce that waits for the whole backward pass would flatter the method). ``into``: run id -> the
    baseline it was paired with."""
    by_key = {_pair_key(b, exchange): b for b in baselines if not exchange or overlapped_or_ps(b)}
    out = []
    for r in runs:
        b = by_key.get(_pair_key(r, exchange))
        if b is not None and (v := how(r, b)) is not None:
            out.append((v, r))
            if into is not None:
                into[r["run_id"]] = b
    return out


def _siblings(runs: list[dict], records: list[dict], param: str, wanted: Callable,
              into: dict | None = None) -> list[tuple[float, dict]]:
    """(partner top-1 - run top-1, run) for each run with a partner: the same setting and seed, except
    ``param`` (and what goes with it), whose value in the partner passes ``wanted``."""
    free = SIBLING_FREE[param]

    def key(r):
        return setting_of(r, free), r["config"].get("seed")

    partners = {key(r): r for r in records if r.get("status") == Status.DONE and wanted(_params(r).get(param))
                and (r.get("metrics") or {}).get("top1") is not None}
    return _with_partners(runs, partners, key, into)


def _with_partners(runs: list[dict], partners: dict, key, into: dict | None) -> list[tuple[float, dict]]:
    """(partner top-1 - run top-1, run) for each run whose key has a partner; ``into``: run id -> partner."""
    out = []
    for r in runs:
        partner = partners.get(key(r))
        if partner is not None and partner is not r:
            out.append((_percent(partner["metrics"]["top1"] - r["metrics"]["top1"]), r))
            if into is not None:
                into[r["run_id"]] = partner
    return out


def _batch_partners(runs: list[dict], records: list[dict], batch: int,
                    into: dict | None = None) -> list[tuple[float, dict]]:
    """(partner top-1 - run top-1, run) for each run with a done partner of the same seed and setting, except the
    total batch (``batch``) and what scales with it (workers, steps at equal epochs, the learning rate)."""
    def key(r):
        cfg = {k: v for k, v in r["config"].items() if k not in NOT_SETTING + BATCH_FREE}
        return json.dumps(cfg, sort_keys=True, default=str), r["config"].get("seed")

    partners = {key(r): r for r in records if r.get("status") == Status.DONE and r["config"].get("global_batch") == batch
                and (r.get("metrics") or {}).get("top1") is not None}
    return _with_partners([r for r in runs if r["config"].get("global_batch") != batch], partners, key, into)


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
              references: list[Reference] = (), declarations: list = ()) -> Cell:
    """``references``: the paper's other rows (baselines to scale bytes to and to take accuracy gaps from);
    ``declarations``: the grids' declared stand-ins for speed rows (config.grid.Declaration)."""
    want, analogue = target(ref, analogues)
    if ref.reports == "best":  # the paper reports a run's best evaluation: compare with ours
        records = [as_reported_best(r) for r in records]
    if analogue is not None:  # the paper's own model, where its runs fill the row, before any stand-in
        own = reproduce(ref, records, [a for a in analogues if a is not analogue], references, declarations)
        if own.values:
            return own
    cell = Cell(ref)
    partner_of: dict[str, dict] = {}  # run id -> the run it was paired with (baseline, sibling)
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
    if metric in SPEED_METRICS and metric != "throughput_images_per_s" and not ref.task:
        cell.why_missing = ("a range over several models: one model's measurement fills only rows of its own model "
                            "and batch")
        return cell
    if equal_share_applies(ref, analogue):  # a stand-in's thresholds let through another share of bytes
        return at_equal_share(cell, ref, [r for r in records if matches(r, ref, want, ignore=("threshold",))],
                              [r for r in records if matches(r, ref, want, method="baseline")], references, analogue)
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
    elif metric in EXCHANGE_BOUND and (other := _declared_for_another_batch(ref, declarations)) is not None:
        cell.why_missing = (f"the measurement of {ref.task} is declared for its batch-{other.batch_per_worker} row "
                            f"(bench/grids/campaign/{other.grid}.yaml): one measurement fills only rows of its own "
                            f"model and batch")
        pairs = []
    elif metric in PAIRED and metric in EXCHANGE_BOUND and (declared := declaration_for(ref, declarations)):
        cell.declared = declared
        pairs, others = _declared_links(cell, _paired(runs, baselines, PAIRED[metric], True, partner_of), declared)
        if runs and not pairs:
            cell.why_missing = _other_cpu(runs, baselines) or cell.why_missing or \
                "no baseline run of the same setting to compare with on the declared links"
    elif metric in PAIRED:
        pairs, others = nearest(_paired(runs, baselines, PAIRED[metric], metric in EXCHANGE_BOUND, partner_of),
                                ref, want)
        if runs and not pairs:
            cell.why_missing = (metric in EXCHANGE_BOUND and _other_cpu(runs, baselines)) or (
                "no baseline run of the same setting to compare with" + (
                    " (a speed-up counts only against a baseline that overlaps its exchange with backward, as DDP, "
                    "or synchronous SGD on the same parameter servers)" if metric in EXCHANGE_BOUND else ""))
    elif metric in BATCH_LOSS:
        pairs, others = nearest(_batch_partners(runs, records, BATCH_LOSS[metric], partner_of), ref, want)
        if runs and not pairs:
            cell.why_missing = (f"no run of the same setting at batch {BATCH_LOSS[metric]} to compare with "
                                f"(bench/grids/campaign/terngrad-table2.yaml has both)")
    elif metric in SIBLING:
        param, wanted = SIBLING[metric]
        pairs, others = nearest(_siblings(runs, records, param, wanted, partner_of), ref, want)
        if metric in SIBLING_GAINS:
            pairs = [(-v, r) for v, r in pairs]
        if runs and not pairs:
            cell.why_missing = f"no run of the same setting with the {metric.rsplit('_vs_', 1)[1]} variant"
    elif metric in AGGREGATES:
        how, aggregate, key = AGGREGATES[metric]
        # one group per optimizer and value of the key: a row over momentum and vanilla SGD takes its extreme
        # over both; a mean is over one optimizer's groups (the one with the most)
        groups: dict = defaultdict(list)
        for v, r in _paired(runs, baselines, PAIRED[how], how in EXCHANGE_BOUND, partner_of):
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
                cell.choices, cell.chosen = dict(groups), chosen
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
    cell.backing = [[(1.0, r, partner_of.get(r["run_id"]))] for _, r in pairs]
    if (note := _others(ref, others)) is not None:
        extra.append(note)
    warmups = {(_params(r).get("warmup"), r["config"].get("steps")) for _, r in pairs if _params(r).get("warmup")}
    if metric in SPEED_METRICS and warmups:
        (warmup, steps), *_ = sorted(warmups)
        extra.append(f"throughput over all {steps} steps, {min(warmup + 1, steps)} of them the synchronous warm-up")
    if metric == "gradient_zero_fraction" and pairs:
        extra.append("in the largest ternarized tensor (AlexNet's fc6 is its largest)")
    if modelled and pairs:
        extra.insert(0, "measured on the emulated network, where the paper's value is its performance model's "
                        "output (the row says for which cluster)")
    cell.markers = markers([r for _, r in pairs], ref, analogue) + extra
    if metric in ("top1", "top5") and ref.method != "baseline" and pairs:
        gap_partner: dict[str, dict] = {}
        gaps = _paired([r for _, r in pairs], baselines, lambda r, b: _percent(r["metrics"][metric] - b["metrics"][metric]),
                       into=gap_partner)
        cell.gap_values = [v for v, _ in gaps]
        cell.gap_backing = [[(1.0, r, gap_partner[r["run_id"]])] for _, r in gaps]
    if not cell.values and cell.why_missing is None and modelled:
        cell.why_missing = f"modelled in the paper (commbench model); no run of {ref.task} on the emulated network"
    if not cell.values and cell.why_missing is None and stand_in is not None and metric in SPEED_METRICS:
        cell.why_missing = (f"a speed of {ref.task}: its CPU stand-in {stand_in.use.get('task')} says nothing "
                            f"about it, and {ref.task} itself has no matching run in real processes")
    if not cell.values and cell.why_missing is None:
        cell.why_missing = NO_MATCH if analogue is None or runs else "no run of the stand-in yet"
    return cell


def _paper_baseline_row(ref: Reference, references: list[Reference], metric: str) -> Reference | None:
    """The paper's baseline row of ``metric`` for the row's setting: the same table's; else the paper's one plain
    baseline of that setting (the threshold paper states its baseline in Section 3.1, not in its Tables 1-3)."""
    same = [r for r in references if r.paper == ref.paper and r.method == "baseline" and r.metric == metric
            and r.task == ref.task and r.workers == ref.workers and r.global_batch == ref.global_batch
            and r.batch_per_worker == ref.batch_per_worker]
    hits = [r for r in same if r.source == ref.source] or [r for r in same if not r.variants]
    return hits[0] if len(hits) == 1 else None


def paper_gap(ref: Reference, references: list[Reference]) -> float | None:
    """The paper's own gap of a method's top-1/top-5 to its baseline row of the same table and setting."""
    if ref.metric not in ("top1", "top5") or ref.method in (None, "baseline"):
        return None
    base = _paper_baseline_row(ref, references, ref.metric)
    return ref.value - base.value if base is not None else None


def paper_baseline_accuracy(ref: Reference, references: list[Reference]) -> float | None:
    """The paper's baseline accuracy (points) in the setting of a row about accuracy, where the paper states it:
    the length gate holds our baseline to it on the paper's own data."""
    metric = "top5" if ref.metric.startswith("top5") else "top1"
    if ref.metric not in ("top1", "top5") and not ref.metric.startswith(("top1_", "top5_", "accuracy_")):
        return None
    base = _paper_baseline_row(ref, references, metric)
    return base.value if base is not None else None


def as_reported_best(record: dict) -> dict:
    """The record as a paper that reports a run's best evaluation reads it: its best top-1 (metrics.top1_best,
    else the history's highest) and that evaluation's correctness bits."""
    m = record.get("metrics") or {}
    best = m.get("top1_best")
    if best is None:
        points = [h["top1"] for h in record.get("history") or [] if isinstance(h.get("top1"), (int, float))]
        best = max(points) if points else m.get("top1")
    if best is None:
        return record
    return {**record, "metrics": {**m, "top1": best, "eval_correct": m.get("eval_correct_best")}}


# -- speed rows: the setting declared before measuring --------------------------------------------------------
def declaration_for(ref: Reference, declarations) -> object:
    """The grid declaration that names this row (its paper, source, model and, where declared, batch)."""
    for d in declarations:
        if (d.paper, d.source, d.task) == (ref.paper, ref.source, ref.task) and \
                (d.batch_per_worker is None or d.batch_per_worker == ref.batch_per_worker):
            return d
    return None


def _declared_for_another_batch(ref: Reference, declarations) -> object:
    if declaration_for(ref, declarations) is not None:
        return None
    return next((d for d in declarations if (d.paper, d.source, d.task) == (ref.paper, ref.source, ref.task)), None)


def link_of(record: dict) -> str:
    return record["config"].get("net") or "loopback"


def _declared_links(cell: Cell, paired: list[tuple[float, dict]], declared) -> tuple[list, list]:
    """The launches of the declared number of workers on each declared link, one setting per link (the one with
    the most launches); the first declared link that has any fills the row's value, the verdict reads them all."""
    by_link: dict[str, list] = defaultdict(list)
    for v, r in paired:
        if r["config"].get("workers") == declared.workers and link_of(r) in declared.links and \
                (declared.topology is None or _params(r).get("topology") == declared.topology):
            by_link[link_of(r)].append((v, r))
    for link in declared.links:
        if by_link.get(link):
            settings: dict[str, list] = defaultdict(list)
            for v, r in by_link[link]:
                settings[setting_of(r)].append((v, r))
            cell.links[link] = max(settings.values(), key=len)
    if not cell.links:
        on = f" on the {declared.topology} topology" if declared.topology else ""
        cell.why_missing = (f"no measurement of {declared.workers} workers{on} on the declared links "
                            f"({', '.join(declared.links)}; bench/grids/campaign/{declared.grid}.yaml)")
        return [], []
    return next(cell.links[link] for link in declared.links if link in cell.links), []


# -- threshold rows on a stand-in: at the paper's share of bytes, not at its threshold ---------------------------
THRESHOLD_METHODS = ("wgt", "bgt", "qgt")


def equal_share_applies(ref: Reference, analogue: Analogue | None) -> bool:
    """A threshold method's accuracy on a stand-in model: its absolute thresholds, tuned to the paper's model,
    let another share of the bytes through on ours, so the comparison is made at the paper's share."""
    return analogue is not None and ref.method in THRESHOLD_METHODS and ref.threshold is not None and \
        ref.metric in ("top1", "top1_loss")


def _paper_share(ref: Reference, references: list[Reference]) -> float | None:
    """The share of its baseline's bytes the paper's method sends at the row's threshold (its own accounting)."""
    sent = [r for r in references if r.paper == ref.paper and r.method == ref.method and r.metric == "gb_transferred"
            and _close(r.threshold, ref.threshold)]
    base = _paper_baseline(ref, references, "gb_transferred")
    return sent[0].value / base.value if len(sent) == 1 and base is not None and base.value else None


def at_equal_share(cell: Cell, ref: Reference, runs: list[dict], baselines: list[dict],
                   references: list[Reference], analogue: Analogue | None) -> Cell:
    """The row's accuracy (or loss) where our runs send the paper's share of the bytes: interpolated on log T
    between the two thresholds run whose shares bracket it (log share linear in log T), seed by seed."""
    share = _paper_share(ref, references)
    if share is None:
        cell.why_missing = "the paper states no bytes at this threshold to take its share from"
        return cell
    partner_of: dict[str, dict] = {}
    paired = _paired(runs, baselines, PAIRED["top1_gain"], into=partner_of)
    families: dict[str, list] = defaultdict(list)
    for gain, r in paired:
        if (f := fp32_fraction(r, True)) and _params(r).get("threshold"):
            families[setting_of(r, ("threshold",))].append((gain, f, r))
    if not families:
        cell.why_missing = NO_MATCH if not runs else "no baseline run of the same setting to compare with"
        return cell
    # one family of runs, never a mix of settings: the longest runs (a gap needs half the schedule), then the
    # one with the most thresholds (the most shares to bracket with), then the most records
    family = max(families.values(), key=lambda g: (max(samples_seen(r["config"]) for _, _, r in g),
                                                   len({_params(r)["threshold"] for _, _, r in g}), len(g)))
    by_t: dict[float, list] = defaultdict(list)
    for gain, f, r in family:
        by_t[float(_params(r)["threshold"])].append((gain, f, r))
    points = sorted((t, statistics.fmean(f for _, f, _ in g)) for t, g in by_t.items())
    said = ", ".join(f"T={t:g} {100 * f:.3g}%" for t, f in points)
    bracket = next(((a, b) for a, b in zip(points, points[1:]) if a[1] >= share >= b[1]), None)
    if bracket is None:
        cell.untestable = (f"no two thresholds run here bracket the paper's share of bytes ({100 * share:.3g}% at "
                           f"T={ref.threshold:g}): here {said}; the comparison is at equal share, not equal T")
        return cell
    (ta, fa), (tb, fb) = bracket
    w = 0.0 if fa == fb else (math.log(fa) - math.log(share)) / (math.log(fa) - math.log(fb))
    t_star = math.exp(math.log(ta) + w * (math.log(tb) - math.log(ta)))
    seeds_a = {r["config"].get("seed"): (g, r) for g, _, r in by_t[ta]}
    seeds_b = {r["config"].get("seed"): (g, r) for g, _, r in by_t[tb]}
    loss = ref.metric == "top1_loss"
    for seed in sorted(set(seeds_a) & set(seeds_b), key=str):
        (ga, ra), (gb, rb) = seeds_a[seed], seeds_b[seed]
        gap = (1 - w) * ga + w * gb
        gap_terms = [(1 - w, ra, partner_of[ra["run_id"]]), (w, rb, partner_of[rb["run_id"]])]
        if loss:
            cell.values.append(-gap)
            cell.backing.append(gap_terms)
        else:
            cell.values.append((1 - w) * _percent(ra["metrics"]["top1"]) + w * _percent(rb["metrics"]["top1"]))
            cell.backing.append([(1 - w, ra, None), (w, rb, None)])
            cell.gap_values.append(gap)
            cell.gap_backing.append(gap_terms)
        cell.records.append(ra)
        cell.run_ids += [ra["run_id"], rb["run_id"]]
    if not cell.values:
        cell.untestable = f"the thresholds that bracket the paper's share (T={ta:g}, T={tb:g}) share no seed"
        return cell
    cell.markers = markers(cell.records, ref, analogue) + [
        f"at the paper's share of bytes ({100 * share:.3g}% of its baseline's at T={ref.threshold:g}): "
        f"interpolated at T={t_star:.3g} between T={ta:g} ({100 * fa:.3g}%) and T={tb:g} ({100 * fb:.3g}%)"]
    return cell
