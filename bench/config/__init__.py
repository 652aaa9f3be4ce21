"""The run configuration: every setting typed and validated once, at the boundary.

A run is described by *settings*: a flat mapping of dotted keys (``task``, ``optimizer.momentum``,
``method.clip``, ...) to values, as they come from the command line, ``--set`` or a grid file.
:func:`resolve` layers them over the task's recipe and tier and returns a frozen :class:`RunConfig`, or
raises :class:`ConfigError` naming the bad item. Nothing runs and nothing is written before that.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import yaml

from commbench.methods import METHODS, param_fields
from commbench.tasks import TASKS, Cited


class ConfigError(ValueError):
    """Bad input. ``str(err)`` is the one line printed before exit code 2."""


# A YAML document is a graph: an alias reuses a node, so 400 bytes of nested aliases stand for billions of
# values, which anything that walks the result (printing, hashing a run id) expands. Refused past this size.
MAX_YAML_VALUES = 100_000


MAX_YAML_DEPTH = 100  # nesting deeper than any grid or profile needs (a deeper document exhausts the parser)


def _depth(text: str) -> int:
    """An upper bound of a YAML document's nesting: the most brackets open at once, or its deepest indent."""
    deepest = level = 0
    for ch in text:
        if ch in "[{":
            level += 1
            deepest = max(deepest, level)
        elif ch in "]}":
            level -= 1
    return deepest


def read_user_text(path: Path) -> str:
    """A user's file (a grid, a profile) as UTF-8 text, or ConfigError naming it."""
    try:
        return Path(path).read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text (save it as UTF-8)") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror or exc})") from None


def load_yaml(text: str, what: str) -> Any:
    """``yaml.safe_load`` for text from users (grids, profiles, --set values), refusing documents whose aliases
    expand past :data:`MAX_YAML_VALUES` values. Raises ConfigError (naming ``what``) or yaml.YAMLError."""
    if _depth(text) > MAX_YAML_DEPTH:
        raise ConfigError(f"{what}: nested more than {MAX_YAML_DEPTH} levels deep; refused")
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except RecursionError:
        raise ConfigError(f"{what}: nested too deeply; refused") from None
    if node is not None:
        sizes: dict[int, int] = {}

        def size(n) -> int:
            if id(n) in sizes:
                return sizes[id(n)]
            sizes[id(n)] = MAX_YAML_VALUES + 1  # a node that contains itself expands without end
            if isinstance(n, yaml.SequenceNode):
                total = 1 + sum(size(c) for c in n.value)
            elif isinstance(n, yaml.MappingNode):
                total = 1 + sum(size(k) + size(v) for k, v in n.value)
            else:
                total = 1
            sizes[id(n)] = min(total, MAX_YAML_VALUES + 1)
            return sizes[id(n)]

        if size(node) > MAX_YAML_VALUES:
            raise ConfigError(f"{what}: its YAML aliases expand to more than {MAX_YAML_VALUES:,} values; refused")
    try:
        return yaml.safe_load(text)
    except ValueError as exc:  # an integer of thousands of digits: Python refuses to convert it
        raise ConfigError(f"{what}: {str(exc).split(';')[0]}") from None


# -- value parsers --------------------------------------------------------------------------------------
_ASCII_INT = re.compile(r"^[+-]?[0-9]+$")
_ASCII_FLOAT = re.compile(r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$")


def ascii_int(text: str) -> int:
    """A command-line integer in ASCII digits (Python's int() also reads other scripts' digits: '２')."""
    if not _ASCII_INT.match(text.strip()):
        raise ValueError(text)
    return int(text)


def ascii_float(text: str) -> float:
    """A finite command-line number in ASCII (no other scripts' digits, no nan or inf)."""
    if not _ASCII_FLOAT.match(text.strip()):
        raise ValueError(text)
    return float(text)


ascii_int.__name__, ascii_float.__name__ = "integer", "number"  # argparse names the type in its message


def _int(minimum: int | None = None, maximum: int | None = None) -> Callable[[str, Any], int]:
    def parse(key, v):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not math.isfinite(v)) \
                or int(v) != v:
            raise ConfigError(f"{key}: expected an integer, got {v!r}")
        if minimum is not None and v < minimum:
            raise ConfigError(f"{key}: must be >= {minimum}, got {v!r}")
        if maximum is not None and v > maximum:
            raise ConfigError(f"{key}: must be <= {maximum:,}, got {v!r}")
        return int(v)
    return parse


