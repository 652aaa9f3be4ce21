"""Speed rows: the setting a grid declared before measuring (its model, batch, workers and links) and the launches
on each declared link that fill the row."""
from __future__ import annotations

from collections import defaultdict

from commbench.analysis.papers.cell import Cell
from commbench.analysis.papers.reference import Reference
from commbench.analysis.papers.runs import link_of, setting_of
from commbench.analysis.runs import Run


def declaration_for(ref: Reference, declarations) -> object:
    """The grid declaration that names this row (its paper, source, model and, where declared, batch)."""
    for d in declarations:
        if (d.paper, d.source, d.task) == (ref.paper, ref.source, ref.task) and \
                (d.batch_per_worker is None or d.batch_per_worker == ref.batch_per_worker):
            return d
    return None


def declared_for_another_batch(ref: Reference, declarations) -> object:
    if declaration_for(ref, declarations) is not None:
        return None
    return next((d for d in declarations if (d.paper, d.source, d.task) == (ref.paper, ref.source, ref.task)), None)


def declared_links(cell: Cell, paired: list[tuple[float, Run]], declared) -> tuple[list, list]:
    """The launches of the declared number of workers on each declared link, one setting per link (the one with
    the most launches); the first declared link that has any fills the row's value, the verdict reads them all."""
    by_link: dict[str, list] = defaultdict(list)
    for v, r in paired:
        if r.config.workers == declared.workers and link_of(r) in declared.links and \
                (declared.topology is None or r.params.get("topology") == declared.topology):
            by_link[link_of(r)].append((v, r))
    for link in declared.links:
        if by_link.get(link):
            settings: dict[str, list] = defaultdict(list)
            for v, r in by_link[link]:
                settings[setting_of(r)].append((v, r))
            cell.links[link] = max(settings.values(), key=len)
    if not cell.links:
        cell.why_missing = why_unmeasured(declared, measured_any=bool(paired))
        return [], []
    return next(cell.links[link] for link in declared.links if link in cell.links), []


def why_unmeasured(declared, measured_any: bool) -> str:
    """Why a declared row has no value: its grid has not run (the command that runs it), or its runs are of other
    workers, links or topology than the declaration's."""
    grid = f"bench/grids/campaign/{declared.grid}.yaml"
    if not measured_any:  # every declared link is emulated (--net: root), and a speed counts only timed alone
        return (f"no run of {declared.task} with its baseline yet: commbench sweep {grid} --out results/campaign "
                f"(root; each run alone)")
    on = f" on the {declared.topology} topology" if declared.topology else ""
    return (f"no measurement of {declared.workers} workers{on} on the declared links "
            f"({', '.join(declared.links)}; {grid})")
