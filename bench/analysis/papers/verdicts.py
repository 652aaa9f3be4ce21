"""One verdict per paper-table row, by a stated rule (docs/papers.md, "The verdict rule"):
``reproduced``, ``not reproduced``, ``inconclusive``, ``untestable here`` or ``missing``.

Each row's claim is typed in the reference tables (results/paper/*.csv, column ``claim``) with its margin,
fixed from the paper's numbers before any run (``reference.effect_margin``), and each type has its own judge:

* ``value``: an absolute value; compared only on the paper's own model, data and length. Accuracy by
  equivalence: ``reproduced`` when the 90% interval of (ours - paper) lies inside +-margin (two one-sided tests at
  5%), ``not reproduced`` when the 95% interval lies entirely outside, else ``inconclusive``. Shares of bytes
  within a relative margin, a share of zeros within its points.
* ``gap``: an effect of g points (a method against its baseline or a sibling variant): the same equivalence test
  on (our gap - the paper's), margin min(0.5, 0.5 |g|), at least 0.25.
* ``no_loss``: our gap above -margin (0.5 points): ``reproduced`` when the 90% interval's lower end is above
  it, ``not reproduced`` when the 95% interval's upper end is below it.
* ``sign``: ``reproduced`` when the 95% interval excludes 0 on the paper's side, ``not reproduced`` when it
  excludes 0 on the other.
* ``bound``: ours below the bound (+ margin): the 90% upper end below it, or the 95% lower end above it.
* ``ordering``: the paper's choice best and better than each other choice by a one-sided paired test across
  seeds, Holm-corrected over the choices (``reproduced``); another choice significantly better (``not
  reproduced``); else ``inconclusive (too close to order)``.
* ``speedup``: on the setting the grid declared before measuring, per declared link: the point estimate within
  a factor of 1.25 of the paper's and the interval (3 launches or more) overlapping that band; a verdict that
  differs between the declared links is ``inconclusive (depends on the link)``.
* ``count``: a model's size or gradient count within 1%.

Every accuracy comparison first passes the gates: a gap from runs covering less than half of the schedule is
``untestable here (early-training gap)``, and one beside a baseline more than 2 points off the paper's (on the
paper's model, on any data, substitutes included) ``untestable here (baseline X below the paper's)``; one whose
test at 5% has less than 80% power at the row's degrees of freedom (Student t: TOST for gaps and values,
one-sided for no loss and bounds, two-sided at the paper's effect for a sign) cannot read ``reproduced`` and is
``untestable here (no power)`` unless the data refute it decisively. A row from one seed is at most
``inconclusive``; from two, at most ``inconclusive`` unless decisive by 4 standard errors. Every ``no power``
and ``inconclusive`` row states the seeds that would decide it (``seeds to decide``).

For value and gap claims the paper's number is a sample (``standing.reference_se``). A row judged on a stand-in
model reads ``transferred`` or ``did not transfer`` (``standing``), never ``reproduced`` or ``not reproduced``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from commbench.analysis.papers import standing, stats
from commbench.analysis.papers.evidence import early, estimate, saturated_top5
from commbench.analysis.papers.reference import EQUIVALENCE_MARGIN, effect_margin
from commbench.analysis.papers.cell import Cell
from commbench.analysis.papers.runs import percent

REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE = "reproduced", "not reproduced", "inconclusive"
UNTESTABLE, MISSING = "untestable here", "missing"
TRANSFERRED, DID_NOT_TRANSFER = "transferred", "did not transfer"  # a stand-in's reproduced, not reproduced
VERDICTS = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, UNTESTABLE, MISSING)
STAND_IN_VERDICTS = (TRANSFERRED, DID_NOT_TRANSFER, INCONCLUSIVE, UNTESTABLE, MISSING)

EQUIVALENCE_LEVEL = 0.90  # two one-sided tests at 5%: the 90% interval inside the margin
REFUTATION_LEVEL = 0.95   # the 95% interval entirely outside the margin (or on the other side of 0)
DECISIVE_SE = 4.0         # two seeds: a verdict only when 4 SE cannot change it
MIN_SEEDS = 3
SPEED_LAUNCHES = 3        # a speed-up's interval needs at least 3 launches
ALPHA = 0.05              # orderings: Holm-corrected one-sided tests at 5%
ACCURACY_METRICS = ("top1", "top5")
NOT_ACCURACY_VALUES = {"throughput_images_per_s", "gb_transferred", "pct_per_gb", "data_fraction",
                       "bytes_per_node_per_iteration", "gradient_zero_fraction"}


@dataclass(frozen=True)
class Verdict:
    label: str
    why: str
    tested: stats.Estimate | None = None  # the quantity tested (ours - paper, our gap, a log speed-up ratio)
    level: float | None = None            # the interval printed: 0.90 for equivalence, else 0.95
    margin: float | None = None
    seeds_to_decide: str = ""             # no power or inconclusive: the paired seeds that would decide the row
    judged_on: str = ""                   # standing.JUDGED_ON
    stand_in: str = ""                    # "lenet-mnist for alexnet-imagenet" where judged on a stand-in

    @property
    def interval(self) -> tuple[float, float] | None:
        return self.tested.interval(self.level) if self.tested is not None and self.level else None

    @property
    def shown(self) -> str:
        """The verdict as a table prints it: on a stand-in, whether the finding transferred, naming the stand-in."""
        if self.judged_on != standing.STAND_IN or self.label in (UNTESTABLE, MISSING):
            return self.label
        label = {REPRODUCED: TRANSFERRED, NOT_REPRODUCED: DID_NOT_TRANSFER}.get(self.label, self.label)
        return f"{label} (stand-in: {self.stand_in})"

    @property
    def counted(self) -> str:
        """The verdict's name in the totals: the stand-in's words where judged on one, without the stand-in."""
        return self.shown.split(" (stand-in:")[0]


# -- shared pieces ---------------------------------------------------------------------------------------------
def _where(cell: Cell) -> str | None:
    """Why the runs are not the paper's own experiment (a stand-in model, other data, a shortened run), or None."""
    ref, reasons = cell.ref, []
    for r in cell.records:
        c, data = r.config, r.data
        if ref.task and c.task != ref.task:
            reasons.append(f"a stand-in model ({c.task} for {ref.task})")
        if data.get("synthetic"):
            reasons.append("synthetic data")
        elif data.get("substitute_for") or (ref.dataset and c.dataset != ref.dataset):
            reasons.append(f"other data ({c.dataset} for {data.get('substitute_for') or ref.dataset})")
        paper_steps = ref.iterations or ((c.overrides or {}).get("steps") or {}).get("paper")
        if paper_steps and (c.steps or 0) < paper_steps:
            reasons.append(f"a shortened run ({c.steps:,} of {paper_steps:,} iterations)")
    return ", ".join(dict.fromkeys(reasons)) or None