def _float(minimum: float | None = None, maximum: float | None = None) -> Callable[[str, Any], float]:
    def parse(key, v):
        if isinstance(v, str):  # YAML 1.1 reads 1e-4 (no dot) as a string
            try:
                v = float(v)
            except ValueError:
                pass
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ConfigError(f"{key}: expected a number, got {v!r}")
        if (minimum is not None and v < minimum) or (maximum is not None and v > maximum):
            raise ConfigError(f"{key}: must be in [{minimum}, {maximum}], got {v!r}")
        return float(v)
    return parse


def _choice(*options: str) -> Callable[[str, Any], str]:
    def parse(key, v):
        if v not in options:
            raise ConfigError(f"{key}: {v!r} is not one of {', '.join(options)}")
        return v
    return parse


def _str(key, v):
    if not isinstance(v, str) or not v:
        raise ConfigError(f"{key}: expected a name, got {v!r}")
    return v


def _data_root(key, v):
    """A folder where data sets are read and provisioned: not a file, not a pseudo file system."""
    if v is None:
        return None
    v = _str(key, v)
    path = Path(v).resolve()
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{key}: {v} is a file, not a folder")
    if path.parts[1:2] in (("proc",), ("sys",), ("dev",)):
        raise ConfigError(f"{key}: {v} is a system folder, not one for data sets")
    return v


def _opt_str(key, v):
    return None if v is None else _str(key, v)


def _int_list(key, v):
    if not isinstance(v, (list, tuple)) or not all(isinstance(i, int) and not isinstance(i, bool) and i > 0
                                                   for i in v):
        raise ConfigError(f"{key}: expected a list of positive integers, got {v!r}")
    return [int(i) for i in v]


def _opt_int(minimum: int):
    inner = _int(minimum)
    return lambda key, v: None if v is None else inner(key, v)


# Link rates of an emulated network (``net``): tc's own notation, bits per second.
NET_UNITS = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
_NET_RATE = re.compile(r"^(\d+(?:\.\d+)?)(kbit|mbit|gbit)$")


def net_rate_bits(rate: str) -> float:
    """``"100mbit"`` -> 1e8 (bits per second). Raises ConfigError for anything but ``<number><kbit|mbit|gbit>``."""
    m = _NET_RATE.match(rate.strip().lower()) if isinstance(rate, str) else None
    if m is None or float(m.group(1)) <= 0:
        raise ConfigError(f"net: {rate!r} is not a link rate (expected <number><kbit|mbit|gbit>, e.g. 1gbit)")
    return float(m.group(1)) * NET_UNITS[m.group(2)]


def _net(key, v):
    try:
        net_rate_bits(v)
    except ConfigError as e:
        raise ConfigError(f"{key}:{str(e).split(':', 1)[1]}") from None
    return v.strip().lower()  # one spelling per rate: the run id does not depend on case


def _bool(key, v):
    if not isinstance(v, bool):
        raise ConfigError(f"{key}: expected true or false, got {v!r}")
    return v


LR_KINDS = ("fixed", "step", "multistep", "poly", "exp")
MAX_STEPS = 10 ** 9  # more iterations than any paper trains (TernGrad's longest: 370K); a typo beyond it
MAX_WORKERS = 4096
OPTIMIZERS = ("sgd", "momentum", "adam")
TIERS = ("paper", "cpu", "smoke")
PRECISIONS = ("fp32", "bf16-autocast")

_NO_IMPLICIT = object()


@dataclass(frozen=True)
class Setting:
    """One setting a run knows, declared once (``SETTINGS``). From the declarations come every key's parser
    (validation), the generic defaults, what enters the run id, what tells settings apart in comparisons (the
    paper tables group the seeds of one setting), and the flags of ``commbench run``."""

    key: str
    parse: Callable[[str, Any], Any]
    default: Cited | None = None  # the generic default; a task's recipe or tier may set another
    field: str | None = None      # the RunConfig field holding it, where that is not the key itself
    in_id: bool = True            # False: changes how a run executes, not what it computes
    compared: bool = True         # False: runs differing only here are one setting (seeds, device, evaluation)
    implicit: Any = _NO_IMPLICIT  # the value every record had before the setting existed: out of the id there
    flag: dict | None = None      # argparse options of its `commbench run` flag (--key); None: only --set

    @property
    def config_field(self) -> str:
        return self.field or self.key


