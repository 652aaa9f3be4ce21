"""Grid files: a base configuration plus axes expanded as a Cartesian product, with optional exclusions.

An axis may tie several settings together: its key names them, comma-separated, and each of its values is a
list with one value per name (``"workers, global_batch": [[2, 256], [4, 512]]``): the settings move together
instead of multiplying.

A method parameter on an axis or in ``base`` (``method.clip``) applies only to runs whose method has it; runs
that resolve to the same configuration (the same run id) are kept once. Every run is resolved before anything runs, so
one bad value anywhere stops the whole sweep with exit 2 and nothing written.
"""
from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from commbench.methods import METHODS

from commbench.config import (ConfigError, RunConfig, check_names, load_yaml, method_param_types, read_user_text,
                              resolve)
from commbench.config.parsers import shown
from commbench.store.records import SAFE_NAME

TOP_LEVEL = ("name", "base", "axes", "exclude", "slurm", "description", "declares")
GRIDS_DIR = Path(__file__).resolve().parent.parent / "grids"  # the grids the package ships
# A declaration names, before its grid runs, the setting that stands for a paper's speed row (docs/papers.md):
# the row (paper, source, task and, where the row states one, batch per worker), the emulated links and the
# number of workers whose measurements judge it, and why that setting is the paper's.
DECLARATION_KEYS = {"paper": str, "source": str, "task": str, "links": list, "workers": int, "why": str}
DECLARATION_OPTIONAL = {"batch_per_worker": int, "topology": str}


@dataclass(frozen=True)
class Declaration:
    paper: str
    source: str
    task: str
    links: tuple[str, ...]
    workers: int
    why: str
    grid: str
    batch_per_worker: int | None = None
    topology: str | None = None  # the method's exchange the row is judged on (ps: the paper's parameter servers)


@dataclass
class Grid:
    path: Path
    base: dict[str, Any]
    axes: dict[str, list]
    exclude: list[dict[str, Any]] = field(default_factory=list)
    slurm: dict[str, Any] = field(default_factory=dict)
    name: str = ""
    declares: list[Declaration] = field(default_factory=list)

    def values(self) -> dict[str, list]:
        """Each setting an axis varies, with its values (a tied axis gives one entry per setting it names)."""
        out: dict[str, list] = {}
        for key, values in self.axes.items():
            names = _axis_names(key)
            for i, name in enumerate(names):
                out[name] = [v[i] for v in values] if len(names) > 1 else list(values)
        return out


def shipped_grids() -> dict[str, Path]:
    """The grids the package ships, by name (a grid file's name without .yaml; campaign grids included)."""
    return {p.stem: p for p in sorted(GRIDS_DIR.rglob("*.yaml"))}


def find_grid(name_or_path: str | Path) -> Path:
    """A grid file: a path to one, or the name of a shipped grid (``tour``, ``campaign/ssdsgd-table2`` or
    ``ssdsgd-table2``), so that a shipped grid runs from any folder."""
    path = Path(name_or_path)
    if path.is_file():
        return path
    shipped = shipped_grids()
    if path.stem in shipped:
        return shipped[path.stem]
    raise ConfigError(f"{name_or_path}: no such grid file, and no shipped grid of that name (commbench list grids "
                      f"names them)")


def load_grid(path: str | Path) -> Grid:
    path = find_grid(path)
    try:
        doc = load_yaml(read_user_text(path), str(path))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        raise ConfigError(f"{path}: not valid YAML{where}") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: a grid is a mapping with 'base' and 'axes'")
    for key in doc:
        if key not in TOP_LEVEL:
            raise ConfigError(f"{path}: unknown top-level key {shown(key)} (known: {', '.join(TOP_LEVEL)})")
    base, axes = doc.get("base") or {}, doc.get("axes") or {}
    exclude, slurm = doc.get("exclude") or [], doc.get("slurm") or {}
    if not isinstance(base, dict):
        raise ConfigError(f"{path}: base must be a mapping of settings")
    if not isinstance(axes, dict):
        raise ConfigError(f"{path}: axes must be a mapping of setting -> list of values")
    _check_axes(path, axes)
    if not isinstance(slurm, dict) or not isinstance(slurm.get("profile", ""), str):
        raise ConfigError(f"{path}: slurm must be a mapping whose profile is a profile's name (slurm: {{profile: "
                          f"local}})")
    if not isinstance(exclude, list) or not all(isinstance(e, dict) for e in exclude):
        raise ConfigError(f"{path}: exclude must be a list of mappings")
    try:
        check_names(base)
        for key, values in axes.items():
            for value in values:
                check_names(_axis_settings(key, value))
        for entry in exclude:
            check_names(entry)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    name = doc.get("name")
    if name is None:  # the file's own name, made safe for a job name
        name = re.sub(r"[^A-Za-z0-9._-]", "-", path.stem).lstrip("._-") or "grid"
    elif not isinstance(name, str) or not SAFE_NAME.match(name):
        raise ConfigError(f"{path}: name {str(name)[:60]!r}: letters, digits, '.', '_', '-' only (it names Slurm jobs)")
    return Grid(path, dict(base), dict(axes), list(exclude), dict(slurm), name,
                _declarations(path, doc.get("declares"), name))


