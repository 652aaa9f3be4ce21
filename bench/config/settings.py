"""The settings a run knows, each declared once with its parser, generic default, flag and place in the run id.

A run is described by *settings*: a flat mapping of dotted keys (``task``, ``optimizer.momentum``,
``method.clip``, ...) to values, as they come from the command line, ``--set`` or a grid file. Everything
else about a setting (the RunConfig field holding it, whether it is in the run id, its ``commbench run``
flag) comes from its declaration here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from commbench.config.parsers import (ascii_float, ascii_int, boolean, data_folder, identifier, integer, link_rate,
                                      number, one_of,
                                      optional_integer, optional_name, optional_number, positive_ints)
from commbench.store.schema import KINDS, is_kind
from commbench.tasks import Cited

LR_KINDS = ("fixed", "step", "multistep", "poly", "exp")
MAX_STEPS = 10 ** 9  # more iterations than any paper trains (TernGrad's longest: 370K); a typo beyond it
MAX_WORKERS = 4096
MAX_THREADS = 4096  # threads per worker: more than any machine has cores (torch cannot take more than an int)
OPTIMIZERS = ("sgd", "momentum", "adam")
TIERS = ("paper", "cpu", "smoke")
PRECISIONS = ("fp32", "bf16-autocast")

NO_IMPLICIT = object()


@dataclass(frozen=True)
class Setting:
    """One setting a run knows, declared once (``SETTINGS``). From the declarations come the fields of
    :class:`~commbench.config.runconfig.RunConfig`, every key's parser (validation), the generic defaults,
    what enters the run id, what tells settings apart in comparisons (the paper tables group the seeds of one
    setting), where ``--dry-run`` says each value came from, the flags of ``commbench run``, and the config part
    of the record schema (:func:`record_config_schema`)."""

    key: str
    parse: Callable[[str, Any], Any]
    # the type a record stores for it, as the record schema names types (commbench.store.schema.KINDS): required,
    # so that no setting can reach a record unchecked
    record_type: str
    default: Cited | None = None  # the generic default; a task's recipe or tier may set another
    field: str | None = None      # the RunConfig field holding it, where that is not the key itself
    in_id: bool = True            # False: changes how a run executes, not what it computes
    compared: bool = True         # False: runs differing only here are one setting (seeds, device, evaluation)
    # the value every record had before the setting existed: out of the run id at that value, and what a record
    # made before it existed reads as (the RunConfig field's default)
    implicit: Any = NO_IMPLICIT
    flag: dict | None = None      # argparse options of its `commbench run` flag (--key); None: only --set

    def __post_init__(self):
        if not is_kind(self.record_type):
            raise ValueError(f"setting {self.key}: record type {self.record_type!r} is not one the record schema "
                             f"knows ({', '.join(KINDS)}, each also with '?' where null is allowed)")

    @property
    def config_field(self) -> str:
        return self.field or self.key


SETTINGS: tuple[Setting, ...] = (
    Setting("task", identifier, "str", flag={"required": True, "help": "the task (commbench list tasks)"}),
    Setting("method", identifier, "str", flag={"required": True, "help": "the method (commbench list methods)"}),
    Setting("dataset", optional_name, "str", flag={"help": "a data set the task accepts (default: its paper's)"}),
    Setting("recipe", optional_name, "str"),
    Setting("data_root", data_folder, "str?", Cited(None, "harness default: data/ in the folder the run starts in"),
            in_id=False, compared=False,
            flag={"help": "where data sets are read and provisioned (default: data)"}),
    Setting("backend", one_of("dist", "sim"), "str", Cited("dist", "harness default: real torch.distributed workers"),
            flag={"choices": ["dist", "sim"], "help": "dist: one real process per worker; sim: all workers in one "
                                                      "process, the same method code and byte counts (default: dist)"}),
    Setting("workers", integer(1, MAX_WORKERS), "count", Cited(1, "harness default"),
            flag={"type": ascii_int, "help": "workers (default: the recipe's, else 1)"}),
    Setting("seed", integer(0, 2 ** 64 - 1), "int", Cited(1, "harness default"), compared=False,
            flag={"type": ascii_int, "help": "the seed of weights, data order and randomness (default: 1)"}),
    Setting("tier", one_of(*TIERS), "str", Cited("paper", "harness default"),
            flag={"choices": list(TIERS), "help": "paper: as published; cpu, smoke: shortened (default: paper)"}),
    Setting("steps", integer(1, MAX_STEPS), "count",
            flag={"type": ascii_int, "group": "length", "help": "iterations (default: the recipe's or the tier's)"}),
    Setting("epochs", number(1e-9, 1e6), "count", field="steps",
            flag={"type": ascii_float, "group": "length", "help": "passes over the training set, instead of --steps"}),
    Setting("global_batch", integer(1), "count"),
    Setting("model.variant", optional_name, "str", field="model_variant"),
    Setting("model.dropout", number(0, 1), "number", field="model_options"),
    # any timm model by name in place of the task's
    Setting("model.timm", optional_name, "str", field="model_options"),
    # BatchNorm over slices of this many samples of a worker's batch: a paper's worker of several devices
    Setting("model.bn_batch", optional_integer(1), "count", field="model_options"),
    Setting("optimizer.name", one_of(*OPTIMIZERS), "str", field="optimizer"),
    Setting("optimizer.momentum", number(0, 1), "number?", Cited(0.0, "harness default (no momentum)"),
            field="optimizer"),
    Setting("optimizer.momentum_form", one_of("lr_outside", "lr_inside"), "str?",
            Cited("lr_outside", "harness default: torch's and TF's momentum, buf = m buf + g; w -= lr buf"),
            field="optimizer", implicit="lr_outside"),
    # Nesterov momentum (TF's MomentumOptimizer(use_nesterov=True), torch's SGD(nesterov=True): the same update)
    Setting("optimizer.nesterov", boolean, "bool", Cited(False, "harness default: heavy-ball momentum"),
            field="optimizer", implicit=False),
    Setting("optimizer.beta1", number(0, 1), "number?", Cited(0.9, "TF/torch Adam default"), field="optimizer"),
    Setting("optimizer.beta2", number(0, 1), "number?", Cited(0.999, "TF/torch Adam default"), field="optimizer"),
    Setting("optimizer.eps", number(0), "number?", Cited(1e-8, "TF/torch Adam default"), field="optimizer"),
    Setting("lr_schedule.kind", one_of(*LR_KINDS), "str", field="lr_schedule"),
    Setting("lr_schedule.base_lr", number(0), "number", field="lr_schedule"),
    Setting("lr_schedule.power", number(0), "number?", Cited(1.0, "harness default"), field="lr_schedule"),
    Setting("lr_schedule.end_lr", number(0), "number?", Cited(0.0, "harness default"), field="lr_schedule"),
    Setting("lr_schedule.gamma", number(0), "number?", Cited(0.1, "Caffe/TF decay factor default 0.1"),
            field="lr_schedule"),
    Setting("lr_schedule.step_size", integer(1), "int?", Cited(None, "harness default: unset"), field="lr_schedule"),
    Setting("lr_schedule.milestones", positive_ints, "list?", Cited([], "harness default: none"), field="lr_schedule"),
    Setting("lr_schedule.warmup_steps", integer(0), "int?", field="lr_schedule"),
    Setting("weight_decay", number(0), "number", Cited(0.0, "harness default")),
    Setting("ema", number(0, 1), "number", Cited(0.0, "harness default: no EMA")),
    Setting("eval.every", integer(0), "int>=0", Cited(0, "harness default: 0 = four evaluations plus the final one"),
            field="eval", compared=False),
    Setting("eval.batch_size", integer(1), "count", Cited(500, "harness default"), field="eval", compared=False),
    # a method with global weights of its own (SSD-SGD's servers) is also scored on them (top1_global), with
    # BatchNorm statistics recomputed for them: a cumulative average over this many of worker 0's training batches
    Setting("eval.bn_batches", integer(1), "int>=0",
            Cited(50, "harness default: BatchNorm statistics of the global weights recomputed over 50 of worker 0's "
                      "training batches, unaugmented"),
            field="eval", compared=False, implicit=50),
    # the top-1 that time to accuracy is measured to, declared before the runs (a grid's base): it changes what the
    # tables read from a record, never what the run computes
    Setting("eval.target", optional_number(0, 1), "number?",
            Cited(None, "harness default: none declared (the tables then take the fp32 baseline's final top-1 "
                        "less 0.5 points, and say the target was derived)"),
            field="eval_target", in_id=False, compared=False, implicit=None),
    Setting("device", one_of("auto", "cpu", "cuda"), "str", Cited("auto", "harness default: CUDA when available"),
            compared=False),
    Setting("threads", optional_integer(1, MAX_THREADS), "count?",
            Cited(None, "harness default: the machine's cores split among local workers"),
            in_id=False, compared=False),
    Setting("fail_at_step", optional_integer(0), "int?", Cited(None, "harness default: off (testing aid)"),
            compared=False),
    Setting("deterministic", boolean, "bool", Cited(False, "harness default")),
    Setting("checkpoint.every", integer(0), "int",
            Cited(0, "harness default: checkpoint only when a stop signal (SIGUSR1/2) asks"),
            field="checkpoint_every", in_id=False, compared=False, implicit=0),
    Setting("step_sleep_s", number(0, 60), "number",
            Cited(0.0, "harness default: off (testing aid: a slow step, to meet a time limit)"),
            in_id=False, compared=False, implicit=0.0),
    Setting("net", link_rate, "rate?", Cited(None, "harness default: the host's own network, not emulated"),
            implicit=None,
            flag={"metavar": "RATE", "help": "dist only, needs root: every process in its own network namespace, "
                                             "each link limited to RATE (1gbit, 100mbit, 500kbit)"}),
    Setting("node_link", link_rate, "rate?",
            Cited(None, "harness default: the cluster's links as they are, not checked"),
            implicit=None,
            flag={"metavar": "RATE", "help": "dist only: a run across nodes whose links are limited to RATE (the "
                                             "two-node cluster's up2.sh --rate); every process checks its node's "
                                             "link and the run fails if it is not"}),
    Setting("exchange", one_of("overlapped", "after-backward"), "str",
            Cited("overlapped", "harness default: as DistributedDataParallel, gradients travel in buckets whose "
                             "exchange starts while backward runs"), implicit="after-backward"),
    Setting("bucket_mb", number(0.001, 100_000), "number",
            Cited(25.0, "torch DistributedDataParallel default bucket_cap_mb=25 (first bucket 1 MiB)"), implicit=25.0),
    # forward and backward in bfloat16 under autocast (channels_last for convolutional models); weights, the
    # optimizer and every byte on the wire stay fp32. A departure from the papers' precision: in the run id.
    Setting("precision", one_of(*PRECISIONS), "str",
            Cited("fp32", "harness default: full precision, as the papers trained"),
            implicit="fp32", flag={"choices": list(PRECISIONS), "help": "fp32 (default) or bf16-autocast: forward "
                                   "and backward in bfloat16, weights and wire in fp32"}),
)
SETTING = {s.key: s for s in SETTINGS}

# Every setting a run knows, with its parser. ``method.<param>`` keys are checked against the method.
KEYS: dict[str, Callable[[str, Any], Any]] = {s.key: s.parse for s in SETTINGS}
# Defaults that hold for every task unless its recipe says otherwise (each with its reason).
GENERIC: dict[str, Cited] = {s.key: s.default for s in SETTINGS if s.default is not None}
# Config fields that are not settings, with the type a record stores for each: where each value came from, and
# the departures from the paper's recipe.
BOOKKEEPING_RECORD_TYPES = {"sources": "dict", "overrides": "dict"}
BOOKKEEPING = tuple(BOOKKEEPING_RECORD_TYPES)
# Config fields the resolver derives from settings, with their record types: the batch split, the method's
# parameters and their version.
DERIVED_RECORD_TYPES = {"batch_per_worker": "count", "method_params": "scalars", "method_version": "int"}
DERIVED = tuple(DERIVED_RECORD_TYPES)
# Fields that change how a run executes but not what it computes: left out of the run id.
NOT_IN_ID = tuple(dict.fromkeys(s.config_field for s in SETTINGS if not s.in_id)) + BOOKKEEPING
# Fields that do not tell one setting from another: runs differing only here are seeds (or reruns) of one.
NOT_COMPARED = tuple(dict.fromkeys(s.config_field for s in SETTINGS if not s.compared)) + BOOKKEEPING
# Fields of several settings added after the first records were made: out of the id while empty, so a run that
# does not use them keeps the id it had before they existed (a record made before reads as empty).
ADDED_EMPTY = ("model_options",)
# Fields out of the id while they hold the value every record had before they existed (a nested one by its dotted
# name): a method's version is 1 unless its computation has changed since (commbench.methods.base.Method.version), and
# the settings declared with an ``implicit`` value.
IMPLICIT = {"method_version": 1, **{s.key: s.implicit for s in SETTINGS if s.implicit is not NO_IMPLICIT}}


def run_flags() -> list[tuple[str, Setting]]:
    """The ``commbench run`` flags (``--data-root`` for ``data_root``) and their settings, in declaration order."""
    return [("--" + s.key.replace("_", "-"), s) for s in SETTINGS if s.flag is not None]


def inner_name(setting: Setting, settings: tuple[Setting, ...] = SETTINGS) -> str | None:
    """The name a setting has inside its config field, where that field is an object of several settings: a dotted
    setting sharing its field with others is stored by the name after the dot (``optimizer.momentum`` as
    ``optimizer["momentum"]``, ``model.dropout`` as ``model_options["dropout"]``); None where the setting is the
    field itself (``steps``, and ``eval.target`` alone in ``eval_target``)."""
    shared = sum(s.config_field == setting.config_field for s in settings) > 1
    return setting.key.split(".", 1)[1] if shared and "." in setting.key else None


def record_config_schema(settings: tuple[Setting, ...] = SETTINGS) -> dict:
    """The config part of the record schema, derived from the settings' record types (then the derived and the
    bookkeeping fields): what commbench.store.schema.CONFIG must equal. Settings that share a field without
    being an object of it (``epochs`` is stored as ``steps``) must agree on its type."""
    schema: dict[str, Any] = {}
    for setting in settings:
        name, inner = setting.config_field, inner_name(setting, settings)
        if inner is not None:
            schema.setdefault(name, {})[inner] = setting.record_type
        elif schema.setdefault(name, setting.record_type) != setting.record_type:
            raise ValueError(f"setting {setting.key}: record type {setting.record_type!r}, but its field {name} "
                             f"is {schema[name]!r}")
    return {**schema, **DERIVED_RECORD_TYPES, **BOOKKEEPING_RECORD_TYPES}
