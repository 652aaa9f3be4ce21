"""A reproduced row's (value, run) pairs, by the kind of its metric: one handler per kind (metric_kinds)."""
from __future__ import annotations

import statistics
from collections import defaultdict

from commbench.analysis.papers.cell import Cell
from commbench.analysis.papers.matching import closeness, nearest
from commbench.analysis.papers.metric_kinds import (AGGREGATES, BATCH_LOSS, BYTE_UNITS, CHOICE_ROUNDING, PAIRED,
                                                    SCALED, SIBLING, SIBLING_GAINS, SINGLE)
from commbench.analysis.papers.pairing import (EXCHANGE_BOUND, batch_pairs, other_cpu, pair_key, paired_with,
                                               sibling_pairs)
from commbench.analysis.papers.paper_rows import paper_baseline_value
from commbench.analysis.papers.reference import Reference
from commbench.analysis.papers.runs import fp32_fraction, percent, setting_of, uses_paper_accounting
from commbench.analysis.papers.speed_rows import declaration_for, declared_for_another_batch, declared_links
from commbench.analysis.runs import Run

Pairs = list[tuple[float, Run]]


def row_values(cell: Cell, ref: Reference, want: dict, runs: list[Run], baselines: list[Run], records: list[Run],
               references: list[Reference], declarations, partner_of: dict[str, Run],
               extra: list[str]) -> tuple[Pairs, list[list]] | None:
    """The row's (value, run) pairs and the other matching settings' (for a marker), by the kind of its metric;
    None, with why, where no kind computes it. ``partner_of`` gets each run's partner (baseline, sibling),
    ``extra`` the handlers' markers, ``cell`` the why of a row without values and the choices of a choice row."""
    metric = ref.metric
    if metric in SINGLE:
        return single_run(ref, want, runs, records, references)
    if metric in SCALED:
        return scaled_bytes(cell, ref, want, runs, references, extra)
    if metric in PAIRED:
        return against_baseline(cell, ref, want, runs, baselines, declarations, partner_of)
    if metric in BATCH_LOSS:
        return against_other_batch(cell, ref, want, runs, records, partner_of)
    if metric in SIBLING:
        return against_sibling(cell, ref, want, runs, records, partner_of)
    if metric in AGGREGATES:
        return over_groups(ref, want, runs, baselines, partner_of, extra)
    if metric in ("best_delay_steps", "warmup_steps_chosen"):  # the k (or warm-up) with the best mean top-1
        return best_choice(cell, ref, want, runs, extra)
    cell.why_missing = f"no analogue for metric {metric!r} in the records"
    return None


def _steps(pairs: Pairs) -> int:
    return min(r.config.steps or 0 for _, r in pairs)


def _group_value(run: Run, key: str):
    """A configuration field where the record stores one by that name (``workers``), else a method parameter."""
    return run.stored[key] if key in run.stored else run.params.get(key)


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


def from_model(cell: Cell, ref: Reference, records: list[Run]) -> Cell:
    """A row that describes the paper's model (its size, gradients per iteration, the baseline's bytes)."""
    own = [r for r in records if r.done and r.config.task == ref.task and r.metrics.get("parameters")]
    if not own:
        cell.why_missing = (f"a property of {ref.task} itself, which the stand-in cannot give: any run of it "
                            f"fills this row (bench/grids/campaign/model-sizes.yaml)")
        return cell
    run = own[0]
    parameters = int(run.metrics["parameters"])
    value = _model_value(ref, parameters)
    if value is None:
        cell.why_missing = "the paper states no iteration count for this total"
        return cell
    cell.values, cell.run_ids, cell.records = [value], [run.run_id], [run]
    per_node = ref.metric in ("model_size", "bytes_per_node_per_iteration")
    scale = [f"{ref.workers} nodes" if ref.workers and not per_node else "",
             f"{ref.iterations:,} iterations" if ref.metric in ("gradients_total", "gb_transferred") else ""]
    scale = " x ".join(s for s in scale if s)
    cell.markers = [f"from {ref.task}'s {parameters:,} float32 gradients (biases included)"
                    + (f" x the paper's {scale}" if scale else "")]
    return cell


def single_run(ref: Reference, want: dict, runs: list[Run], records: list[Run],
               references: list[Reference]) -> tuple[Pairs, list[list]]:
    """A value of one run (its accuracy, its share of the bytes, its speed), of the setting nearest the paper's."""
    if ref.method == "baseline":  # a baseline row takes the setting its table's methods ran in, where one did
        methods = {r.method for r in references if r.paper == ref.paper and r.source == ref.source
                   and r.method not in (None, "baseline")}
        want = {**want, "partners": {pair_key(r, False) for r in records if r.config.method in methods and r.done}}
    return nearest([(v, r) for r in runs if (v := SINGLE[ref.metric](r, ref)) is not None], ref, want)