SETTINGS: tuple[Setting, ...] = (
    Setting("task", _str, flag={"required": True, "help": "the task (commbench list tasks)"}),
    Setting("method", _str, flag={"required": True, "help": "the method (commbench list methods)"}),
    Setting("dataset", _opt_str, flag={"help": "a data set the task accepts (default: its paper's)"}),
    Setting("recipe", _opt_str),
    Setting("data_root", _data_root, in_id=False, compared=False,
            flag={"help": "where data sets are read and provisioned (default: data)"}),
    Setting("backend", _choice("dist", "sim"), Cited("dist", "harness default: real torch.distributed workers"),
            flag={"choices": ["dist", "sim"], "help": "dist: one real process per worker; sim: all workers in one "
                                                      "process, the same method code and byte counts (default: dist)"}),
    Setting("workers", _int(1, MAX_WORKERS), Cited(1, "harness default"),
            flag={"type": ascii_int, "help": "workers (default: the recipe's, else 1)"}),
    Setting("seed", _int(0, 2 ** 64 - 1), Cited(1, "harness default"), compared=False,
            flag={"type": ascii_int, "help": "the seed of weights, data order and randomness (default: 1)"}),
    Setting("tier", _choice(*TIERS), Cited("paper", "harness default"),
            flag={"choices": list(TIERS), "help": "paper: as published; cpu, smoke: shortened (default: paper)"}),
    Setting("steps", _int(1, MAX_STEPS),
            flag={"type": ascii_int, "group": "length", "help": "iterations (default: the recipe's or the tier's)"}),
    Setting("epochs", _float(1e-9, 1e6), field="steps",
            flag={"type": ascii_float, "group": "length", "help": "passes over the training set, instead of --steps"}),
    Setting("global_batch", _int(1)),
    Setting("model.variant", _opt_str, field="model_variant"),
    Setting("model.dropout", _float(0, 1), field="model_options"),
    Setting("model.timm", _opt_str, field="model_options"),  # any timm model by name in place of the task's
    # BatchNorm over slices of this many samples of a worker's batch: a paper's worker of several devices
    Setting("model.bn_batch", _opt_int(1), field="model_options"),
    Setting("optimizer.name", _choice(*OPTIMIZERS), field="optimizer"),
    Setting("optimizer.momentum", _float(0, 1), Cited(0.0, "harness default (no momentum)"), field="optimizer"),
    Setting("optimizer.momentum_form", _choice("lr_outside", "lr_inside"),
            Cited("lr_outside", "harness default: torch's and TF's momentum, buf = m buf + g; w -= lr buf"),
            field="optimizer", implicit="lr_outside"),
    Setting("optimizer.beta1", _float(0, 1), Cited(0.9, "TF/torch Adam default"), field="optimizer"),
    Setting("optimizer.beta2", _float(0, 1), Cited(0.999, "TF/torch Adam default"), field="optimizer"),
    Setting("optimizer.eps", _float(0), Cited(1e-8, "TF/torch Adam default"), field="optimizer"),
    Setting("lr_schedule.kind", _choice(*LR_KINDS), field="lr_schedule"),
    Setting("lr_schedule.base_lr", _float(0), field="lr_schedule"),
    Setting("lr_schedule.power", _float(0), Cited(1.0, "harness default"), field="lr_schedule"),
    Setting("lr_schedule.end_lr", _float(0), Cited(0.0, "harness default"), field="lr_schedule"),
    Setting("lr_schedule.gamma", _float(0), Cited(0.1, "Caffe/TF decay factor default 0.1"), field="lr_schedule"),
    Setting("lr_schedule.step_size", _int(1), Cited(None, "harness default: unset"), field="lr_schedule"),
    Setting("lr_schedule.milestones", _int_list, Cited([], "harness default: none"), field="lr_schedule"),
    Setting("lr_schedule.warmup_steps", _int(0), field="lr_schedule"),
    Setting("weight_decay", _float(0), Cited(0.0, "harness default")),
    Setting("ema", _float(0, 1), Cited(0.0, "harness default: no EMA")),
    Setting("eval.every", _int(0), Cited(0, "harness default: 0 = four evaluations plus the final one"), field="eval",
            compared=False),
    Setting("eval.batch_size", _int(1), Cited(500, "harness default"), field="eval", compared=False),
    # a method with global weights of its own (SSD-SGD's servers) is also scored on them (top1_global), with
    # BatchNorm statistics recomputed for them: a cumulative average over this many of worker 0's training batches
    Setting("eval.bn_batches", _int(1), Cited(50, "harness default: BatchNorm statistics of the global weights "
                                                  "recomputed over 50 of worker 0's training batches, unaugmented"),
            field="eval", compared=False, implicit=50),
    Setting("device", _choice("auto", "cpu", "cuda"), Cited("auto", "harness default: CUDA when available"),
            compared=False),
    Setting("threads", _opt_int(1), Cited(None, "harness default: the machine's cores split among local workers"),
            in_id=False, compared=False),
    Setting("fail_at_step", _opt_int(0), Cited(None, "harness default: off (testing aid)"), compared=False),
    Setting("deterministic", _bool, Cited(False, "harness default")),
    Setting("checkpoint.every", _int(0),
            Cited(0, "harness default: checkpoint only when a stop signal (SIGUSR1/2) asks"),
            field="checkpoint_every", in_id=False, compared=False),
    Setting("step_sleep_s", _float(0, 60),
            Cited(0.0, "harness default: off (testing aid: a slow step, to meet a time limit)"),
            in_id=False, compared=False),
    Setting("net", _net, Cited(None, "harness default: the host's own network, not emulated"),
            flag={"metavar": "RATE", "help": "dist only, needs root: every process in its own network namespace, "
                                             "each link limited to RATE (1gbit, 100mbit, 500kbit)"}),
    Setting("node_link", _net, Cited(None, "harness default: the cluster's links as they are, not checked"),
            flag={"metavar": "RATE", "help": "dist only: a run across nodes whose links are limited to RATE (the "
                                             "two-node cluster's up2.sh --rate); every process checks its node's "
                                             "link and the run fails if it is not"}),
    Setting("exchange", _choice("overlapped", "after-backward"),
            Cited("overlapped", "harness default: as DistributedDataParallel, gradients travel in buckets whose "
                             "exchange starts while backward runs"), implicit="after-backward"),
    Setting("bucket_mb", _float(0.001, 100_000),
            Cited(25.0, "torch DistributedDataParallel default bucket_cap_mb=25 (first bucket 1 MiB)"), implicit=25.0),
    # forward and backward in bfloat16 under autocast (channels_last for convolutional models); weights, the
    # optimizer and every byte on the wire stay fp32. A departure from the papers' precision: in the run id.
    Setting("precision", _choice(*PRECISIONS), Cited("fp32", "harness default: full precision, as the papers trained"),
            implicit="fp32", flag={"choices": list(PRECISIONS), "help": "fp32 (default) or bf16-autocast: forward "
                                   "and backward in bfloat16, weights and wire in fp32"}),
)
SETTING = {s.key: s for s in SETTINGS}

