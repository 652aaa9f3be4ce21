"""Verdicts by the stated rule: what compares where, each tolerance, and the paper's numbers as printed."""
from __future__ import annotations

import dataclasses

import pytest

from commbench.analysis.papers.reference import Reference
from commbench.analysis.papers.reproduce import Cell
from commbench.analysis.papers.tables import render, rows
from commbench.analysis.papers.verdicts import MISSING, NOT_REPRODUCED, REPRODUCED, UNTESTABLE, judge

from ..conftest import commbench


def ref(metric="top1", value=57.0, task="alexnet-imagenet", method="terngrad", unit="%", iterations=None, **kw):
    fields = {f.name: None for f in dataclasses.fields(Reference)}
    fields.update(paper="terngrad", source="Table 2", row="r", task=task, dataset="imagenet", method=method,
                  metric=metric, value=value, unit=unit, iterations=iterations, printed=str(value), **kw)
    return Reference(**fields)


def run(task="alexnet-imagenet", dataset="imagenet", steps=1000, top5=0.8, substitute=None):
    return {"run_id": "r", "config": {"task": task, "dataset": dataset, "steps": steps},
            "data": {"dataset": dataset, "substitute_for": substitute}, "metrics": {"top1": 0.5, "top5": top5}}


def cell(reference, values, records=None, **kw):
    c = Cell(reference, values=list(values), records=records or [run() for _ in values])
    for k, v in kw.items():
        setattr(c, k, v)
    return c


def test_no_run_is_missing_with_its_reason():
    v = judge(cell(ref(), [], why_missing="no run of the stand-in yet"))
    assert (v.label, v.why) == (MISSING, "no run of the stand-in yet")


def test_an_absolute_accuracy_on_a_stand_in_is_untestable_and_says_why():
    v = judge(cell(ref(method="baseline"), [88.0], [run(task="lenet-mnist", dataset="mnist")]))
    assert v.label == UNTESTABLE and "stand-in model (lenet-mnist for alexnet-imagenet)" in v.why
    shortened = judge(cell(ref(method="baseline", iterations=370_000), [57.1]))
    assert shortened.label == UNTESTABLE and "a shortened run (1,000 of 370,000 iterations)" in shortened.why
    substitute = judge(cell(ref(method="baseline"), [57.1], [run(dataset="cifar10-jpeg", substitute="imagenet")]))
    assert substitute.label == UNTESTABLE and "other data" in substitute.why


@pytest.mark.parametrize("values,label", [([57.3, 57.5], REPRODUCED), ([56.2, 56.4], NOT_REPRODUCED),
                                          ([54.5, 58.0], REPRODUCED)])  # 0.75 off, but 2 std = 4.9
def test_an_absolute_accuracy_on_the_papers_own_experiment_is_judged(values, label):
    assert judge(cell(ref(method="baseline", value=57.0), values)).label == label


@pytest.mark.parametrize("ours,std,paper,label", [
    (0.19, 0.10, -2.70, NOT_REPRODUCED),  # TernGrad without clipping: the paper loses 2.7, here nothing
    (-1.14, 0.08, -0.92, REPRODUCED),     # within 0.5 points
    (-1.70, 0.60, -0.92, REPRODUCED),     # 0.78 apart, but 2 std of the seeds is 1.2
    (-1.70, None, -0.92, NOT_REPRODUCED),  # one seed: 0.5 points
])
def test_a_methods_accuracy_on_a_stand_in_is_judged_on_its_gap(ours, std, paper, label):
    c = cell(ref(), [88.0], [run(task="lenet-mnist", dataset="mnist")], gap=ours, gap_std=std, paper_gap=paper)
    v = judge(c)
    assert v.label == label and "gap to the baseline" in v.why


def test_a_loss_row_compares_its_value_with_the_papers_within_the_tolerance():
    assert judge(cell(ref(metric="top1_loss_vs_clipped", value=3.0), [-0.13, 0.02])).label == NOT_REPRODUCED
    assert judge(cell(ref(metric="top1_loss", value=1.45), [0.99])).label == REPRODUCED


def test_an_upper_bound_holds_below_the_bound_plus_tolerance():
    bound = ref(metric="top5_loss_mean_upper_bound", value=2.0)
    assert judge(cell(bound, [1.0])).label == REPRODUCED
    assert judge(cell(bound, [2.4])).label == REPRODUCED  # within 0.5 of the bound
    assert judge(cell(bound, [2.6])).label == NOT_REPRODUCED


def test_a_saturated_top5_is_untestable():
    v = judge(cell(ref(metric="top5"), [99.8], [run(top5=0.998)], gap=0.01, paper_gap=-0.09))
    assert v.label == UNTESTABLE and "saturated" in v.why
    assert judge(cell(ref(metric="top5_loss"), [0.05], [run(top5=0.997)])).label == UNTESTABLE


