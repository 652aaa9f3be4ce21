"""The papers' tables rebuilt from the reference values and the stored records: one section per table or
figure, in the paper's order, each row its value, the reproduction (mean ± std over seeds, n), the delta,
a method's gap to its baseline in the paper and in the reproduction, and how the reproduction's setting
differs. A row without a matching run stays, marked missing."""
from __future__ import annotations

import csv
import io
from pathlib import Path

from commbench.config import ConfigError
from commbench.config.grid import GRIDS_DIR
from commbench.methods import METHODS

from commbench.analysis.runs import Run, read_runs
from commbench.analysis.papers.reference import PAPER_DIR, PAPERS, load_analogues, load_declarations, load_references
from commbench.analysis.papers.cell import Cell
from commbench.analysis.papers.differs import paper_arm_conditions
from commbench.analysis.papers.metric_kinds import NO_MATCH
from commbench.analysis.papers.paper_rows import paper_baseline_accuracy, paper_gap
from commbench.analysis.papers.reproduce import reproduce
from commbench.analysis.papers.rerun import grids_rerunning
from commbench.analysis.papers.crossrows import (baseline_runs, mark_repeats, mark_shared_baselines,
                                                 with_negative_controls)
from commbench.analysis.papers.matching import target
from commbench.analysis.papers.totals import summary, totals_line, verdict_counts
from commbench.analysis.papers.verdicts import judge

FORMATS = ("md", "csv", "latex", "json")
MISSING = "missing"


def paper_names(which: str) -> list[str]:
    return list(PAPERS) if which == "all" else [which]


def superseded(run: Run) -> str | None:
    """Why a run no longer counts: it was made by an older version of its method (commbench.methods.base.Method.version),
    whose computation has changed since. None for a current run."""
    c = run.config
    method = METHODS.get(c.method)
    made_by = c.method_version  # a record from before versions were stored: 1
    if method is None or method.computes_as(made_by, c.workers or 0, run.params):
        return None
    return f"{c.method} v{made_by}, now v{method.version}"


def build(which: str, results: Path, paper_dir: Path = PAPER_DIR, declarations: list | None = None,
          grids: Path | None = None) -> list[Cell]:
    """Every reference row of the paper(s) with its reproduction from the records below ``results``. Records of
    an older version of their method are left out; a row only they would fill says so, and names the grids under
    ``grids`` that run it again (the shipped ones where the reference tables are)."""
    # a run of a timm model (model.timm) is the user's own experiment, never a paper's network
    records = [r for r in read_runs(results) if isinstance(r.stored, dict)
               and not (r.config.model_options or {}).get("timm")]
    current = [r for r in records if superseded(r) is None]
    analogues = load_analogues(paper_dir)
    shipped = Path(paper_dir) == PAPER_DIR
    if declarations is None:  # the shipped grids' declarations name rows of the shipped reference tables
        declarations = load_declarations() if shipped else []
    if grids is None and shipped:
        grids = GRIDS_DIR
    cells = []
    for paper in paper_names(which):
        references = load_references(paper, paper_dir)
        tables = {r.source for r in references}
        for a in analogues:
            if a.paper == paper and (unknown := [x for x in a.sources if x not in tables]):
                raise ConfigError(f"{Path(paper_dir) / 'analogues.yaml'}: the stand-in for {a.task} names "
                                  f"{', '.join(map(repr, unknown))}, which is no table or section of {paper}'s rows "
                                  f"({', '.join(sorted(tables))})")
        for ref in references:
            cell = reproduce(ref, current, analogues, references, declarations)
            stand_in = target(ref, analogues)[1]
            cell.stand_in = stand_in.use.get("task") if stand_in is not None else None
            conditions, blocking = paper_arm_conditions(ref, cell.records)
            cell.markers += conditions
            if blocking and cell.values and not cell.untestable:
                cell.untestable = blocking
            if not cell.values and len(current) < len(records):
                old = reproduce(ref, records, analogues, references, declarations)
                old_records = [r for r in records if r.run_id in old.run_ids and superseded(r)]
                stale = sorted({superseded(r) for r in old_records})
                if stale:  # and what the current records lack, where they say (it may be why a re-run is missing)
                    lack = cell.why_missing not in (None, NO_MATCH)
                    now = f"; the current records: {cell.why_missing}" if lack else ""
                    cell.why_missing = (f"only records of an older version of the method ({', '.join(stale)}: its "
                                        f"computation changed), left out: {_rerun(old_records, grids)}{now}")
            cell.paper_gap = paper_gap(ref, references)
            cell.paper_baseline = paper_baseline_accuracy(ref, references)
            cells.append(cell)
    return cells


