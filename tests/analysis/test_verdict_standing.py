"""What a verdict stands on (bench/analysis/papers/standing.py, crossrows.py, totals.py): a stand-in's finding
transfers or does not, never reproduces; the paper's number is a sample; a count is right to its printed digits;
a no-loss claim on a stand-in needs the paper's negative control; a repeated row counts once; the totals give
three counts. Planted cases, not the live records."""
from __future__ import annotations

import csv
import dataclasses
import math

import pytest

from commbench.analysis.papers.cell import Cell
from commbench.analysis.papers.tables import render, rows
from commbench.analysis.papers.verdicts import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, UNTESTABLE, judge

from .test_verdicts import BIG, changed, gap_cell, record, ref, spread

ALEXNET = {"task": "alexnet-imagenet", "dataset": "imagenet"}


def stand_in_cell(claim, gaps, **kw) -> Cell:
    """LeNet's per-seed gaps against a row of AlexNet on ImageNet (the paper's baseline 57%, one run of 50,000
    test images: its own SE sqrt(2pq/m) is 0.31 points)."""
    c = gap_cell(claim, gaps, images=BIG, **kw)
    c.paper_baseline = 57.0
    c.stand_in = "lenet-mnist"
    return c


def test_a_stand_in_gap_that_does_not_transfer_says_so_and_counts_under_stand_ins():
    claim = ref(value=-3.3, **ALEXNET)
    v = judge(stand_in_cell(claim, spread(-0.5, 0.05)))
    assert v.label == NOT_REPRODUCED and v.judged_on == "stand-in model"
    assert v.shown == "did not transfer (stand-in: lenet-mnist for alexnet-imagenet)"
    assert v.tested.ref_se == pytest.approx(100 * math.sqrt(2 * 0.57 * 0.43 / 50_000))
    assert v.tested.ref_how == "binomial proxy at the paper's 57.00% on 50,000 test images"
    table = rows([stand_in_cell(claim, spread(-0.5, 0.05)), stand_in_cell(ref(value=-1.0, **ALEXNET),
                                                                          spread(-1.0, 0.05))])
    assert [r["verdict"].split(" (")[0] for r in table] == ["did not transfer", "untestable here"]
    totals = render(table, "md").splitlines()[-1]
    assert "the papers' settings (substitute data included), 0 rows" in totals
    assert "stand-in models, 2 rows: 0 transferred, 1 did not transfer, 0 inconclusive, 1 untestable here" in totals
    parsed = list(csv.DictReader(render(table, "csv").splitlines()))[0]
    assert (parsed["judged on"], parsed["reference se"]) == ("stand-in model", "0.313")
    assert parsed["reference se from"].startswith("binomial proxy")


def test_a_stand_in_gap_as_small_as_imagenets_own_noise_cannot_be_decided_however_many_seeds():
    """GRACE's -0.38 or a 0.25-point margin against 0.31 points of the paper's own noise: 1.645 tau alone fills
    the margin, so no number of seeds here decides it, and the row says >50."""
    v = judge(stand_in_cell(ref(value=-0.38, **ALEXNET), spread(-0.4, 0.02)))
    assert v.label == UNTESTABLE and v.why.startswith("no power") and v.seeds_to_decide == ">50"


def test_the_papers_own_model_on_a_substitute_uses_our_spread_as_a_prediction_interval():
    claim = ref(value=-1.0, task="lenet-mnist")
    c = gap_cell(claim, spread(-1.0, 0.2), images=BIG)
    ours = {r.run_id for r in c.records}  # the method's runs, not their baselines

    def on_a_substitute(r):
        if r["run_id"] in ours:
            r["data"]["substitute_for"] = "mnist"
    v = judge(changed(c, on_a_substitute))
    assert v.judged_on == "substitute data" and v.tested.prediction
    assert v.tested.ref_se == pytest.approx(0.2) and "prediction interval" in v.tested.ref_how


COUNT = dict(metric="model_size", claim="count", margin=1.0, method="baseline", task="nin-imagenet", unit="MB")


@pytest.mark.parametrize("printed,note,ours,label", [
    ("30", 'printed as "just over 30MB per iteration"', 30.38, REPRODUCED),     # on its digits: [30, 30.5)
    ("30", "", 29.4, NOT_REPRODUCED),                                          # 2% off, outside [29.5, 30.5)
    ("203.4", "", 203.38, REPRODUCED),                                         # within 1% and its digits
    ("29", "", 28.95, REPRODUCED),                                             # NiN's 29 MiB, within 1%
    ("53433", 'printed as "just over 53,433 GBs"', 53_441.0, REPRODUCED),      # within 1%
    ("532.10", "", 531.45, REPRODUCED),                                        # VGG-11, within 1%
    ("203.4", "", 243.86, NOT_REPRODUCED),                                     # TernGrad's AlexNet-BN
    ("30", 'printed as "just over 30MB"', 30.6, NOT_REPRODUCED),               # beyond both
])
def test_a_count_is_right_within_1_percent_or_to_its_printed_digits(printed, note, ours, label):
    size = dataclasses.replace(ref(value=float(printed), **COUNT), printed=printed, note=note)
    v = judge(Cell(size, values=[ours], records=[record(0.0, task="nin-imagenet")]))
    assert v.label == label and v.judged_on == "arithmetic"


