"""How a row's runs differ from the paper's setting, one short phrase each (the tables' "differs" column): the
model and data they stand in with, their length, workers, batch, local rule and training conditions."""
from __future__ import annotations

import statistics

from commbench.analysis.papers.conditions import condition_markers
from commbench.analysis.papers.reference import SPEED_METRICS, Analogue, Reference
from commbench.analysis.papers.runs import link_of
from commbench.analysis.runs import Run


def other_settings(ref: Reference, others: list[list]) -> str | None:
    """The settings a row did not take: counted; for a speed, each named by its link with its value."""
    if not others:
        return None
    if ref.metric in SPEED_METRICS:
        several = len({g[0][1].config.workers for g in others}) > 1

        def link(g):
            return link_of(g[0][1]) + (f" {g[0][1].config.workers} workers" if several else "")
        return "other settings: " + ", ".join(f"{link(g)} {statistics.fmean(v for v, _ in g):+.1f}"
                                              if ref.unit == "%" else f"{link(g)} {statistics.fmean(v for v, _ in g):.3g}"
                                              for g in others)
    return f"{len(others)} other matching setting{'s' * (len(others) > 1)} not pooled"


def markers(runs: list[Run], ref: Reference, analogue: Analogue | None) -> list[str]:
    """How the runs' setting differs from the paper's, one short phrase each."""
    out: list[str] = []

    def add(text: str) -> None:
        if text not in out:
            out.append(text)

    for r in runs:
        c, data, params = r.config, r.data, r.params
        if ref.task and c.task != ref.task:
            add(f"model: {c.task} for {ref.task}")
        if data.get("synthetic"):
            add("synthetic data")
        elif data.get("substitute_for"):
            add(f"data: {data.get('dataset')} for {data['substitute_for']}")
        elif ref.dataset and c.dataset != ref.dataset:
            add(f"data: {c.dataset} for {ref.dataset}")
        steps = c.steps
        tier_steps = ((c.overrides or {}).get("steps") or {}).get("paper")
        if ref.metric in SPEED_METRICS:  # a speed is an average over some steps on one link, not a training run
            add(f"measured over {steps} steps")
            add(f"link: {c.net} to every process (emulated)" if c.net else
                f"link: {c.node_link} between nodes" if c.node_link else "link: one host's loopback")
            add(f"{c.workers} workers")
        elif ref.iterations and steps is not None and steps < ref.iterations:
            add(f"shortened: {steps:,} of {ref.iterations:,} iterations")
        elif not ref.iterations and tier_steps and steps is not None and steps < tier_steps:
            add(f"shortened: {steps:,} of the {tier_steps:,} steps of {c.task}'s paper tier")
        elif not ref.iterations and c.tier not in (None, "paper"):
            add(f"shortened ({c.tier} tier)")
        if ref.workers and (c.workers or 0) < ref.workers:
            add(f"fewer workers: {c.workers} of {ref.workers}")
        if c.backend == "sim":
            add("simulated workers")
        if c.method == "ssdsgd" and params.get("local_rule") == "glu":
            add("local rule: GLU as the paper's Eq. 8 states it (the authors' code runs COSDCASGD, glu_code)")
        if c.method == "ssdsgd" and params.get("local_grad_scale", "paper") == "paper" and \
                params.get("local_rule") != "none":
            add("local gradient unscaled, as the paper's text (the authors' code: 1/workers, MXNet's rescale_grad)")
        warmup = params.get("warmup")
        if ref.warmup_steps is not None and warmup is not None and warmup != ref.warmup_steps:
            add(f"warm-up {warmup} for {ref.warmup_steps}")
        if ref.global_batch and c.global_batch != ref.global_batch:
            add(f"batch {c.global_batch} for {ref.global_batch}")
        if ref.batch_per_worker and c.batch_per_worker != ref.batch_per_worker:
            bn_batch = (c.model_options or {}).get("bn_batch")
            # one simulated worker may stand for a machine of several GPUs: its BatchNorm over the paper's slices
            slices = f", BatchNorm over {bn_batch}-image slices" if bn_batch == ref.batch_per_worker else ""
            add(f"{c.batch_per_worker}/worker for {ref.batch_per_worker}{slices}")
        if ref.metric not in SPEED_METRICS:  # a speed does not depend on the recipe's schedule or averaging
            for phrase in condition_markers(c, ref):
                add(phrase)
    if analogue and analogue.reason:
        add(analogue.reason)
    return out


def paper_arm_conditions(ref: Reference, runs: list[Run]) -> tuple[list[str], str | None]:
    """What the paper's method arm ran with that its baseline did not, where a stand-in judges the row: each as
    a phrase for ``differs``, and why the row cannot be tested on the stand-in (a model setting the stand-in
    lacks, such as TernGrad Table 2's dropout 0.2 against the baseline's 0.5: the paper's gap mixes two
    changes, and a model without dropout carries only one of them), or None."""
    from commbench.tasks import TASKS

    task = TASKS.get(ref.task or "")
    stand_ins = sorted({r.config.task for r in runs if r.config.task != ref.task})
    if task is None or not stand_ins or not ref.method or ref.method == "baseline":
        return [], None
    recipe = next(iter(task.recipes.values()))
    out, blocking = [], None
    for key, cited in task.method_overlay(next(iter(task.recipes)), ref.method).items():
        if key.startswith("model.") and key in recipe and recipe[key].value != cited.value \
                and "_vs_" not in ref.metric:  # against the baseline: a sibling of the same method shares it
            phrase = (f"the paper's {ref.method} arm: {key} {cited.value:g} against the baseline's "
                      f"{recipe[key].value:g} ({cited.source}), so its gap mixes two changes")
            out.append(phrase)
            lacking = [t for t in stand_ins if t in TASKS and not _has_setting(TASKS[t], key)]
            if lacking and blocking is None:
                blocking = f"{phrase}; {', '.join(lacking)} has no {key}, so it cannot carry the row"
        elif key.startswith("method."):
            ours = sorted({str(r.params.get(key[len("method."):])) for r in runs
                           if r.config.method == ref.method})
            if ours and str(cited.value) not in ours:
                out.append(f"the paper's {ref.task} runs {key} = {cited.value} ({cited.source}); here "
                           f"{', '.join(ours)}")
    return out, blocking


def _has_setting(task, key: str) -> bool:
    return any(key in recipe for recipe in task.recipes.values()) or \
        any(key in overlay for overlay in task.method_defaults.values())
