"""``model tta --links``: the projection to a cluster with its link between nodes replaced by each rate in turn (its
shape, its link within a node and its latency kept), one block of rows per link. On each link an arm is measured
against the strongest all-reduce on that same link (fp32, fp16 or bf16: the fastest there, which a slow link and
a fast one need not agree on), with the spread over seeds: each seed's projected time to the target (its own steps
to the target, its own segments of bytes) paired by seed with the strongest's, as ``analysis.tta.speedup`` pairs
measured times (the geometric mean of the per-seed ratios and its 95% interval).
"""
from __future__ import annotations

from dataclasses import replace

from commbench.analysis.tta import Arm as Timed, speedup, strongest
from commbench.config import ConfigError
from commbench.config.parsers import link_rate, net_rate_bits

from .projection import Links, time_to_target_s
from .ranked import on_cluster, projection


def link_rates(text: str) -> list[str]:
    """``1gbit,10gbit,100gbit`` -> the rates, each checked by the emulated links' own parser; a bad one named."""
    rates = [part.strip() for part in str(text).split(",") if part.strip()]
    if not rates:
        raise ConfigError(f"--links {text!r}: no rate given (e.g. 1gbit,10gbit,100gbit)")
    return [link_rate("--links", rate) for rate in rates]


def with_link(links: Links, rate: str) -> Links:
    """``links`` with the link between nodes at ``rate`` (payload; the within-node link and latency kept)."""
    return replace(links, between_bytes_s=net_rate_bits(rate) / 8)


def seed_times(measured, links: Links, compute_s: float, codec_scale: float) -> dict:
    """seed -> that seed's projected time to the target alone (None: it did not reach the target), for a
    tta_tables.Measured."""
    arm = on_cluster(measured.arm, codec_scale)
    segments = arm.runs if len(arm.runs) == len(measured.steps) else ()  # one per seed, in the seeds' order
    times = {}
    for i, (seed, steps) in enumerate(measured.steps.items()):
        alone = replace(arm, steps_to_target=steps, runs=(segments[i],) if segments else ())
        times[seed] = None if steps is None else time_to_target_s(alone, links, compute_s)
    return times


def spread(calibration: dict, links: Links, compute_s: float, codec_scale: float) -> dict:
    """label -> {seeds low, seeds high, pairs}: the interval of the per-seed ratio against the strongest
    all-reduce on ``links`` (None where fewer than two seeds pair, or none reaches the target)."""
    timed = {label: Timed(m.method, seed_times(m, links, compute_s, codec_scale)) for label, m in calibration.items()}
    strong = strongest(list(timed.values()))
    out = {}
    for label, arm in timed.items():
        paired = speedup(strong, arm) if strong else None
        out[label] = {"seeds low": paired.low if paired else None, "seeds high": paired.high if paired else None,
                      "pairs": paired.pairs if paired else 0}
    return out


def link_blocks(calibration: dict, cluster, compute_s: float, rates: list[str], errors: dict) -> list[dict]:
    """One block of projected rows per rate in ``rates``: time to target on the cluster at that link, the ratio
    to that link's strongest all-reduce, and the seeds' spread of it."""
    rows = []
    for rate in rates:
        links = with_link(cluster.links, rate)
        spreads = spread(calibration, links, compute_s, cluster.codec_scale)
        for row in projection(calibration, links, compute_s, cluster.codec_scale):
            rows.append({"where": f"{cluster.name} at {rate} (projected)", "method": row["method"],
                         "steps to target": row["steps to target"], "predicted s": row["time to target s"],
                         "measured s": None, "held-out error": errors.get(row["method"]), "within 20%": None,
                         "vs strongest": row["vs strongest"], **spreads[row["method"]]})
    return rows