@pytest.mark.parametrize("ours,paper,unit,label", [
    (2.06, 3.04, "x", REPRODUCED),         # measured 2.06x where the paper models 3.04x: within a factor of 2
    (0.82, 3.04, "x", NOT_REPRODUCED),     # slower: the other direction
    (7.0, 3.04, "x", NOT_REPRODUCED),      # beyond a factor of 2
    (29.5, 79.6, "%", REPRODUCED),         # +29.5% vs +79.6%: 1.295 / 1.796 = 0.72
    (-4.5, 79.6, "%", NOT_REPRODUCED),
])
def test_a_speed_up_agrees_in_direction_and_within_a_factor_of_2(ours, paper, unit, label):
    metric = "speedup" if unit == "x" else "speedup_pct"
    assert judge(cell(ref(metric=metric, value=paper, unit=unit), [ours])).label == label


def test_counts_shares_and_choices():
    assert judge(cell(ref(metric="model_size", value=532.1, unit="MB", method="baseline"), [531.45])).label == REPRODUCED
    assert judge(cell(ref(metric="model_size", value=203.4, unit="MB", method="baseline"), [243.86])).label == \
        NOT_REPRODUCED
    stand_in = judge(cell(ref(metric="gb_transferred", value=100.0, unit="GB", method="wgt"), [50.0],
                          [run(task="lenet-mnist", dataset="mnist")]))
    assert stand_in.label == UNTESTABLE and "share of bytes" in stand_in.why
    # bytes per node and iteration: the model's count for the baseline, a threshold's effect for BGT
    per_node = ref(metric="bytes_per_node_per_iteration", value=30.0, unit="MB", method="baseline")
    assert judge(cell(per_node, [30.38], [run(task="lenet-mnist")])).label == NOT_REPRODUCED  # 1.3% off
    bgt = ref(metric="bytes_per_node_per_iteration", value=6.9, unit="KB", method="bgt")
    on_lenet = judge(cell(bgt, [1.77], [run(task="lenet-mnist", dataset="mnist")]))
    assert on_lenet.label == UNTESTABLE and on_lenet.why.startswith("bytes sent on a stand-in model")
    assert judge(cell(bgt, [7.2], [run(steps=10**9)])).label == REPRODUCED  # the paper's own run: within 10%
    assert judge(cell(ref(metric="throughput_images_per_s", value=900.0, unit="images/s"), [12.0])).label == UNTESTABLE
    assert judge(cell(ref(metric="best_delay_steps", value=2, unit="steps"), [2.0])).label == REPRODUCED
    assert judge(cell(ref(metric="best_delay_steps", value=2, unit="steps"), [1.0])).label == NOT_REPRODUCED
    assert judge(cell(ref(metric="warmup_steps_chosen", value=500, unit="iterations"), [499.0])).label == REPRODUCED


def test_a_paper_choice_within_noise_of_the_best_here_is_not_called_wrong():
    best_k = ref(metric="best_delay_steps", value=2, unit="steps")
    close = judge(cell(best_k, [5.0], choice_shortfall=0.14))
    assert close.label == REPRODUCED and "trails the best by 0.14 points: within 0.50" in close.why
    far = judge(cell(best_k, [5.0], choice_shortfall=0.8))
    assert far.label == NOT_REPRODUCED and "trails the best by 0.80 points: beyond 0.50" in far.why
    assert judge(cell(best_k, [5.0], choice_shortfall=0.8, choice_std=0.5)).label == REPRODUCED  # 2 std = 1.0
    assert judge(cell(best_k, [5.0])).label == NOT_REPRODUCED  # no shortfall measured: the exact rule


def test_sections_count_verdicts_and_every_row_has_exactly_one():
    cells = [cell(ref(method="baseline"), [88.0], [run(task="lenet-mnist")]),
             cell(ref(metric="top1_loss", value=1.0), [1.1]),
             cell(ref(metric="top1_loss", value=1.0), [3.0]),
             cell(ref(metric="top1_gain", value=1.0), [], why_missing="no matching run")]
    table = rows(cells)
    assert [r["verdict"] for r in table] == [UNTESTABLE, REPRODUCED, NOT_REPRODUCED, MISSING]
    assert "1 reproduced, 1 not reproduced, 1 untestable, 1 missing" in render(table, "md")


def test_paper_values_print_as_the_paper_printed_them():
    threshold = commbench("table", "--paper", "threshold", "--format", "csv")
    assert threshold.returncode == 0 and ",56.2720," in threshold.stdout and ",15583.03," in threshold.stdout
    terngrad = commbench("table", "--paper", "terngrad")
    assert "| 89.00 |" in terngrad.stdout
