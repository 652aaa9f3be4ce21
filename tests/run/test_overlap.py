"""The exchange overlapped with backward (exchange=overlapped): DDP's bucket layout, buckets started in order as
their gradients are ready, the same weights as the exchange after backward for every per-tensor method, the same
weights and bytes under sim and dist, and a time breakdown in every record."""
from __future__ import annotations

import pytest
import torch

from commbench.config import resolve
from commbench.methods.buckets import MIB, BucketTracker, bucket_layout

from ..conftest import run_and_load


def test_bucket_layout_is_ddps():
    """Reverse parameter order; the first bucket capped at 1 MiB, the others at the cap; a tensor larger than
    the cap alone."""
    t = {"a": torch.empty(100_000), "b": torch.empty(200_000), "c": torch.empty(300_000), "d": torch.empty(10)}
    # sizes: a 0.38 MiB, b 0.76 MiB, c 1.14 MiB, d 40 B
    assert bucket_layout(t, cap_bytes=2 * MIB) == [["d"], ["c", "b"], ["a"]]
    assert bucket_layout(t, cap_bytes=25 * MIB) == [["d"], ["c", "b", "a"]]
    assert bucket_layout(t, cap_bytes=25 * MIB, first_cap_bytes=25 * MIB) == [["d", "c", "b", "a"]]


def test_buckets_start_in_order_whatever_order_gradients_arrive():
    started = []
    tracker = BucketTracker([["d"], ["c", "b"], ["a"]], started.append)
    for name in ("b", "a"):  # bucket 2 is complete first, but waits for 0 and 1
        tracker.ready(name)
    assert started == []
    tracker.ready("d")
    assert started == [0]
    tracker.ready("c")
    assert started == [0, 1, 2]
    tracker.reset()
    tracker.ready("d")
    tracker.flush()  # a parameter without a gradient this step: the rest go out after backward
    assert started == [0, 1, 2, 0, 1, 2]


def test_methods_that_need_the_whole_gradient_say_so_and_run_after_backward():
    for settings, why in (({"method": "ssdsgd"}, "exchanges the whole gradient"),
                          ({"method": "terngrad", "method.layerwise": False}, "one scaler for the whole gradient"),
                          ({"method": "baseline", "method.topology": "ps"}, "parameter server")):
        cfg = resolve({"task": "lenet-mnist", **settings})
        assert cfg.exchange == "after-backward" and why in cfg.sources["exchange"]
    assert resolve({"task": "lenet-mnist", "method": "wgt"}).exchange == "overlapped"


def run(tmp_path, method, backend, exchange, extra=()):
    rec, weights = run_and_load("--task", "lenet-mnist", "--dataset", "synthetic", "--method", method, "--workers",
                                "2", "--backend", backend, "--steps", "6", "--set", "global_batch=32",
                                "--set", "eval.every=6", "--set", "bucket_mb=0.1", "--set", f"exchange={exchange}",
                                *extra, "--out", str(tmp_path))
    assert rec["config"]["exchange"] == exchange
    return rec["metrics"], weights


@pytest.mark.parametrize("method,extra", [("baseline", []), ("terngrad", []), ("wgt", ["--set", "method.threshold=0.001"]),
                                          ("powersgd", ["--set", "method.start_iter=3"])])
def test_overlapped_computes_the_after_backward_weights(tmp_path, method, extra):
    (_, overlapped), (_, after) = (run(tmp_path, method, "sim", e, extra) for e in ("overlapped", "after-backward"))
    same = all(torch.equal(overlapped[k], after[k]) for k in overlapped)
    # PowerSGD draws its first Q once per bucket: another layout, another draw (torch's hook does the same)
    assert same is (method != "powersgd")


# fp16, bf16 and PowerSGD exchange by the all-reduce the baseline uses (their arithmetic against torch's DDP hooks:
# test_production_baselines.py): their dist runs repeat the baseline's in the slow tier.
@pytest.mark.parametrize("method,extra", [
    pytest.param("fp16", [], marks=pytest.mark.slow), pytest.param("bf16", [], marks=pytest.mark.slow),
    pytest.param("powersgd", ["--set", "method.start_iter=3"], marks=pytest.mark.slow),
    ("baseline", []), ("terngrad", []), ("qgt", ["--set", "method.threshold=0.001"])])
def test_sim_and_dist_agree_overlapped(tmp_path, method, extra):
    (m_sim, w_sim), (m_dist, w_dist) = (run(tmp_path, method, b, "overlapped", extra) for b in ("sim", "dist"))
    assert all(torch.equal(w_sim[k], w_dist[k]) for k in w_sim)
    assert m_sim["bytes_sent"] == m_dist["bytes_sent"] and m_sim["bytes_received"] == m_dist["bytes_received"]
    assert set(m_dist["time_breakdown"]) == {"forward_backward_s", "encode_s", "wait_s", "decode_s", "update_s",
                                             "other_s"}