# Every setting a run knows, with its parser. ``method.<param>`` keys are checked against the method.
KEYS: dict[str, Callable[[str, Any], Any]] = {s.key: s.parse for s in SETTINGS}
# Defaults that hold for every task unless its recipe says otherwise (each with its reason).
GENERIC: dict[str, Cited] = {s.key: s.default for s in SETTINGS if s.default is not None}
# Config fields that are not settings: where each value came from, and the departures from the paper's recipe.
BOOKKEEPING = ("sources", "overrides")
# Fields that change how a run executes but not what it computes: left out of the run id.
NOT_IN_ID = tuple(dict.fromkeys(s.config_field for s in SETTINGS if not s.in_id)) + BOOKKEEPING
# Fields that do not tell one setting from another: runs differing only here are seeds (or reruns) of one.
NOT_COMPARED = tuple(dict.fromkeys(s.config_field for s in SETTINGS if not s.compared)) + BOOKKEEPING
# Fields added after the first records were made: out of the id while empty (see RunConfig.model_options), so
# a run that does not use them keeps the id it had before they existed.
ADDED_EMPTY = ("model_options", "net", "node_link")
# Fields out of the id while they hold the value every record had before they existed (a nested one by its dotted
# name): a method's version is 1 unless its computation has changed since (methods.base.Method.version), and
# the settings declared with an ``implicit`` value.
IMPLICIT = {"method_version": 1, **{s.key: s.implicit for s in SETTINGS if s.implicit is not _NO_IMPLICIT}}


