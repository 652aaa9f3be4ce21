"""The record schema (bench/store/schema.py) and docs/record-format.md name the same fields, section by section;
and a record whose declared field has another type is unreadable, named, never a traceback."""
from __future__ import annotations

import json
import re

import pytest

from commbench.store import schema
from commbench.store.records import UnreadableRecord, load_record

from ..conftest import REPO
from ..helpers import write_record

DOC = (REPO / "docs" / "record-format.md").read_text()


def documented(section: str) -> set[str]:
    """The field names of a section's table: the backticked names in its first column."""
    body = DOC.split(f"## `{section}`", 1)[1].split("\n## ", 1)[0]
    names = set()
    for line in body.splitlines():
        if line.startswith("| `"):
            names |= set(re.findall(r"`([a-z0-9_]+)`", line.split("|")[1]))
    return names


@pytest.mark.parametrize("section,declared", [("config", schema.CONFIG), ("metrics", schema.METRICS),
                                              ("env", schema.ENV), ("history", schema.HISTORY_POINT)])
def test_the_documented_fields_are_the_declared_ones(section, declared):
    assert documented(section) == set(declared)


def test_the_data_section_documents_every_common_field():
    assert set(schema.DATA) <= documented("data")


@pytest.mark.parametrize("path,value", [
    (("metrics", "top1"), {"a": 1}), (("metrics", "top1"), [0.5]), (("metrics", "time_breakdown"), "fast"),
    (("config", "method_params"), "threshold=1"), (("config", "method_params"), {"t": [1, 2]}),
    (("config", "optimizer"), {"name": 3}), (("config", "lr_schedule"), {"kind": "step", "base_lr": "0.1"}),
    (("config", "eval"), {"every": "often", "batch_size": 1, "bn_batches": 1}), (("env", "git_dirty"), "no"),
    (("metrics", "eval_correct"), {"images": "10", "bits": ""}), (("config", "precision"), 16)])
def test_a_declared_field_of_another_type_makes_the_record_unreadable_in_one_line(tmp_path, path, value):
    record = write_record(tmp_path, "r")
    record[path[0]][path[1]] = value
    (tmp_path / "runs" / "r.json").write_text(json.dumps(record))
    with pytest.raises(UnreadableRecord, match=rf"{path[0]}\.{path[1]}"):
        load_record(tmp_path / "runs" / "r.json")


def test_a_bare_nan_reads_as_null(tmp_path):
    record = write_record(tmp_path, "r")
    text = json.dumps(record).replace('"top5": 0.99', '"top5": NaN')
    (tmp_path / "runs" / "r.json").write_text(text)
    assert load_record(tmp_path / "runs" / "r.json")["metrics"]["top5"] is None
