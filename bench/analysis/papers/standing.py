"""What a row's verdict stands on, and what that lets it say.

* **Judged on** one of: the paper's setting (its model on its data), substitute data (its model on a labelled
  substitute, ``cifar10-jpeg`` for ``cifar10``), a stand-in model (LeNet on MNIST for AlexNet on ImageNet), or
  arithmetic (a model's size, its gradients and bytes, from its parameter count). A row judged on a stand-in
  says whether the paper's finding *transferred* to the stand-in, never that the paper was or was not
  reproduced: that a gap did not show on LeNet says nothing against AlexNet.
* **The paper's number is a sample.** The reference's own standard error tau, for value and gap claims: our
  per-seed SD where our runs are the paper's model on its data or a labelled substitute (then the interval of
  ours - paper is a prediction interval); elsewhere the binomial proxy at the paper's accuracy and test-set size
  (on a stand-in our SD is the stand-in's: LeNet's 0.03-0.08 points would hide ImageNet's 0.2-0.31); the larger
  where both apply.
"""
from __future__ import annotations

import math

from commbench.analysis.papers import stats
from commbench.analysis.papers.cell import Cell
from commbench.analysis.papers.evidence import runs_of

PAPER, SUBSTITUTE, STAND_IN, ARITHMETIC = "paper's setting", "substitute data", "stand-in model", "arithmetic"
JUDGED_ON = (PAPER, SUBSTITUTE, STAND_IN, ARITHMETIC)
# the test-set size of each paper data set: the binomial proxy of a paper's own run-to-run error
PAPER_TEST_IMAGES = {"imagenet": 50_000, "cifar10": 10_000, "mnist": 10_000}


def judged_on(cell: Cell) -> tuple[str, str]:
    """(what the row is judged on, the stand-in as ``lenet-mnist for alexnet-imagenet`` where it is one)."""
    ref = cell.ref
    if ref.claim == "count":
        return ARITHMETIC, ""
    runs = runs_of(cell)
    if not runs:  # a missing row: what would judge it, where a stand-in is declared for it
        return (STAND_IN, f"{cell.stand_in} for {ref.task}") if cell.stand_in else (PAPER, "")
    others = sorted({r.config.task for r in runs if ref.task and r.config.task != ref.task})
    if others:
        return STAND_IN, f"{', '.join(others)} for {ref.task}"
    substituted = any(r.data.get("substitute_for") or
                      (ref.dataset and r.config.dataset not in (ref.dataset, "synthetic")) for r in runs)
    return (SUBSTITUTE if substituted else PAPER), ""


def reference_se(cell: Cell, ours: stats.Estimate, gap: bool, on: str) -> stats.Estimate:
    """``ours`` (an estimate of ours - the paper's) with the paper's number counted as a sample: tau and where it
    comes from (module docstring). Unchanged where neither source applies (no accuracy of the paper to take a
    binomial proxy from, and not the paper's model)."""
    ref = cell.ref
    runs = max(1, getattr(ref, "paper_runs", 1) or 1)  # tau / sqrt(k) where the paper averaged k runs
    found: list[tuple[float, str, bool]] = []
    accuracy = cell.paper_baseline if gap else ref.value
    images = PAPER_TEST_IMAGES.get(ref.dataset or "")
    if accuracy is not None and images and 0 < accuracy < 100:
        p = accuracy / 100
        tau = 100 * math.sqrt((2 if gap else 1) * p * (1 - p) / images) / math.sqrt(runs)
        found.append((tau, f"binomial proxy at the paper's {accuracy:.2f}% on {images:,} test images", False))
    if on in (PAPER, SUBSTITUTE) and ours.per_seed_sd is not None:
        found.append((ours.per_seed_sd / math.sqrt(runs),
                       "our per-seed SD (the paper's model): a prediction interval", True))
    if not found:
        return ours
    tau, how, prediction = max(found, key=lambda f: f[0])
    return ours.with_reference(tau, how, prediction)


def same_runs_and_numbers(a: dict, b: dict) -> bool:
    """Two rows of one paper that judge the same runs on the same numbers (the threshold paper's Section 4
    restates Table 1-3's losses): counted once."""
    ta, tb = a["_verdict"].tested, b["_verdict"].tested
    return (a["paper"] == b["paper"] and a["runs"] and set(a["runs"].split()) == set(b["runs"].split())
            and ta is not None and tb is not None and abs(abs(ta.value) - abs(tb.value)) < 0.005)
