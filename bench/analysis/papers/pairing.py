"""Each run's partner: the baseline run of the same setting and seed (for a speed-up, also on the same exchange
and CPU), a sibling run of the same method that differs in one parameter, or the same setting at another batch."""
from __future__ import annotations

import json
from typing import Callable

from commbench.analysis.papers.runs import NOT_SETTING, exchange_of, overlapped_or_ps, percent, setting_of
from commbench.analysis.runs import Run


# the parts of a configuration that must agree between a run and the baseline run it is compared with
PAIR_KEYS = ("task", "dataset", "workers", "backend", "tier", "steps", "seed", "global_batch", "recipe", "net",
             "node_link")


def pair_key(run: Run, exchange: bool, cpu: bool = True) -> tuple:
    """``exchange``: a speed-up's pairing, which also needs the same exchange and, where ``cpu``, the same CPU (a
    step's compute on one CPU against a baseline's on another measures the machines, not the method)."""
    c = run.config
    key = tuple(str(getattr(c, k)) for k in PAIR_KEYS) + (str((c.optimizer or {}).get("name")),)
    if not exchange:
        return key
    return key + exchange_of(run) + ((run.cpu,) if cpu else ())


def other_cpu(runs: list[Run], baselines: list[Run]) -> str | None:
    """Why runs found no baseline to time against, where one ran in their setting but on another CPU."""
    by_key = {pair_key(b, True, cpu=False): b for b in baselines if overlapped_or_ps(b)}
    for r in runs:
        b = by_key.get(pair_key(r, True, cpu=False))
        if b is not None and b.cpu != r.cpu:
            return (f"the baseline of the same setting was timed on another CPU ({b.cpu}, the method on "
                    f"{r.cpu}): speeds compare only on one CPU; re-run both on one machine")
    return None


# a speed-up is only fair against a baseline on the same exchange (a PS method against synchronous SGD on the
# same servers); an accuracy gap is not, because synchronous SGD computes the same weights on both
EXCHANGE_BOUND = ("speedup", "speedup_pct")


def paired_with(runs: list[Run], baselines: list[Run], how, exchange: bool = False,
            into: dict | None = None) -> list[tuple[float, Run]]:
    """(how(run, baseline), run) for each run with a baseline of the same setting and seed; ``exchange``: and
    on the same exchange, against a baseline people run (``EXCHANGE_BOUND`` metrics: a speed-up over an
    all-reduce that waits for the whole backward pass would flatter the method). ``into``: run id -> the
    baseline it was paired with."""
    by_key = {pair_key(b, exchange): b for b in baselines if not exchange or overlapped_or_ps(b)}
    out = []
    for r in runs:
        b = by_key.get(pair_key(r, exchange))
        if b is not None and (v := how(r, b)) is not None:
            out.append((v, r))
            if into is not None:
                into[r.run_id] = b
    return out


# per-rule local learning rates differ too (GLU 4 x lr, SGD lr / 4, DC-ASGD-a lr): not part of the pairing
SIBLING_FREE = {"clip": ("clip",), "local_rule": ("local_rule", "local_lr_scale"), "warmup": ("warmup",)}


def sibling_pairs(runs: list[Run], records: list[Run], param: str, wanted: Callable,
              into: dict | None = None) -> list[tuple[float, Run]]:
    """(partner top-1 - run top-1, run) for each run with a partner: the same setting and seed, except
    ``param`` (and what goes with it), whose value in the partner passes ``wanted``."""
    free = SIBLING_FREE[param]

    def key(r):
        return setting_of(r, free), r.config.seed

    partners = {key(r): r for r in records if r.done and wanted(r.params.get(param))
                and r.metrics.get("top1") is not None}
    return with_partners(runs, partners, key, into)


def with_partners(runs: list[Run], partners: dict, key, into: dict | None) -> list[tuple[float, Run]]:
    """(partner top-1 - run top-1, run) for each run whose key has a partner; ``into``: run id -> partner."""
    out = []
    for r in runs:
        partner = partners.get(key(r))
        if partner is not None and partner is not r:
            out.append((percent(partner.metrics["top1"] - r.metrics["top1"]), r))
            if into is not None:
                into[r.run_id] = partner
    return out


BATCH_FREE = ("workers", "backend", "global_batch", "batch_per_worker", "steps", "lr_schedule")


def batch_pairs(runs: list[Run], records: list[Run], batch: int,
                    into: dict | None = None) -> list[tuple[float, Run]]:
    """(partner top-1 - run top-1, run) for each run with a done partner of the same seed and setting, except the
    total batch (``batch``) and what scales with it (workers, steps at equal epochs, the learning rate)."""
    def key(r):  # as stored, as setting_of reads it
        cfg = {k: v for k, v in r.stored.items() if k not in NOT_SETTING + BATCH_FREE}
        return json.dumps(cfg, sort_keys=True, default=str), r.config.seed

    partners = {key(r): r for r in records if r.done and r.config.global_batch == batch
                and r.metrics.get("top1") is not None}
    return with_partners([r for r in runs if r.config.global_batch != batch], partners, key, into)