def _interval_text(est: stats.Estimate, level: float) -> str:
    low, high = est.interval(level)
    return f"{level:.0%} interval [{low:+.2f}, {high:+.2f}]"


def _n_text(est: stats.Estimate) -> str:
    return f"n={est.n} paired seed{'s' * (est.n != 1)}, SE {est.se:.2f}"


def _powerless(est: stats.Estimate, distance: float, test: str) -> str | None:
    """Why the row's test cannot decide it at the row's degrees of freedom, or None: ``distance`` (the margin, or
    the effect claimed) spans fewer standard errors than the test needs for 80% power at 5%."""
    if stats.decidable(est, distance, test):
        return None
    need = stats.needed_se_multiple(test, est.df)
    df = "many" if math.isinf(est.df) else f"{est.df:g}"
    return (f"no power: the {'equivalence (TOST)' if test == 'tost' else test} test needs {distance:.2f} points to "
            f"span {need:.1f} SE at {df} degrees of freedom, and SE is {est.se:.2f}")


def seeds_needed(est: stats.Estimate | None, distance: float | None, test: str) -> str:
    """The paired seeds at which the row's test would have 80% power at 5% (stats.seeds_to_decide)."""
    if est is None or distance is None or distance <= 0:
        return ""
    per_seed = est.per_seed_sd if est.per_seed_sd is not None else est.own_se  # one seed: its test noise stands in
    return stats.seeds_to_decide(per_seed, est.test_se or 0.0, est.ref_se or 0.0, distance, test)


