"""Verdicts by the stated rule (bench/analysis/papers/verdicts.py, docs/papers.md): every verdict of every claim
type on hand-made records, the planted cases the rule was specified with, and the gates (length, power, seeds).

Unless a test says otherwise: 10,000 test images (MNIST's), runs at the full length of LeNet's own recipe, no
per-image correctness stored (the binomial floor), 3 seeds. The rows are LeNet's own (the paper's setting), so the
paper's number counts as a sample with our per-seed SD (a prediction interval); the tests that plant a verdict
give the evidence the rule needs to reach one: a test set of a million images (``BIG``), seeds that agree.
"""
from __future__ import annotations

import copy
import dataclasses
import math

import numpy as np
import pytest

from commbench.config import resolve
from commbench.config.grid import Declaration
from commbench.store.correctness import pack_correct
from commbench.analysis.runs import Run
from commbench.analysis.papers import stats
from commbench.analysis.papers.reference import Reference, effect_margin
from commbench.analysis.papers.cell import Cell
from commbench.analysis.papers.tables import render, rows
from commbench.analysis.papers.verdicts import INCONCLUSIVE, MISSING, NOT_REPRODUCED, REPRODUCED, UNTESTABLE, judge

from ..conftest import commbench

RECIPE = resolve({"task": "lenet-mnist", "method": "baseline"}).to_dict()


def ref(metric="top1_gain", value=-1.0, claim="gap", margin=None, task="lenet-mnist", method="terngrad", unit="%",
        dataset="mnist", **kw) -> Reference:
    fields = {f.name: None for f in dataclasses.fields(Reference)}
    if margin is None and claim == "gap":
        margin = effect_margin(value)
    elif margin is None and claim in ("no_loss", "value"):
        margin = 0.5
    fields.update(paper="terngrad", source="Table 2", row="r", task=task, dataset=dataset, method=method,
                  metric=metric, value=value, unit=unit, claim=claim, margin=margin, reports="final",
                  printed=str(value), **kw)
    return Reference(**fields)


BIG = 1_000_000  # test images: a binomial floor far under the margins, so that the seeds decide


def record(top1, seed=1, method="baseline", steps=None, task="lenet-mnist", dataset="mnist", bits=None,
           images=None, **config) -> Run:
    cfg = {**RECIPE, "task": task, "method": method, "dataset": dataset, "seed": seed,
           "steps": steps or RECIPE["steps"], **config}
    metrics = {"top1": top1, "top5": 0.999}
    if bits is not None:
        metrics["eval_correct"] = pack_correct(bits)
    data = {"dataset": dataset, **({"eval_samples": images} if images else {})}
    return Run.of({"run_id": f"{method}-{seed}-{top1}", "config": cfg, "data": data, "metrics": metrics,
                   "status": "done"})


def changed(c: Cell, change) -> Cell:
    """``c`` with every run in it (its records, the terms behind its values, its choices and links) remade from a
    copy of its record that ``change`` edits in place: runs are immutable, so a test plants a condition this way."""
    remade: dict[int, tuple[Run, Run]] = {}  # id -> (the run, itself remade); the run kept alive for its id

    def again(run: Run | None) -> Run | None:
        if run is None:
            return None
        if id(run) not in remade:
            record = copy.deepcopy(dict(run.record))
            change(record)
            remade[id(run)] = (run, Run.of(record))
        return remade[id(run)][1]

    c.records = [again(r) for r in c.records]
    for name in ("backing", "gap_backing", "final_gap_backing"):
        setattr(c, name, [[(w, again(r), again(p)) for w, r, p in terms] for terms in getattr(c, name)])
    c.choices = {choice: [again(r) for r in runs] for choice, runs in c.choices.items()}
    c.links = {link: [(v, again(r)) for v, r in launches] for link, launches in c.links.items()}
    return c


