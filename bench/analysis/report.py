"""``commbench report``: every table and figure in one markdown file and one self-contained HTML page.

Regenerated from the records and the reference values only; nothing in it depends on when or where it was
made (no timestamps, sorted inputs), so deleting every generated file and running it again gives the same
bytes. The report is built as a list of blocks rendered twice (markdown, HTML), not converted.
"""
from __future__ import annotations

import base64
import hashlib
import html
import re
from dataclasses import dataclass
from pathlib import Path

from commbench.store.safe_io import ensure_folder, output_root, read_small_text
from commbench.analysis.papers.reference import PAPERS
from commbench.analysis.papers.tables import LEGEND, build, layout, rows, sections, totals_line, verdict_counts
from commbench.analysis.plots import plot_all
from commbench.store.records import MAX_RECORD_BYTES, UnreadableRecord, iter_records, part_way_line
from commbench.store.results_folder import CAMPAIGN, ReportFolder, ResultsFolder
from commbench.analysis.table import COLUMNS, comparison, records_frame


@dataclass(frozen=True)
class Block:
    kind: str            # "h1", "h2", "h3", "p", "table", "image", "pre"
    text: str = ""
    header: tuple = ()   # table columns
    body: tuple = ()     # table rows (tuples of strings)
    path: Path | None = None


def _table_block(columns, records) -> Block:
    return Block("table", header=tuple(columns), body=tuple(tuple(str(r[c]) for c in columns) for r in records))


def record_digest(results: Path) -> tuple[int, str]:
    """How many records went in, and a hash of their contents: names the exact inputs of a report."""
    h = hashlib.sha256()
    n = 0
    for r in iter_records(results):
        try:  # read again, bounded as the first time: the file may have been swapped since
            h.update(read_small_text(Path(r["_path"]), MAX_RECORD_BYTES, UnreadableRecord).encode())
        except UnreadableRecord:
            continue
        n += 1
    return n, h.hexdigest()[:16]


def model_blocks() -> list[Block]:
    """The performance models' headline numbers (TernGrad Figure 5 under the paper's assumptions)."""
    try:
        from commbench.analysis.perfmodel.report import report_blocks
    except ImportError:  # the models are optional for a report
        return []
    return [Block(**b) for b in report_blocks()]


def _fmt(value, spec: str, suffix: str = "") -> str:
    """A table cell: the number in ``spec`` with ``suffix``, or a dash where there is none."""
    return "—" if value is None else format(value, spec) + suffix


def network_blocks(results: Path) -> list[Block]:
    """Runs on the emulated network: measured images/s beside the model's prediction for the same setting."""
    from commbench.analysis.perfmodel.measured import comparison

    rows = comparison(results)
    if not rows:
        return []

    def pct(value):
        return _fmt(value, "+.0f", "%")

    header = ("task", "method", "workers", "link", "batch/worker", "measured images/s",
              "model (1-worker profile)", "error", "model (loopback profile)", "error", "wire bytes/step",
              "network term")
    body = tuple((r["task"], r["method"], str(r["workers"]), r["net"], str(r["batch_per_worker"]),
                  _fmt(r["measured_images_per_s"], ".2f"), _fmt(r["modelled_images_per_s"], ".2f"),
                  pct(r["model_error_pct"]), _fmt(r["loopback_modelled_images_per_s"], ".2f"),
                  pct(r["loopback_model_error_pct"]), _fmt(r["wire_bytes_per_step"], ",.0f"), r["network_term"])
                 for r in rows)
    return [Block("h2", "Emulated network: measured vs modelled throughput"),
            Block("p", "Every process in its own network namespace, each link limited with tc tbf (--net). "
                       "Modelled: TernGrad's weak-scaling model (supplement Eq. 8-9) with the link rate and the "
                       "run's own ledger bytes per step, once with the 1-worker run's step time as the compute "
                       "time (as the paper profiles it) and once with the step time of the same workers on the "
                       "host's loopback (the same processes sharing the same cores, no rate limit; "
                       "bench/analysis/perfmodel/measured.py). Runs with parameter servers are priced by their busiest "
                       "links instead (the servers' ledger bytes over S links: the all-reduce of Eq. 8-9 does "
                       "not describe them). A missing profile run leaves its column empty."),
            Block("table", header=header, body=body)]


