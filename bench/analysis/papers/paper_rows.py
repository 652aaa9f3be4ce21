"""The paper's other rows that a reproduced row is read against: its baseline's value of a metric, and the
paper's own gap and baseline accuracy in the row's setting."""
from __future__ import annotations

from commbench.analysis.papers.reference import Reference


def paper_baseline_value(ref: Reference, references: list[Reference], metric: str) -> Reference | None:
    """The paper's own baseline value of ``metric`` (the threshold paper's 53,433 GB; its 30 MB per node)."""
    hits = [r for r in references if r.paper == ref.paper and r.method == "baseline" and r.metric == metric
            and r.task == ref.task]
    return hits[0] if len(hits) == 1 else None


def baseline_row(ref: Reference, references: list[Reference], metric: str) -> Reference | None:
    """The paper's baseline row of ``metric`` for the row's setting: the same table's; else the paper's one plain
    baseline of that setting (the threshold paper states its baseline in Section 3.1, not in its Tables 1-3)."""
    same = [r for r in references if r.paper == ref.paper and r.method == "baseline" and r.metric == metric
            and r.task == ref.task and r.workers == ref.workers and r.global_batch == ref.global_batch
            and r.batch_per_worker == ref.batch_per_worker]
    hits = [r for r in same if r.source == ref.source] or [r for r in same if not r.variants]
    return hits[0] if len(hits) == 1 else None


def paper_gap(ref: Reference, references: list[Reference]) -> float | None:
    """The paper's own gap of a method's top-1/top-5 to its baseline row of the same table and setting."""
    if ref.metric not in ("top1", "top5") or ref.method in (None, "baseline"):
        return None
    base = baseline_row(ref, references, ref.metric)
    return ref.value - base.value if base is not None else None


def paper_baseline_accuracy(ref: Reference, references: list[Reference]) -> float | None:
    """The paper's baseline accuracy (points) in the setting of a row about accuracy, where the paper states it:
    the length gate holds our baseline to it on the paper's own data."""
    metric = "top5" if ref.metric.startswith("top5") else "top1"
    if ref.metric not in ("top1", "top5") and not ref.metric.startswith(("top1_", "top5_", "accuracy_")):
        return None
    base = baseline_row(ref, references, metric)
    return base.value if base is not None else None