def warmup_row(row: str, claim: str, value: float, margin=None) -> dict:
    return dict(metric="top1_gain", value=value, claim=claim, margin=margin, unit="sign", source="Section 4.2",
                task="resnet20-cifar10", dataset="cifar10", method="ssdsgd", row=row)


def fig4(control_gaps) -> list[dict]:
    """SSD-SGD Fig. 4 on a LeNet stand-in: warm-up 500 "comparable" (no loss), and the paper's negative control,
    warm-up 100 "obviously lower" (a loss, a sign claim)."""
    cells = []
    for fields, gaps in ((warmup_row("warm-up 100 vs SSGD", "sign", -1.0), control_gaps),
                         (warmup_row("warm-up 500 vs SSGD", "no_loss", 0.0, 0.5), spread(-0.02, 0.02))):
        c = gap_cell(ref(**{k: v for k, v in fields.items() if k not in ("source", "row")}), gaps, images=BIG)
        c.ref = dataclasses.replace(c.ref, source=fields["source"], row=fields["row"])
        c.stand_in = "lenet-mnist"
        cells.append(c)
    return rows(cells)


def test_a_no_loss_claim_on_a_stand_in_that_loses_nothing_anywhere_is_untestable():
    """Warm-up 100 costs nothing measurable on LeNet, as 500 does: the stand-in cannot see the loss the paper
    calls obvious, so its 'no loss' at 500 says nothing."""
    table = fig4(spread(0.0, 0.1))
    assert table[0]["verdict"].startswith("inconclusive") or table[0]["verdict"].startswith("untestable")
    assert table[1]["verdict"] == UNTESTABLE
    assert table[1]["why"].startswith("insensitive stand-in: the paper's negative control (warm-up 100 vs SSGD")


def test_a_no_loss_claim_on_a_stand_in_that_sees_the_papers_negative_control_transfers():
    table = fig4(spread(-1.5, 0.05))
    assert table[0]["verdict"] == "transferred (stand-in: lenet-mnist for resnet20-cifar10)"
    assert table[1]["verdict"] == "transferred (stand-in: lenet-mnist for resnet20-cifar10)"


def test_a_no_loss_claim_on_a_stand_in_without_a_negative_control_is_untestable():
    c = gap_cell(ref(metric="top1_gain", value=0.0, claim="no_loss", margin=0.5, **ALEXNET), spread(0.0, 0.02),
                 images=BIG)
    [row] = rows([c])
    assert row["verdict"] == UNTESTABLE and row["why"].startswith("insensitive stand-in: no negative control")


def test_a_row_that_repeats_another_names_it_and_counts_once():
    """The threshold paper's Section 4 restates Table 1's loss at T = 5e-3: the same runs, the same numbers."""
    table_row = gap_cell(ref(value=-1.45, **ALEXNET), spread(0.0, 0.05))
    restated = Cell(dataclasses.replace(table_row.ref, metric="top1_loss", value=1.45, source="Section 4",
                                        row="WGT: accuracy below baseline"),
                    values=[-g for g in table_row.values], records=table_row.records, backing=table_row.backing,
                    run_ids=["a", "b", "c"])
    table_row.run_ids = ["a", "b", "c"]
    for c in (table_row, restated):
        c.paper_baseline, c.stand_in = 57.0, "lenet-mnist"
    table = rows([table_row, restated])
    assert table[0]["same as"] == "" and table[1]["same as"] == "Table 2: r"
    assert render(table, "md").splitlines()[-1].startswith("**Totals over 2 rows (1 repeat another row and are not "
                                                           "counted): ")
    assert "stand-in models, 1 rows" in render(table, "md").splitlines()[-1]


def test_called_rows_against_one_baseline_are_named_together():
    a, b = stand_in_cell(ref(value=-3.3, **ALEXNET), spread(-0.5, 0.05)), \
        stand_in_cell(ref(value=-4.0, **ALEXNET), spread(-0.5, 0.05))
    b.backing = [[(1.0, run, a.backing[i][0][2])] for i, (_, run, _) in enumerate(t[0] for t in b.backing)]
    table = rows([a, b])
    assert table[0]["shares baseline with"] == "Table 2: r" and table[1]["shares baseline with"] == "Table 2: r"
    assert "2 rows were called by a test at a per-row error of at most 5%; 2 of them share" in \
        render(table, "md").splitlines()[-1]


def test_inconclusive_rows_say_how_many_seeds_would_decide_them():
    """The seeds at which the test would have 80% power at a true difference of 0: 3 here already (the row is
    inconclusive because it lies near the margin, not for want of power); with seeds that disagree more, more."""
    v = judge(gap_cell(ref(value=-1.0), spread(-0.55, 0.05), images=BIG))
    assert v.label == INCONCLUSIVE and v.seeds_to_decide == "3"
    wider = judge(gap_cell(ref(value=-1.0), spread(-0.55, 0.12), images=BIG))
    assert int(wider.seeds_to_decide) > 3
