"""The config part of the record schema comes from the settings: each setting declares the type a record stores
for it, the store's copy (commbench.store.schema.CONFIG) equals the one derived from them, and the documents
that list the settings (docs/record-format.md's config table, docs/contract.md's settings table) name every one."""
from __future__ import annotations

import re

import pytest

from commbench.config import IMPLICIT, NOT_IN_ID, SETTING, SETTINGS, Setting, record_config_schema, resolve
from commbench.config.parsers import integer
from commbench.config.settings import ADDED_EMPTY
from commbench.store import schema

from ..conftest import REPO

RECORD_FORMAT = (REPO / "docs" / "record-format.md").read_text()
CONTRACT = (REPO / "docs" / "contract.md").read_text()


def test_the_store_checks_records_against_the_schema_the_settings_declare():
    assert schema.CONFIG == record_config_schema()


def test_a_setting_without_a_record_type_cannot_be_declared():
    with pytest.raises(TypeError):
        Setting("knob", integer(0))  # the missing record type is the point
    with pytest.raises(ValueError, match="knob: record type 'integer'"):
        Setting("knob", integer(0), "integer")


def test_every_setting_has_a_record_type_the_schema_knows():
    assert all(schema.is_kind(s.record_type) for s in SETTINGS)


def test_every_generic_default_has_its_settings_record_type():
    """A default a record stores as it is must pass the record's own check (``epochs`` is stored as ``steps``)."""
    wrong = [f"{s.key}: {s.default.value!r} is not {s.record_type}" for s in SETTINGS
             if s.default is not None and s.key != "epochs"
             and schema.problem({s.key: s.default.value}, {s.key: s.record_type}) is not None]
    assert not wrong, wrong


def test_a_resolved_config_is_what_the_schema_declares():
    config = resolve({"task": "lenet-mnist", "method": "baseline"}).to_dict()
    declared = record_config_schema()
    assert set(config) == set(declared)
    assert schema.problem(config, declared, "config") is None
    assert set(config["optimizer"]) == set(declared["optimizer"])  # nesterov among them


def test_settings_sharing_a_field_they_are_not_an_object_of_must_agree_on_its_type():
    with pytest.raises(ValueError, match="twin: record type 'int', but its field steps is 'count'"):
        record_config_schema(SETTINGS + (Setting("twin", integer(1), "int", field="steps"),))


def table_names(doc: str, heading: str) -> set[str]:
    """The backticked names (dotted ones whole) in the first column of the first table under ``heading``."""
    body = doc.split(f"\n{heading}\n", 1)[1].split("\n#", 1)[0]
    _header, _rule, *rows = body[body.index("\n|") + 1:].split("\n\n", 1)[0].splitlines()
    first_cells = [row.replace("\\|", "/").split("|")[1] for row in rows]  # `steps` \| `epochs`: one cell
    return {name for cell in first_cells for name in re.findall(r"`([a-z0-9_.]+)`", cell)}


def dotted_fields(declared: dict) -> set[str]:
    """A declaration's fields, and an object's own fields by their dotted names (``optimizer.nesterov``)."""
    return set(declared) | {f"{name}.{inner}" for name, kind in declared.items() if isinstance(kind, dict)
                            for inner in kind}


def test_the_record_format_lists_every_config_field():
    assert table_names(RECORD_FORMAT, "## `config`") == dotted_fields(record_config_schema())


def test_the_contract_lists_every_setting():
    assert table_names(CONTRACT, "## Settings") == set(SETTING)


def run_id_rule(constant: str) -> set[str]:
    """The backticked names of the run-id rule in docs/record-format.md that names ``constant`` (not the values in
    brackets after them)."""
    rule = RECORD_FORMAT.split(f"(`{constant}`):", 1)[1].split("\n- ", 1)[0].split("\n\n", 1)[0]
    return set(re.findall(r"`([a-z0-9_.]+)`", re.sub(r"\([^)]*\)", "", rule)))


def test_the_record_format_names_what_stays_out_of_the_run_id():
    in_id_implicit = {key for key in IMPLICIT if SETTING.get(key) is None or SETTING[key].config_field not in NOT_IN_ID}
    assert run_id_rule("NOT_IN_ID") == set(NOT_IN_ID)
    assert run_id_rule("ADDED_EMPTY") == set(ADDED_EMPTY)
    assert in_id_implicit <= run_id_rule("IMPLICIT") <= set(IMPLICIT)