def gap_cell(reference: Reference, gaps: list[float], base: float = 0.99, steps=None, images=None, task=None,
             **kw) -> Cell:
    """A cell of per-seed gaps (points) of a method against a baseline at ``base`` (a fraction); ``task``: the
    runs' task (a stand-in where it is not the row's)."""
    c = Cell(reference)
    where = {"steps": steps, "images": images, **({"task": task} if task else {})}
    for seed, g in enumerate(gaps, start=1):
        b = record(base, seed, **where)
        r = record(base + g / 100, seed, method="terngrad", **where)
        c.values.append(g)
        c.records.append(r)
        c.backing.append([(1.0, r, b)])
    for k, v in kw.items():
        setattr(c, k, v)
    return c


def spread(mean: float, sd: float = 0.15) -> list[float]:
    """Three seeds around ``mean`` with standard deviation ``sd``."""
    return [mean - sd, mean, mean + sd]


# -- the planted cases ----------------------------------------------------------------------------------------
def test_a_claimed_loss_of_one_point_at_99_percent():
    claim = ref(value=-1.0)
    assert judge(gap_cell(claim, spread(0.0, 0.05), images=BIG)).label == NOT_REPRODUCED
    assert judge(gap_cell(claim, spread(-1.1, 0.05), images=BIG)).label == REPRODUCED
    # the same seeds spread three times wider: the paper's run is one draw of that spread, and 3 seeds at 2 degrees
    # of freedom cannot decide a 0.5-point margin (TOST needs 4.8 SE there); the row says what would
    v = judge(gap_cell(claim, spread(-1.1, 0.15), images=BIG))
    assert v.label == UNTESTABLE and v.why.startswith("no power: the equivalence (TOST) test needs 0.50 points")
    assert v.seeds_to_decide == "11"  # sqrt(s^2/n + s^2) x (t(0.95) + t(0.90)) at 10 degrees of freedom: 0.50


def test_no_cost_at_90_percent_is_refuted_by_a_2_point_loss_and_cannot_be_shown_by_a_small_one():
    claim = ref(value=0.08, claim="no_loss")
    assert judge(gap_cell(claim, spread(-2.0), base=0.90)).label == NOT_REPRODUCED
    small = judge(gap_cell(claim, spread(-0.1), base=0.90))
    assert small.label == UNTESTABLE and small.why.startswith("no power")


def test_a_planted_2_point_loss_at_80_percent_against_a_paper_gap_of_0():
    assert judge(gap_cell(ref(value=0.0), spread(-2.0), base=0.80)).label == NOT_REPRODUCED


def test_one_seed_is_at_most_inconclusive_even_where_decisive():
    assert judge(gap_cell(ref(value=-1.0), [-0.6])).label == INCONCLUSIVE
    far = judge(gap_cell(ref(value=-1.0), [3.0], base=0.9, images=BIG))  # 4 points off, a million test images
    assert far.label == INCONCLUSIVE and "one seed: at most inconclusive" in far.why and far.seeds_to_decide


def test_mnist_cannot_show_a_gain_of_0_15_points():
    v = judge(gap_cell(ref(metric="accuracy_gain_max", value=0.15), spread(-0.06), base=0.993))
    assert v.label == UNTESTABLE and v.why.startswith("no power: the equivalence (TOST) test needs 0.25 points")
    assert v.seeds_to_decide == ">50"


def ordering_cell(means: dict, chosen, sd=0.15, seeds=3, base=0.95) -> Cell:
    c = Cell(ref(metric="warmup_steps_chosen", value=float(chosen), claim="ordering", unit="iterations"))
    c.choices = {choice: [record(base + (m + d) / 100, s, method="ssdsgd")
                          for s, d in zip(range(1, seeds + 1), [-sd, 0.0, sd][:seeds])]
                 for choice, m in means.items()}
    c.chosen = chosen
    best = max(means, key=means.get)
    c.values, c.records = [float(best)], [c.choices[best][0]]
    return c


def test_five_orderings_within_noise_are_inconclusive():
    v = judge(ordering_cell({100: 0.0, 200: 0.05, 300: 0.02, 400: 0.07, 500: 0.04}, chosen=500))
    assert v.label == INCONCLUSIVE and v.why.startswith("too close to order")


