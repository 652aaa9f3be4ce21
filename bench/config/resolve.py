"""Resolving settings into a :class:`RunConfig`: layered over the task's recipe and tier, every value checked,
every value's source recorded, or :class:`ConfigError` naming the bad item before anything runs or is written."""
from __future__ import annotations

import math
import typing
from typing import Any, Mapping

import yaml

from commbench.config.errors import ConfigError
from commbench.config.parsers import boolean, clipped, identifier, integer, number, shown
from commbench.config.runconfig import RunConfig
from commbench.config.settings import GENERIC, KEYS, SETTINGS
from commbench.config.userfiles import load_yaml
from commbench.methods import registry
from commbench.methods.registry import MethodRegistryError, UnknownMethod


def parse_set(items: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` strings to settings; values read as YAML scalars (``0`` int, ``true`` bool, ``[1,2]``)."""
    out = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set {shown(item)}: expected KEY=VALUE")
        name = clipped(key.strip())  # a pasted page of a key, cut to a line
        try:
            out[key.strip()] = load_yaml(raw, f"--set {name}") if raw.strip() else ""
        except yaml.YAMLError:
            raise ConfigError(f"--set {name}: cannot read value {shown(raw)}") from None
    return out


def method_class(name: Any) -> type:
    """The method registered as ``name`` (built in, an entry point's, a ``COMMBENCH_METHODS`` module's), or
    ConfigError: the registry's one unknown-name message (the known names, the nearest), or why a user's method
    does not load (a name taken twice names both classes)."""
    try:
        return registry.get(name)
    except UnknownMethod as exc:
        raise ConfigError(f"method: {exc}") from None
    except MethodRegistryError as exc:
        raise ConfigError(str(exc)) from None


def server_count(cfg: RunConfig) -> int:
    """Parameter-server processes a dist run of ``cfg`` needs beside its workers: a fact of its method and the
    method's parameters, so it lives beside them (the launcher, the workers and the preflight ask it here)."""
    return registry.get(cfg.method).servers_needed(registry.params_for(cfg.method, cfg.method_params))


def method_param_types(method: str) -> dict[str, Any]:
    from commbench.methods import param_fields  # commbench.methods.base imports torch: not at import (a fast --help)

    cls = method_class(method).Params
    hints = typing.get_type_hints(cls)
    return {name: hints[name] for name in param_fields(cls)}


def _coerce_method_param(method: str, key: str, typ: Any, v: Any) -> Any:
    if typ is bool:
        return boolean(key, v)
    if typ is int:
        return integer()(key, v)
    if typ is float:
        return number()(key, v)
    if typ is str:
        return identifier(key, v)
    return v


def check_names(settings: Mapping[str, Any]) -> None:
    """Unknown keys, tasks, methods: the checks a grid can make before choosing per-run values."""
    from commbench.tasks import TASKS  # the tasks import torch: loaded at first use, not at import (a fast --help)

    for key in settings:
        if not isinstance(key, str) or (key not in KEYS and not key.startswith("method.")):
            raise ConfigError(f"unknown key {shown(key)}")
    # a mapping or list where a name belongs (an axis value {a: 1}) is no name; and it cannot be looked up
    if "task" in settings and (not isinstance(settings["task"], str) or settings["task"] not in TASKS):
        raise ConfigError(f"task: unknown task {shown(settings['task'])} (known: {', '.join(TASKS)})")
    if "method" in settings:
        method_class(settings["method"])


def resolve(settings: Mapping[str, Any]) -> RunConfig:
    """Layer settings over generic defaults < task recipe < tier; validate everything; build the config."""
    settings = {k: v for k, v in settings.items() if v is not None}
    check_names(settings)
    for required in ("task", "method"):
        if required not in settings:
            raise ConfigError(f"{required}: missing (--{required} NAME)")
    from commbench.tasks import TASKS  # loaded by check_names above; here only named

    task, method = TASKS[settings["task"]], settings["method"]
    recipe_name = settings.get("recipe") or next(iter(task.recipes))
    if not isinstance(recipe_name, str) or recipe_name not in task.recipes:
        raise ConfigError(f"recipe: {task.name} has no recipe {shown(recipe_name)} (known: {', '.join(task.recipes)})")
    tier = KEYS["tier"]("tier", settings.get("tier", "paper"))
    paper, layered = _layered(task, recipe_name, tier, method, settings)
    values = {k: v if v is None else KEYS[k](k, v) for k, (v, _source) in layered.items()}
    values.update(tier=tier, recipe=recipe_name)
    values["dataset"] = _one_of_the_tasks(task, "dataset", values.get("dataset") or task.paper_dataset,
                                          task.datasets, "does not accept", "accepts")
    values["model.variant"] = _one_of_the_tasks(task, "model.variant", values.get("model.variant") or
                                                task.variants[0], task.variants, "has no variant", "known")
    _check_together(task, values)
    if "epochs" in settings:
        if "steps" in settings:
            raise ConfigError("epochs: give --steps or --epochs, not both")
        values["steps"] = math.ceil(values["epochs"] * task.train_size(values["dataset"]) / values["global_batch"])
        layered["steps"] = (values["steps"], f"set by user: {values['epochs']} epochs")
    method_params, method_sources = method_params_of(task, recipe_name, method, settings, values["steps"])
    _momentum_to_method(method, values, layered, method_params, method_sources, settings)
    values["exchange"] = _exchange(method, method_params, values["exchange"], layered)
    sources = {**{k: source for k, (_v, source) in layered.items()}, **method_sources}
    # the values resolve chose itself (not from a recipe): say so
    sources.setdefault("dataset", f"task default: the paper's data set ({task.paper_dataset})")
    sources.setdefault("recipe", "task default: its first recipe")
    sources.setdefault("model.variant", "task default: its first variant")
    for setting in SETTINGS:
        if setting.key != "epochs":  # epochs: a way to give steps
            sources.setdefault(setting.key, "not set (no recipe, tier or user gives it)")
    fields = _fields_of(values)
    fields.update(task=task.name, model_options=_model_options(values),
                  batch_per_worker=values["global_batch"] // values["workers"], method_params=method_params,
                  method_version=method_class(method).version, sources=sources,
                  overrides=_departures(task, recipe_name, tier, method, paper, values, sources))
    return RunConfig(**fields)


def _layered(task, recipe_name: str, tier: str, method: str, settings: Mapping[str, Any]) -> tuple[dict, dict]:
    """The published recipe (generic defaults < recipe < the task's overlay for the method), and every setting's
    value and source once the tier and the user's settings are laid over it."""
    # A paper may train one method with other values (TernGrad's dropout and weight decay): the task's
    # per-method overlay is part of the published recipe for that method.
    paper = {**GENERIC, **task.recipes[recipe_name], **_overlay(task, recipe_name, method)}
    layered: dict[str, tuple[Any, str]] = {k: (c.value, c.source) for k, c in paper.items()}
    for k, c in task.tiers.get(tier, {}).items():
        layered[k] = (c.value, f"tier {tier}: {c.source}")
    for k, v in settings.items():
        if not k.startswith("method."):
            layered[k] = (v, "set by user")
    return paper, layered


def _overlay(task, recipe_name: str, method: str) -> dict:
    return {k: c for k, c in task.method_overlay(recipe_name, method).items() if not k.startswith("method.")}


def _one_of_the_tasks(task, key: str, value: str, known, refusal: str, listing: str) -> str:
    if value not in known:
        raise ConfigError(f"{key}: {task.name} {refusal} {shown(value)} ({listing}: {', '.join(known)})")
    return value


def _check_together(task, values: Mapping[str, Any]) -> None:
    """The checks that need several settings at once: the batch split, BatchNorm slices, network settings that
    need real processes, a schedule's own parameters, a recipe that names an optimizer and a rate."""
    workers, global_batch, dataset = values["workers"], values["global_batch"], values["dataset"]
    if global_batch % workers:
        raise ConfigError(f"global_batch: {global_batch} does not split evenly over {workers} workers")
    if global_batch > task.train_size(dataset):
        raise ConfigError(f"global_batch: {global_batch} is more than the {task.train_size(dataset):,} training "
                          f"images of {dataset}")
    if values.get("model.bn_batch"):
        _check_bn_batch(task, values["model.variant"], values["model.bn_batch"], global_batch // workers,
                        values.get("model.timm"))
    if values.get("net") is not None and values["backend"] != "dist":
        raise ConfigError(f"net: an emulated network ({values['net']}) needs backend dist, not "
                          f"{values['backend']} (sim workers share one process and send nothing over a network)")
    if values.get("node_link") is not None and (values["backend"] != "dist" or values.get("net") is not None):
        raise ConfigError(f"node_link: links between nodes ({values['node_link']}) need backend dist on a cluster, "
                          f"not {'net=' + values['net'] if values.get('net') else 'backend ' + values['backend']}")
    kind = values.get("lr_schedule.kind")
    if kind in ("step", "exp") and not values.get("lr_schedule.step_size"):
        raise ConfigError(f"lr_schedule.step_size: required by lr_schedule.kind={kind}")
    if kind == "multistep" and not values.get("lr_schedule.milestones"):
        raise ConfigError("lr_schedule.milestones: required by lr_schedule.kind=multistep")
    if values.get("optimizer.nesterov") and (values.get("optimizer.name") != "momentum" or not values.get(
            "optimizer.momentum") or values.get("optimizer.momentum_form") == "lr_inside"):
        raise ConfigError(f"optimizer.nesterov: needs optimizer.name=momentum with a momentum above 0 in the lr_outside "
                          f"form (got {values.get('optimizer.name')}, momentum {values.get('optimizer.momentum')}, "
                          f"{values.get('optimizer.momentum_form')})")
    if "optimizer.name" not in values or "lr_schedule.base_lr" not in values:
        raise ConfigError(f"recipe: {task.name}/{values['recipe']} sets no optimizer or base LR")


def _exchange(method: str, params: dict, asked: str, layered: dict) -> str:
    """The exchange the run will do: overlapped (bucketed) only where the method can send buckets."""
    spec, method_params = method_class(method), registry.params_for(method, params)
    if asked == "overlapped" and not spec.can_bucket(method_params):
        layered["exchange"] = ("after-backward", f"{layered['exchange'][1]}; after backward here: "
                                                 f"{spec.why_not_bucketed(method_params)}")
        return "after-backward"
    return asked


def _fields_of(values: Mapping[str, Any]) -> dict:
    """RunConfig's fields from the resolved setting values, as the declarations map them: a field of several
    settings (``optimizer``) is a dict of those given, by the name after the dot."""
    fields: dict[str, Any] = {}
    for setting in SETTINGS:
        name = setting.config_field
        if setting.key.startswith(name + "."):
            inner = fields.setdefault(name, {})
            if setting.key in values:
                inner[setting.key[len(name) + 1:]] = values[setting.key]
        elif name in (setting.key, setting.key.replace(".", "_")):
            fields[name] = values.get(setting.key)
        # the rest (epochs, model.*) resolve makes into another field: steps, model_options
    return fields


def _departures(task, recipe_name: str, tier: str, method: str, paper: dict, values: Mapping[str, Any],
                sources: Mapping[str, str]) -> dict:
    """Every departure from the published recipe, whether by tier or by the user: visible in the record."""
    recipe_keys = set(task.recipes[recipe_name]) | set(_overlay(task, recipe_name, method)) | \
        set(task.tiers.get(tier, {}))
    overrides = {k: {"paper": paper[k].value if k in paper else None, "used": values[k], "by": sources[k]}
                 for k in sorted(recipe_keys) if k in values and (k not in paper or paper[k].value != values[k])}
    if values["dataset"] != task.paper_dataset:
        overrides["dataset"] = {"paper": task.paper_dataset, "used": values["dataset"],
                                "by": sources.get("dataset", "")}
    return overrides


def _check_bn_batch(task, variant: str, slice_size: int, per_worker: int, timm_name: str | None) -> None:
    """BatchNorm over slices needs slices that split a worker's batch, and a model with BatchNorm."""
    if per_worker % slice_size:
        raise ConfigError(f"model.bn_batch: {slice_size} does not split a worker's batch of {per_worker} evenly")
    if timm_name is None:
        import torch

        with torch.device("meta"):
            model = task.build_model(variant, task.classes)
        if not any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in model.modules()):
            raise ConfigError(f"model.bn_batch: {task.name} ({variant}) has no BatchNorm layer to normalise in "
                              f"slices")


def _model_options(values: Mapping[str, Any]) -> dict:
    """The model settings a run passes to its network. With ``model.timm`` the network is timm's, so the task's
    own model settings (a recipe's dropout) do not apply."""
    name = values.get("model.timm")
    if name:
        import timm

        if not timm.is_model(name):
            raise ConfigError(f"model.timm: timm has no model {shown(name)} (timm.list_models() lists them)")
        return {"timm": name, **({"bn_batch": values["model.bn_batch"]} if values.get("model.bn_batch") else {})}
    return {k: values[f"model.{k}"] for k in ("dropout", "bn_batch") if values.get(f"model.{k}") is not None}


def method_params_of(task, recipe_name: str, method: str, settings: Mapping[str, Any],
                   steps: int | None = None) -> tuple[dict, dict]:
    """The method's parameters and their sources: its defaults (those that follow the run's ``steps``, where a
    run is being resolved), the task recipe's values for it, then the user's."""
    types, cls = method_param_types(method), method_class(method)
    defaults = cls.Params()
    params = {n: getattr(defaults, n) for n in types}
    sources = {f"method.{n}": cls.param_sources.get(n, f"{method} default") for n in types}
    run_defaults = cls.run_defaults(steps) if steps is not None else {}
    for name, (value, source) in run_defaults.items():  # defaults that follow the run
        params[name], sources[f"method.{name}"] = value, source
    for key, c in task.method_overlay(recipe_name, method).items():
        if not key.startswith("method."):
            continue
        params[key.split(".", 1)[1]] = c.value
        sources[key] = c.source
    for key, v in settings.items():
        if not key.startswith("method."):
            continue
        name = key.split(".", 1)[1]
        if name not in types:
            known = ", ".join(f"method.{n}" for n in types) or "none"
            raise ConfigError(f"{key}: method {method} has no parameter {shown(name)} (its parameters: {known})")
        params[name] = _coerce_method_param(method, key, types[name], v)
        sources[key] = "set by user"
    try:
        registry.params_for(method, params)  # the method's own range checks
    except (TypeError, ValueError) as exc:  # the Params messages begin with the parameter's name
        raise ConfigError(f"method.{exc} (method {method})") from None
    return params, sources


def _momentum_to_method(method: str, values: dict, layered: dict, params: dict, sources: dict,
                        settings: Mapping[str, Any]) -> None:
    """A method that owns momentum (DGC's momentum correction, Signum's signed momentum) takes the recipe's
    momentum into its own parameter ``momentum`` and its checkpointed memory, and the optimizer steps plain SGD:
    the momentum must act before compression, where no optimizer sees the gradient. An optimizer the user asked
    for that it cannot honour (Adam, Nesterov) is refused rather than silently dropped."""
    if not getattr(method_class(method), "owns_momentum", False):
        return
    name, owns = values.get("optimizer.name"), f"{method} applies heavy-ball momentum itself and steps plain SGD"
    if name not in ("sgd", "momentum"):
        raise ConfigError(f"optimizer.name: {owns}; it cannot run with {name}")
    if values.get("optimizer.nesterov"):
        raise ConfigError(f"optimizer.nesterov: {owns}; it cannot run with Nesterov momentum")
    if "method.momentum" not in settings:
        params["momentum"] = float(values.get("optimizer.momentum") or 0.0) if name == "momentum" else 0.0
        sources["method.momentum"] = f"the recipe's optimizer.momentum ({name}), applied by {method} itself"
    if name != "sgd" or values.get("optimizer.momentum"):
        values["optimizer.name"], values["optimizer.momentum"] = "sgd", 0.0
        for key in ("optimizer.name", "optimizer.momentum"):
            layered[key] = (values[key], f"{method} applies the momentum itself: its optimizer steps plain SGD")
    try:
        registry.params_for(method, params)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"method.{exc} (method {method})") from None


def never_acts(cfg: RunConfig) -> str | None:
    """Why the run never does what its method is for (PowerSGD that never compresses), or None."""
    return method_class(cfg.method).never_acts(registry.params_for(cfg.method, cfg.method_params), cfg.steps)


def describe(cfg: RunConfig) -> str:
    """The resolved configuration as ``commbench run --dry-run`` prints it: the run id, then every setting and
    method parameter with its value and where the value came from."""
    d = cfg.to_dict()
    lines = [f"run id     {cfg.run_id}"]
    for s in SETTINGS:
        if s.key == "epochs":
            continue  # resolved into steps
        field_value = d.get(s.config_field)
        inner = s.key.split(".", 1)[1] if "." in s.key else None
        if s.config_field == "model_options":
            value = field_value.get(inner) if isinstance(field_value, dict) else None
        elif inner is not None and isinstance(field_value, dict):
            value = field_value.get(inner)
        else:
            value = field_value
        lines.append(f"{s.key:28s} {value!s:22s} {cfg.sources.get(s.key, '')}")
    for name, value in cfg.method_params.items():
        key = f"method.{name}"
        lines.append(f"{key:28s} {value!s:22s} {cfg.sources.get(key, '')}")
    lines.append(f"{'method_version':28s} {cfg.method_version!s:22s} {cfg.method}'s computation version")
    if (idle := never_acts(cfg)) is not None:
        lines.append(f"note: {idle}")
    if cfg.overrides:
        lines.append("departs from the published recipe: " + ", ".join(
            f"{k} {o['paper']} -> {o['used']} ({o['by']})" for k, o in cfg.overrides.items()))
    return "\n".join(lines)
