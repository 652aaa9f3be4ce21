"""Arms projected onto one set of links and ranked against the strongest all-reduce there (fp32, fp16 or bf16 by
projected time to target: analysis.tta's STRONG_BASELINES): the rows ``model tta`` prints for a cluster, per link.
"""
from __future__ import annotations

from dataclasses import replace

from commbench.analysis.tta import STRONG_BASELINES

from .projection import Arm, Links, step_s, time_to_target_s


def projection(calibration: dict, links: Links, compute_s: float | None, codec_scale: float = 1.0) -> list[dict]:
    """Each arm's projected time to target on ``links``, and its ratio to the strongest all-reduce's.
    ``compute_s``: one worker's compute per step there (None: each arm's own, as measured here)."""
    rows = []
    for label, cal in calibration.items():
        arm = on_cluster(cal.arm, codec_scale)
        compute = cal.compute_s if compute_s is None else compute_s
        rows.append({"method": label, "kind": cal.method, "steps to target": arm.steps_to_target,
                     "step s": step_s(arm, links, compute), "time to target s": time_to_target_s(arm, links, compute)})
    strong = [r["time to target s"] for r in rows if r["kind"] in STRONG_BASELINES and r["time to target s"]]
    best = min(strong) if strong else None
    for r in rows:
        r["vs strongest"] = best / r["time to target s"] if best and r["time to target s"] else None
    return rows


def on_cluster(arm: Arm, codec_scale: float) -> Arm:
    """The arm's costs on a cluster: the codecs and the transport's measured overhead are this host's software,
    both scaled to the cluster's (its profile's codec_scale)."""
    return replace(arm, codec_s=arm.codec_s * codec_scale, overhead_s=arm.overhead_s * codec_scale)