def _few_seeds(label: str, est: stats.Estimate, decisive: bool, why: str) -> tuple[str, str]:
    """One seed: at most inconclusive. Two: only a verdict 4 SE cannot change stands; otherwise inconclusive."""
    if est.n >= MIN_SEEDS or label == INCONCLUSIVE or (decisive and est.n > 1):
        return label, why
    if est.n == 1:
        return INCONCLUSIVE, f"{why}; one seed: at most inconclusive"
    return INCONCLUSIVE, f"{why}; {est.n} seeds: at most inconclusive unless decisive by 4 SE"


def _equivalence(est: stats.Estimate, margin: float) -> str:
    """est: ours - paper. Inside the margin at 90%, outside it at 95%, or neither."""
    low, high = est.interval(EQUIVALENCE_LEVEL)
    if -margin <= low and high <= margin:
        return REPRODUCED
    low, high = est.interval(REFUTATION_LEVEL)
    return NOT_REPRODUCED if high < -margin or low > margin else INCONCLUSIVE


def _decisive_equivalence(est: stats.Estimate, margin: float) -> bool:
    h = DECISIVE_SE * est.se
    return (-margin <= est.value - h and est.value + h <= margin) or est.value + h < -margin or \
        est.value - h > margin


# -- the judges, one per claim type ----------------------------------------------------------------------------
def _accuracy_estimate(cell: Cell) -> tuple[stats.Estimate, float, str]:
    """Our estimate, the paper's number it is compared with, and what it is (a gap or the row's own metric)."""
    ref = cell.ref
    if ref.metric in ACCURACY_METRICS and cell.gap_values and cell.paper_gap is not None:
        what = "best top-1 gap to the baseline" if ref.reports == "best" else "gap to the baseline"
        return estimate(cell.gap_values, cell.gap_backing, ref.metric, True), cell.paper_gap, what
    return estimate(cell.values, cell.backing, ref.metric, True), ref.value, ref.metric.replace("_", " ")


def judge_value(cell: Cell) -> Verdict:
    ref = cell.ref
    elsewhere = _where(cell)
    if ref.metric == "throughput_images_per_s":
        return Verdict(UNTESTABLE, "an absolute speed, on other hardware than the paper's")
    if ref.metric in NOT_ACCURACY_VALUES:
        what = ("a property of the paper model's gradients" if ref.metric == "gradient_zero_fraction" else
                "bytes sent" if ref.metric == "bytes_per_node_per_iteration" else "a share of bytes")
        if elsewhere:
            return Verdict(UNTESTABLE, f"{what}, measured on {elsewhere}: what a method lets through depends on the "
                                       f"model's gradients")
        if ref.metric == "gradient_zero_fraction":
            return _within_points(cell.mean, ref.value, ref.margin or 5.0, "zero share")
        return _relative(cell.mean, ref.value, (ref.margin or 10.0) / 100, "the share of bytes")
    if elsewhere:
        return Verdict(UNTESTABLE, f"an absolute accuracy on {elsewhere}")
    margin = ref.margin if ref.margin is not None else EQUIVALENCE_MARGIN
    ours = estimate(cell.values, cell.backing, ref.metric, True)
    est = standing.reference_se(cell, ours, False, standing.PAPER).shifted(ref.value)
    label = _equivalence(est, margin)
    why = f"accuracy {est.value:+.2f} from the paper's, {_interval_text(est, EQUIVALENCE_LEVEL)}, margin ±{margin:g}"
    if (weak := _powerless(est, margin, "tost")) is not None and label != NOT_REPRODUCED:
        return Verdict(UNTESTABLE, f"{weak}; {why} ({_n_text(est)})", est, REFUTATION_LEVEL, margin)
    label, why = _few_seeds(label, est, _decisive_equivalence(est, margin), f"{why} ({_n_text(est)})")
    return Verdict(label, why, est, EQUIVALENCE_LEVEL, margin)


def _gated(cell: Cell, ours: float, paper: float | None) -> Verdict | None:
    if (top5 := saturated_top5(cell)) is not None:
        return Verdict(UNTESTABLE, f"no power: top-5 is saturated here ({top5:.2f}%), so no top-5 effect can show")
    if (reason := early(cell, ours, paper)) is not None:
        return Verdict(UNTESTABLE, reason)
    return None


