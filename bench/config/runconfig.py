"""A resolved run, :class:`RunConfig`, whose fields come from the settings' declarations, and its identity:
the run id hashes what the run computes, never how it executes or the clock."""
from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any, Mapping

from commbench.config.settings import ADDED_EMPTY, BOOKKEEPING, DERIVED, IMPLICIT, NO_IMPLICIT, NOT_IN_ID, SETTINGS


def config_fields(settings=SETTINGS) -> list[tuple[str, type, dataclasses.Field]]:
    """RunConfig's fields: one per field named by the settings (in declaration order; several settings may share
    one, as ``optimizer.*`` share ``optimizer``), then the derived ones and the bookkeeping. A field a record made
    before it existed lacks reads as the value every record had then (its setting's ``implicit``, or empty)."""
    holders: dict[str, list] = {}
    for setting in settings:
        holders.setdefault(setting.config_field, []).append(setting)
    defaults: dict[str, Any] = {name: dataclasses.field(default_factory=dict) for name in ADDED_EMPTY + BOOKKEEPING}
    defaults["method_version"] = dataclasses.field(default=IMPLICIT["method_version"])
    for name, group in holders.items():
        if len(group) == 1 and group[0].implicit is not NO_IMPLICIT:
            defaults[name] = dataclasses.field(default=group[0].implicit)
    names = [*holders, *DERIVED, *BOOKKEEPING]
    required = [(n, Any, dataclasses.field()) for n in names if n not in defaults]
    return required + [(n, Any, defaults[n]) for n in names if n in defaults]  # dataclasses want defaults last


def _to_dict(self) -> dict:
    return dataclasses.asdict(self)


def _from_dict(cls, d: Mapping[str, Any]):
    """A config from a record's ``config`` (fields it lacks take their defaults; unknown keys are ignored)."""
    return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls) if f.name in d})


# Built from the declarations, not written out field by field: a new setting is a field of every config at once.
# Units: steps are iterations; batches are samples; lr in optimizer units.
RunConfig = dataclasses.make_dataclass("RunConfig", config_fields(), frozen=True, namespace={
    "__doc__": "A fully resolved run: one field per declared setting (settings.SETTINGS), the derived fields "
               "and the bookkeeping (where each value came from, the departures from the paper's recipe).",
    "to_dict": _to_dict,
    "run_id": property(lambda self: run_id_of(self.to_dict()), doc="The run's id: see run_id_of."),
    "from_dict": classmethod(_from_dict),
})
RunConfig.__module__ = __name__  # pickled into spawned workers by this name


def identity_of(config: Mapping[str, Any]) -> dict:
    """What a run computes: the configuration less what only changes how it executes (and less the fields
    at the value every record had before they existed). The run id is its hash."""
    identity = {k: v for k, v in config.items() if k not in NOT_IN_ID and not (k in ADDED_EMPTY and not v)
                and not (k in IMPLICIT and v == IMPLICIT[k])}
    for key, value in IMPLICIT.items():  # nested ones (optimizer.momentum_form): out of their dict at that value
        outer, dot, inner = key.partition(".")
        if dot and isinstance(identity.get(outer), dict) and identity[outer].get(inner) == value:
            identity[outer] = {k: v for k, v in identity[outer].items() if k != inner}
    return identity


def run_id_of(config: Mapping[str, Any]) -> str:
    """Deterministic id: readable prefix + hash of the resolved configuration (never the clock)."""
    digest = hashlib.sha256(json.dumps(identity_of(config), sort_keys=True, default=str).encode()).hexdigest()[:10]
    return f"{config['task']}_{config['method']}_w{config['workers']}_{digest}"


def setting_of(config: Mapping[str, Any]) -> dict:
    """A run's setting: what it computes, less its seed. Runs of one setting are its seeds (and reruns)."""
    return {k: v for k, v in identity_of(config).items() if k != "seed"}


def flat_items(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts as dotted keys (``optimizer.name``), for comparing settings field by field."""
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            out.update(flat_items(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: value}
