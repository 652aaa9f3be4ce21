"""How a row's runs differ from the paper's setting, one short phrase each (the tables' "differs" column): the
model and data they stand in with, their length, workers, batch, local rule and training conditions."""
from __future__ import annotations

import statistics

from commbench.analysis.papers.conditions import condition_markers
from commbench.analysis.papers.reference import SPEED_METRICS, Analogue, Reference
from commbench.analysis.papers.runs import link_of, params_of


def other_settings(ref: Reference, others: list[list]) -> str | None:
    """The settings a row did not take: counted; for a speed, each named by its link with its value."""
    if not others:
        return None
    if ref.metric in SPEED_METRICS:
        several = len({g[0][1]["config"].get("workers") for g in others}) > 1

        def link(g):
            return link_of(g[0][1]) + (f" {g[0][1]['config'].get('workers')} workers" if several else "")
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
        if cfg.get("method") == "ssdsgd" and params_of(r).get("local_rule") == "glu":
            add("local rule: GLU as the paper's Eq. 8 states it (the authors' code runs COSDCASGD, glu_code)")
        if cfg.get("method") == "ssdsgd" and params_of(r).get("local_grad_scale", "paper") == "paper" and \
                params_of(r).get("local_rule") != "none":
            add("local gradient unscaled, as the paper's text (the authors' code: 1/workers, MXNet's rescale_grad)")
        warmup = params_of(r).get("warmup")
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
