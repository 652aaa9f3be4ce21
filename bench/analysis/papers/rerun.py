"""Which shipped grid runs again what an older method version's records measured, so that a row they alone would
fill can say what to re-run (``commbench sweep NAME``)."""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from commbench.config import ConfigError
from commbench.config.grid import expand, load_grid
from commbench.config.runconfig import identity_of
from commbench.analysis.runs import Run


def _setting(config: dict) -> str:
    """What a run computes less its method's version and parameters: a re-run takes the method's current
    parameters, whose defaults may have changed with its version (SSD-SGD's local rule did), so they cannot
    tell an old record's grid."""
    identity = {k: v for k, v in identity_of(config).items() if k not in ("method_version", "method_params")}
    return json.dumps(identity, sort_keys=True, default=str)


# Settings a grid file names plainly: a grid that gives one of them values none of the records has cannot make
# them, and is not expanded (expanding resolves every run, some by building its model).
NAMED_PLAINLY = ("task", "method", "dataset", "workers", "steps", "seed")


def _named(grid, key: str) -> set | None:
    """The values a grid gives one setting (None where it leaves the setting to its default)."""
    values = [grid.base[key]] if key in grid.base else grid.values().get(key)
    return None if values is None else {json.dumps(v, default=str) for v in values}


@lru_cache(maxsize=None)
def _grid_files(folder: Path) -> tuple:
    """Each grid file under ``folder`` with the values it names plainly; a broken grid file is the sweep's to
    report, not the table's."""
    out = []
    for path in sorted(folder.rglob("*.yaml")):
        try:
            grid = load_grid(path)
        except ConfigError:
            continue
        out.append((path, {key: _named(grid, key) for key in NAMED_PLAINLY}))
    return tuple(out)


@lru_cache(maxsize=None)
def _grid_settings(path: Path) -> tuple[str, frozenset[str]]:
    grid = load_grid(path)
    return grid.path.stem, frozenset(_setting(c.to_dict()) for c in expand(grid))


def grids_rerunning(runs: list[Run], folder: Path) -> list[str]:
    """The names of the grids under ``folder`` (shipped grids run by name) that make the settings of these
    runs again (each setting from the configuration as stored, which its run id was computed from)."""
    wanted = {_setting(r.stored) for r in runs}
    have = {key: {json.dumps(getattr(r.config, key), default=str) for r in runs} for key in NAMED_PLAINLY}
    names = []
    for path, named in _grid_files(Path(folder).resolve()):
        if any(values is not None and not values & have[key] for key, values in named.items()):
            continue
        try:
            name, settings = _grid_settings(path)
        except ConfigError:
            continue
        if wanted & settings:
            names.append(name)
    return names
