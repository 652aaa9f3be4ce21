"""A grid's runs as the command line picks them: ``--set`` applied to every run, ``--only`` choosing a part
(shared by ``sweep`` and ``status --grid``)."""
from __future__ import annotations

from commbench.config import ConfigError, RunConfig, parse_set


def only(runs: list[RunConfig], grid, filters: list[str]) -> list[RunConfig]:
    """The runs whose axis values are among those named (``--only workers=1,2``)."""
    axes = grid.values()
    for item in filters:
        axis, sep, values = item.partition("=")
        if not sep or not values:
            raise ConfigError(f"--only {item!r}: expected AXIS=V1,V2")
        if axis not in axes:
            raise ConfigError(f"--only {axis}: not an axis of the grid (axes: {', '.join(axes)})")
        wanted = {v.strip() for v in values.split(",")}
        unknown = wanted - {str(v) for v in axes[axis]}
        if unknown:
            raise ConfigError(f"--only {axis}: {', '.join(sorted(unknown))} not among the axis values "
                              f"({', '.join(map(str, axes[axis]))})")
        runs = [c for c in runs if str(_axis_value(c, axis)) in wanted]
    return runs


def _axis_value(cfg: RunConfig, axis: str):
    if axis.startswith("method."):
        return cfg.method_params.get(axis.split(".", 1)[1])
    if axis == "recipe":
        return cfg.recipe
    outer, dot, inner = axis.partition(".")
    if dot and isinstance(getattr(cfg, outer, None), dict):  # optimizer.momentum, lr_schedule.base_lr, eval.every
        return getattr(cfg, outer).get(inner)
    return getattr(cfg, axis.replace(".", "_"), None)


def grid_runs(path: str, sets: list[str], filters: list[str], data_root: str | None = None,
              max_runs: int | None = None):
    """A grid's runs, with ``--set`` applied to every run and ``--only`` picking a part."""
    from commbench.config.grid import MAX_RUNS, expand, load_grid

    if max_runs is not None and max_runs < 1:
        raise ConfigError(f"--max-runs: at least 1, got {max_runs}")
    grid = load_grid(path)
    if data_root:
        grid.base["data_root"] = data_root
    for key, value in parse_set(sets).items():
        if key in grid.values():
            raise ConfigError(f"--set {key}: is an axis of {path}; change the grid instead")
        grid.base[key] = value
    return grid, only(expand(grid, max_runs or MAX_RUNS), grid, filters)