def run_flags() -> list[tuple[str, Setting]]:
    """The ``commbench run`` flags (``--data-root`` for ``data_root``) and their settings, in declaration order."""
    return [("--" + s.key.replace("_", "-"), s) for s in SETTINGS if s.flag is not None]


@dataclass(frozen=True)
class RunConfig:
    """A fully resolved run. Units: steps are iterations; batches are samples; lr in optimizer units."""

    task: str
    method: str
    dataset: str
    workers: int
    backend: str
    seed: int
    tier: str
    recipe: str
    steps: int
    global_batch: int
    batch_per_worker: int
    model_variant: str
    optimizer: dict
    lr_schedule: dict
    weight_decay: float
    ema: float
    eval: dict
    method_params: dict
    device: str
    threads: int | None
    deterministic: bool
    fail_at_step: int | None
    data_root: str | None
    # Model options a recipe sets (dropout); left out of the run id while empty, so records made before the
    # field existed keep their ids.
    model_options: dict = field(default_factory=dict)
    sources: dict = field(default_factory=dict)    # key -> where its value came from
    overrides: dict = field(default_factory=dict)  # key -> {"paper": v, "used": v, "by": ...}
    checkpoint_every: int = 0  # steps between checkpoints; 0: only when a stop signal asks
    step_sleep_s: float = 0.0  # testing aid: sleep after every step (a run long enough to meet a time limit)
    # Emulated network (dist only, local launcher): every process in its own network namespace, each link
    # limited to this rate ("1gbit"); None: the host's own network. Part of the run id when set, since runs at
    # different rates are different measurements (bench/launch/netns.py).
    net: str | None = None
    # The links between a multi-node run's nodes (tc tbf, set by the cluster, not the harness): the rate every
    # process checks its node's link has before it starts (bench/run/worker.py). A separate measurement from the
    # same run on unlimited links, so in the run id when set.
    node_link: str | None = None
    # The method's computation version (methods.base.Method.version): in the run id from version 2 on, so a
    # changed method is re-run rather than taken as done from an old record.
    method_version: int = 1
    # How gradients travel: "overlapped" (per bucket of bucket_mb, started while backward runs, as DDP) or
    # "after-backward" (the whole gradient after backward: every record made before the switch existed).
    exchange: str = "after-backward"
    bucket_mb: float = 25.0
    # forward and backward under bfloat16 autocast ("bf16-autocast") or not ("fp32": every record before it existed)
    precision: str = "fp32"

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @property
    def run_id(self) -> str:
        return run_id_of(self.to_dict())

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "RunConfig":
        return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls) if f.name in d})


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


