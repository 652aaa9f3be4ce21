"""One check of a record (commbench.store.schema.record_problem): every record the project commits passes it,
the records module reads through it and holds no second one, and the metrics every record holds are named once."""
from __future__ import annotations

import json

import pytest

from commbench.store import records, schema
from commbench.store.records import EMPTY_METRICS, UnreadableRecord, load_record

from ..conftest import REPO
from ..helpers import write_record

COMMITTED = sorted(REPO.glob("results/**/runs/*.json"))


def test_the_project_commits_records():
    assert len(COMMITTED) > 100


def test_every_committed_record_passes_the_one_check():
    # parsed as load_record parses them: a bare NaN reads as null
    failing = {str(path.relative_to(REPO)): why for path in COMMITTED
               if (why := schema.record_problem(json.loads(path.read_text(), parse_constant=lambda _: None)))}
    assert not failing, failing


def test_the_records_module_reads_through_the_schemas_check_alone():
    assert not hasattr(records, "problem") and not hasattr(records, "_CONFIG_TYPES")
    assert records.record_problem is schema.record_problem


@pytest.mark.parametrize("change,named", [
    (lambda r: r.update(schema_version=2), "schema_version 2"),
    (lambda r: r.update(status="running"), "status 'running'"),
    (lambda r: r.update(metrics=None), "metrics is missing"),
    (lambda r: r["config"].pop("seed"), "config.seed is missing"),
    (lambda r: r["config"].update(workers="2"), "config.workers"),
    (lambda r: r["config"].update(optimizer={"name": "sgd", "nesterov": "yes"}), "config.optimizer.nesterov"),
    (lambda r: r["metrics"].update(my_own_metric="fast"), "metrics.my_own_metric"),
    (lambda r: r.update(history=[{"train_loss": 1.0}]), r"history\[0\].step is missing")])
def test_a_record_the_check_refuses_is_unreadable_and_named(tmp_path, change, named):
    record = write_record(tmp_path, "r")
    change(record)
    (tmp_path / "runs" / "r.json").write_text(json.dumps(record))
    with pytest.raises(UnreadableRecord, match=named):
        load_record(tmp_path / "runs" / "r.json")


def test_a_record_without_an_outcome_holds_every_recorded_metric():
    assert tuple(EMPTY_METRICS) == schema.RECORDED_METRIC_NAMES
    assert set(schema.RECORDED_METRIC_NAMES) <= set(schema.METRICS)
    assert all(schema.METRICS[name].endswith("?") for name in schema.RECORDED_METRIC_NAMES)  # null is allowed
