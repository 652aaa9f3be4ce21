"""Golden outputs of the analysis, recorded before the records' reading is refactored (tests/golden/analysis/):
the paper tables and the campaign's table as CSV, the three DataFrames the tables, the figures and
``commbench.load_records`` are built from (a digest per column: which column moved is what a failure says), and
the campaign report's markdown (slow tier). A refactor that reads the records another way must leave every one
unchanged. ``COMMBENCH_UPDATE_GOLDEN=1`` rewrites them (only for a change that means to change the output)."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from ..conftest import commbench

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "golden" / "analysis"
CAMPAIGN = REPO / "results" / "campaign"


def _check_text(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("COMMBENCH_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    assert path.exists(), f"no golden {name}: record it (COMMBENCH_UPDATE_GOLDEN=1) before the refactor"
    expected = path.read_text()
    if text != expected:
        got, want = text.splitlines(), expected.splitlines()
        first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        pytest.fail(f"{name} differs from its golden from line {first + 1}:\n  now:    "
                    f"{got[first] if first < len(got) else '<end>'}\n  golden: "
                    f"{want[first] if first < len(want) else '<end>'}")


def test_the_paper_tables_are_unchanged(tmp_path):
    """Over the papers' records: the zoo's (results/zoo*/) grow while its campaign runs, and a run of theirs at a
    paper's setting would move a row's count of other matching settings."""
    (tmp_path / "results").mkdir()
    for folder in sorted(p for p in (REPO / "results").iterdir() if p.is_dir() and not p.name.startswith("zoo")):
        shutil.copytree(folder, tmp_path / "results" / folder.name, ignore=shutil.ignore_patterns("logs", "claims"))
    proc = commbench("table", "--paper", "all", "--format", "csv", "--results", "results", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    _check_text("paper_tables.csv", proc.stdout)


def test_the_campaign_table_is_unchanged():
    proc = commbench("table", "--results", str(CAMPAIGN.relative_to(REPO)), "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    _check_text("campaign_table.csv", proc.stdout)


def frames() -> dict:
    """The three frames the analysis reads the campaign's records into (the public one, the tables', the
    figures')."""
    from commbench.analysis.frame import load_records
    from commbench.analysis.plots import runs_frame
    from commbench.analysis.table import records_frame

    return {"load_records": load_records(CAMPAIGN), "tables": records_frame(CAMPAIGN), "figures": runs_frame(CAMPAIGN)}


def column_digests(frame) -> dict:
    """Each column's values, in run-id order, as a digest of their CSV text (dtype-blind, NaN as empty)."""
    frame = frame.sort_values("run_id", ignore_index=True)
    return {"rows": len(frame),
            "columns": {c: hashlib.sha256(frame[c].to_csv(index=False).encode()).hexdigest()[:16]
                        for c in sorted(frame.columns)}}


def test_the_frames_the_tables_and_figures_read_are_unchanged():
    now = {name: column_digests(frame) for name, frame in frames().items()}
    text = json.dumps(now, indent=1, sort_keys=True) + "\n"
    if os.environ.get("COMMBENCH_UPDATE_GOLDEN") == "1" or not (GOLDEN / "frames.json").exists():
        _check_text("frames.json", text)
        return
    golden = json.loads((GOLDEN / "frames.json").read_text())
    for name, digests in golden.items():
        assert now[name]["rows"] == digests["rows"], name
        moved = sorted(c for c, d in digests["columns"].items() if now[name]["columns"].get(c) != d)
        assert not moved, f"{name}: these columns changed or went missing: {moved}"


@pytest.mark.slow
def test_the_campaign_report_is_unchanged(tmp_path, monkeypatch):
    from commbench.analysis.report import write_report

    monkeypatch.chdir(REPO)  # the report names its folder as given: relative, as a user in the checkout would
    write_report(CAMPAIGN.relative_to(REPO), tmp_path / "report")
    _check_text("campaign_report.md", (tmp_path / "report" / "report.md").read_text())