def _rerun(runs: list[Run], grids: Path | None) -> str:
    """What runs these superseded runs' settings again: a grid's sweep into the folder that holds them."""
    names = grids_rerunning(runs, grids) if grids is not None else []
    if not names:
        return "re-run the grid that made them"
    # the file a record was read from (iter_records notes it beside the record)
    outs = sorted({str(Path(r.record["_path"]).parent.parent) for r in runs if r.record.get("_path")})
    out = f" --out {outs[0]}" if len(outs) == 1 else ""
    return " or ".join(f"commbench sweep {name}{out}" for name in names) + " runs them again"


def _decimals(ref, unit: str) -> int:
    """As many decimals as the paper printed, at least two (a reproduction is finer than 98%)."""
    if unit == "count":
        return 0
    text = ref.printed or repr(float(ref.value))
    printed = 0 if "e" in text.lower() or "." not in text else len(text.split(".")[1])
    return max(2, min(printed, 6))


def _paper_value(ref) -> str:
    """The paper's number as the paper printed it (56.2720, 89.00, 15583.03); large counts with separators."""
    if ref.printed and not (ref.unit == "count" or (float(ref.value).is_integer() and abs(ref.value) >= 1000)):
        return ref.printed
    return _number(ref.value, ref.unit)


def _number(value: float | None, unit: str, decimals: int | None = None) -> str:
    if value is None:
        return ""
    if decimals is None:  # a paper's value: as printed
        return f"{value:,.0f}" if unit == "count" or (float(value).is_integer() and abs(value) >= 1000) \
            else f"{value:g}"
    return f"{value:,.{decimals}f}"


def _reproduced(cell: Cell) -> str:
    if not cell.values:
        return MISSING
    d = _decimals(cell.ref, cell.ref.unit)
    text = _number(cell.mean, cell.ref.unit, d)
    return text + (f" ± {_number(cell.std, cell.ref.unit, d)}" if cell.std is not None else "")


def _stat(value: float | None, decimals: int = 3) -> str:
    return "" if value is None else f"{value:.{decimals}f}"


def rows(cells: list[Cell]) -> list[dict]:
    verdicts = with_negative_controls(cells, [judge(c) for c in cells])
    out = []
    for c, verdict in zip(cells, verdicts):
        r = c.ref
        interval = verdict.interval
        tested = verdict.tested
        out.append({"paper": r.paper, "source": r.source, "row": r.row, "setting": r.setting(), "metric": r.metric,
                    "unit": r.unit, "paper value": _paper_value(r), "reproduced": _reproduced(c),
                    "n": str(c.n) if c.n else "",
                    "delta": f"{c.delta:+,.{_decimals(r, r.unit)}f}" if c.delta is not None else "",
                    "paper gap": f"{c.paper_gap:+.2f}" if c.paper_gap is not None else "",
                    "our gap": f"{c.gap:+.2f}" if c.gap is not None else "",
                    # a missing row says why in the why column, as every other verdict does
                    "verdict": verdict.shown, "judged on": verdict.judged_on, "why": verdict.why,
                    "differs": "; ".join(c.markers) if c.values else "",
                    # the numbers behind the verdict: the quantity tested (ours - paper, our gap, ...), its interval
                    "claim": r.claim or "", "tested": _stat(tested.value if tested else None),
                    "interval low": _stat(interval[0] if interval else None),
                    "interval high": _stat(interval[1] if interval else None),
                    "level": f"{verdict.level:.0%}" if interval else "",
                    "margin": "" if verdict.margin is None else f"{verdict.margin:g}",
                    "se": _stat(tested.se if tested else None), "se from": tested.how if tested else "",
                    "reference se": _stat(tested.ref_se if tested else None),
                    "reference se from": tested.ref_how if tested and tested.ref_se is not None else "",
                    "paired seeds": str(tested.n) if tested else "", "seeds to decide": verdict.seeds_to_decide,
                    "runs": " ".join(c.run_ids), "_verdict": verdict, "_baselines": baseline_runs(c)})
    mark_repeats(out)
    mark_shared_baselines(out)
    return out


