"""How a run's training conditions differ from those of the paper's own recipe for a row: optimizer, momentum
and its form, learning rate and the shape of its schedule, weight decay, evaluation on a moving average.

The paper's conditions are the row's own task resolved with its published recipe (the one whose optimizer and
worker count match the row), so a stand-in run is held to the conditions of the experiment it stands in for,
not to those of the stand-in model's own paper. A schedule's *shape* is compared relative to each run's own
length (where the learning rate drops, as a share of the run), since stand-in runs are shortened.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from commbench.methods import METHODS
from commbench.tasks import TASKS

from commbench.config import ConfigError, RunConfig, resolve
from commbench.analysis.papers.reference import Reference
from commbench.analysis.runs import Run

FORMS = {"lr_outside": "lr outside the momentum (torch, TF)", "lr_inside": "lr inside the momentum (Caffe, MXNet)"}
OPTIMIZER_OF_ROW = {"momentum": "momentum", "vanilla-sgd": "sgd", "sgd": "sgd", "vanilla": "sgd", "adam": "adam"}
SHARE_TOLERANCE = 0.03  # drops within 3% of a run's length count as the same place


@lru_cache(maxsize=None)
def _paper_config(task: str, method: str, optimizer: str | None, workers: int | None) -> RunConfig | None:
    if task not in TASKS:
        return None
    method = method if method in METHODS else "baseline"
    found = []
    for recipe in TASKS[task].recipes:
        try:
            cfg = resolve({"task": task, "method": method, "recipe": recipe})
        except ConfigError:
            continue
        found.append(cfg)
        if (optimizer is None or cfg.optimizer.get("name") == optimizer) and (workers is None or cfg.workers == workers):
            return cfg
    # no recipe matches both: the one of the row's optimizer, else the first
    return next((c for c in found if optimizer is None or c.optimizer.get("name") == optimizer),
                found[0] if found else None)


def paper_config(ref: Reference, run_optimizer: str | None = None) -> RunConfig | None:
    """The paper's recipe for the row: the one of the row's optimizer; for a row over several optimizers
    (TernGrad's Figure 3: momentum and vanilla SGD), the one of the run's."""
    optimizer = OPTIMIZER_OF_ROW.get(ref.optimizer or "", None)
    if optimizer is None:
        words = {w for v in ref.variants for w in v.split("+")}
        if words >= {"momentum", "vanilla"}:
            optimizer = run_optimizer
        elif words & {"momentum", "vanilla"}:
            optimizer = "momentum" if "momentum" in words else "sgd"
    return _paper_config(ref.task or "", ref.method or "baseline", optimizer, ref.workers)


def schedule_shape(schedule: dict, steps: int) -> tuple:
    """(kind, parameters): ``("fixed",)``, ``("poly", power, end)``, or ``("drops", gamma, shares)`` where
    ``shares`` are the places the rate drops as a share of the run (a step schedule whose first drop lies
    beyond the run is fixed)."""
    kind, steps = schedule.get("kind"), max(1, steps)
    warmup = (schedule.get("warmup_steps") or 0) / steps
    if kind == "poly":
        return ("poly", schedule.get("power"), schedule.get("end_lr"), round(warmup, 2))
    drops: list[float] = []
    if kind in ("step", "exp") and schedule.get("step_size"):
        at = schedule["step_size"]
        while at < steps:
            drops.append(at / steps)
            at += schedule["step_size"]
    elif kind == "multistep":
        drops = [m / steps for m in schedule.get("milestones") or [] if m < steps]
    if not drops:
        return ("fixed", round(warmup, 2))
    return ("drops", schedule.get("gamma"), tuple(drops), round(warmup, 2))


def _same_shape(a: tuple, b: tuple) -> bool:
    if a[0] != b[0] or abs(a[-1] - b[-1]) > SHARE_TOLERANCE:
        return False
    if a[0] == "drops":
        return a[1] == b[1] and len(a[2]) == len(b[2]) and all(abs(x - y) <= SHARE_TOLERANCE
                                                                 for x, y in zip(a[2], b[2]))
    return a[1:-1] == b[1:-1]


def describe_shape(shape: tuple) -> str:
    warmup = f" after a warm-up over {shape[-1]:.0%}" if shape[-1] else ""
    if shape[0] == "fixed":
        return "fixed" + warmup
    if shape[0] == "poly":
        return f"polynomial decay (power {shape[1]:g}) to {shape[2]:g}" + warmup
    return f"x{shape[1]:g} at {', '.join(f'{s:.0%}' for s in shape[2])} of the run" + warmup


def condition_markers(config: RunConfig, ref: Reference) -> list[str]:
    """One phrase per training condition in which the run (its ``config``) departs from the paper's recipe for
    the row."""
    paper = paper_config(ref, (config.optimizer or {}).get("name"))
    if paper is None:
        return []
    out: list[str] = []
    run_opt, paper_opt = config.optimizer or {}, paper.optimizer
    if run_opt.get("name") != paper_opt.get("name"):
        out.append(f"optimizer: {run_opt.get('name')} for {paper_opt.get('name')}")
    elif paper_opt.get("name") == "momentum":
        if run_opt.get("momentum") != paper_opt.get("momentum"):
            out.append(f"momentum {run_opt.get('momentum')} for {paper_opt.get('momentum')}")
        run_form = run_opt.get("momentum_form", "lr_outside")
        if run_form != paper_opt.get("momentum_form", "lr_outside"):
            out.append(f"momentum form: {FORMS[run_form]} for {FORMS[paper_opt['momentum_form']]}")
    schedule = config.lr_schedule or {}
    paper_lr = ref.base_lr if ref.base_lr is not None else paper.lr_schedule.get("base_lr")
    if schedule.get("base_lr") is not None and paper_lr is not None and schedule["base_lr"] != paper_lr:
        out.append(f"lr {schedule['base_lr']:g} for {paper_lr:g}")
    run_shape = schedule_shape(schedule, config.steps or 1)
    paper_shape = schedule_shape(paper.lr_schedule, paper.steps)
    if not _same_shape(run_shape, paper_shape):
        out.append(f"lr schedule: {describe_shape(run_shape)} for {describe_shape(paper_shape)}")
    if ref.global_batch is None and ref.batch_per_worker is None and config.global_batch != paper.global_batch:
        out.append(f"batch {config.global_batch} for {paper.global_batch}")
    if (config.weight_decay or 0.0) != paper.weight_decay:
        out.append(f"weight decay {config.weight_decay or 0:g} for {paper.weight_decay:g}")
    if config.precision != "fp32":
        out.append(f"precision: {config.precision} for the paper's fp32")
    run_ema, paper_ema = config.ema or 0.0, paper.ema
    if run_ema != paper_ema:
        run_eval = f"a {run_ema:g} moving average" if run_ema else "the raw weights"
        paper_eval = f"a {paper_ema:g} moving average" if paper_ema else "the raw weights"
        out.append(f"evaluated on {run_eval}, the paper on {paper_eval}")
    return out


@dataclass(frozen=True)
class Coverage:
    """How much of the schedule a run covers, in samples seen (epochs, whatever the batch), and whether its
    learning rate drops where the schedule's do (relative to the run's length)."""

    share: float
    schedule: str     # what the share is of
    complete: bool    # the lr schedule has the shape of the paper's (or, for a stand-in, of its own recipe's)
    shape: str        # the run's lr schedule, described

    def describe(self) -> str:
        return f"{self.share:.1%} of {self.schedule}"


def _stand_in_recipe(config: RunConfig) -> RunConfig | None:
    try:
        return resolve({"task": config.task, "method": config.method if config.method in METHODS else "baseline",
                        "recipe": config.recipe})
    except ConfigError:
        return None


def samples_seen(config: RunConfig) -> int:
    """The samples a run trains on: its steps times its total batch."""
    return (config.steps or 0) * (config.global_batch or 0)


def coverage(run: Run, ref: Reference) -> Coverage | None:
    """The run's coverage of the schedule a gap is judged against: the paper's for its own model (its stated
    iterations at its batch, else its recipe's), the stand-in task's own recipe for a stand-in (LeNet's 10,000
    iterations of 64 standing in for AlexNet's). None where no schedule is known."""
    config = run.config
    own = config.task == ref.task
    paper = paper_config(ref, (config.optimizer or {}).get("name"))
    recipe = paper if own else _stand_in_recipe(config)
    if recipe is None:
        return None
    if own:
        steps = ref.iterations or recipe.steps
        batch = ref.global_batch or (ref.batch_per_worker * ref.workers if ref.batch_per_worker and ref.workers
                                     else recipe.global_batch)
        what = f"the paper's {steps:,} iterations of {batch:,} samples"
    else:
        steps, batch = recipe.steps, recipe.global_batch
        what = f"{config.task}'s own recipe ({steps:,} iterations of {batch:,} samples)"
    seen = samples_seen(config)
    run_shape = schedule_shape(config.lr_schedule or {}, config.steps or 1)
    shapes = [schedule_shape(recipe.lr_schedule, recipe.steps)]
    if paper is not None and not own:  # a stand-in may run under the paper model's schedule instead of its own
        shapes.append(schedule_shape(paper.lr_schedule, paper.steps))
    return Coverage(seen / (steps * batch), what, any(_same_shape(run_shape, s) for s in shapes),
                    describe_shape(run_shape))
