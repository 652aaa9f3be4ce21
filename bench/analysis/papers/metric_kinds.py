"""How each kind of metric is computed from runs: a value of one run, a value against a partner run (the
baseline, a sibling, the same setting at another batch), an aggregate over groups, or a choice over a sweep."""
from __future__ import annotations

import statistics
from typing import Callable

from commbench.analysis.papers.matching import RULE_FORMS
from commbench.analysis.papers.reference import Reference
from commbench.analysis.papers.runs import fp32_fraction, percent, uses_paper_accounting
from commbench.analysis.runs import Run


# a best-k row names one k; a best-warm-up row one length, within 1 (Algorithm 1 rounds the warm-up to fit k)
CHOICE_ROUNDING = {"best_delay_steps": 0, "warmup_steps_chosen": 1}
NO_MATCH = "no matching run"  # a row with no record of its setting at all
BYTE_UNITS = {"B": 1.0, "KB": 1e3, "MB": 1e6, "GB": 1e9, "MiB": 2.0 ** 20}


# metric -> value of one run, in the reference's unit
SINGLE: dict[str, Callable[[Run, Reference], float | None]] = {
    "top1": lambda r, ref: percent(r.metrics.get("top1")),
    "top5": lambda r, ref: percent(r.metrics.get("top5")),
    "data_fraction": lambda r, ref: percent(fp32_fraction(r, uses_paper_accounting(ref))),
    "throughput_images_per_s": lambda r, ref: r.metrics.get("images_per_s"),
    "gradient_zero_fraction": lambda r, ref: (percent(r.metrics["zero_trits_largest"] / r.metrics["trits_largest"])
                                              if r.metrics.get("trits_largest") else None),
}
# metrics that describe a model, not a run: from the parameter count of any record of the paper's own model
MODEL = ("model_size", "gradients_per_iteration", "gradients_total")
# byte metrics of a method's run, scaled to the paper's run through the paper's baseline value of the metric
SCALED = ("gb_transferred", "bytes_per_node_per_iteration", "pct_per_gb")
# metric -> value of a run compared with its baseline run (same setting and seed)
PAIRED: dict[str, Callable[[Run, Run], float | None]] = {
    "top1_gain": lambda r, b: percent(r.metrics["top1"] - b.metrics["top1"]),
    "top1_loss": lambda r, b: percent(b.metrics["top1"] - r.metrics["top1"]),
    "top5_loss": lambda r, b: percent(b.metrics["top5"] - r.metrics["top5"]),
    "speedup": lambda r, b: _ratio(r, b),
    "speedup_pct": lambda r, b: None if _ratio(r, b) is None else 100.0 * (_ratio(r, b) - 1.0),
}
# metric -> (method parameter that differs, its value in the partner run): a loss against a sibling run of the
# same method and setting (TernGrad without vs with clipping; SSD-SGD's local SGD vs GLU or DC-ASGD-a)
SIBLING: dict[str, tuple[str, Callable[[object], bool]]] = {
    "top1_loss_vs_clipped": ("clip", lambda v: v not in (None, 0)),
    "top1_loss_vs_glu": ("local_rule", lambda v: v in RULE_FORMS["glu"]),
    "top1_loss_vs_dcasgd": ("local_rule", lambda v: v == "dcasgd"),
    # SSD-SGD Figure 4: a warm-up of 200 iterations against one of 100 (99 where k needs (1 + warm-up) % k == 0)
    "top1_gain_vs_warmup_100": ("warmup", lambda v: v in (99, 100)),
}
SIBLING_GAINS = {"top1_gain_vs_warmup_100"}  # a gain over the partner (run - partner), not a loss
# metric -> (paired metric, aggregate over the groups, grouping): TernGrad Figure 3's largest gain over worker
# counts, SSD-SGD's speed-up range over delay steps, GoogLeNet's mean top-5 loss
AGGREGATES = {"accuracy_gain_max": ("top1_gain", max, "workers"), "accuracy_loss_max": ("top1_loss", max, "workers"),
              "speedup_pct_max": ("speedup_pct", max, "k"), "speedup_pct_min": ("speedup_pct", min, "k"),
              "top5_loss_mean_upper_bound": ("top5_loss", statistics.fmean, "workers")}
# metric -> the total batch of the partner run: a loss against the same setting at a smaller batch (TernGrad
# Sec. 4.2: floating gradients at batch 1024 vs 256), everything else equal but what goes with the batch
BATCH_LOSS = {"top1_loss_vs_batch_256": 256}
# rows whose analogue at CPU scale does not exist, and why
NO_ANALOGUE: dict[str, str] = {}


def _ratio(r: Run, b: Run) -> float | None:
    mine, base = r.metrics.get("images_per_s"), b.metrics.get("images_per_s")
    return mine / base if mine and base else None