def scaled_bytes(cell: Cell, ref: Reference, want: dict, runs: list[Run], references: list[Reference],
                 extra: list[str]) -> tuple[Pairs, list[list]]:
    """A method's byte total at the paper's scale: its fp32 fraction times the paper's baseline bytes."""
    fractions, others = nearest([(f, r) for r in runs if (f := fp32_fraction(r, uses_paper_accounting(ref)))],
                                ref, want)
    metric = "gb_transferred" if ref.metric == "pct_per_gb" else ref.metric
    base = paper_baseline_value(ref, references, metric)
    if base is None:
        cell.why_missing = f"no baseline value of {metric} in the paper to scale to"
        return [], others
    factor = BYTE_UNITS.get(base.unit, 1.0) / BYTE_UNITS.get(ref.unit, 1.0) if ref.metric != "pct_per_gb" else 1.0
    pairs = []
    for fraction, r in fractions:
        bytes_at_scale = fraction * base.value * factor
        pairs.append((r.metrics["top1"] * 100 / bytes_at_scale if ref.metric == "pct_per_gb" else bytes_at_scale,
                      r))
    if fractions:
        what = "top-1 over " if ref.metric == "pct_per_gb" else ""
        extra.append(f"scaled: {what}our {statistics.fmean([f for f, _ in fractions]) * 100:.3g}% of the fp32 bytes x "
                     f"the paper's baseline {base.value:,g} {base.unit}")
    return pairs, others


def against_baseline(cell: Cell, ref: Reference, want: dict, runs: list[Run], baselines: list[Run], declarations,
                     partner_of: dict[str, Run]) -> tuple[Pairs, list[list]]:
    """A run against the baseline of its setting and seed (a gain, a loss, a speed-up); a speed-up of a setting a
    grid declares for the row at the declared links, and none from a setting declared for another batch."""
    metric = ref.metric
    exchange = metric in EXCHANGE_BOUND
    if exchange and (other := declared_for_another_batch(ref, declarations)) is not None:
        cell.why_missing = (f"the measurement of {ref.task} is declared for its batch-{other.batch_per_worker} row "
                            f"(bench/grids/campaign/{other.grid}.yaml): one measurement fills only rows of its own "
                            f"model and batch")
        return [], []
    if exchange and (declared := declaration_for(ref, declarations)):
        cell.declared = declared
        pairs, others = declared_links(cell, paired_with(runs, baselines, PAIRED[metric], True, partner_of), declared)
        if runs and not pairs:
            cell.why_missing = other_cpu(runs, baselines) or cell.why_missing or \
                "no baseline run of the same setting to compare with on the declared links"
        return pairs, others
    pairs, others = nearest(paired_with(runs, baselines, PAIRED[metric], exchange, partner_of), ref, want)
    if runs and not pairs:
        cell.why_missing = (exchange and other_cpu(runs, baselines)) or (
            "no baseline run of the same setting to compare with" + (
                " (a speed-up counts only against a baseline that overlaps its exchange with backward, as DDP, "
                "or synchronous SGD on the same parameter servers)" if exchange else ""))
    return pairs, others


def against_other_batch(cell: Cell, ref: Reference, want: dict, runs: list[Run], records: list[Run],
                        partner_of: dict[str, Run]) -> tuple[Pairs, list[list]]:
    """A loss against the same setting at a smaller batch (``BATCH_LOSS``)."""
    batch = BATCH_LOSS[ref.metric]
    pairs, others = nearest(batch_pairs(runs, records, batch, partner_of), ref, want)
    if runs and not pairs:
        cell.why_missing = (f"no run of the same setting at batch {batch} to compare with "
                            f"(bench/grids/campaign/terngrad-table2.yaml has both)")
    return pairs, others


def against_sibling(cell: Cell, ref: Reference, want: dict, runs: list[Run], records: list[Run],
                    partner_of: dict[str, Run]) -> tuple[Pairs, list[list]]:
    """A loss (or gain) against a sibling run of the same method and setting with the variant the row names."""
    metric = ref.metric
    param, wanted = SIBLING[metric]
    pairs, others = nearest(sibling_pairs(runs, records, param, wanted, partner_of), ref, want)
    if metric in SIBLING_GAINS:
        pairs = [(-v, r) for v, r in pairs]
    if runs and not pairs:
        cell.why_missing = f"no run of the same setting with the {metric.rsplit('_vs_', 1)[1]} variant"
    return pairs, others


def over_groups(ref: Reference, want: dict, runs: list[Run], baselines: list[Run], partner_of: dict[str, Run],
                extra: list[str]) -> tuple[Pairs, list[list]]:
    """The largest gain or loss, or the mean, over the groups of a key (``AGGREGATES``: workers, delay steps)."""
    _, aggregate, key = AGGREGATES[ref.metric]
    groups = _groups_by_key(ref, want, runs, baselines, partner_of)
    several = len({o for o, _ in groups}) > 1

    def label(k):
        return f"{k[1]}, {k[0]}" if several else str(k[1])

    groups = _full_length_groups(ref, groups, label, extra)
    if not groups:
        return [], []
    means = {k: statistics.fmean(v for v, _ in g) for k, g in groups.items()}
    if aggregate is statistics.fmean:
        extra.append(f"mean over {key} {', '.join(label(k) for k in sorted(groups))}")
        return [(means[k], g[0][1]) for k, g in sorted(groups.items())], []
    best = aggregate(means, key=means.get)
    values = sorted({k[1] for k in groups})
    extra.append(f"at {key} {label(best)} (of {', '.join(map(str, values))}"  # no "; " in a marker
                 + (f", with {' and '.join(sorted({k[0] for k in groups}))})" if several else ")"))
    return groups[best], []