SHOWN = ["row", "setting", "metric", "unit", "paper value", "reproduced", "n", "delta", "paper gap", "our gap",
         "verdict", "judged on", "why", "differs", "same as"]
NUMERIC = ("paper value", "n", "delta", "paper gap", "our gap")
STATS = ["claim", "tested", "interval low", "interval high", "level", "margin", "se", "se from", "reference se",
         "reference se from", "paired seeds", "seeds to decide", "shares baseline with"]
LEGEND = ("reproduced: mean ± std over the seeds of one setting (n runs); delta: reproduced - paper; gap: a "
          "method's top-1/top-5 minus its baseline's, in the paper (the same table's baseline row) and here (the "
          "baseline run of the same setting and seed); verdict: reproduced, not reproduced, inconclusive, untestable "
          "here or missing, and on a stand-in model transferred or did not transfer, by the rule in docs/papers.md "
          "(why: what was compared, with its interval, margin and paired seeds, or why it cannot be); judged on: the "
          "paper's setting, substitute data, a stand-in model or arithmetic; differs: how the runs' setting departs "
          "from the paper's; same as: the row this one repeats (not counted). The CSV and JSON formats carry the "
          "interval's numbers, the paper's own standard error and the seeds that would decide a row in columns of "
          "their own.")


def sections(table: list[dict]):
    """Consecutive rows of one (paper, source): the paper's tables in its own order."""
    current, group = None, []
    for row in table:
        key = (row["paper"], row["source"])
        if key != current and group:
            yield current, group
            group = []
        current = key
        group.append(row)
    if group:
        yield current, group


def layout(group: list[dict]) -> tuple[list[str], list[dict]]:
    """A section in the paper's own layout: one line per row of the paper and a column group per metric (the
    threshold paper's Table 1: T | accuracy | GB | %/GB; TernGrad's Table 2: top-1 | top-5). A section whose
    rows each carry one number keeps the long layout: one line per number (``SHOWN``)."""
    labels: dict[str, list[dict]] = {}
    for r in group:
        labels.setdefault(r["row"], []).append(r)
    metrics = list(dict.fromkeys(r["metric"] for r in group))
    one_each = all(len({r["metric"] for r in rs}) == len(rs) for rs in labels.values())
    if len(metrics) < 2 or not one_each or all(len(rs) == 1 for rs in labels.values()):
        return SHOWN, group
    units = {r["metric"]: r["unit"] for r in group}
    with_gaps = {r["metric"] for r in group if r["paper gap"] or r["our gap"]}

    def head(metric: str, what: str) -> str:
        return f"{metric}{f' ({units[metric]})' if units[metric] else ''}: {what}"

    columns = ["row", "setting"]
    for m in metrics:
        columns += [head(m, "paper"), head(m, "reproduced"), head(m, "delta")]
        columns += [head(m, "paper gap"), head(m, "our gap")] if m in with_gaps else []
        columns.append(head(m, "verdict"))
    columns += ["why", "differs"]
    lines = []
    for label, rs in labels.items():
        line = dict.fromkeys(columns, "")
        line.update({"row": label, "setting": rs[0]["setting"]})
        why: list[str] = []
        # a condition every metric of the line shares is said once; one only some metrics' runs have is
        # said with the metric (two extremes over worker counts come from different runs)
        markers = {r["metric"]: r["differs"].split("; ") if r["differs"] else [] for r in rs}
        shared = [d for d in markers[rs[0]["metric"]] if all(d in ms for ms in markers.values())]
        differs = shared + [f"{m}: {d}" for m, ms in markers.items() for d in ms if d not in shared]
        for r in rs:
            m = r["metric"]
            line.update({head(m, "paper"): r["paper value"], head(m, "reproduced"): _with_n(r),
                         head(m, "delta"): r["delta"], head(m, "verdict"): r["verdict"]})
            if m in with_gaps:
                line.update({head(m, "paper gap"): r["paper gap"], head(m, "our gap"): r["our gap"]})
            if r["why"]:
                why.append(f"{m}: {r['why']}")
        line["why"] = "; ".join(why)
        line["differs"] = "; ".join(differs)
        lines.append(line)
    return columns, lines


def _with_n(row: dict) -> str:
    """The reproduced value, with its number of runs where it is a mean over more than one."""
    return row["reproduced"] + (f" (n={row['n']})" if row["n"] not in ("", "1") else "")


