"""Which stored runs reproduce a reference row, and the reproduced value in the paper's unit: the one entry point
(:func:`reproduce`) that takes a row through its parts, in this package's modules:

- matching: which records match the row (its task or the stand-in, method and variant), and which of the
  matching settings is nearest the paper's;
- metric_kinds: how the row's metric is computed (one run; against a partner run; an aggregate; a choice);
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

import statistics
from collections import defaultdict

from commbench.analysis.papers.cell import Cell
from commbench.analysis.papers.differs import markers, other_settings
from commbench.analysis.papers.equal_share import at_equal_share, equal_share_applies
from commbench.analysis.papers.matching import closeness, matches, nearest, target
from commbench.analysis.papers.metric_kinds import (AGGREGATES, BATCH_LOSS, BYTE_UNITS, CHOICE_ROUNDING, MODEL,
                                                    NO_ANALOGUE, NO_MATCH, PAIRED, SCALED, SIBLING, SIBLING_GAINS,
                                                    SINGLE)
from commbench.analysis.papers.pairing import (EXCHANGE_BOUND, batch_pairs, other_cpu, pair_key, paired_with,
                                               sibling_pairs)
from commbench.analysis.papers.paper_rows import paper_baseline_value
from commbench.analysis.papers.reference import SPEED_METRICS, Analogue, Reference
from commbench.analysis.papers.runs import (fp32_fraction, learns_nothing, params_of, percent, setting_of,
                                            uses_paper_accounting)
from commbench.analysis.papers.speed_rows import declaration_for, declared_for_another_batch, declared_links
from commbench.store.records import Status


def _steps(pairs: list[tuple[float, dict]]) -> int:
    return min(r["config"].get("steps") or 0 for _, r in pairs)


def _group_value(record: dict, key: str):
    return record["config"].get(key) if key in record["config"] else params_of(record).get(key)


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


def _scaled(cell: Cell, ref: Reference, pairs: list[tuple[float, dict]], references: list[Reference]):
    """A method's byte total at the paper's scale: its fp32 fraction times the paper's baseline bytes."""
    metric = "gb_transferred" if ref.metric == "pct_per_gb" else ref.metric
    base = paper_baseline_value(ref, references, metric)
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
    # the paper's own model, where its runs fill the row, before any stand-in; but not in a table the stand-in is
    # declared for, whose rows are all the stand-in's
    if analogue is not None and not analogue.sources:
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
            want = {**want, "partners": {pair_key(r, False) for r in records if r["config"].get("method") in methods
                                         and r.get("status") == Status.DONE}}
        pairs, others = nearest([(v, r) for r in runs if (v := SINGLE[metric](r, ref)) is not None], ref, want)
    elif metric in SCALED:
        fractions, others = nearest([(f, r) for r in runs if (f := fp32_fraction(r, uses_paper_accounting(ref)))],
                                    ref, want)
        pairs, note = _scaled(cell, ref, fractions, references)
        extra += [note] if note else []
    elif metric in EXCHANGE_BOUND and (other := declared_for_another_batch(ref, declarations)) is not None:
        cell.why_missing = (f"the measurement of {ref.task} is declared for its batch-{other.batch_per_worker} row "
                            f"(bench/grids/campaign/{other.grid}.yaml): one measurement fills only rows of its own "
                            f"model and batch")
        pairs = []
    elif metric in PAIRED and metric in EXCHANGE_BOUND and (declared := declaration_for(ref, declarations)):
        cell.declared = declared
        pairs, others = declared_links(cell, paired_with(runs, baselines, PAIRED[metric], True, partner_of), declared)
        if runs and not pairs:
            cell.why_missing = other_cpu(runs, baselines) or cell.why_missing or \
                "no baseline run of the same setting to compare with on the declared links"
    elif metric in PAIRED:
        pairs, others = nearest(paired_with(runs, baselines, PAIRED[metric], metric in EXCHANGE_BOUND, partner_of),
                                ref, want)
        if runs and not pairs:
            cell.why_missing = (metric in EXCHANGE_BOUND and other_cpu(runs, baselines)) or (
                "no baseline run of the same setting to compare with" + (
                    " (a speed-up counts only against a baseline that overlaps its exchange with backward, as DDP, "
                    "or synchronous SGD on the same parameter servers)" if metric in EXCHANGE_BOUND else ""))
    elif metric in BATCH_LOSS:
        pairs, others = nearest(batch_pairs(runs, records, BATCH_LOSS[metric], partner_of), ref, want)
        if runs and not pairs:
            cell.why_missing = (f"no run of the same setting at batch {BATCH_LOSS[metric]} to compare with "
                                f"(bench/grids/campaign/terngrad-table2.yaml has both)")
    elif metric in SIBLING:
        param, wanted = SIBLING[metric]
        pairs, others = nearest(sibling_pairs(runs, records, param, wanted, partner_of), ref, want)
        if metric in SIBLING_GAINS:
            pairs = [(-v, r) for v, r in pairs]
        if runs and not pairs:
            cell.why_missing = f"no run of the same setting with the {metric.rsplit('_vs_', 1)[1]} variant"
    elif metric in AGGREGATES:
        how, aggregate, key = AGGREGATES[metric]
        # one group per optimizer and value of the key: a row over momentum and vanilla SGD takes its extreme
        # over both; a mean is over one optimizer's groups (the one with the most)
        groups: dict = defaultdict(list)
        for v, r in paired_with(runs, baselines, PAIRED[how], how in EXCHANGE_BOUND, partner_of):
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
                len({params_of(r).get("warmup") for _, r in g}), closeness([r for _, r in g], ref, want)))
            family, others = (ranked[0], ranked[1:]) if ranked else ([], [])
        groups = defaultdict(list)
        for _, r in family:
            groups[params_of(r).get(key)].append(r)
        pairs = []
        if len(groups) > 1:
            top1 = {g: [percent(r["metrics"]["top1"]) for r in runs_] for g, runs_ in groups.items()}
            means = {g: statistics.fmean(v) for g, v in top1.items()}
            swept = ', '.join(map(str, sorted(groups)))
            chosen = min((g for g in groups if g is not None and abs(g - ref.value) <= CHOICE_ROUNDING[metric]),
                         key=lambda g: abs(g - ref.value), default=None)
            if chosen is not None:  # a best-of sweep without the paper's own choice cannot say whether it is best
                best = max(means, key=means.get)
                pairs = [(float(best), groups[best][0])]
                extra.append(f"of {key} in {swept}")
                cell.choices, cell.chosen = dict(groups), chosen
                k = params_of(groups[best][0]).get("k")
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
    if (note := other_settings(ref, others)) is not None:
        extra.append(note)
    warmups = {(params_of(r).get("warmup"), r["config"].get("steps")) for _, r in pairs if params_of(r).get("warmup")}
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
        gaps = paired_with([r for _, r in pairs], baselines,
                           lambda r, b: percent(r["metrics"][metric] - b["metrics"][metric]), into=gap_partner)
        cell.gap_values = [v for v, _ in gaps]
        cell.gap_backing = [[(1.0, r, gap_partner[r["run_id"]])] for _, r in gaps]
        if ref.reports == "best" and metric == "top1":  # only top-1 is read as the best (as_reported_best)
            last = [(as_run_last(r), as_run_last(gap_partner[r["run_id"]])) for _, r in gaps]
            cell.final_gap_values = [percent(r["metrics"][metric] - b["metrics"][metric]) for r, b in last]
            cell.final_gap_backing = [[(1.0, r, b)] for r, b in last]
    if not cell.values and cell.why_missing is None and modelled:
        cell.why_missing = f"modelled in the paper (commbench model); no run of {ref.task} on the emulated network"
    if not cell.values and cell.why_missing is None and stand_in is not None and metric in SPEED_METRICS:
        cell.why_missing = (f"a speed of {ref.task}: its CPU stand-in {stand_in.use.get('task')} says nothing "
                            f"about it, and {ref.task} itself has no matching run in real processes")
    if not cell.values and cell.why_missing is None:
        cell.why_missing = NO_MATCH if analogue is None or runs else "no run of the stand-in yet"
        elsewhere = [a for a in analogues if (a.paper, a.task) == (ref.paper, ref.task) and a is not analogue]
        if analogue is None and elsewhere:
            a = elsewhere[0]
            cell.why_missing += (f" of {ref.task} ({a.use.get('task')} stands in for it in "
                                 f"{', '.join(a.sources)} only: a table is one model's)")
    return cell


def as_reported_best(record: dict) -> dict:
    """The record as a paper that reports a run's best evaluation reads it: its best top-1 (metrics.top1_best,
    else the history's highest) and that evaluation's correctness bits."""
    m = record.get("metrics") or {}
    if "top1_last" in m:  # read as the best already
        return record
    best = m.get("top1_best")
    if best is None:
        points = [h["top1"] for h in record.get("history") or [] if isinstance(h.get("top1"), (int, float))]
        best = max(points) if points else m.get("top1")
    if best is None:
        return record
    # the last evaluation is kept beside, for the final gap the row states too
    return {**record, "metrics": {**m, "top1": best, "eval_correct": m.get("eval_correct_best"),
                                  "top1_last": m.get("top1"), "eval_correct_last": m.get("eval_correct")}}


def as_run_last(record: dict) -> dict:
    """A record read by :func:`as_reported_best` as it ran: its last evaluation's top-1 and correctness bits."""
    m = record.get("metrics") or {}
    if "top1_last" not in m:
        return record
    return {**record, "metrics": {**m, "top1": m["top1_last"], "eval_correct": m.get("eval_correct_last")}}


