"""The rules that read more than one row of a paper's tables:

* **a no-loss claim on a stand-in needs the paper's own negative control.** "No loss at warm-up 500" reads
  ``transferred`` only where the same table's claimed loss (Fig. 4's "obviously lower" warm-up 100) is found on
  the stand-in too; a stand-in on which nothing loses cannot show that nothing is lost, so otherwise the row is
  ``untestable here (insensitive stand-in: ...)``;
* **a row that repeats another** (the same runs, the same numbers: the threshold paper's Section 4 restates its
  Tables 1-3) names that row in ``same as`` and is left out of the totals;
* **rows called against shared baselines** are named (``shares baseline with``): their errors are correlated, so
  the per-row error of each is not an error rate over them.
"""
from __future__ import annotations

from dataclasses import replace

from commbench.analysis.papers import standing
from commbench.analysis.papers.cell import Cell
from commbench.analysis.papers.verdicts import INCONCLUSIVE, REPRODUCED, UNTESTABLE, Verdict, called_from_an_interval


def with_negative_controls(cells: list[Cell], verdicts: list[Verdict]) -> list[Verdict]:
    """``verdicts``, with every no-loss row on a stand-in that its paper's negative control cannot back made
    untestable (a finding of a loss where the paper has none is kept: the stand-in shows something)."""
    out = list(verdicts)
    for i, (cell, verdict) in enumerate(zip(cells, verdicts)):
        if cell.ref.claim != "no_loss" or verdict.judged_on != standing.STAND_IN or \
                verdict.label not in (REPRODUCED, INCONCLUSIVE):
            continue
        controls = [(c, v) for c, v in zip(cells, verdicts) if c.ref.paper == cell.ref.paper
                    and c.ref.source == cell.ref.source and c.ref.claim == "sign" and c.ref.value < 0
                    and v.judged_on == standing.STAND_IN]
        if any(v.label == REPRODUCED for _, v in controls):
            continue
        if not controls:
            why = "insensitive stand-in: no negative control (no loss the paper claims in this table to detect)"
        else:
            control, seen = controls[0]
            why = (f"insensitive stand-in: the paper's negative control ({control.ref.row}, a loss) is not found on "
                   f"it ({seen.label}: {seen.why})")
        out[i] = replace(verdict, label=UNTESTABLE, why=f"{why}; {verdict.why}")
    return out


def mark_repeats(table: list[dict]) -> None:
    """``same as``: the first earlier row of the same paper that judges the same runs on the same numbers."""
    for i, row in enumerate(table):
        row["same as"] = next((f"{other['source']}: {other['row']}" for other in table[:i]
                               if not other["same as"] and standing.same_runs_and_numbers(other, row)), "")


def mark_shared_baselines(table: list[dict]) -> None:
    """``shares baseline with``: the other called rows whose baseline runs this row's share."""
    called = [r for r in table if called_from_an_interval(r["_verdict"]) and not r["same as"] and r["_baselines"]]
    for row in table:
        row["shares baseline with"] = "; ".join(
            f"{other['source']}: {other['row']}" for other in called
            if other is not row and row in called and row["_baselines"] & other["_baselines"])


def baseline_runs(cell: Cell) -> frozenset[str]:
    """The run ids of the baseline runs a row's values were compared with."""
    backing = cell.gap_backing or cell.backing
    return frozenset(partner.run_id for terms in backing for _, _, partner in terms
                     if partner is not None and partner.config.method == "baseline")
