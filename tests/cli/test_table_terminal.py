"""``table --paper all`` on a terminal prints a summary (a line per paper table with its verdict counts, the totals
and how to get everything), not some 100 KB of tables; ``--full`` prints them whole there. A pipe, a file
(``--out``) or another format always gets the whole tables, as scripts and ``make report`` expect."""
from __future__ import annotations

import io
import sys

import pytest

from commbench.analysis.papers.tables import build, render, rows, sections
from commbench.cli import main


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Pipe(io.StringIO):
    def isatty(self) -> bool:
        return False


def printed(monkeypatch, stdout: io.StringIO, *args: str) -> str:
    monkeypatch.setattr(sys, "stdout", stdout)
    assert main(["table", *args]) == 0
    return stdout.getvalue()


@pytest.fixture
def results(tmp_path):
    (tmp_path / "runs").mkdir()
    return tmp_path


def test_on_a_terminal_the_paper_tables_are_summed_up_with_a_pointer_to_the_whole(monkeypatch, results):
    shown = printed(monkeypatch, Terminal(), "--paper", "all", "--results", str(results))
    table = rows(build("all", results))
    lines = shown.splitlines()
    assert len(lines) < 40 and "|" not in shown  # no table
    assert sum(line.startswith("  ") for line in lines) == len(list(sections(table)))  # a line per paper table
    assert any(line.startswith("  Table 1 ") and line.endswith("6 missing") for line in lines)
    assert "TernGrad (Wen et al., NeurIPS 2017)" in lines
    assert lines[-3].startswith(f"Totals over {len(table)} rows: ")
    assert lines[-1] == (f"the full tables: commbench table --paper all --results {results} --full "
                         f"(or --out FILE)")


def test_full_prints_the_whole_tables_on_a_terminal_as_a_pipe_gets_them(monkeypatch, results):
    whole = render(rows(build("all", results)), "md")
    assert printed(monkeypatch, Terminal(), "--paper", "all", "--results", str(results), "--full") == whole
    assert printed(monkeypatch, Pipe(), "--paper", "all", "--results", str(results)) == whole


def test_another_format_or_a_file_is_never_summed_up(monkeypatch, results, tmp_path_factory):
    csv = printed(monkeypatch, Terminal(), "--paper", "threshold", "--results", str(results), "--format", "csv")
    assert csv.startswith("paper,source,row,") and "the full tables" not in csv
    out = tmp_path_factory.mktemp("out") / "tables.md"
    assert printed(monkeypatch, Terminal(), "--paper", "all", "--results", str(results), "--out", str(out)) == ""
    assert out.read_text() == render(rows(build("all", results)), "md")