def _compared(cell: Cell) -> tuple[stats.Estimate, float, str] | Verdict:
    """Ours, the paper's number and what they are, once the gates are passed; else the verdict they give. A
    method's top-1 row with no paired baseline here (or none in the paper) is judged on its absolute value."""
    ref = cell.ref
    if ref.metric in ACCURACY_METRICS and not (cell.gap_values and cell.paper_gap is not None):
        return judge_value(cell)
    ours, paper, what = _accuracy_estimate(cell)
    gate = _gated(cell, ours.value, None if ref.unit == "sign" else paper)  # a bare direction has no number
    return gate if gate is not None else (ours, paper, what)


def judge_gap(cell: Cell) -> Verdict:
    ref = cell.ref
    if isinstance(compared := _compared(cell), Verdict):
        return compared
    ours, paper, what = compared
    margin = ref.margin if ref.margin is not None else effect_margin(paper)
    est = standing.reference_se(cell, ours, True, standing.judged_on(cell)[0]).shifted(paper)  # every gap claim
    label = equivalence_label(est, margin)
    if label == UNTESTABLE:
        return Verdict(UNTESTABLE, f"{_powerless(est, margin, 'tost')}; {what} here {ours.value:+.2f}, the paper "
                                   f"{paper:+.2f} ({_n_text(est)})", est, REFUTATION_LEVEL, margin)
    why = (f"{what} {ours.value:+.2f} vs the paper's {paper:+.2f}: difference {est.value:+.2f}, "
           f"{_interval_text(est, EQUIVALENCE_LEVEL if label == REPRODUCED else REFUTATION_LEVEL)}, "
           f"margin ±{margin:g} ({_n_text(est)}, {est.how})")
    why = _few_seeds(_equivalence(est, margin), est, _decisive_equivalence(est, margin), why)[1]  # and why not more
    return Verdict(label, why, est, EQUIVALENCE_LEVEL if label == REPRODUCED else REFUTATION_LEVEL, margin)


def equivalence_label(est: stats.Estimate, margin: float) -> str:
    """The rule for a value or a gap, on ``est`` (ours - the paper's, the paper's own error counted in it):
    ``reproduced`` (90% inside +-margin), ``not reproduced`` (95% outside), ``inconclusive``, or ``untestable
    here`` where the test cannot have 80% power at the row's degrees of freedom (unless it refutes), and at most
    ``inconclusive`` from fewer than 3 seeds that are not decisive by 4 SE (one seed: never more). The
    simulation test (tests/analysis/test_verdict_simulation.py) drives this function."""
    label = _equivalence(est, margin)
    if label != NOT_REPRODUCED and _powerless(est, margin, "tost") is not None:
        return UNTESTABLE
    return _few_seeds(label, est, _decisive_equivalence(est, margin), "")[0]


def judge_no_loss(cell: Cell) -> Verdict:
    ref = cell.ref
    if isinstance(compared := _compared(cell), Verdict):
        return compared
    ours, paper, what = compared
    margin = ref.margin if ref.margin is not None else EQUIVALENCE_MARGIN
    low90, _ = ours.interval(EQUIVALENCE_LEVEL)
    _, high95 = ours.interval(REFUTATION_LEVEL)
    label = REPRODUCED if low90 > -margin else NOT_REPRODUCED if high95 < -margin else INCONCLUSIVE
    level = EQUIVALENCE_LEVEL if label == REPRODUCED else REFUTATION_LEVEL
    why = (f"no loss claimed (the paper {paper:+.2f}): {what} here {ours.value:+.2f}, {_interval_text(ours, level)}, "
           f"against -{margin:g} ({_n_text(ours)}, {ours.how})")
    if (weak := _powerless(ours, margin, "one-sided")) is not None and label != NOT_REPRODUCED:
        return Verdict(UNTESTABLE, f"{weak}; {what} here {ours.value:+.2f} ({_n_text(ours)})", ours,
                       REFUTATION_LEVEL, margin)
    h = DECISIVE_SE * ours.se
    label, why = _few_seeds(label, ours, ours.value - h > -margin or ours.value + h < -margin, why)
    return Verdict(label, why, ours, level, margin)