def two_level_blocks(results: Path) -> list[Block]:
    """Runs across nodes with limited links: measured images/s beside TernGrad's model in its two-level form
    (i workers per node, j nodes) and with every link slow."""
    from commbench.analysis.perfmodel.measured import two_level_comparison

    rows = two_level_comparison(results)
    if not rows:
        return []

    header = ("task", "method", "workers (i x j)", "link between nodes", "batch/worker", "bytes/worker/step",
              "measured images/s", "model, two levels", "error", "model, every link slow", "error",
              "ring on the node links", "error")
    body = tuple((r["task"], r["method"], f"{r['workers']} ({r['workers_per_node']} x {r['nodes']})", r["node_link"],
                  str(r["batch_per_worker"]), _fmt(r["grad_bytes_per_step"], ",.0f"),
                  _fmt(r["measured_images_per_s"], ".2f"), _fmt(r["two_level_images_per_s"], ".2f"),
                  _fmt(r["two_level_error_pct"], "+.0f", "%"), _fmt(r["one_level_images_per_s"], ".2f"),
                  _fmt(r["one_level_error_pct"], "+.0f", "%"), _fmt(r["ring_images_per_s"], ".2f"),
                  _fmt(r["ring_error_pct"], "+.0f", "%")) for r in rows)
    return [Block("h2", "Two nodes: measured vs the two-level model"),
            Block("p", "Runs through Slurm on the two-node cluster (slurm/local/up2.sh --rate): i workers on each "
                       "of j nodes, fast links inside a node, the rate-limited link between nodes (the run's "
                       "node_link, checked by every process). Modelled: TernGrad's weak-scaling model (supplement "
                       "Eq. 8-9) with |g| the run's ledger bytes per worker and step, C_nwd the node link, and as "
                       "compute the step time of the same workers on one host's loopback (so the fast level's cost "
                       "is in it); once with the paper's two levels (log2 j slow rounds) and once with every link "
                       "slow (log2 N). The last prediction is the harness's own: the same compute plus the bytes "
                       "gloo's ring puts on each node's link, from the ledger (an all-gather's ring edge carries "
                       "(N-1) |g|, an all-reduce's 2 (N-1)/N |g|; bench/analysis/perfmodel/measured.py). A missing "
                       "profile run leaves the model columns empty."),
            Block("table", header=header, body=body)]


TTA_COLUMNS = ["task", "method", "params", "differs", "workers", "n", "time to target (s)", "vs strongest baseline"]


def tta_blocks(results: Path, figures_dir: Path, root: Path | None = None) -> list[Block]:
    """Time to accuracy: the settings whose runs declared a target (eval.target) on emulated links, measured, and
    (with runs on both links of the time-to-accuracy grid) the held-out validation and the projection to TernGrad
    Figure 5's cluster with its crossover map."""
    frame = records_frame(results)
    if frame.empty or "eval_target" not in frame or frame["eval_target"].isna().all():
        return []
    declared = frame[frame["eval_target"].notna()]
    out = [Block("h2", "Time to accuracy"),
           Block("p", "Measured on emulated links against the strongest of the fp32, fp16 and bf16 all-reduce of the "
                      "same setting (seeds paired; docs/analysis.md says how). The target and horizon were declared "
                      "before the runs. Times compare only among runs timed on one CPU: "
                      + "; ".join(f"{cpu} ({count} runs)" for cpu, count in sorted(declared["cpu"].value_counts().items()))
                      + ".")]
    table = comparison(declared)
    out.append(_table_block(TTA_COLUMNS, table.to_dict("records")))
    nets = set(declared["setting_flat"].map(lambda flat: flat.get("net")).dropna())
    if {"1gbit", "100mbit"} <= nets:
        from commbench.analysis.perfmodel import clusters, tta_tables
        from commbench.config import ConfigError

        try:
            cluster = clusters.load("terngrad-fig5")
            task = declared["task"].iloc[0]
            workers = int(declared["workers"].iloc[0])
            rows, notes, calibration, cpu = tta_tables.report(results, task, workers, "1gbit", "100mbit", cluster)
            figure = figures_dir / f"tta-crossover_{task}_w{workers}.png"
            tta_tables.draw_crossover(figure, results, task, workers, calibration, ["1gbit", "100mbit"], cluster,
                                      cluster.compute_s(task)[0], None, 50e-6, cpu, root=root)
        except ConfigError as exc:
            return out + [Block("p", f"(no projection: {exc})")]
        out.append(Block("h3", "Projected: calibrated at 1 Gbit/s, validated at 100 Mbit/s, projected to a cluster"))
        out += [Block("p", note) for note in notes]
        out.append(_table_block(list(rows[0]), [{k: _fmt_cell(v) for k, v in r.items()} for r in rows]))
        out.append(Block("image", "crossover map: time to target relative to the strongest all-reduce", path=figure))
    return out


