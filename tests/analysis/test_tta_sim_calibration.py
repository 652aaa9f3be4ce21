"""``commbench model tta --calibrate-on none``: the projection calibrated on simulated runs (no emulated link: the
zoo's accuracy grid), and ``--links``: one block per link rate, each against that link's strongest all-reduce.
Records are synthetic; every expected number is computed here by hand from projection.py's formula:

    step = compute + codec + max(0, exchange - 2/3 compute)   (overlapped all-reduce: baseline, fp16)
    step = compute + codec + exchange                          (top-k's all-gather, waited whole)
    ring all-reduce of B bytes on W workers: 2 (W-1)/W B / b + 2 (W-1) a;  all-gather: (W-1) B / b + (W-1) a
"""
from __future__ import annotations

import json

import pytest

from ..conftest import commbench
from ..helpers import write_record

WORKERS, STEPS, COMPUTE, LATENCY = 4, 200, 0.01, 1e-6
# method: (bytes per worker per step, encode_s and decode_s per step as a sim record sums them, steps to target
# per seed). A sim record's encode_s sums the 4 simulated workers' encodes; its decode_s sums them for the fp32
# all-reduce (baseline: 4 x 0.5 ms, one worker's 0.5 ms) but is one decode for the kit's exchange (fp16, top-k).
ARMS = {
    "baseline": (1e6, 0.0, 4 * 0.0005, (100, 100, 100)),
    "fp16": (0.5e6, 4 * 0.001, 0.0, (100, 100, 100)),
    "topk": (1e4, 4 * 0.003, 0.001, (90, 100, 110)),  # codec-heavy: 4 ms a step for one worker, few bytes
}
CODEC = {"baseline": 0.0005, "fp16": 0.001, "topk": 0.004}  # one worker's, per step


def _step_by_hand(method: str, bits_per_s: float) -> float:
    b = bits_per_s / 8
    sent = ARMS[method][0]
    if method == "topk":
        return COMPUTE + CODEC[method] + 3 * sent / b + 3 * LATENCY
    exchange = 2 * 3 / 4 * sent / b + 6 * LATENCY
    return COMPUTE + CODEC[method] + max(0.0, exchange - 2 / 3 * COMPUTE)


def _sim_records(root, interrupted: bool = False) -> None:
    """Three seeds of each arm as the zoo grid writes them: backend sim, 4 workers, net null."""
    for method, (sent, encode, decode, crossings) in ARMS.items():
        for seed, cross in zip((1, 2, 3), crossings):
            run_id = f"{method}-sim-{seed}"
            record = write_record(root, run_id, method=method, seed=seed, workers=WORKERS, backend="sim",
                                  top1=0.8, steps=STEPS, bytes_sent=sent * WORKERS * STEPS,
                                  config={"net": None, "eval_target": 0.75, "exchange": "overlapped"})
            record["metrics"].update(train_s=50.0, bytes_received=sent * WORKERS * STEPS, time_breakdown={
                "forward_backward_s": 30.0, "encode_s": encode * STEPS, "decode_s": decode * STEPS,
                "wait_s": 0.01, "update_s": 1.0, "other_s": 0.0})
            record["history"] = [{"step": s, "top1": 0.8 if s >= cross else 0.5, "train_s": s * 0.25,
                                  "bytes_sent": sent * WORKERS * s, "bytes_received": sent * WORKERS * s}
                                 for s in range(10, STEPS + 1, 10)]
            (root / "runs" / f"{run_id}.json").write_text(json.dumps(record))
    if interrupted:  # an unfinished run that crossed at once must not count
        record = write_record(root, "baseline-sim-cut", method="baseline", seed=4, workers=WORKERS, backend="sim",
                              status="interrupted", config={"net": None, "eval_target": 0.75})
        record["metrics"].update(train_s=1.0, steps=10)
        record["history"] = [{"step": 10, "top1": 0.9, "train_s": 1.0, "bytes_sent": 4e7}]
        (root / "runs" / "baseline-sim-cut.json").write_text(json.dumps(record))


def _cluster(root) -> str:
    path = root / "four-nodes.yaml"
    path.write_text("name: four-nodes\nnodes: 4\ngpus_per_node: 1\nlink: 10gbit\nlatency_us: 1\n"
                    f"compute:\n  lenet-mnist: {{step_s: {COMPUTE}, source: test}}\ncodec_scale: 1.0\n")
    return str(path)


def _tta(root, *extra: str):
    return commbench("model", "tta", "--results", str(root), "--workers", str(WORKERS), "--calibrate-on", "none",
                     "--cluster", _cluster(root), *extra)


def _projected(root, links: str) -> dict:
    done = _tta(root, "--links", links, "--format", "json")
    assert done.returncode == 0, done.stderr
    return {(r["where"].split(" at ")[1].split(" ")[0], r["method"]): r for r in json.loads(done.stdout)["rows"]}