def _numeric(column: str) -> bool:
    return column in NUMERIC or column.endswith((": paper", ": delta", ": paper gap", ": our gap"))


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_markdown(table: list[dict]) -> str:
    parts = [f"_{LEGEND}_\n"] if table else []
    for (paper, source), group in sections(table):
        parts.append(f"### {PAPERS[paper]}: {source}\n\n{verdict_counts(group)}\n")
        columns, lines = layout(group)
        parts.append("| " + " | ".join(_md_cell(c) for c in columns) + " |")
        parts.append("|" + "|".join("---:" if _numeric(c) else "---" for c in columns) + "|")
        parts += ["| " + " | ".join(_md_cell(r[c]) for c in columns) + " |" for r in lines]
        parts.append("")
    if table:
        parts.append(f"**{totals_line(table)}**")
    return "\n".join(parts) + ("\n" if parts else "(no reference values)\n")


def render_summary(table: list[dict], full: str) -> str:
    """What a terminal gets of the papers' tables, whose whole is some 100 KB: each paper with one line per table
    or section (its verdict counts), the totals, and ``full``, the command that prints everything."""
    if not table:
        return "(no reference values)\n"
    parts, paper_now = [], None
    width = max(len(source) for (_, source), _ in sections(table))
    for (paper, source), group in sections(table):
        if paper != paper_now:
            parts.append(PAPERS[paper])
            paper_now = paper
        parts.append(f"  {source:<{width}}  {verdict_counts(group)}")
    parts += ["", totals_line(table), "", f"the full tables: {full}"]
    return "\n".join(parts) + "\n"


def render_csv(table: list[dict]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=["paper", "source", *SHOWN, *STATS, "runs"], lineterminator="\n",
                            extrasaction="ignore")
    writer.writeheader()
    writer.writerows(table)
    if table:  # the totals, as a last row of their own: paper "all", source "totals"
        writer.writerow({"paper": "all", "source": "totals", "row": "totals", "n": str(len(table)),
                         "why": totals_line(table)})
    return buf.getvalue()


def render_json(table: list[dict]) -> str:
    import json

    return json.dumps({"rows": [{k: v for k, v in r.items() if not k.startswith("_")} for r in table],
                       "summary": summary(table)}, indent=1) + "\n"


_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "±": r"$\pm$",
                  "—": "---", "≥": r"$\geq$", "≤": r"$\leq$", "×": r"$\times$"}


def latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)


def render_latex(table: list[dict]) -> str:
    """One booktabs table per paper table (needs \\usepackage{booktabs})."""
    parts = []
    for (paper, source), group in sections(table):
        caption = (rf"\caption{{{latex_escape(PAPERS[paper])}: {latex_escape(source)}, paper vs.\ reproduced "
                   rf"({latex_escape(verdict_counts(group))})}}")
        columns, lines = layout(group)
        if columns is not SHOWN:  # the paper's layout: a column group per metric
            spec = "".join("r" if _numeric(c) or c.endswith(": reproduced") else "l" for c in columns)
            parts += [r"\begin{table}[ht]", r"\centering", r"\small", caption, rf"\begin{{tabular}}{{{spec}}}",
                      r"\toprule", " & ".join(latex_escape(c) for c in columns) + r" \\", r"\midrule"]
            parts += [" & ".join(latex_escape(r[c]) for c in columns) + r" \\" for r in lines]
            parts += [r"\bottomrule", r"\end{tabular}", r"\end{table}", ""]
            continue
        parts += [r"\begin{table}[ht]", r"\centering", r"\small", caption,
                  r"\begin{tabular}{lllrrrrrlll}", r"\toprule",
                  r"Row & Setting & Metric & Paper & Reproduced & $\Delta$ & Paper gap & Our gap & Verdict & Why & "
                  r"Differs \\",
                  r"\midrule"]
        for r in group:
            unit = f" ({r['unit']})" if r["unit"] else ""
            fields = [r["row"], r["setting"], r["metric"] + unit, r["paper value"],
                      _with_n(r), r["delta"],
                      r["paper gap"], r["our gap"], r["verdict"], r["why"], r["differs"]]
            parts.append(" & ".join(latex_escape(f) for f in fields) + r" \\")
        parts += [r"\bottomrule", r"\end{tabular}", r"\end{table}", ""]
    return "\n".join(parts) + "\n"


def render(table: list[dict], fmt: str) -> str:
    return {"md": render_markdown, "csv": render_csv, "latex": render_latex, "json": render_json}[fmt](table)