def speed_cell(links: dict[str, list[float]], paper=3.04) -> Cell:
    c = Cell(ref(metric="speedup", value=paper, claim="speedup", margin=1.25, unit="x", task="alexnet-imagenet"))
    c.declared = Declaration("terngrad", "Table 2", "alexnet-imagenet", tuple(links), 4, "test", "grid")
    c.links = {link: [(v, record(0.0, s)) for s, v in enumerate(values, start=1)] for link, values in links.items()}
    first = next(iter(c.links.values()))
    c.values, c.records = [v for v, _ in first], [r for _, r in first]
    return c


def test_a_speed_up_that_flips_between_the_declared_links_depends_on_the_link():
    v = judge(speed_cell({"100mbit": [4.0, 4.03, 4.06], "1gbit": [1.17, 1.19, 1.21]}))
    assert v.label == INCONCLUSIVE and v.why.startswith("depends on the link")
    assert "100mbit 4.03x (n=3)" in v.why and "1gbit 1.19x (n=3)" in v.why  # the whole range printed


# -- every verdict of every claim type ----------------------------------------------------------------------------
def test_missing_and_untestable_say_why():
    assert judge(Cell(ref(), why_missing="no run of the stand-in yet")).label == MISSING
    c = gap_cell(ref(), spread(-1.0))
    c.untestable = "no two thresholds run here bracket the paper's share of bytes"
    assert judge(c).label == UNTESTABLE and "bracket" in judge(c).why


def value_cell(paper: float, ours: list[float], task="lenet-mnist", steps=None, dataset="mnist", images=None) -> Cell:
    c = Cell(ref(metric="top1", value=paper, claim="value", method="baseline"))
    for s, v in enumerate(ours, start=1):
        r = record(v / 100, s, task=task, steps=steps, dataset=dataset, images=images)
        c.values.append(v)
        c.records.append(r)
        c.backing.append([(1.0, r, None)])
    return c


@pytest.mark.parametrize("ours,label", [(spread(99.1, 0.03), REPRODUCED), (spread(98.0, 0.03), NOT_REPRODUCED),
                                        (spread(98.55, 0.03), INCONCLUSIVE)])
def test_an_absolute_accuracy_on_the_papers_own_experiment(ours, label):
    """99.0% on MNIST's 10,000 test images: the paper's run is a sample with the binomial SE sqrt(pq/m), 0.10
    points, counted in quadrature (larger than our 0.03-point seeds' prediction interval). Ours on a million test
    images: at 10,000 of them, our own floor beside the paper's leaves 3 seeds without the power to decide."""
    v = judge(value_cell(99.0, ours, images=BIG))
    assert v.label == label
    assert v.tested.ref_se == pytest.approx(100 * math.sqrt(0.99 * 0.01 / 10_000))
    assert v.tested.ref_how.startswith("binomial proxy at the paper's 99.00% on 10,000 test images")


def test_an_absolute_accuracy_elsewhere_is_untestable():
    v = judge(value_cell(57.0, spread(98.0), task="lenet-mnist", dataset="fashion-mnist"))
    assert v.label == UNTESTABLE and "an absolute accuracy on other data" in v.why
    shortened = value_cell(99.0, spread(99.0), steps=1000)
    shortened.ref = dataclasses.replace(shortened.ref, iterations=10_000)
    assert judge(shortened).label == UNTESTABLE and "a shortened run (1,000 of 10,000" in judge(shortened).why


def test_a_gap_is_inconclusive_between_the_two_intervals():
    v = judge(gap_cell(ref(value=-1.0), spread(-0.55, 0.05), images=BIG))
    assert v.label == INCONCLUSIVE and v.seeds_to_decide.isdigit()


def test_a_gap_from_an_early_run_is_untestable_and_prints_both_numbers():
    v = judge(gap_cell(ref(value=-1.0), spread(-3.0), steps=2000))
    assert v.label == UNTESTABLE
    assert v.why.startswith("early-training gap: the runs cover 20.0% of the paper's 10,000 iterations")
    assert "here -3.00, the paper -1.00" in v.why


