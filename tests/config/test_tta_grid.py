"""The time-to-accuracy grid declares what it is judged by before it runs: one target and one horizon for
every run, the strongest baselines beside every compression method, both links, three seeds."""
from __future__ import annotations

from collections import Counter

from commbench.config.grid import expand, load_grid

from ..conftest import REPO


def test_every_run_has_the_declared_target_horizon_and_evaluation_points():
    runs = expand(load_grid(REPO / "bench/grids/campaign/network-tta.yaml"))
    assert {(r.eval_target, r.steps, r.eval["every"], r.global_batch, r.workers, r.threads) for r in runs} == \
        {(0.98, 1000, 20, 64, 2, 1)}
    arms = Counter((r.method, r.method_params.get("topology"), r.net) for r in runs)
    assert set(arms.values()) == {3}  # seeds 1-3 of every arm
    methods = {m for m, _, _ in arms}
    assert {"baseline", "fp16", "bf16"} <= methods and len(methods - {"baseline", "fp16", "bf16"}) >= 4
    assert {net for _, _, net in arms} == {"100mbit", "1gbit"}
    assert {("terngrad", "allgather"), ("terngrad", "ps"), ("ssdsgd", "ps")} <= {(m, t) for m, t, _ in arms}
    servers = {r.method: r.method_params.get("servers") for r in runs if r.method_params.get("topology") == "ps"}
    assert servers == {"terngrad": 2, "ssdsgd": 2}  # as many parameter servers as workers
