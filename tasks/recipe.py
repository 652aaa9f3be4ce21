"""Recipes: hyper-parameters that carry their source.

Every value a task supplies is a :class:`Cited` value: the number and where it comes from (a paper's table
or section, or an official script). A value that no source states is marked ``assumed: <reason>``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Cited:
    value: Any
    source: str

    def __post_init__(self):
        if not self.source:
            raise ValueError("a recipe value needs a source (or 'assumed: <reason>')")


def assumed(value: Any, reason: str) -> Cited:
    return Cited(value, f"assumed: {reason}")


Recipe = dict[str, Cited]  # dotted setting key -> value with its source


def terngrad_official(script: str, float_last_layer: Cited, min_size: Cited) -> Recipe:
    """TernGrad as its papers' numbers were produced: the official TF code, run by ``script``. Only which
    layers stay float differs between the scripts."""
    return {
        "method.clip": Cited(2.5, "TernGrad Sec. 3.3: c = 2.5 in all experiments"),
        "method.scaler": Cited("std", "official bingrad_common.py: scaler = clip_factor * std when clipping"),
        "method.scaler_sharing": Cited(True, "TernGrad Eq. 4; official inception_train.py max_scalers"),
        "method.float_last_layer": float_last_layer,
        "method.min_size": min_size,
        "method.wd_in_grad": Cited(True, "official _tower_loss: L2 in the loss, so g + wd*w is ternarized"),
        "method.packing": Cited("2bit", f"official ternary_encoder: 2 bits per element ({script})"),
    }


def probe_tiers(cpu_steps: int, cpu_batch: int) -> dict[str, Recipe]:
    """Tiers of a task too large to train on a CPU: a short throughput probe and a forward/backward smoke."""
    return {
        "paper": {},
        "cpu": {"steps": assumed(cpu_steps, "CPU tier: a throughput probe, not a training run"),
                "global_batch": assumed(cpu_batch, "CPU tier: a batch a CPU computes in seconds")},
        "smoke": {"steps": assumed(3, "smoke tier: the network runs forward and backward"),
                  "global_batch": assumed(8, "smoke tier: tiny batch (one image per worker up to 8 workers)")},
    }