def test_a_gap_on_the_papers_own_data_needs_a_baseline_within_2_points_of_the_papers():
    c = gap_cell(ref(value=-1.0), spread(-1.0, 0.05), base=0.95, paper_baseline=99.2, images=BIG)
    v = judge(c)
    assert v.label == UNTESTABLE and v.why.startswith("baseline 95.00 below the paper's 99.20 by more than 2 points")
    c.paper_baseline = 96.0
    assert not judge(c).why.startswith("baseline")


def test_the_baseline_gate_holds_on_a_labelled_substitute_too():
    """ResNet-20 on cifar10-jpeg 5 points under the paper's CIFAR-10 baseline: its gap is another regime's."""
    claim = ref(value=-1.0, task="resnet20-cifar10", dataset="cifar10")
    c = gap_cell(claim, spread(-1.0, 0.05), base=0.8736, task="resnet20-cifar10", paper_baseline=92.13)
    recipe = resolve({"task": "resnet20-cifar10", "method": "baseline", "dataset": "cifar10-jpeg"}).to_dict()

    def on_the_substitute(r):  # ResNet-20's own recipe, whole, on the labelled substitute
        r["config"] = {**recipe, "method": r["config"]["method"], "seed": r["config"]["seed"]}
        r["data"].update(dataset="cifar10-jpeg", substitute_for="cifar10")
    changed(c, on_the_substitute)
    v = judge(c)
    assert v.label == UNTESTABLE and "baseline 87.36 below the paper's 92.13" in v.why and "cifar10-jpeg" in v.why
    assert v.judged_on == "substitute data"


def test_a_lr_schedule_cut_short_is_not_the_schedule_compressed():
    c = changed(gap_cell(ref(value=-1.0), spread(-1.0)),
                lambda r: r["config"].update(lr_schedule={**RECIPE["lr_schedule"], "kind": "fixed"}))
    v = judge(c)
    assert v.label == UNTESTABLE and "is not the schedule's shape" in v.why


def test_a_method_top1_row_is_judged_on_its_gap_with_the_papers():
    c = value_cell(57.61, [98.2, 98.3, 98.4])
    c.ref = ref(metric="top1", value=57.61, claim="gap", margin=effect_margin(2.0))
    c.paper_gap = 2.0
    changed(c, lambda r: r["data"].update(eval_samples=BIG))
    for s, (g, r) in enumerate(zip([1.98, 2.0, 2.02], c.records), start=1):
        c.gap_values.append(g)
        c.gap_backing.append([(1.0, r, record(r.metrics["top1"] - g / 100, s, images=BIG))])
    v = judge(c)
    assert v.label == REPRODUCED and v.why.startswith("gap to the baseline +2.00 vs the paper's +2.00")


@pytest.mark.parametrize("gaps,label", [(spread(0.3, 0.05), REPRODUCED), (spread(-1.2, 0.05), NOT_REPRODUCED),
                                        (spread(-0.45, 0.05), INCONCLUSIVE)])
def test_no_loss(gaps, label):
    """With a million test images and seeds that agree, the one-sided test has power against the 0.5-point
    margin (at MNIST's 10,000 the binomial floor, 0.17 points, leaves 3 seeds without it)."""
    assert judge(gap_cell(ref(value=0.08, claim="no_loss"), gaps, images=BIG)).label == label


@pytest.mark.parametrize("gaps,label", [(spread(0.9), REPRODUCED), (spread(-0.9), NOT_REPRODUCED),
                                        (spread(0.2), INCONCLUSIVE)])
def test_a_sign_claim(gaps, label):
    """TernGrad Section 4.2: "TernGrad even improves the accuracy" (+0.92)."""
    assert judge(gap_cell(ref(value=0.92, claim="sign"), gaps)).label == label