def judge_sign(cell: Cell) -> Verdict:
    ref = cell.ref
    if isinstance(compared := _compared(cell), Verdict):
        return compared
    ours, paper, what = compared
    side = math.copysign(1.0, paper)
    low, high = ours.interval(REFUTATION_LEVEL)
    if (low > 0 and side > 0) or (high < 0 and side < 0):
        label = REPRODUCED
    elif (low > 0 and side < 0) or (high < 0 and side > 0):
        label = NOT_REPRODUCED
    else:
        label = INCONCLUSIVE
    direction = "a gain" if side > 0 else "a loss"
    why = f"{direction} claimed: {what} here {ours.value:+.2f}, {_interval_text(ours, REFUTATION_LEVEL)} " \
          f"({_n_text(ours)}, {ours.how})"
    if ref.unit != "sign" and (weak := _powerless(ours, abs(paper), "sign")) is not None \
            and label != NOT_REPRODUCED:
        return Verdict(UNTESTABLE, f"{weak}; {what} here {ours.value:+.2f}, the paper {paper:+.2f}", ours,
                       REFUTATION_LEVEL, abs(paper))
    label, why = _few_seeds(label, ours, abs(ours.value) > DECISIVE_SE * ours.se, why)
    return Verdict(label, why, ours, REFUTATION_LEVEL, None)


def judge_bound(cell: Cell) -> Verdict:
    ref = cell.ref
    ours = estimate(cell.values, cell.backing, ref.metric, True)
    if (gate := _gated(cell, ours.value, ref.value)) is not None:
        return gate
    margin = ref.margin or 0.0
    bound = ref.value + margin
    _, high90 = ours.interval(EQUIVALENCE_LEVEL)
    low95, _ = ours.interval(REFUTATION_LEVEL)
    label = REPRODUCED if high90 <= bound else NOT_REPRODUCED if low95 > bound else INCONCLUSIVE
    level = EQUIVALENCE_LEVEL if label == REPRODUCED else REFUTATION_LEVEL
    why = f"{ours.value:.2f} against the paper's bound {ref.value:g}: {_interval_text(ours, level)} ({_n_text(ours)})"
    if (weak := _powerless(ours, ref.value, "one-sided")) is not None and label != NOT_REPRODUCED:
        return Verdict(UNTESTABLE, f"{weak}; here {ours.value:.2f}", ours, level, ref.value)
    h = DECISIVE_SE * ours.se
    label, why = _few_seeds(label, ours, ours.value + h <= bound or ours.value - h > bound, why)
    return Verdict(label, why, ours, level, margin)


def judge_ordering(cell: Cell) -> Verdict:
    ref = cell.ref
    key = "k" if ref.metric == "best_delay_steps" else "warmup"
    chosen, choices = cell.chosen, cell.choices
    if chosen is None or len(choices) < 2:
        return Verdict(MISSING, cell.why_missing or "the sweep did not run the paper's choice")
    top1 = {c: {r.config.seed: r for r in runs} for c, runs in choices.items()}
    means = {c: sum(100 * r.metrics["top1"] for r in rs.values()) / len(rs) for c, rs in top1.items()}
    best = max(means, key=means.get)
    if (gate := _gated(cell, means[best] - means[chosen], None)) is not None:
        return gate
    comparisons = {}
    for other in choices:
        if other == chosen:
            continue
        seeds = sorted(set(top1[chosen]) & set(top1[other]), key=str)
        if not seeds:
            continue
        backing = [[(1.0, top1[chosen][s], top1[other][s])] for s in seeds]
        values = [percent(top1[chosen][s].metrics["top1"] - top1[other][s].metrics["top1"]) for s in seeds]
        comparisons[other] = estimate(values, backing, "top1", True)
    if not comparisons:
        return Verdict(MISSING, "no choice shares a seed with the paper's")
    others = list(comparisons)
    better = stats.holm([stats.one_sided_p(comparisons[o]) for o in others])  # the paper's choice better
    worse = stats.holm([stats.one_sided_p(comparisons[o].negated()) for o in others])
    n = min(e.n for e in comparisons.values())
    said = (f"the paper's {key}={chosen:g}: {means[chosen]:.2f}; best here {key}={best:g}: {means[best]:.2f} "
            f"(of {key} in {', '.join(f'{c:g}' for c in sorted(choices))}; n={n} paired seeds)")
    if best == chosen and all(p < ALPHA for p in better):
        label, why = REPRODUCED, f"{said}; better than every other choice (Holm-corrected one-sided tests at 5%)"
    elif any(p < ALPHA for p in worse):
        beaten = [f"{o:g}" for o, p in zip(others, worse) if p < ALPHA]
        label, why = NOT_REPRODUCED, f"{said}; {key} {', '.join(beaten)} significantly better (Holm at 5%)"
    else:
        label, why = INCONCLUSIVE, f"too close to order: {said}"
    decisive = all(abs(e.value) > DECISIVE_SE * e.se for e in comparisons.values())
    label, why = _few_seeds(label, min(comparisons.values(), key=lambda e: e.n), decisive, why)
    closest = min(comparisons.values(), key=lambda e: abs(e.value))  # the pair that is hardest to order
    seeds = seeds_needed(closest, abs(closest.value), "sign") if label == INCONCLUSIVE else ""
    return Verdict(label, why, seeds_to_decide=seeds and f"{seeds} (at the closest pair's observed difference)")


