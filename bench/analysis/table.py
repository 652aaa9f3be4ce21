"""Comparison tables, always regenerated from the stored records."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd

from commbench.analysis.runs import read_runs, runs_frame
from commbench.analysis.tta import Arm, speedup, strongest, time_to
from commbench.store.records import Status

COLUMNS = ["task", "dataset", "method", "params", "differs", "workers", "backend", "tier", "steps", "n", "status",
           "top1", "bytes/worker/step", "recv/worker/step", "fp32/sent", "images/s", "comm exposed",
           "time to target (s)", "vs strongest baseline"]
# The machine-readable table (--format csv/json): plain numbers, units in the names. Accuracy is a fraction of
# the evaluation set (0-1) here as in the records.
DATA_COLUMNS = ["task", "dataset", "substitute_for", "method", "params", "differs", "workers", "backend", "tier",
                "tier_steps", "steps", "planned_steps", "n_runs", "n_done", "seeds", "status", "top1_mean",
                "top1_std", "top5_mean", "bytes_sent_per_worker_step", "bytes_received_per_worker_step",
                "fp32_bytes_over_sent", "speed_withheld", "images_per_s_mean", "images_per_s_std",
                "comm_exposed_share", "target_top1", "target_source", "time_to_target_s", "runs_reaching_target",
                "runs_untimed", "timing_cpu", "strongest_baseline", "speedup_vs_strongest", "speedup_low",
                "speedup_high", "speedup_pairs", "setting_id"]
# time to accuracy: by default the first point at which a run reaches its setting's baseline's final top-1 minus this
TARGET_BELOW_BASELINE = 0.005


SHOWN = ("task", "dataset", "method", "workers", "backend", "tier", "steps")  # fields the table shows anyway


def not_timed_alone(cfg: dict) -> str:
    """Why a run's seconds are no speed result, or "" where they are one. Only a run timed alone on one machine
    says how fast a method is: real processes (backend dist), and the emulated network's runs (net), which are
    run one at a time. Simulated workers share one process, on a machine that trains other runs beside them (a
    campaign's lanes): their images/s, time to target and speed-up would read as speed results and are none."""
    if cfg.get("backend") == "dist" or cfg.get("net"):
        return ""
    return f"{cfg.get('backend') or 'unknown backend'}: not timed alone"


def tier_steps(cfg: dict) -> int | None:
    """The steps of a run's tier: the tier's own (cpu, smoke: shortened on purpose), else its recipe's as
    published (with the paper's overlay for the method). None for a task, recipe or tier this code does not know."""
    from commbench.tasks import TASKS

    task = TASKS.get(cfg.get("task"))
    tier = task.tiers.get(cfg.get("tier") or "paper") if task else None
    recipe_name = cfg.get("recipe") or (next(iter(task.recipes)) if task else None)
    if tier is None or recipe_name not in task.recipes:
        return None
    layered = {**task.recipes[recipe_name], **task.method_overlay(recipe_name, cfg.get("method") or ""), **tier}
    steps = layered.get("steps")
    return int(steps.value) if steps is not None and isinstance(steps.value, int) else None


def _key(value: dict) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def records_frame(root: Path) -> pd.DataFrame:
    """One row per record with the columns the tables need: the one frame of the runs
    (:func:`commbench.analysis.runs.runs_frame`), and what only the tables derive."""
    runs = list(read_runs(root))
    frame = runs_frame(runs)
    if frame.empty:
        return frame
    per_step, sent = list(zip(frame["steps"], frame["workers"])), frame["bytes_sent"]
    frame["params"] = [chosen_params(run.stored) for run in runs]
    frame["tier_steps"] = [tier_steps(run.stored) for run in runs]
    frame["not_timed_alone"] = [not_timed_alone(run.stored) for run in runs]
    frame["bytes_per_worker_step"] = [b / (w * s) if b is not None and not pd.isna(b) and w and s else None
                                      for b, (s, w) in zip(sent, per_step)]
    frame["received_per_worker_step"] = [b / (w * s) if b is not None and not pd.isna(b) and w and s else None
                                         for b, (s, w) in zip(frame["bytes_received"], per_step)]
    frame["compression"] = [f / b if b else None for f, b in zip(frame["bytes_fp32_equiv"], sent)]
    frame["exposed"] = [_exposed_share(run.metrics) for run in runs]
    return frame[TABLE_COLUMNS]


TABLE_COLUMNS = ["run_id", "status", "task", "dataset", "method", "params", "workers", "backend", "tier", "seed",
                 "steps", "top1", "planned_steps", "tier_steps", "not_timed_alone", "top5", "images_per_s",
                 "bytes_sent", "bytes_fp32_equiv", "bytes_per_worker_step", "received_per_worker_step",
                 "compression", "substitute", "exposed", "curve", "timed", "eval_target", "cpu", "setting",
                 "setting_flat", "baseline_setting"]


def _exposed_share(metrics: dict) -> float | None:
    """The share of training time spent waiting for communication that computation did not hide."""
    breakdown, train_s = metrics.get("time_breakdown"), metrics.get("train_s")
    if not isinstance(breakdown, dict) or not train_s or not isinstance(breakdown.get("wait_s"), (int, float)):
        return None
    return breakdown["wait_s"] / train_s


def chosen_params(cfg: dict) -> str:
    """The method parameters a run set itself (by --set or a grid axis), as ``k=v``, and a model or precision
    other than the task's own: what tells its rows apart from other runs of the same method. Recipe and method
    defaults are left out."""
    sources = cfg.get("sources", {})
    chosen = [f"{k}={v}" for k, v in sorted(cfg.get("method_params", {}).items())
              if sources.get(f"method.{k}", "").startswith("set by user")]
    # the model is part of what a row compares: a timm model in the task's place, BatchNorm over slices
    options = cfg.get("model_options") or {}
    chosen += [f"model.{k}={options[k]}" for k in ("timm", "bn_batch") if options.get(k) is not None]
    if cfg.get("precision", "fp32") != "fp32":
        chosen.append(f"precision={cfg['precision']}")
    return ", ".join(chosen)


def _mean_std(mean, std, fmt: str) -> str:
    """A setting's mean over its seeds, ± their standard deviation where there are two or more."""
    if mean is None or pd.isna(mean):
        return "—"
    if std is None or pd.isna(std):
        return format(mean, fmt)
    return f"{format(mean, fmt)} ± {format(std, fmt)}"


def _mean(series: pd.Series) -> float | None:
    values = series.dropna()
    return float(values.mean()) if not values.empty else None


def _std(series: pd.Series) -> float | None:
    values = series.dropna()
    return float(values.std()) if len(values) > 1 else None


def _shown(value) -> str:
    return "none" if value is None else json.dumps(value) if isinstance(value, (list, dict)) else str(value)


def _differs(groups: list[pd.DataFrame]) -> dict[str, str]:
    """For settings that the shown columns do not tell apart: each one's values of the fields that differ."""
    out = {}
    by_look: dict[tuple, list[pd.DataFrame]] = {}
    for group in groups:
        first = group.iloc[0]
        look = tuple(str(first[k]) for k in (*SHOWN, "params"))
        by_look.setdefault(look, []).append(group)
    for alike in by_look.values():
        if len(alike) < 2:
            continue
        flats = [g.iloc[0]["setting_flat"] for g in alike]
        keys = sorted(set().union(*flats))
        varying = [k for k in keys if len({_key({"v": f.get(k)}) for f in flats}) > 1 and k not in SHOWN]
        for group, flat in zip(alike, flats):
            out[group.iloc[0]["setting"]] = ", ".join(f"{k}={_shown(flat.get(k))}" for k in varying)
    return out


def _goal(group: pd.DataFrame, target: float | None, baseline_top1: float | None) -> tuple[float | None, str]:
    """The top-1 a setting's time to accuracy is measured to, and where it comes from: the reader's --target, else
    the one its runs declared before they ran (eval.target), else its fp32 baseline's final top-1 less 0.5 points
    (a baseline that learned nothing, on synthetic data, sets none)."""
    if target is not None:
        return target, "given"
    declared = group["eval_target"].dropna().unique()
    if len(declared) == 1:
        return float(declared[0]), "declared"
    if baseline_top1 is not None and pd.notna(baseline_top1) and baseline_top1 > TARGET_BELOW_BASELINE:
        return baseline_top1 - TARGET_BELOW_BASELINE, "derived"
    return None, ""


def comparison_data(frame: pd.DataFrame, target: float | None = None) -> pd.DataFrame:
    """One row per setting (everything that enters the run id but the seed): its runs' means, plain numbers.
    Time to accuracy (analysis/tta.py): training seconds until a run first reaches the target top-1 (``target``,
    else the one the runs declared, else the baseline's final top-1 less 0.5 points), and the speed-up against
    the strongest of the fp32, fp16 and bf16 all-reduce of the same setting, seeds paired."""
    if frame.empty:
        return pd.DataFrame(columns=DATA_COLUMNS)
    done_frame = frame[frame["status"] == Status.DONE]
    baseline_top1 = done_frame[done_frame["method"] == "baseline"].groupby("baseline_setting")["top1"].mean()
    groups = [g for _, g in frame.groupby("setting", sort=False)]
    differs = _differs(groups)
    rows, arms = [], []
    for group in groups:
        first = group.iloc[0]
        done = group[group["status"] == Status.DONE]
        statuses = group["status"].value_counts()
        goal, source = _goal(group, target, baseline_top1.get(first["baseline_setting"]))
        timing, arm = _timing(done, first["method"], goal, first["not_timed_alone"])
        substitutes = group["substitute"].dropna()
        arms.append((first["baseline_setting"], goal, arm))
        rows.append({
            "task": first["task"], "dataset": first["dataset"],
            "substitute_for": substitutes.iloc[0] if not substitutes.empty else None,
            "method": first["method"], "params": first["params"], "differs": differs.get(first["setting"], ""),
            "workers": first["workers"], "backend": first["backend"], "tier": first["tier"],
            "tier_steps": _planned(group, "tier_steps"), "planned_steps": _planned(group, "planned_steps"),
            "steps": int(group["steps"].max()), "n_runs": len(group), "n_done": len(done),
            "seeds": " ".join(str(s) for s in sorted(group["seed"].dropna().unique())),
            "status": ", ".join(f"{s} {c}" if len(statuses) > 1 or c > 1 else s for s, c in statuses.items()),
            "top1_mean": _mean(done["top1"]), "top1_std": _std(done["top1"]), "top5_mean": _mean(done["top5"]),
            "bytes_sent_per_worker_step": _mean(done["bytes_per_worker_step"]),
            "bytes_received_per_worker_step": _mean(done["received_per_worker_step"]),
            "fp32_bytes_over_sent": _mean(done["compression"]),
            "comm_exposed_share": _mean(done["exposed"]), "target_top1": goal, "target_source": source,
            **timing,
            "setting_id": hashlib.sha256(first["setting"].encode()).hexdigest()[:10],
        })
    for row, (where, goal, arm) in zip(rows, arms):
        row.update(_against_strongest(arm, [a for w, g, a in arms if w == where and g == goal]))
    data = pd.DataFrame(rows)
    order = ["task", "dataset", "method", "params", "workers", "backend", "tier", "steps", "differs"]
    data = data.sort_values(order, key=lambda c: c.astype(str), kind="stable", ignore_index=True)
    for column in ("tier_steps", "planned_steps"):  # whole numbers, a missing one empty (not 10000.0 beside NaN)
        data[column] = data[column].astype("Int64")
    return data[DATA_COLUMNS]


def _planned(group: pd.DataFrame, column: str) -> int | None:
    """The steps a setting's runs were to train, or its tier's recipe's: one number (both are part of the
    setting), or None where the records do not say."""
    planned = group[column].dropna()
    return int(planned.max()) if not planned.empty else None


def _timing(done: pd.DataFrame, method: str, goal: float | None, withheld: str) -> tuple[dict, Arm]:
    """A setting's timed columns (images/s, time to target) and its arm for the speed-ups. None of them where
    its runs were not timed alone (``withheld`` says why: :func:`not_timed_alone`); no time to target where its
    timed runs ran on more than one CPU."""
    timed = done[done["timed"]]
    if withheld:
        return ({"speed_withheld": withheld, "images_per_s_mean": None, "images_per_s_std": None,
                 "time_to_target_s": None, "runs_reaching_target": None, "runs_untimed": len(done),
                 "timing_cpu": None}, Arm(method, {}, None))
    cpus = timed["cpu"].value_counts()
    cpu = cpus.index[0] if len(cpus) == 1 else None
    times = ({seed: time_to(curve, goal) for seed, curve in zip(timed["seed"], timed["curve"])}
             if goal and cpu is not None else {})
    reached = [t for t in times.values() if t is not None]
    return ({"speed_withheld": "",
             "images_per_s_mean": _mean(done["images_per_s"]), "images_per_s_std": _std(done["images_per_s"]),
             "time_to_target_s": sum(reached) / len(reached) if reached else None,
             # of the runs whose history times their evaluations: a run without train_s is unknown, not unreached
             "runs_reaching_target": len(reached) if goal is not None and len(timed) and cpu is not None else None,
             "runs_untimed": len(done) - len(timed),
             "timing_cpu": cpu if cpu is not None or not len(cpus) else
                           "mixed: " + "; ".join(f"{name} ({count})" for name, count in sorted(cpus.items())),
             }, Arm(method, times, cpu))


def _against_strongest(arm: Arm, rivals: list[Arm]) -> dict:
    """The strongest all-reduce arm among ``rivals`` (the same setting and target) measured on ``arm``'s CPU, and
    ``arm``'s speed-up."""
    strong = strongest(rivals, arm.cpu) if arm.cpu is not None else None
    if strong is None or not arm.times:
        return {"strongest_baseline": strong.method if strong else None, "speedup_vs_strongest": None,
                "speedup_low": None, "speedup_high": None, "speedup_pairs": 0}
    paired = speedup(strong, arm)
    return {"strongest_baseline": strong.method, "speedup_vs_strongest": paired.ratio, "speedup_low": paired.low,
            "speedup_high": paired.high, "speedup_pairs": paired.pairs}


def comparison(frame: pd.DataFrame, target: float | None = None) -> pd.DataFrame:
    """The table for reading: :func:`comparison_data`'s rows as text (mean ± std over a setting's seeds)."""
    data = comparison_data(frame, target)
    if data.empty:
        return pd.DataFrame(columns=COLUMNS)
    rows = []
    for _, d in data.iterrows():
        withheld = f"— ({d['speed_withheld']})" if d["speed_withheld"] else None
        rows.append({
            "task": d["task"],
            # pandas reads a missing substitute as NaN where another row has one: NaN is truthy
            "dataset": d["dataset"] + (f" (for {d['substitute_for']})" if isinstance(d["substitute_for"], str)
                                       and d["substitute_for"] else ""),
            "method": d["method"], "params": d["params"], "differs": d["differs"], "workers": d["workers"],
            "backend": d["backend"], "tier": _tier_text(d), "steps": d["steps"], "n": d["n_runs"],
            "status": d["status"], "top1": _mean_std(d["top1_mean"], d["top1_std"], ".4f"),
            "bytes/worker/step": _number(d["bytes_sent_per_worker_step"], ",.0f"),
            "recv/worker/step": _number(d["bytes_received_per_worker_step"], ",.0f"),
            "fp32/sent": _number(d["fp32_bytes_over_sent"], ".2f", "x"),
            "images/s": withheld or _mean_std(d["images_per_s_mean"], d["images_per_s_std"], ".0f"),
            "comm exposed": _number(None if d["comm_exposed_share"] is None else 100 * d["comm_exposed_share"],
                                    ".0f", "%"),
            "time to target (s)": withheld or _time_to_target_text(d),
            "vs strongest baseline": withheld or _speedup_text(d),
        })
    return pd.DataFrame(rows, columns=COLUMNS)


def _tier_text(d: pd.Series) -> str:
    """The tier, and ``shortened`` where the runs train fewer steps than the tier's recipe: ``paper, shortened
    (of 10,000)`` for a 600-step run of the paper's recipe is no run of the paper's length."""
    planned, recipe = d["planned_steps"], d["tier_steps"]
    if planned is None or recipe is None or pd.isna(planned) or pd.isna(recipe) or planned >= recipe:
        return d["tier"]
    return f"{d['tier']}, shortened (of {int(recipe):,})"


def _time_to_target_text(d: pd.Series) -> str:
    """The mean seconds to the target (with ``(r of n)`` where only r of the n timed runs reached it), or why
    there is none: no target, timed on several CPUs, no train_s in the history, not reached within the steps."""
    goal, reached, n_done = d["target_top1"], d["runs_reaching_target"], d["n_done"] - d["runs_untimed"]
    if goal is None or pd.isna(goal):
        return "—"
    if str(d["timing_cpu"]).startswith("mixed: "):
        return f"none (timed on more than one CPU: {d['timing_cpu'][len('mixed: '):]})"
    if reached is None or pd.isna(reached):
        return "unknown (the history has no train_s)"
    if not reached:  # the target's top-1, not the runs': they stayed below it
        return f"not reached within {d['steps']} steps (target top-1 {goal:.4f})"
    return f"{d['time_to_target_s']:.1f}" + (f" ({int(reached)} of {n_done})" if reached < n_done else "")


def _speedup_text(d: pd.Series) -> str:
    """``1.85x [1.62, 2.11] vs fp16 (3 pairs)``; a lone pair without its interval; "—" with nothing to pair."""
    ratio, strong = d["speedup_vs_strongest"], d["strongest_baseline"]
    if strong is None or pd.isna(strong) or ratio is None or pd.isna(ratio):
        return "—"
    interval = "" if pd.isna(d["speedup_low"]) else f" [{d['speedup_low']:.2f}, {d['speedup_high']:.2f}]"
    pairs = int(d["speedup_pairs"])
    return f"{ratio:.2f}x{interval} vs {strong} ({pairs} pair{'s' if pairs != 1 else ''})"


def _number(value, fmt: str, unit: str = "") -> str:
    return "—" if value is None or pd.isna(value) else f"{format(value, fmt)}{unit}"


def render(table: pd.DataFrame, fmt: str) -> str:
    """``md``: the reading table (:func:`comparison`); ``csv`` and ``json``: the data (:func:`comparison_data`)."""
    if fmt in ("csv", "json"):
        return table.to_csv(index=False) if fmt == "csv" else table.to_json(orient="records", indent=1) + "\n"
    if table.empty:
        return "(no records)\n"
    return table.to_markdown(index=False, disable_numparse=True) + "\n"