def test_steps_to_target_and_one_workers_codec_are_read_from_sim_records(tmp_path):
    from commbench.analysis.perfmodel.tta_tables import measured_arms

    _sim_records(tmp_path, interrupted=True)
    arms = measured_arms(tmp_path, "lenet-mnist", WORKERS, None)
    assert set(arms) == set(ARMS) and arms["baseline"].seeds == 3  # the interrupted run is not read
    assert arms["topk"].steps == {1: 90, 2: 100, 3: 110} and arms["topk"].arm.steps_to_target == 100
    for method, codec in CODEC.items():
        assert arms[method].arm.codec_s == pytest.approx(codec)
        assert arms[method].arm.sent == pytest.approx(ARMS[method][0])
    rows = _projected(tmp_path, "10gbit")
    assert rows[("10gbit", "topk")]["steps to target"] == 100
    assert rows[("10gbit", "topk")]["predicted s"] == pytest.approx(100 * _step_by_hand("topk", 1e10))


def test_a_codec_heavy_arm_loses_on_a_fast_link_and_wins_on_a_slow_one_against_each_links_strongest(tmp_path):
    _sim_records(tmp_path)
    rows = _projected(tmp_path, "100mbit,100gbit")
    fast, slow = {m: 100 * _step_by_hand(m, 1e11) for m in ARMS}, {m: 100 * _step_by_hand(m, 1e8) for m in ARMS}
    assert min(fast, key=fast.get) == "baseline" and min(("baseline", "fp16"), key=slow.get) == "fp16"
    for (link, method), row in rows.items():
        assert row["predicted s"] == pytest.approx((fast if link == "100gbit" else slow)[method])
    # on each link the reference is that link's own strongest all-reduce: fp32 at 100 Gbit/s, fp16 at 100 Mbit/s
    assert rows[("100gbit", "topk")]["vs strongest"] == pytest.approx(fast["baseline"] / fast["topk"])
    assert rows[("100mbit", "topk")]["vs strongest"] == pytest.approx(slow["fp16"] / slow["topk"])
    assert rows[("100gbit", "topk")]["vs strongest"] < 1 < rows[("100mbit", "topk")]["vs strongest"]
    assert rows[("100gbit", "baseline")]["vs strongest"] == pytest.approx(1.0)
    assert rows[("100mbit", "fp16")]["vs strongest"] == pytest.approx(1.0)
    # the seeds' spread: top-k's seeds reach the target at 90, 100 and 110 steps, paired with the strongest's
    spread = rows[("100mbit", "topk")]
    assert spread["pairs"] == 3 and spread["seeds low"] < spread["vs strongest"] < spread["seeds high"]
    per_seed = [slow["fp16"] / (steps * _step_by_hand("topk", 1e8)) for steps in (90, 100, 110)]
    assert spread["seeds low"] < min(per_seed) and max(per_seed) < spread["seeds high"]


def test_the_crossover_map_sweeps_the_link_of_a_sim_calibration(tmp_path):
    from commbench.analysis.perfmodel import clusters
    from commbench.analysis.perfmodel.tta_tables import crossover, measured_arms

    _sim_records(tmp_path)
    cluster = clusters.load(_cluster(tmp_path))
    curves = crossover(measured_arms(tmp_path, "lenet-mnist", WORKERS, None), cluster.links, COMPUTE,
                       bits_per_s=(1e8, 1e11), points=2)
    strongest = {1e8: 100 * _step_by_hand("fp16", 1e8), 1e11: 100 * _step_by_hand("baseline", 1e11)}
    for rate, relative in curves["topk"]:
        assert relative == pytest.approx(100 * _step_by_hand("topk", rate) / strongest[rate])
    figure = tmp_path / "map.png"
    done = _tta(tmp_path, "--sweep-bandwidth", str(figure))
    assert done.returncode == 0, done.stderr
    assert figure.stat().st_size > 10_000 and f"crossover map: {figure}" in done.stdout


@pytest.mark.parametrize("args, named", [
    (("--calibrate-on", "none"), "--calibrate-on none: needs --cluster"),
    (("--calibrate-on", "none", "--cluster", "ssdsgd-paper", "--validate-on", "100mbit"),
     "--validate-on 100mbit: not with --calibrate-on none"),
    (("--calibrate-on", "none", "--cluster", "ssdsgd-paper", "--links", "1gbit,fastest"), "--links: 'fastest'"),
])
def test_bad_input_exits_2_with_one_line_naming_the_item(tmp_path, args, named):
    _sim_records(tmp_path)
    done = commbench("model", "tta", "--results", str(tmp_path), "--workers", str(WORKERS), *args)
    assert done.returncode == 2 and named in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("method, params, topology", [
    ("randomk", {"ratio": 0.01, "scaled": False}, "allreduce"),  # a shared seed: the payloads add up
    ("topk", {"ratio": 0.01}, "allgather"),                      # each worker its own coordinates
    ("fp16", {}, "allreduce"),
    ("baseline", {"topology": "ps"}, "ps"),                      # the run's own setting wins
])
def test_a_linear_compressor_is_modelled_as_the_all_reduce_it_runs(tmp_path, method, params, topology):
    from commbench.analysis.perfmodel.tta_tables import _topology
    from commbench.analysis.runs import as_run

    record = write_record(tmp_path, f"{method}-1", method=method, seed=1, workers=WORKERS, backend="sim",
                          config={"method_params": params})
    assert _topology(as_run(record)) == topology