def _groups_by_key(ref: Reference, want: dict, runs: list[Run], baselines: list[Run],
                   partner_of: dict[str, Run]) -> dict[tuple, Pairs]:
    """An aggregate's groups, (optimizer, value of the key) -> the pairs of the setting nearest the paper's."""
    how, aggregate, key = AGGREGATES[ref.metric]
    # one group per optimizer and value of the key: a row over momentum and vanilla SGD takes its extreme
    # over both; a mean is over one optimizer's groups (the one with the most)
    groups: dict = defaultdict(list)
    for v, r in paired_with(runs, baselines, PAIRED[how], how in EXCHANGE_BOUND, partner_of):
        groups[((r.config.optimizer or {}).get("name"), _group_value(r, key))].append((v, r))
    groups = {k: nearest(g, ref, want)[0] for k, g in groups.items()}
    optimizers = sorted({o for o, _ in groups}, key=lambda o: (-sum(g[0] == o for g in groups), o))
    if aggregate is statistics.fmean and optimizers:
        groups = {k: g for k, g in groups.items() if k[0] == optimizers[0]}
    return groups


def _full_length_groups(ref: Reference, groups: dict[tuple, Pairs], label, extra: list[str]) -> dict[tuple, Pairs]:
    """The groups an aggregate is judged over: those that ran the paper's iterations, where some did."""
    _, aggregate, key = AGGREGATES[ref.metric]
    # where some groups ran the paper's iterations, the verdict is theirs; the shortened ones are said beside
    # it (TernGrad Figure 3: 10,000 iterations at 1-8 workers, 2,000 at 16-64 on 2 cores)
    full = {k: g for k, g in groups.items() if ref.iterations and _steps(g) >= ref.iterations}
    if not full or len(full) == len(groups):
        return groups
    short = {k: g for k, g in groups.items() if k not in full}
    means = {k: statistics.fmean(v for v, _ in g) for k, g in short.items()}
    worst = aggregate(means, key=means.get)
    extra.append(f"not judged: {key} {', '.join(str(w) for w in sorted({k[1] for k in short}))} shortened to "
                 f"{min(_steps(g) for g in short.values()):,} iterations (there {ref.metric} "
                 f"{means[worst]:+.2f} at {key} {label(worst)})")
    return full


def best_choice(cell: Cell, ref: Reference, want: dict, runs: list[Run],
                extra: list[str]) -> tuple[Pairs, list[list]]:
    """The k (or warm-up) with the best mean top-1, where the paper's own choice ran here: the choices swept and
    the paper's go to ``cell``."""
    metric = ref.metric
    key = "k" if metric == "best_delay_steps" else "warmup"
    family, others = _choice_family(ref, want, runs, key)
    groups = defaultdict(list)
    for _, r in family:
        groups[r.params.get(key)].append(r)
    pairs = []
    if len(groups) > 1:
        top1 = {g: [percent(r.metrics["top1"]) for r in runs_] for g, runs_ in groups.items()}
        means = {g: statistics.fmean(v) for g, v in top1.items()}
        swept = ', '.join(map(str, sorted(groups)))
        chosen = min((g for g in groups if g is not None and abs(g - ref.value) <= CHOICE_ROUNDING[metric]),
                     key=lambda g: abs(g - ref.value), default=None)
        if chosen is not None:  # a best-of sweep without the paper's own choice cannot say whether it is best
            best = max(means, key=means.get)
            pairs = [(float(best), groups[best][0])]
            extra.append(f"of {key} in {swept}")
            cell.choices, cell.chosen = dict(groups), chosen
            k = groups[best][0].params.get("k")
            if metric == "warmup_steps_chosen" and ref.delay_steps is not None and k != ref.delay_steps:
                extra.append(f"swept at k={k}, not the paper's k={ref.delay_steps}")
        else:
            cell.why_missing = f"the paper's {key} = {ref.value:g} did not run here ({key} in {swept})"
    return pairs, others


def _choice_family(ref: Reference, want: dict, runs: list[Run], key: str) -> tuple[Pairs, list[list]]:
    """The runs a choice is made over, as (0, run) pairs, and the other families'."""
    if key == "k":  # the warm-up goes with k (Algorithm 1: (1 + warm-up) % k == 0)
        return nearest([(0.0, r) for r in runs], ref, want, drop_params=("k", "warmup"))
    # one k, the family that swept the most warm-up lengths
    families: dict[str, list] = defaultdict(list)
    for r in runs:
        families[setting_of(r, ("warmup",))].append((0.0, r))
    ranked = sorted(families.values(), reverse=True, key=lambda g: (
        len({r.params.get("warmup") for _, r in g}), closeness([r for _, r in g], ref, want)))
    return (ranked[0], ranked[1:]) if ranked else ([], [])