def _band(ratio: float, paper: float, factor: float) -> str:
    off = math.log(ratio / paper)
    return "within" if abs(off) <= math.log(factor) else "above" if off > 0 else "below"


def judge_speedup(cell: Cell) -> Verdict:
    ref = cell.ref
    as_ratio = (lambda v: v) if ref.unit == "x" else (lambda v: 1 + v / 100)
    paper = as_ratio(ref.value)
    factor = ref.margin or 1.25
    if cell.declared is None:
        measured = ", ".join(f"{as_ratio(v):.2f}x" for v in cell.values)
        return Verdict(UNTESTABLE, f"no setting was declared before measuring to stand for the paper's (a grid's "
                                   f"declares); measured {measured} on the setting nearest it")
    declared = cell.declared
    per_link = {}
    for link in declared.links:
        launches = [as_ratio(v) for v, _ in cell.links.get(link, [])]
        if launches and all(x > 0 for x in launches):
            per_link[link] = stats.estimate([math.log(x) for x in launches], None, "launches")
    summary = ", ".join(f"{link} {math.exp(e.value):.2f}x (n={e.n})" for link, e in per_link.items())
    said = f"the paper's {paper:.2f}x; declared {declared.workers} workers on {', '.join(declared.links)}: {summary}"
    unmeasured = [link for link in declared.links if link not in per_link]
    bands = {link: _band(math.exp(e.value), paper, factor) for link, e in per_link.items()}
    if len(set(bands.values())) > 1:
        return Verdict(INCONCLUSIVE, f"depends on the link: {said}", margin=factor,
                       seeds_to_decide="none: the declared links disagree, more launches do not reconcile them")
    if unmeasured:
        return Verdict(INCONCLUSIVE, f"declared link{'s' * (len(unmeasured) > 1)} {', '.join(unmeasured)} not "
                                     f"measured: {said}", margin=factor,
                       seeds_to_decide=f"{SPEED_LAUNCHES} launches on {', '.join(unmeasured)} first")
    few = [link for link, e in per_link.items() if e.n < SPEED_LAUNCHES]
    if few:
        return Verdict(INCONCLUSIVE, f"fewer than {SPEED_LAUNCHES} launches on {', '.join(few)} (no interval): "
                                     f"{said}", margin=factor,
                       seeds_to_decide=f"at least {SPEED_LAUNCHES} launches on {', '.join(few)}")
    band = (math.log(paper) - math.log(factor), math.log(paper) + math.log(factor))
    within = set(bands.values()) == {"within"}
    overlaps = all(e.interval(REFUTATION_LEVEL)[1] >= band[0] and e.interval(REFUTATION_LEVEL)[0] <= band[1]
                   for e in per_link.values())
    if within and overlaps:
        return Verdict(REPRODUCED, f"within a factor of {factor:g} on every declared link: {said}", margin=factor)
    if not overlaps and not within:
        return Verdict(NOT_REPRODUCED, f"{next(iter(bands.values()))} a factor of {factor:g} of the paper's on every "
                                       f"declared link, 95% intervals outside it: {said}", margin=factor)
    widest = max(per_link.values(), key=lambda e: e.se)
    launches = seeds_needed(widest, math.log(factor), "tost")
    return Verdict(INCONCLUSIVE, f"the 95% intervals reach the band of a factor of {factor:g}: {said}", margin=factor,
                   seeds_to_decide=launches and f"{launches} launches")


