"""Which stored runs reproduce a reference row, and the reproduced value in the paper's unit: the one entry point
(:func:`reproduce`) that takes a row through its parts, in this package's modules:

- matching: which records match the row (its task or the stand-in, method and variant), and which of the
  matching settings is nearest the paper's;
- metric_kinds: how the row's metric is computed (one run; against a partner run; an aggregate; a choice);
- row_values: the row's values by the kind of its metric, one handler per kind;
- pairing: each run's partner (the baseline of the same setting and seed, a sibling, another batch);
- differs: how the runs' setting differs from the paper's (the markers);
- speed_rows, equal_share, paper_rows: speed rows at the declared links, threshold rows at the paper's share of
  bytes, and the paper's own baseline rows.

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

import dataclasses

from commbench.analysis.papers.cell import Cell
from commbench.analysis.papers.differs import markers, other_settings
from commbench.analysis.papers.equal_share import at_equal_share, equal_share_applies
from commbench.analysis.papers.matching import matches, target
from commbench.analysis.papers.metric_kinds import MODEL, NO_ANALOGUE, NO_MATCH
from commbench.analysis.papers.pairing import paired_with
from commbench.analysis.papers.reference import SPEED_METRICS, Analogue, Reference
from commbench.analysis.papers.row_values import Pairs, from_model, row_values
from commbench.analysis.papers.runs import learns_nothing, percent
from commbench.analysis.runs import Run


def reproduce(ref: Reference, records: list[Run], analogues: list[Analogue],
              references: list[Reference] = (), declarations: list = ()) -> Cell:
    """``references``: the paper's other rows (baselines to scale bytes to and to take accuracy gaps from);
    ``declarations``: the grids' declared stand-ins for speed rows (config.grid.Declaration)."""
    want, stand_in = target(ref, analogues)
    if ref.reports == "best":  # the paper reports a run's best evaluation: compare with ours
        records = [as_reported_best(r) for r in records]
    # the paper's own model, where its runs fill the row, before any stand-in; but not in a table the stand-in is
    # declared for, whose rows are all the stand-in's
    if stand_in is not None and not stand_in.sources:
        own = reproduce(ref, records, [a for a in analogues if a is not stand_in], references, declarations)
        if own.values:
            return own
    cell = Cell(ref)
    found = _records_for(cell, ref, records, analogues, want, stand_in)
    if found is None:  # the row is filled already, or says why it cannot be
        return cell
    records, want, analogue = found
    if equal_share_applies(ref, analogue):  # a stand-in's thresholds let through another share of bytes
        return at_equal_share(cell, ref, [r for r in records if matches(r, ref, want, ignore=("threshold",))],
                              [r for r in records if matches(r, ref, want, method="baseline")], references, analogue)
    ignore = _ignored(ref.metric)
    runs = [r for r in records if matches(r, ref, want, ignore=ignore)]
    baselines = [r for r in records if matches(r, ref, want, method="baseline")]
    partner_of: dict[str, Run] = {}  # run id -> the run it was paired with (baseline, sibling)
    extra: list[str] = []
    computed = row_values(cell, ref, want, runs, baselines, records, references, declarations, partner_of, extra)
    if computed is None:
        return cell
    pairs, others = computed
    _fill(cell, ref, pairs, others, partner_of, extra, analogue)
    _gap_values(cell, ref, pairs, baselines)
    _why_missing(cell, ref, analogues, analogue, stand_in, runs)
    return cell


def _modelled(ref: Reference) -> bool:
    """The paper's value comes from its performance model, not from a run."""
    return "performance-model" in ref.variants


def _records_for(cell: Cell, ref: Reference, records: list[Run], analogues: list[Analogue], want: dict,
                 analogue: Analogue | None) -> tuple[list[Run], dict, Analogue | None] | None:
    """The records a row may be computed from, what they must match and the stand-in they may come from; None where
    the row is done already (a model row, filled or not; a row that cannot be reproduced, with why)."""
    metric = ref.metric
    if metric in SPEED_METRICS:  # a speed only from the paper's own model in real processes: a stand-in's
        want, analogue = target(ref, [])  # or a simulation's images/s say nothing about the paper's
        records = [r for r in records if r.config.backend == "dist"]
    if _modelled(ref):  # the paper modelled this speed; here it is measured on the emulated network, if it was run
        if metric not in SPEED_METRICS:
            cell.why_missing = "modelled in the paper: see commbench model"
            return None
        records = [r for r in records if r.config.net]
        want = {**want, "workers": None}  # 2 cores host a few workers, not the paper's 8 or 128
    if metric in MODEL or (metric in ("gb_transferred", "bytes_per_node_per_iteration") and ref.method == "baseline"):
        from_model(cell, ref, records)
        return None
    if metric not in SPEED_METRICS:  # what training does, from runs that learn from data: not from synthetic
        records = [r for r in records if not learns_nothing(r)]  # inputs nor from runs made to time a link
    if metric in SPEED_METRICS:  # a row over several models: never from a model that only stands in for one
        stand_ins = {a.use.get("task") for a in analogues if a.paper == ref.paper} - {ref.task}
        records = [r for r in records if r.config.task not in stand_ins]
    if metric in NO_ANALOGUE:
        cell.why_missing = NO_ANALOGUE[metric]
        return None
    if metric in SPEED_METRICS and metric != "throughput_images_per_s" and not ref.task:
        cell.why_missing = ("a range over several models: one model's measurement fills only rows of its own model "
                            "and batch")
        return None
    return records, want, analogue