def test_a_sign_claim_without_a_size_needs_no_power():
    """SSD-SGD Figure 4: a warm-up of 100 "obviously lower" than SSGD, a direction with no number."""
    v = judge(gap_cell(ref(value=-1.0, claim="sign", unit="sign"), spread(-0.5), base=0.8))
    assert v.label == INCONCLUSIVE  # the 95% interval (SE 0.57) reaches 0


@pytest.mark.parametrize("losses,label", [(spread(0.5), REPRODUCED), (spread(3.5), NOT_REPRODUCED),
                                          (spread(1.8), INCONCLUSIVE)])
def test_a_bound(losses, label):
    bound = ref(metric="top1_loss", value=2.0, claim="bound", margin=0.0)
    assert judge(gap_cell(bound, losses, base=0.9)).label == label


def test_a_bound_on_a_saturated_top5_has_no_power():
    c = gap_cell(ref(metric="top5_loss_mean_upper_bound", value=2.0, claim="bound", margin=0.0), spread(0.0))
    v = judge(c)
    assert v.label == UNTESTABLE and "top-5 is saturated here (99.90%)" in v.why


def test_orderings():
    clear = ordering_cell({1: 0.0, 2: 2.0, 5: 0.5}, chosen=2, sd=0.05)
    assert judge(clear).label == REPRODUCED
    beaten = ordering_cell({1: 0.0, 2: -2.0, 5: 0.5}, chosen=2, sd=0.05)
    v = judge(beaten)
    assert v.label == NOT_REPRODUCED and "k 1, 5 significantly better" in v.why.replace("warmup", "k")
    one_seed = ordering_cell({1: 0.0, 2: 0.3, 5: 0.1}, chosen=2, seeds=1)
    assert judge(one_seed).label == INCONCLUSIVE


def test_speed_ups():
    assert judge(speed_cell({"100mbit": [3.0, 3.1, 3.2], "1gbit": [2.8, 2.9, 3.0]})).label == REPRODUCED
    low = judge(speed_cell({"100mbit": [1.1, 1.2, 1.3], "1gbit": [1.0, 1.05, 1.1]}))
    assert low.label == NOT_REPRODUCED and low.why.startswith("below a factor of 1.25")
    one = judge(speed_cell({"100mbit": [3.0], "1gbit": [2.9]}))
    assert one.label == INCONCLUSIVE and one.why.startswith("fewer than 3 launches")
    unmeasured = speed_cell({"100mbit": [3.0, 3.1, 3.2]})
    unmeasured.declared = dataclasses.replace(unmeasured.declared, links=("100mbit", "1gbit"))
    assert judge(unmeasured).why.startswith("declared link 1gbit not measured")
    undeclared = speed_cell({"100mbit": [3.0, 3.1, 3.2]})
    undeclared.declared = None
    v = judge(undeclared)
    assert v.label == UNTESTABLE and v.why.startswith("no setting was declared before measuring")


def test_counts():
    size = ref(metric="model_size", value=532.1, claim="count", margin=1.0, unit="MB", method="baseline")
    assert judge(Cell(size, values=[531.45], records=[record(0.0)])).label == REPRODUCED
    assert judge(Cell(dataclasses.replace(size, value=203.4), values=[243.86], records=[record(0.0)])).label == \
        NOT_REPRODUCED


# -- the errors ----------------------------------------------------------------------------------------------------
def test_the_binomial_floor_the_seed_term_and_the_prediction_interval():
    c = gap_cell(ref(value=-1.0), spread(-1.0, 0.3))
    v = judge(c)
    est = v.tested
    # the two arms at their accuracies, 99% and 98%: sqrt(p1 q1 / m + p2 q2 / m)
    assert est.n == 3 and est.test_se == pytest.approx(100 * math.sqrt((0.99 * 0.01 + 0.98 * 0.02) / 10_000))
    assert est.seed_se == pytest.approx(0.3 / math.sqrt(3))
    # LeNet's own row: the paper's run is one more draw of our spread, t(n - 1) s sqrt(1/n + 1)
    assert est.prediction and est.ref_se == pytest.approx(0.3)
    h = max(stats.t(v.level, 2) * est.seed_se, stats.z(v.level) * est.test_se,
            stats.t(v.level, 2) * 0.3 * math.sqrt(1 / 3 + 1))
    assert v.interval == pytest.approx((est.value - h, est.value + h))


