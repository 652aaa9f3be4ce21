"""Which records match a reference row, and of the matching settings, which comes nearest the paper's.

A record matches a row when it is done and agrees on everything the row pins down: task (or the analogue the
campaign trains instead), method, workers, threshold, delay steps, warm-up, optimizer and the variant (no
clipping, global scaler, local rule). Batch size and learning rate do not filter; a difference is marked.
Matching runs are grouped by *setting* (the whole resolved configuration but the seed); :func:`closeness` ranks
the settings (the paper's own model, real data, the paper's batch, the most steps, real processes, the most seeds).
"""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Callable

from commbench.analysis.papers.pairing import pair_key
from commbench.analysis.papers.reference import PEER_RECIPES, SPEED_METRICS, Analogue, Reference
from commbench.analysis.papers.runs import same_value, setting_of
from commbench.analysis.runs import Run


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


def target(ref: Reference, analogues: list[Analogue]) -> tuple[dict, Analogue | None]:
    """What to look for: the row's own setting, or the analogue trained in its place (where it stands in for the
    row's table, if it names the tables it stands in for)."""
    want = {"task": ref.task, "workers": ref.workers, "global_batch": ref.global_batch}
    for a in analogues:
        if a.paper == ref.paper and a.task == ref.task and (not a.sources or ref.source in a.sources):
            return {**want, **a.use}, a
    return want, None


def matches(run: Run, ref: Reference, want: dict, method: str | None = None,
            ignore: tuple[str, ...] = ()) -> bool:
    """``ignore``: row settings not to filter on (``threshold``, ``delay_steps``, ``warmup_steps``, ``variant``)."""
    c = run.config
    params = run.params
    method = method or ref.method
    if not run.done or run.metrics.get("top1") is None:
        return False
    if want["task"] and c.task != want["task"]:
        return False
    if ref.paper in PEER_RECIPES and c.recipe != PEER_RECIPES[ref.paper]:
        return False
    if method and c.method != method:
        return False
    if want["workers"] and c.workers != want["workers"]:
        return False
    # the paper's own model at another total batch is another experiment (a 200-step speed measurement at 4 x 64
    # is no point of Figure 3's batch 64); a stand-in's batch may differ, and its row says so
    if want["global_batch"] and want["task"] == ref.task and c.global_batch != want["global_batch"]:
        return False
    if method == ref.method:  # the row's own method parameters (a paired baseline has none of them)
        if ref.threshold is not None and "threshold" not in ignore and not same_value(params.get("threshold"),
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
    if allowed and (c.optimizer or {}).get("name") not in allowed:
        return False
    return True


def _optimizers(ref: Reference) -> set[str]:
    """The optimizers a row covers: its own, or those its variant names (``momentum+vanilla``); empty: any."""
    if ref.optimizer:
        return {OPTIMIZERS.get(ref.optimizer, ref.optimizer)}
    return {OPTIMIZERS[w] for v in ref.variants for w in v.split("+") if w in ("momentum", "vanilla")}


def as_the_authors_ran(run: Run) -> bool:
    """SSD-SGD as the paper's experiments ran it: the authors' COSDCASGD at MXNet's local gradient scale (not
    the paper text's Eq. 8, unscaled). True for every other method."""
    if run.config.method != "ssdsgd":
        return True
    params = run.params
    return params.get("local_rule") != "glu" and params.get("local_grad_scale", "paper") == "code"


def _link_bits(run: Run) -> float:
    """The run's emulated link rate in bits/s; infinite on the host's loopback (no ``--net``)."""
    from commbench.config import net_rate_bits

    net = run.config.net
    return net_rate_bits(net) if net else math.inf


def closeness(group: list[Run], ref: Reference, want: dict) -> tuple:
    """How near a setting (its runs, one per seed) comes to the paper's, as a sort key: larger is nearer.
    A speed row takes the most communication-bound setting first (the slowest emulated link): the papers'
    speed-ups are claims about relieving that bottleneck."""
    c, data = group[0].config, group[0].data
    speed = (-_link_bits(group[0]), c.workers or 0) if ref.metric in SPEED_METRICS else ()
    partnered = any(pair_key(r, False) in want.get("partners", ()) for r in group)
    return speed + (c.task == ref.task, not data.get("synthetic"), c.dataset == ref.dataset,
            partnered, as_the_authors_ran(group[0]),
            want["global_batch"] is None or c.global_batch == want["global_batch"],
            ref.batch_per_worker is None or c.batch_per_worker == ref.batch_per_worker,
            c.steps or 0, c.backend == "dist", len(group))


def nearest(pairs: list[tuple[float, Run]], ref: Reference, want: dict,
            drop_params: tuple[str, ...] = ()) -> tuple[list[tuple[float, Run]], list[list]]:
    """The (value, run) pairs of the setting nearest the paper's; and those of the other matching settings."""
    groups: dict[str, list] = defaultdict(list)
    for value, run in pairs:
        groups[setting_of(run, drop_params)].append((value, run))
    if not groups:
        return [], []
    ranked = sorted(groups.values(), key=lambda g: closeness([r for _, r in g], ref, want), reverse=True)
    return ranked[0], ranked[1:]