def parse_set(items: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` strings to settings; values read as YAML scalars (``0`` int, ``true`` bool, ``[1,2]``)."""
    out = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE")
        try:
            out[key.strip()] = load_yaml(raw, f"--set {key.strip()}") if raw.strip() else ""
        except yaml.YAMLError:
            raise ConfigError(f"--set {key}: cannot read value {raw!r}") from None
    return out


def method_param_types(method: str) -> dict[str, Any]:
    cls = METHODS[method].Params
    hints = typing.get_type_hints(cls)
    return {name: hints[name] for name in param_fields(cls)}


def _coerce_method_param(method: str, key: str, typ: Any, v: Any) -> Any:
    if typ is bool:
        return _bool(key, v)
    if typ is int:
        return _int()(key, v)
    if typ is float:
        return _float()(key, v)
    if typ is str:
        return _str(key, v)
    return v


def check_names(settings: Mapping[str, Any]) -> None:
    """Unknown keys, tasks, methods: the checks a grid can make before choosing per-run values."""
    for key in settings:
        if key not in KEYS and not key.startswith("method."):
            raise ConfigError(f"unknown key {key!r}")
    if "task" in settings and settings["task"] not in TASKS:
        raise ConfigError(f"task: unknown task {settings['task']!r} (known: {', '.join(TASKS)})")
    if "method" in settings and settings["method"] not in METHODS:
        raise ConfigError(f"method: unknown method {settings['method']!r} (known: {', '.join(METHODS)})")


def resolve(settings: Mapping[str, Any]) -> RunConfig:
    """Layer settings over generic defaults < task recipe < tier; validate everything; build the config."""
    settings = {k: v for k, v in settings.items() if v is not None}
    check_names(settings)
    for required in ("task", "method"):
        if required not in settings:
            raise ConfigError(f"{required}: missing (--{required} NAME)")
    task = TASKS[settings["task"]]
    method = settings["method"]

    recipe_name = settings.get("recipe") or next(iter(task.recipes))
    if recipe_name not in task.recipes:
        raise ConfigError(f"recipe: {task.name} has no recipe {recipe_name!r} (known: {', '.join(task.recipes)})")
    tier = KEYS["tier"]("tier", settings.get("tier", "paper"))
    # A paper may train one method with other values (TernGrad's dropout and weight decay): the task's
    # per-method overlay is part of the published recipe for that method.
    overlay = {k: c for k, c in task.method_overlay(recipe_name, method).items() if not k.startswith("method.")}
    paper = {**GENERIC, **task.recipes[recipe_name], **overlay}
    layered: dict[str, tuple[Any, str]] = {k: (c.value, c.source) for k, c in paper.items()}
    for k, c in task.tiers.get(tier, {}).items():
        layered[k] = (c.value, f"tier {tier}: {c.source}")
    for k, v in settings.items():
        if not k.startswith("method."):
            layered[k] = (v, "set by user")

    values: dict[str, Any] = {}
    for k, (v, _src) in layered.items():
        values[k] = v if v is None else KEYS[k](k, v)

    dataset = values.get("dataset") or task.paper_dataset
    if dataset not in task.datasets:
        raise ConfigError(f"dataset: {task.name} does not accept {dataset!r} (accepts: {', '.join(task.datasets)})")
    variant = values.get("model.variant") or task.variants[0]
    if variant not in task.variants:
        raise ConfigError(f"model.variant: {task.name} has no variant {variant!r} (known: {', '.join(task.variants)})")

    workers, global_batch = values["workers"], values["global_batch"]
    if global_batch % workers:
        raise ConfigError(f"global_batch: {global_batch} does not split evenly over {workers} workers")
    if global_batch > task.train_size(dataset):
        raise ConfigError(f"global_batch: {global_batch} is more than the {task.train_size(dataset):,} training "
                          f"images of {dataset}")
    if values.get("model.bn_batch"):
        _check_bn_batch(task, variant, values["model.bn_batch"], global_batch // workers, values.get("model.timm"))
    if values.get("net") is not None and values["backend"] != "dist":
        raise ConfigError(f"net: an emulated network ({values['net']}) needs backend dist, not "
                          f"{values['backend']} (sim workers share one process and send nothing over a network)")
    if values.get("node_link") is not None and (values["backend"] != "dist" or values.get("net") is not None):
        raise ConfigError(f"node_link: links between nodes ({values['node_link']}) need backend dist on a cluster, "
                          f"not {'net=' + values['net'] if values.get('net') else 'backend ' + values['backend']}")
    if "epochs" in settings:
        if "steps" in settings:
            raise ConfigError("epochs: give --steps or --epochs, not both")
        values["steps"] = math.ceil(values["epochs"] * task.train_size(dataset) / global_batch)
        layered["steps"] = (values["steps"], f"set by user: {values['epochs']} epochs")

    schedule = {k.split(".", 1)[1]: values[k] for k in values if k.startswith("lr_schedule.")}
    if schedule.get("kind") in ("step", "exp") and not schedule.get("step_size"):
        raise ConfigError(f"lr_schedule.step_size: required by lr_schedule.kind={schedule['kind']}")
    if schedule.get("kind") == "multistep" and not schedule.get("milestones"):
        raise ConfigError("lr_schedule.milestones: required by lr_schedule.kind=multistep")
    optimizer = {k.split(".", 1)[1]: values[k] for k in values if k.startswith("optimizer.")}
    if "name" not in optimizer or "base_lr" not in schedule:
        raise ConfigError(f"recipe: {task.name}/{recipe_name} sets no optimizer or base LR")

    method_params, method_sources = _method_params(task, recipe_name, method, settings, values["steps"])
    exchange = values["exchange"]
    if exchange == "overlapped" and not METHODS[method].can_bucket(METHODS[method].Params(**method_params)):
        exchange = "after-backward"  # what the run will do, whatever was asked
        layered["exchange"] = ("after-backward", f"{layered['exchange'][1]}; after backward here: "
                                                 f"{METHODS[method].why_not_bucketed(METHODS[method].Params(**method_params))}")

    sources = {k: src for k, (_v, src) in layered.items()}
    sources.update(method_sources)
    # the values resolve chose itself (not from a recipe): say so
    sources.setdefault("dataset", f"task default: the paper's data set ({task.paper_dataset})")
    sources.setdefault("recipe", "task default: its first recipe")
    sources.setdefault("model.variant", "task default: its first variant")
    # Every departure from the published recipe, whether by tier or by the user, is visible in the record.
    recipe_keys = set(task.recipes[recipe_name]) | set(overlay) | set(task.tiers.get(tier, {}))
    overrides = {k: {"paper": paper[k].value if k in paper else None, "used": values[k], "by": sources[k]}
                 for k in sorted(recipe_keys) if k in values and (k not in paper or paper[k].value != values[k])}
    if dataset != task.paper_dataset:
        overrides["dataset"] = {"paper": task.paper_dataset, "used": dataset, "by": sources.get("dataset", "")}

    return RunConfig(
        task=task.name, method=method, dataset=dataset, workers=workers, backend=values["backend"],
        seed=values["seed"], tier=tier, recipe=recipe_name, steps=values["steps"], global_batch=global_batch,
        batch_per_worker=global_batch // workers, model_variant=variant, optimizer=optimizer,
        lr_schedule=schedule, weight_decay=values["weight_decay"], ema=values["ema"],
        eval={"every": values["eval.every"], "batch_size": values["eval.batch_size"],
              "bn_batches": values["eval.bn_batches"]},
        method_params=method_params, device=values["device"], threads=values["threads"],
        deterministic=values["deterministic"], fail_at_step=values["fail_at_step"],
        data_root=values.get("data_root"), sources=sources, overrides=overrides,
        checkpoint_every=values["checkpoint.every"], step_sleep_s=values["step_sleep_s"], net=values.get("net"),
        node_link=values.get("node_link"),
        model_options=_model_options(values),
        method_version=METHODS[method].version, exchange=exchange, bucket_mb=values["bucket_mb"],
        precision=values["precision"],
    )


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
            raise ConfigError(f"model.timm: timm has no model {name!r} (timm.list_models() lists them)")
        return {"timm": name, **({"bn_batch": values["model.bn_batch"]} if values.get("model.bn_batch") else {})}
    return {k: values[f"model.{k}"] for k in ("dropout", "bn_batch") if values.get(f"model.{k}") is not None}


def _method_params(task, recipe_name: str, method: str, settings: Mapping[str, Any],
                   steps: int | None = None) -> tuple[dict, dict]:
    """The method's parameters and their sources: its defaults (those that follow the run's ``steps``, where a
    run is being resolved), the task recipe's values for it, then the user's."""
    types = method_param_types(method)
    defaults = METHODS[method].Params()
    params = {n: getattr(defaults, n) for n in types}
    sources = {f"method.{n}": METHODS[method].param_sources.get(n, f"{method} default") for n in types}
    run_defaults = METHODS[method].run_defaults(steps) if steps is not None else {}
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
            raise ConfigError(f"{key}: method {method} has no parameter {name!r} (its parameters: {known})")
        params[name] = _coerce_method_param(method, key, types[name], v)
        sources[key] = "set by user"
    try:
        METHODS[method].Params(**params)  # the method's own range checks
    except (TypeError, ValueError) as exc:  # the Params messages begin with the parameter's name
        raise ConfigError(f"method.{exc} (method {method})") from None
    return params, sources


def never_acts(cfg: RunConfig) -> str | None:
    """Why the run never does what its method is for (PowerSGD that never compresses), or None."""
    method = METHODS[cfg.method]
    return method.never_acts(method.Params(**cfg.method_params), cfg.steps)


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