def test_from_three_seeds_the_floor_is_the_disagreement_not_the_bootstrap():
    """Three seeds that agree to 0.01 point cannot give an interval finer than the images the arms disagree on."""
    rng = np.random.default_rng(1)
    c = Cell(ref(value=-1.0))
    for seed in (1, 2, 3):
        base_bits = rng.random(10_000) < 0.99
        run_bits = base_bits.copy()
        run_bits[np.flatnonzero(base_bits)[:100]] = False  # the same 100 images lost on every seed
        b, r = record(base_bits.mean(), seed, bits=base_bits), record(run_bits.mean(), seed, bits=run_bits,
                                                                        method="terngrad")
        c.values.append(100 * (run_bits.mean() - base_bits.mean()))
        c.records.append(r)
        c.backing.append([(1.0, r, b)])
    est = judge(c).tested
    assert est.how.startswith("t over seeds, floor sqrt(disagreement / m)")
    assert est.test_se == pytest.approx(100 * math.sqrt((0.01 - 0.01 ** 2) / 10_000), rel=0.05)


def test_the_bootstrap_is_resampling_the_images_and_seeds_and_remembers_its_answer():
    """The bootstrap counts how often each image is drawn and multiplies; resampling the images directly (a
    gather) with the same draws gives the same replicates, for -1/0/1 gaps and for weighted (interpolated)
    values. Asked again for the same comparison, it answers from memory; a changed image changes the answer."""
    rng = np.random.default_rng(3)
    gaps = [rng.integers(-1, 2, 500).astype(np.float32) for _ in range(3)]
    weighted = [0.25 * g + 0.75 * rng.integers(0, 2, 500) for g in gaps]

    def by_gather(diffs):
        values = np.stack([np.asarray(d, dtype=np.float32) for d in diffs])
        n, m = values.shape
        draws = np.random.default_rng(stats.BOOTSTRAP_SEED)
        replicates = []
        for _ in range(0, stats.BOOTSTRAP_REPLICATES, 2_000_000 // m):
            b = min(2_000_000 // m, stats.BOOTSTRAP_REPLICATES - len(replicates))
            images = draws.integers(0, m, size=(b, m))
            per_seed = values[:, images].sum(axis=-1, dtype=np.float64).T / m
            seeds = draws.multinomial(n, np.full(n, 1.0 / n), size=b)
            replicates += list((per_seed * seeds).sum(axis=1) / n)
        return 100.0 * float(np.std(replicates, ddof=1))

    for diffs in (gaps, weighted):
        assert stats.paired_bootstrap_se(diffs) == pytest.approx(by_gather(diffs), rel=1e-12)
    stats._BOOTSTRAPPED.clear()
    first = stats.paired_bootstrap_se(gaps)
    assert len(stats._BOOTSTRAPPED) == 1 and stats.paired_bootstrap_se([g.copy() for g in gaps]) == first
    changed = [g.copy() for g in gaps]
    changed[0][0] = 1 - changed[0][0] if changed[0][0] != 1 else -1
    assert stats.paired_bootstrap_se(changed) != first and len(stats._BOOTSTRAPPED) == 2


def test_stored_correctness_gives_a_paired_interval_narrower_than_the_floor():
    """Two models that agree on most images: the paired bootstrap's SE is far below the unpaired floor, and it
    is what the verdict uses once every run stored which images it got right."""
    rng = np.random.default_rng(0)
    c = Cell(ref(value=-1.0))
    for seed in (1, 2, 3):
        base_bits = rng.random(10_000) < 0.99
        run_bits = base_bits.copy()
        flip = np.flatnonzero(base_bits)[rng.permutation(int(base_bits.sum()))[:100]]  # 1 point lost
        run_bits[flip] = False
        b = record(base_bits.mean(), seed, bits=base_bits)
        r = record(run_bits.mean(), seed, method="terngrad", bits=run_bits)
        c.values.append(100 * (run_bits.mean() - base_bits.mean()))
        c.records.append(r)
        c.backing.append([(1.0, r, b)])
    c.values, c.records, c.backing = c.values[:2], c.records[:2], c.backing[:2]  # two seeds: the bootstrap's
    est = judge(c).tested
    assert est.how == "paired bootstrap over seeds and test images"
    floor = 100 * math.sqrt(2 * 0.99 * 0.01 / 10_000)
    assert est.test_se < 0.8 * floor
    # one run without its bits: every value falls back to the floor
    bitless = c.backing[0][0][1]

    def without_bits(r):
        if r["run_id"] == bitless.run_id:
            del r["metrics"]["eval_correct"]
    changed(c, without_bits)
    assert judge(c).tested.how.startswith("binomial floor")


def test_two_seeds_decisive_by_4_se_stand():
    assert judge(gap_cell(ref(value=-1.0), [3.0, 3.1], base=0.9, images=BIG)).label == NOT_REPRODUCED
    close = judge(gap_cell(ref(value=-1.0), [-0.3, -0.5], base=0.95))  # t at 1 degree of freedom: no verdict
    assert close.label in (INCONCLUSIVE, UNTESTABLE) and close.seeds_to_decide


def test_holm_and_the_t_quantile():
    assert stats.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert stats.t(0.95, 2) == pytest.approx(4.303, abs=1e-3) and stats.z(0.90) == pytest.approx(1.645, abs=1e-3)


# -- the table ---------------------------------------------------------------------------------------------------
def test_every_row_has_one_verdict_and_the_table_ends_with_the_totals():
    cells = [gap_cell(ref(value=-1.0), spread(-1.1, 0.05), images=BIG),
             gap_cell(ref(value=-1.0), spread(0.0, 0.05), images=BIG),
             gap_cell(ref(value=-1.0), [-0.6]), Cell(ref(), why_missing="no matching run")]
    table = rows(cells)
    assert [r["verdict"] for r in table] == [REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, MISSING]
    md = render(table, "md")
    assert "1 reproduced, 1 not reproduced, 1 inconclusive, 0 untestable here, 1 missing" in md
    assert "Totals over 4 rows" in md.splitlines()[-1]
    assert "2 rows were called by a test at a per-row error of at most 5%" in md.splitlines()[-1]
    first = table[0]
    assert (first["claim"], first["margin"], first["paired seeds"], first["level"]) == ("gap", "0.5", "3", "90%")
    assert float(first["interval low"]) < float(first["tested"]) < float(first["interval high"])


def test_paper_values_print_as_the_paper_printed_them():
    threshold = commbench("table", "--paper", "threshold", "--format", "csv")
    assert threshold.returncode == 0 and ",56.2720," in threshold.stdout and ",15583.03," in threshold.stdout
    terngrad = commbench("table", "--paper", "terngrad")
    assert "| 89.00 |" in terngrad.stdout


def test_a_sign_claim_with_a_size_needs_the_power_to_show_it():
    v = judge(gap_cell(ref(value=0.15, claim="sign"), spread(0.05), base=0.993))
    assert v.label == UNTESTABLE and v.why.startswith("no power")


def test_an_ordering_without_the_papers_choice_is_missing_and_an_early_one_untestable():
    c = ordering_cell({1: 0.0, 2: 2.0}, chosen=2, sd=0.05)
    c.chosen = None
    assert judge(c).label == MISSING
    early_runs = changed(ordering_cell({1: 0.0, 2: 2.0, 5: 0.5}, chosen=2, sd=0.05),
                         lambda r: r["config"].update(steps=1000))
    v = judge(early_runs)
    assert v.label == UNTESTABLE and v.why.startswith("early-training gap: the runs cover 10.0%")