def judge_count(cell: Cell) -> Verdict:
    """Within the margin (1%), or inside the interval the paper's printed digits allow: a paper that prints
    "just over 30MB" for 30.36 MB, or 203.4 MB for 203.38, is right to its digits."""
    ref = cell.ref
    verdict = _relative(cell.mean, ref.value, (ref.margin or 1.0) / 100, "the model's count")
    if verdict.label == REPRODUCED or (digits := printed_interval(ref)) is None:
        return verdict
    low, high = digits
    if low <= cell.mean < high:
        return replace(verdict, label=REPRODUCED, why=f"{verdict.why}, but inside [{low:g}, {high:g}), what the "
                                                      f"paper's printed {ref.printed or f'{ref.value:g}'} allows")
    return verdict


def printed_interval(ref) -> tuple[float, float] | None:
    """The values the paper's printed number stands for: half a unit of its last printed digit either side, or
    above it where the paper says "just over" ("just over 30MB": [30, 30.5))."""
    text = (ref.printed or "").replace(",", "")
    try:
        value = float(text)
    except ValueError:
        return None
    step = 10.0 ** -(len(text.split(".")[1]) if "." in text else 0)
    if "just over" in (ref.note or "").lower():
        return value, value + step / 2
    return value - step / 2, value + step / 2


def _relative(ours: float, paper: float, share: float, what: str) -> Verdict:
    off = abs(ours - paper) / abs(paper) if paper else abs(ours)
    ok = off <= share
    return Verdict(REPRODUCED if ok else NOT_REPRODUCED,
                   f"{what} off by {off:.1%} ({'within' if ok else 'beyond'} {share:.0%})", margin=share)


def _within_points(ours: float, paper: float, tolerance: float, what: str) -> Verdict:
    ok = abs(ours - paper) <= tolerance
    return Verdict(REPRODUCED if ok else NOT_REPRODUCED,
                   f"{what} {ours:+.2f} vs the paper's {paper:+.2f}: {'within' if ok else 'beyond'} {tolerance:.2f}",
                   margin=tolerance)


JUDGES = {"value": judge_value, "gap": judge_gap, "no_loss": judge_no_loss, "sign": judge_sign,
          "bound": judge_bound, "ordering": judge_ordering, "speedup": judge_speedup, "count": judge_count}


# the test each claim needs, for its power and its seeds to decide
TESTS = {"value": "tost", "gap": "tost", "no_loss": "one-sided", "bound": "one-sided", "sign": "sign",
         "ordering": "sign", "speedup": "tost"}


def judge(cell: Cell) -> Verdict:
    on, stand_in = standing.judged_on(cell)
    if cell.untestable:
        verdict = Verdict(UNTESTABLE, cell.untestable)
    elif not cell.values:
        verdict = Verdict(MISSING, cell.why_missing or "no matching run")
    else:
        verdict = JUDGES[cell.ref.claim](cell)
    if cell.final_gap_values:  # judged on the best evaluations, as the paper reports; the last ones said beside
        final = estimate(cell.final_gap_values, cell.final_gap_backing, cell.ref.metric, True)
        verdict = replace(verdict, why=f"{verdict.why}; the final top-1 gap (the last evaluation) {final.value:+.2f}, "
                                       f"{_interval_text(final, REFUTATION_LEVEL)} ({_n_text(final)}, {final.how})")
    seeds = verdict.seeds_to_decide
    if not seeds and (verdict.label == INCONCLUSIVE or verdict.why.startswith("no power")):
        distance, note = verdict.margin, ""
        if distance is None and verdict.tested is not None:  # a direction with no size: at what we see
            distance, note = abs(verdict.tested.value), " (at the observed difference)"
        seeds = seeds_needed(verdict.tested, distance, TESTS.get(cell.ref.claim, "tost"))
        seeds = seeds and seeds + note
    return replace(verdict, judged_on=on, stand_in=stand_in, seeds_to_decide=seeds)


def called_from_an_interval(verdict: Verdict) -> bool:
    """A row called (reproduced or not, transferred or not) by a test at a per-row error of at most 5%."""
    return verdict.label in (REPRODUCED, NOT_REPRODUCED) and verdict.tested is not None