def _ignored(metric: str) -> tuple[str, ...]:
    """The method parameters a row's runs may differ in from the row's."""
    if metric == "warmup_steps_chosen":
        return ("delay_steps", "warmup_steps")
    if metric in SPEED_METRICS:  # a speed is measured over the delayed steps, whatever came before
        return ("warmup_steps",)
    return ()


def _fill(cell: Cell, ref: Reference, pairs: Pairs, others: list[list], partner_of: dict[str, Run],
          extra: list[str], analogue: Analogue | None) -> None:
    """The cell's values, their runs and partners, and its markers (the handlers' ``extra`` among them)."""
    cell.values = [v for v, _ in pairs]
    cell.run_ids = [r.run_id for _, r in pairs]
    cell.records = [r for _, r in pairs]
    cell.backing = [[(1.0, r, partner_of.get(r.run_id))] for _, r in pairs]
    if (note := other_settings(ref, others)) is not None:
        extra.append(note)
    warmups = {(r.params.get("warmup"), r.config.steps) for _, r in pairs if r.params.get("warmup")}
    if ref.metric in SPEED_METRICS and warmups:
        (warmup, steps), *_ = sorted(warmups)
        extra.append(f"throughput over all {steps} steps, {min(warmup + 1, steps)} of them the synchronous warm-up")
    if ref.metric == "gradient_zero_fraction" and pairs:
        extra.append("in the largest ternarized tensor (AlexNet's fc6 is its largest)")
    if _modelled(ref) and pairs:
        extra.insert(0, "measured on the emulated network, where the paper's value is its performance model's "
                        "output (the row says for which cluster)")
    cell.markers = markers([r for _, r in pairs], ref, analogue) + extra


def _gap_values(cell: Cell, ref: Reference, pairs: Pairs, baselines: list[Run]) -> None:
    """A method's top-1/top-5 row: each run's gap to the baseline of its setting and seed (and, where the paper
    reports the best evaluation, the same gap at the last)."""
    metric = ref.metric
    if metric not in ("top1", "top5") or ref.method == "baseline" or not pairs:
        return
    gap_partner: dict[str, Run] = {}
    gaps = paired_with([r for _, r in pairs], baselines,
                       lambda r, b: percent(r.metrics[metric] - b.metrics[metric]), into=gap_partner)
    cell.gap_values = [v for v, _ in gaps]
    cell.gap_backing = [[(1.0, r, gap_partner[r.run_id])] for _, r in gaps]
    if ref.reports == "best" and metric == "top1":  # only top-1 is read as the best (as_reported_best)
        last = [(as_run_last(r), as_run_last(gap_partner[r.run_id])) for _, r in gaps]
        cell.final_gap_values = [percent(r.metrics[metric] - b.metrics[metric]) for r, b in last]
        cell.final_gap_backing = [[(1.0, r, b)] for r, b in last]


def _why_missing(cell: Cell, ref: Reference, analogues: list[Analogue], analogue: Analogue | None,
                 stand_in: Analogue | None, runs: list[Run]) -> None:
    """Why a row without values has none, where its handler did not say."""
    if cell.values or cell.why_missing is not None:
        return
    if _modelled(ref):
        cell.why_missing = f"modelled in the paper (commbench model); no run of {ref.task} on the emulated network"
    elif stand_in is not None and ref.metric in SPEED_METRICS:
        cell.why_missing = (f"a speed of {ref.task}: its CPU stand-in {stand_in.use.get('task')} says nothing "
                            f"about it, and {ref.task} itself has no matching run in real processes")
    else:
        cell.why_missing = NO_MATCH if analogue is None or runs else "no run of the stand-in yet"
        elsewhere = [a for a in analogues if (a.paper, a.task) == (ref.paper, ref.task) and a is not analogue]
        if analogue is None and elsewhere:
            a = elsewhere[0]
            cell.why_missing += (f" of {ref.task} ({a.use.get('task')} stands in for it in "
                                 f"{', '.join(a.sources)} only: a table is one model's)")


def as_reported_best(run: Run) -> Run:
    """The run as a paper that reports a run's best evaluation reads it: its best top-1 (metrics.top1_best,
    else the history's highest) and that evaluation's correctness bits."""
    m = run.metrics
    if "top1_last" in m:  # read as the best already
        return run
    best = m.get("top1_best")
    if best is None:
        points = [h["top1"] for h in run.history if isinstance(h.get("top1"), (int, float))]
        best = max(points) if points else m.get("top1")
    if best is None:
        return run
    # the last evaluation is kept beside, for the final gap the row states too
    return dataclasses.replace(run, metrics={**m, "top1": best, "eval_correct": m.get("eval_correct_best"),
                                             "top1_last": m.get("top1"), "eval_correct_last": m.get("eval_correct")})


def as_run_last(run: Run) -> Run:
    """A run read by :func:`as_reported_best` as it ran: its last evaluation's top-1 and correctness bits."""
    m = run.metrics
    if "top1_last" not in m:
        return run
    return dataclasses.replace(run, metrics={**m, "top1": m["top1_last"], "eval_correct": m.get("eval_correct_last")})


