"""A reproduced row (``Cell``): its values in the paper's unit, the runs behind each value, and why it is
missing or cannot be compared where it is."""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from commbench.analysis.papers.reference import Reference
from commbench.analysis.runs import Run


# one term of a value: (weight, run, partner). A value is the weighted sum over its terms of (run - partner), or of
# the run alone where the partner is None (an absolute value); the terms say which runs' test images it rests on
Term = tuple[float, Run, "Run | None"]


@dataclass
class Cell:
    """The reproduction of one reference row, and the runs behind each of its values (for the verdict's errors)."""

    ref: Reference
    values: list[float] = field(default_factory=list)  # one per matched run (or pair, or seed), in the row's unit
    markers: list[str] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)
    why_missing: str | None = None
    records: list[Run] = field(default_factory=list)  # the matched runs (one per value)
    backing: list[list[Term]] = field(default_factory=list)  # per value: the runs it is computed from
    # top-1/top-5 rows of a method: ours minus our baseline (same setting and seed), per seed, and their runs
    gap_values: list[float] = field(default_factory=list)
    gap_backing: list[list[Term]] = field(default_factory=list)
    # where the paper reports a run's best evaluation (the gaps above are of the best top-1s): the same seeds' gaps
    # at the last evaluation, which the verdict states beside its own (a best over evaluations favours noise)
    final_gap_values: list[float] = field(default_factory=list)
    final_gap_backing: list[list[Term]] = field(default_factory=list)
    paper_gap: float | None = None       # the same gap in the paper (its baseline row of the same table)
    paper_baseline: float | None = None  # the paper's baseline accuracy of the row's setting, where it states one
    # best-k / best-warm-up rows: the runs of each choice swept, and the choice the paper names
    choices: dict = field(default_factory=dict)
    chosen: object = None
    # speed rows: the setting declared to stand for the paper's (config.grid.Declaration), and per declared link
    # the (speed-up, run, baseline) of each launch
    declared: object = None
    links: dict = field(default_factory=dict)
    untestable: str | None = None  # why the runs that exist cannot be compared with this row (the verdict says it)
    stand_in: str | None = None  # the stand-in task declared for the row (analogues.yaml), whether or not it ran

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.values) if self.values else None

    @property
    def std(self) -> float | None:
        return statistics.stdev(self.values) if len(self.values) > 1 else None

    @property
    def gap(self) -> float | None:
        return statistics.fmean(self.gap_values) if self.gap_values else None

    @property
    def delta(self) -> float | None:
        return None if self.mean is None else self.mean - self.ref.value