def _check_axes(path: Path, axes: dict) -> None:
    """Each axis a non-empty list (of lists as long as its names, for a tied axis), and each setting on one axis
    once: a setting named twice would silently take one of its values."""
    axis_of: dict[str, str] = {}
    for key, values in axes.items():
        if not isinstance(values, list) or not values:
            raise ConfigError(f"{path}: axis {shown(key)} must be a non-empty list")
        names = _axis_names(key)
        if len(names) > 1 and not all(isinstance(v, list) and len(v) == len(names) for v in values):
            raise ConfigError(f"{path}: axis {shown(key)} ties {len(names)} settings: each value must be a list of "
                              f"{len(names)}")
        for name in names:
            if name in axis_of:
                where = "twice" if axis_of[name] == key else f"and so does axis {shown(axis_of[name])}"
                raise ConfigError(f"{path}: axis {shown(key)} names {shown(name)} {where}; a setting may vary on one "
                                  f"axis only")
            axis_of[name] = key


def _declarations(path: Path, entries, grid_name: str) -> list[Declaration]:
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise ConfigError(f"{path}: declares must be a list of mappings")
    out = []
    for i, entry in enumerate(entries, start=1):
        where = f"{path}: declares entry {i}"
        if not isinstance(entry, dict):
            raise ConfigError(f"{where}: must be a mapping")
        unknown = set(entry) - set(DECLARATION_KEYS) - set(DECLARATION_OPTIONAL)
        if unknown:
            raise ConfigError(f"{where}: unknown key {shown(sorted(map(str, unknown))[0])} (known: "
                              f"{', '.join([*DECLARATION_KEYS, *DECLARATION_OPTIONAL])})")
        for key, typ in {**DECLARATION_KEYS, **DECLARATION_OPTIONAL}.items():
            if key not in entry and key in DECLARATION_KEYS:
                raise ConfigError(f"{where}: {key} missing")
            if key in entry and (not isinstance(entry[key], typ) or isinstance(entry[key], bool)):
                raise ConfigError(f"{where}: {key} must be a{'n integer' if typ is int else ' ' + typ.__name__}")
        links = entry["links"]
        if not links or not all(isinstance(x, str) and x for x in links):
            raise ConfigError(f"{where}: links must be a non-empty list of link rates (100mbit)")
        out.append(Declaration(entry["paper"], entry["source"], entry["task"], tuple(links), entry["workers"],
                               entry["why"], grid_name, entry.get("batch_per_worker"), entry.get("topology")))
    return out


def _axis_names(key: str) -> list[str]:
    return [name.strip() for name in str(key).split(",")]


def _axis_settings(key: str, value) -> dict[str, Any]:
    """The settings one value of an axis gives (several for a tied axis)."""
    names = _axis_names(key)
    return dict(zip(names, value)) if len(names) > 1 else {names[0]: value}


def _excluded(settings: dict, exclude: list[dict]) -> bool:
    return any(all(settings.get(k) == v for k, v in entry.items()) for entry in exclude)


MAX_RUNS = 10_000  # a grid above this (the product of its axes) is refused unless --max-runs allows it


def expand(grid: Grid, max_runs: int = MAX_RUNS) -> list[RunConfig]:
    """All runs of the grid, resolved and validated, in axis order, without duplicates. A grid whose axes
    multiply to more than ``max_runs`` combinations is refused before any is resolved."""
    count = math.prod(len(v) for v in grid.axes.values())
    if count > max_runs:
        raise ConfigError(f"{grid.path}: {count:,} runs (the product of its axes), more than {max_runs:,}; "
                          f"pass --max-runs {count} to allow it")
    keys = list(grid.axes)
    combos = [{k: v for key, value in zip(keys, values) for k, v in _axis_settings(key, value).items()}
              for values in itertools.product(*grid.axes.values())] or [{}]
    axis_settings = {name for key in keys for name in _axis_names(key)}
    used_params: set[str] = set()
    runs: dict[str, RunConfig] = {}
    excluded = 0
    for combo in combos:
        settings = {**grid.base, **combo}
        if _excluded(settings, grid.exclude):
            excluded += 1
            continue
        method = settings.get("method")
        if method in METHODS:
            has = method_param_types(method)
            for key in [k for k in settings if k.startswith("method.")]:
                if key.split(".", 1)[1] in has:
                    used_params.add(key)
                elif key in axis_settings or key in grid.base:  # applies only to methods that know it
                    del settings[key]
        try:
            cfg = resolve(settings)
        except ConfigError as exc:
            raise ConfigError(f"{grid.path}: {exc}") from None
        runs.setdefault(cfg.run_id, cfg)
    if excluded == len(combos):  # an empty sweep would report success having run nothing
        raise ConfigError(f"{grid.path}: exclude removes every one of its {len(combos):,} runs; nothing would run")
    for key in sorted(axis_settings | set(grid.base)):
        if key.startswith("method.") and key not in used_params:
            where = "axis" if key in axis_settings else "base setting"
            raise ConfigError(f"{grid.path}: {where} {shown(key)}: no method of this grid has that parameter")
    return list(runs.values())