def _fmt_cell(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else "—" if value is None else str(value)


def is_campaign(results: Path) -> bool:
    """A folder of the project's reproduction campaign (or the results folder holding it): its report is about
    the papers."""
    folder = ResultsFolder(results)
    return folder.root.name == CAMPAIGN or folder.campaign.runs.is_dir()


def blocks(results: Path, figures_dir: Path, paper: bool = False, root: Path | None = None) -> list[Block]:
    """The user's runs first (their table and figures); the paper tables, the performance models and the
    papers' figures with ``paper`` (always for the campaign's folder)."""
    paper = paper or is_campaign(results)
    n, digest = record_digest(results)
    inputs = " and the papers' reference values in `results/paper/`" if paper else ""
    out = [Block("h1", "commbench report"),
           Block("p", f"Regenerated from {n} run records under `{results}` (content hash {digest}){inputs}. "
                      f"Regenerate with `commbench report --results {results}{' --paper' if paper else ''}`.")]
    frame = comparison(records_frame(results))
    out.append(Block("h2", "All runs"))
    out.append(_table_block(COLUMNS, frame.to_dict("records")) if not frame.empty else Block("p", "(no records)"))

    if paper:
        out.append(Block("h2", "Paper tables"))
        out.append(Block("p", LEGEND))
        table = rows(build("all", results))
        out.append(Block("p", totals_line(table)))
        if under_way := part_way_line(results):
            out.append(Block("p", under_way[0].upper() + under_way[1:] + "."))
        for (paper_name, source), group in sections(table):  # in each paper's own order
            out.append(Block("h3", f"{PAPERS[paper_name]}: {source} ({verdict_counts(group)})"))
            out.append(_table_block(*layout(group)))
        out += model_blocks()
    out += network_blocks(results)
    out += two_level_blocks(results)
    root = root or output_root(figures_dir, results)  # below it, nothing is written through a link
    out += tta_blocks(results, ensure_folder(figures_dir, root), root)
    figures = plot_all(results, figures_dir, formats=("png", "pdf"), paper=paper, root=root)
    out.append(Block("h2", "Figures"))
    if not figures:
        out.append(Block("p", "(no records to plot)"))
    for path in figures:
        if path.suffix == ".png":
            figure, _, setting = path.stem.partition("_")  # the name's parts: the figure, then its setting
            out.append(Block("image", f"{figure}: {setting.replace('_', ', ')}", path=path))
    return out


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(items: list[Block], base: Path) -> str:
    lines: list[str] = []
    for b in items:
        if b.kind in ("h1", "h2", "h3"):
            lines += ["#" * int(b.kind[1]) + " " + b.text, ""]
        elif b.kind == "p":
            lines += [b.text, ""]
        elif b.kind == "pre":
            lines += ["```", b.text.rstrip("\n"), "```", ""]
        elif b.kind == "table":
            lines.append("| " + " | ".join(b.header) + " |")
            lines.append("|" + "---|" * len(b.header))
            lines += ["| " + " | ".join(_md_escape(c) for c in row) + " |" for row in b.body]
            lines.append("")
        elif b.kind == "image":
            lines += [f"![{b.text}]({b.path.relative_to(base).as_posix()})", ""]
    return "\n".join(lines)


def _inline_html(text: str) -> str:
    """Markdown's inline code (`x`) and bold (**x**) as HTML; everything else escaped."""
    escaped = html.escape(text)
    escaped = re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)
    return re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", escaped)


def to_html(items: list[Block]) -> str:
    """One page, figures embedded as data URIs, so it can be mailed or attached as it is."""
    parts = ["<!DOCTYPE html>", "<html><head><meta charset='utf-8'><title>commbench report</title>",
             "<style>body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em}"
             "table{border-collapse:collapse;font-size:12px;margin-bottom:1.5em}"
             "td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}th{background:#f3f3f3}"
             "img{max-width:100%}code{background:#f3f3f3;padding:0 2px}</style></head><body>"]
    for b in items:
        if b.kind in ("h1", "h2", "h3"):
            parts.append(f"<{b.kind}>{html.escape(b.text)}</{b.kind}>")
        elif b.kind == "p":
            parts.append(f"<p>{_inline_html(b.text)}</p>")
        elif b.kind == "pre":
            parts.append(f"<pre>{html.escape(b.text)}</pre>")
        elif b.kind == "table":
            head = "".join(f"<th>{html.escape(c)}</th>" for c in b.header)
            body = "".join("<tr>" + "".join(f"<td>{_inline_html(c)}</td>" for c in row) + "</tr>"
                           for row in b.body)
            parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
        elif b.kind == "image":
            data = base64.b64encode(b.path.read_bytes()).decode()
            parts.append(f"<figure><img alt='{html.escape(b.text)}' src='data:image/png;base64,{data}'>"
                         f"<figcaption>{html.escape(b.text)}</figcaption></figure>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write_report(results: Path, out: Path, paper: bool = False) -> list[Path]:
    """report.md, report.html and figures/ under ``out``; returns the files written."""
    from commbench.store.records import atomic_write

    root = output_root(out, results)  # nothing below it is written through a link (a planted report/ is refused)
    ensure_folder(out, root)
    report = ReportFolder(out)
    items = blocks(results, report.figures, paper, root)
    md, page = report.markdown, report.page
    atomic_write(md, to_markdown(items, out), root)
    atomic_write(page, to_html(items), root)
    return [md, page]

