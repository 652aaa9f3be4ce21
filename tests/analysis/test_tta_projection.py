"""Time to accuracy projected to a cluster: the exchange arithmetic on hand-computed cases, and the held-out
validation and projection from records (commbench model tta)."""
from __future__ import annotations

import json

import pytest

from commbench.analysis.perfmodel.projection import TCP_ETHERNET_SHARE, Arm, Links, exchange_s, step_s, time_to_target_s
from commbench.analysis.perfmodel.tta_tables import links_of

from ..conftest import commbench
from ..helpers import write_record

MB = 1e6


@pytest.mark.parametrize("topology, links, sent, received, servers, seconds", [
    # ring all-reduce, 4 workers on their own links: 2 x 3/4 x 1 MB / 100 MB/s + 6 messages of 0.1 ms
    ("allreduce", Links(4, 1, 1e8, None, 1e-4), MB, None, 1, 0.015 + 6e-4),
    # two-level: 4 per node at 1 GB/s, then 2 nodes at 100 MB/s: 2 x 3/4 x 1 MB / 1e9 + 2 x 1/2 x 1 MB / 1e8
    ("allreduce", Links(2, 4, 1e8, 1e9, 0.0), MB, None, 1, 0.0015 + 0.01),
    # all-gather: each worker receives the 3 others' payloads over its link
    ("allgather", Links(4, 1, 1e8, None, 1e-4), MB, None, 1, 0.03 + 3e-4),
    # all-gather across 2 nodes of 4: the other node's 4 payloads over the link, the 3 neighbours' within
    ("allgather", Links(2, 4, 1e8, 1e9, 0.0), MB, None, 1, 0.04 + 0.003),
    # 4 workers on 2 servers: the busiest server link carries 2 pushes in and 2 pulls out
    ("ps", Links(4, 1, 1e8, None, 1e-4), MB, 2 * MB, 2, 2 * 3 * MB / 1e8 + 2e-4),
    # as many servers as workers: a worker's own link, one push and one pull
    ("ps", Links(2, 1, 1e8, None, 0.0), MB, 2 * MB, 2, 3 * MB / 1e8),
    ("allreduce", Links(1, 1, 1e8, None, 1e-4), MB, None, 1, 0.0),  # one worker: nothing crosses a network
])
def test_the_exchange_on_hand_computed_cases(topology, links, sent, received, servers, seconds):
    assert exchange_s(topology, links, sent, received, servers) == pytest.approx(seconds)


def test_an_overlapped_exchange_is_hidden_behind_backward_up_to_its_share_of_compute():
    links = Links(4, 1, 1e8, None, 1e-4)  # 15.6 ms of ring all-reduce for 1 MB
    hidden = Arm("baseline", "allreduce", 100, MB, overlapped=True)
    exposed = Arm("baseline", "allreduce", 100, MB, codec_s=0.001)
    assert step_s(hidden, links, compute_s=0.03) == pytest.approx(0.03)  # 2/3 x 30 ms hides all 15.6 ms
    assert step_s(hidden, links, compute_s=0.012) == pytest.approx(0.012 + 0.0156 - 0.008)
    assert step_s(exposed, links, compute_s=0.03) == pytest.approx(0.03 + 0.001 + 0.0156)
    assert time_to_target_s(exposed, links, 0.03) == pytest.approx(100 * 0.0466)
    assert time_to_target_s(Arm("x", "allreduce", None, MB), links, 0.03) is None  # not reached: no time


def test_a_link_counted_in_frames_carries_its_payload_share():
    """tbf counts TCP/Ethernet frames: 1,448 payload bytes in 1,514, plus half an ACK of 66 bytes per segment of
    the other direction: the ring all-reduce of 1 MB on 2 workers at 100 MB/s takes 1 MB / (1e8 x share)."""
    assert TCP_ETHERNET_SHARE == pytest.approx(1448 / 1547)
    framed = Links(2, 1, 1e8, None, 0.0, TCP_ETHERNET_SHARE)
    assert exchange_s("allreduce", framed, MB) == pytest.approx(MB / (1e8 * 1448 / 1547))
    assert exchange_s("allgather", Links(2, 4, 1e8, 1e9, 0.0, 0.5), MB) == pytest.approx(4 * MB / 5e7 + 3 * MB / 1e9)
    assert links_of("100mbit", 2, 0.0).payload_share == TCP_ETHERNET_SHARE  # the emulated links are framed


def test_a_measured_overlap_replaces_the_bound_but_never_exceeds_it():
    links = Links(4, 1, 1e8, None, 1e-4)  # 15.6 ms of ring all-reduce for 1 MB
    nothing_hidden = Arm("baseline", "allreduce", 100, MB, overlapped=True, hidden_s=0.0)
    assert step_s(nothing_hidden, links, compute_s=0.03) == pytest.approx(0.03 + 0.0156)
    too_much = Arm("baseline", "allreduce", 100, MB, overlapped=True, hidden_s=1.0)
    assert step_s(too_much, links, compute_s=0.012) == pytest.approx(0.012 + 0.0156 - 0.008)


def test_an_unknown_topology_is_refused_by_name():
    with pytest.raises(ValueError, match="'ring'"):
        exchange_s("ring", Links(2, 1, 1e8), MB)


COMPUTE = 0.01  # s per step, every arm
ARMS = {  # method: (bytes sent per worker per step, encode+decode per step, steps to 0.98, exchange)
    "baseline": (1.7 * MB, 0.0, 380, "overlapped"),
    "fp16": (0.85 * MB, 0.0, 380, "overlapped"),
    "terngrad": (0.11 * MB, 0.004, 420, "after-backward"),
}


def _step(method: str, rate_bytes: float) -> float:
    sent, codec, _, exchange = ARMS[method]
    topology = "allgather" if method == "terngrad" else "allreduce"
    arm = Arm(method, topology, 1, sent, codec_s=codec, overlapped=exchange == "overlapped")
    return step_s(arm, Links(2, 1, rate_bytes, None, 50e-6, TCP_ETHERNET_SHARE), COMPUTE)


def _runs(root, net: str, rate_bytes: float, slower: dict | None = None, cpu: str | None = None) -> None:
    """Three seeds of each arm on one link, timed as the model says (a method in ``slower`` by that factor), on
    ``cpu`` (None: records that do not say)."""
    for method, (sent, codec, cross, exchange) in ARMS.items():
        step = _step(method, rate_bytes) * (slower or {}).get(method, 1.0)
        for seed in (1, 2, 3):
            steps = 1000
            record = write_record(root, f"{method}-{net}-{seed}", method=method, seed=seed, top1=0.985, steps=steps,
                                  bytes_sent=sent * 2 * steps,
                                  config={"net": net, "eval_target": 0.98, "exchange": exchange,
                                          "method_params": {"topology": "allgather"} if method == "terngrad" else {}})
            exposed = step - COMPUTE - codec
            record["metrics"].update(train_s=step * steps, steps=steps, time_breakdown={
                "forward_backward_s": COMPUTE * steps, "encode_s": codec * steps / 2, "decode_s": codec * steps / 2,
                "wait_s": exposed * steps, "update_s": 0.0, "other_s": 0.0})
            record["history"] = [{"step": s, "top1": 0.985 if s >= cross else 0.97, "train_s": s * step}
                                 for s in range(20, steps + 1, 20)]
            if cpu is not None:
                record.setdefault("env", {})["cpu_model"] = cpu
            (root / "runs" / f"{method}-{net}-{seed}.json").write_text(json.dumps(record))


def test_validation_on_a_held_out_link_passes_where_the_model_holds_and_names_the_arm_where_it_does_not(tmp_path):
    _runs(tmp_path, "1gbit", 1.25e8)
    _runs(tmp_path, "100mbit", 1.25e7, slower={"terngrad": 1.5})
    done = commbench("model", "tta", "--results", str(tmp_path), "--validate-on", "100mbit", "--format", "json")
    assert done.returncode == 0, done.stderr
    rows = {r["method"]: r for r in json.loads(done.stdout)["rows"]}
    for method in ("baseline", "fp16"):
        assert rows[method]["held-out error"] == pytest.approx(0.0, abs=1e-9) and rows[method]["within 20%"] is True
    # steps to target at 1 Gbit/s: the same 400 (first evaluation at or past 380 or 420) on both links
    assert rows["terngrad"]["held-out error"] == pytest.approx(1 / 1.5 - 1) and rows["terngrad"]["within 20%"] is False
    assert "worst error 33% (limit 20%)" in done.stdout


def test_a_projection_to_a_shipped_cluster_ranks_against_the_strongest_all_reduce_and_draws_the_map(tmp_path):
    _runs(tmp_path, "1gbit", 1.25e8)
    _runs(tmp_path, "100mbit", 1.25e7)
    figure = tmp_path / "crossover.png"
    done = commbench("model", "tta", "--results", str(tmp_path), "--validate-on", "100mbit", "--cluster",
                     "terngrad-fig5", "--sweep-bandwidth", str(figure), "--format", "json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    projected = {r["method"]: r for r in out["rows"] if r["where"] == "terngrad-fig5 (projected)"}
    assert set(projected) == set(ARMS) and figure.stat().st_size > 10_000
    strongest = max(projected[m]["vs strongest"] for m in ("baseline", "fp16"))
    assert strongest == pytest.approx(1.0)  # the strongest all-reduce is the reference: 1x against itself
    assert any("a projection, not a measurement" in n for n in out["notes"])


def test_runs_timed_on_two_cpus_are_never_mixed_and_one_can_be_chosen(tmp_path):
    """Calibrated on one machine and validated on another, the held-out error would measure the machines: the
    command refuses, names both CPUs and their runs per link, and reads one CPU's runs where --cpu names it."""
    amd, intel = "AMD EPYC (cpu family 25, model 1)", "Intel Xeon (cpu family 6, model 143)"
    _runs(tmp_path, "1gbit", 1.25e8, cpu=amd)
    _runs(tmp_path, "100mbit", 1.25e7, cpu=amd)
    faster = tmp_path / "runs-on-intel"
    _runs(faster, "100mbit", 1.25e7, slower={"terngrad": 0.5}, cpu=intel)
    done = commbench("model", "tta", "--results", str(tmp_path), "--validate-on", "100mbit")
    assert done.returncode == 2 and "timed on more than one CPU" in done.stderr
    assert f"{amd} (9 on 1gbit, 9 on 100mbit); {intel} (9 on 100mbit)" in done.stderr and "--cpu" in done.stderr
    done = commbench("model", "tta", "--results", str(tmp_path), "--validate-on", "100mbit", "--cpu", amd,
                     "--format", "json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert all(r["within 20%"] for r in out["rows"]) and any(f"timed on {amd}" in n for n in out["notes"])
    done = commbench("model", "tta", "--results", str(tmp_path), "--validate-on", "100mbit", "--cpu", intel)
    assert done.returncode == 2 and f"--cpu {intel!r}: no done lenet-mnist runs of 2 workers on 1gbit" in done.stderr


def test_bad_input_is_named(tmp_path):
    assert "no such folder" in commbench("model", "tta", "--results", str(tmp_path / "nowhere")).stderr
    tmp_path.joinpath("runs").mkdir()
    assert "--cluster atlantis: no such cluster" in commbench(
        "model", "tta", "--results", str(tmp_path), "--cluster", "atlantis").stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("nodes: 2\ngpus_per_node: 0\nlink: 1gbit\n")
    done = commbench("model", "tta", "--results", str(tmp_path), "--cluster", str(bad))
    assert done.returncode == 2 and "gpus_per_node must be a positive number" in done.stderr
    done = commbench("model", "tta", "--results", str(tmp_path), "--calibrate-on", "fast")
    assert done.returncode == 2 and "--calibrate-on" in done.stderr


def test_the_report_has_a_time_to_accuracy_section_with_the_validated_projection(tmp_path):
    from commbench.analysis.report import write_report

    results = tmp_path / "results"
    _runs(results, "1gbit", 1.25e8)
    _runs(results, "100mbit", 1.25e7)
    write_report(results, tmp_path / "report")
    md = (tmp_path / "report" / "report.md").read_text()
    section = md.split("## Time to accuracy")[1].split("\n## ")[0]
    assert "vs fp16 (3 pairs)" in section and "held-out validation on 100mbit: worst error 0%" in section
    assert "terngrad-fig5 (projected)" in section and "tta-crossover_lenet-mnist_w2.png" in section


def test_the_overlap_is_measured_on_the_calibration_link_and_carried_to_the_held_out_one():
    """A run whose exposed wait on the calibration link is the whole exchange hid nothing: the held-out link is
    then predicted with nothing hidden; one whose wait is a third shorter hid that third, up to the bound."""
    from commbench.analysis.perfmodel.tta_tables import Measured, with_measured_overlap

    cal_links, held = links_of("1gbit", 2, 0.0), links_of("100mbit", 2, 0.0)
    arm = Arm("baseline", "allreduce", 100, 5 * MB, overlapped=True)
    full = exchange_s("allreduce", cal_links, 5 * MB)
    for waited, hidden in ((full, 0.0), (full - 0.01, 0.01)):
        measured = {"baseline": Measured(arm, "baseline", 0.03, None, 3, 3, {}, waited)}
        (cal,) = with_measured_overlap(measured, cal_links).values()
        assert cal.arm.hidden_s == pytest.approx(hidden)
        assert step_s(cal.arm, held, 0.03) == pytest.approx(0.03 + exchange_s("allreduce", held, 5 * MB) - hidden)


def test_a_run_whose_bytes_change_is_timed_segment_by_segment():
    """PowerSGD-like: 100 steps of the full 5 MB, then 0.5 MB. Each stretch at its own step time; the mean bytes
    over the run would hide most of the first stretch's exchange behind backward and predict short."""
    from commbench.analysis.perfmodel.projection import Segment

    links = Links(2, 1, 1.25e7, None, 0.0)  # 100 Mbit/s of payload: 0.4 s to all-reduce 5 MB on 2 workers
    run = (Segment(100, 5 * MB), Segment(280, 0.5 * MB))
    arm = Arm("powersgd", "allreduce", 380, (100 * 5 + 900 * 0.5) * MB / 1000, overlapped=True, hidden_s=0.02,
              runs=(run, run))
    by_hand = 100 * (0.03 + 0.4 - 0.02) + 280 * (0.03 + 0.04 - 0.02)
    assert time_to_target_s(arm, links, 0.03) == pytest.approx(by_hand)
    flat = Arm("powersgd", "allreduce", 380, arm.sent, overlapped=True, hidden_s=0.02)
    assert time_to_target_s(flat, links, 0.03) == pytest.approx(380 * (0.03 + 0.076 - 0.02))  # 32.7 s, not 52.8


def _powersgd_runs(root, net: str, rate_bytes: float, hidden: float, full_steps: int = 100) -> None:
    """Three seeds whose first ``full_steps`` send the full gradient, timed by the segment model with ``hidden``
    seconds of each exchange behind backward; the history records cumulative bytes (both workers) every 10 steps."""
    links = Links(2, 1, rate_bytes, None, 50e-6, TCP_ETHERNET_SHARE)
    full, small, steps, cross = 5 * MB, 0.25 * MB, 1000, 380

    def step_time(sent):
        return COMPUTE + max(0.0, exchange_s("allreduce", links, sent) - hidden)

    for seed in (1, 2, 3):
        history, clock, sent, wait = [], 0.0, 0.0, 0.0
        for s in range(1, steps + 1):
            per = full if s <= full_steps else small
            clock, sent = clock + step_time(per), sent + 2 * per
            wait += step_time(per) - COMPUTE
            if s % 10 == 0:
                history.append({"step": s, "top1": 0.985 if s >= cross else 0.97, "train_s": clock,
                                "bytes_sent": sent})
        record = write_record(root, f"powersgd-{net}-{seed}", method="powersgd", seed=seed, top1=0.985, steps=steps,
                              bytes_sent=sent, config={"net": net, "eval_target": 0.98, "exchange": "overlapped"})
        record["metrics"].update(train_s=clock, steps=steps, bytes_received=sent, time_breakdown={
            "forward_backward_s": COMPUTE * steps, "encode_s": 0.0, "decode_s": 0.0, "wait_s": wait})
        record["history"] = history
        (root / "runs" / f"powersgd-{net}-{seed}.json").write_text(json.dumps(record))


def test_validation_of_a_method_whose_bytes_change_holds_where_a_mean_over_the_run_would_not(tmp_path):
    """The calibration link's wait is matched by one hidden time across both stretches (recovered by bisection);
    the held-out link is then predicted stretch by stretch, to the measurement. Dropping the history's bytes (the
    mean over the run) misses by far more than 20% on the same records: the segments are what make it hold."""
    from commbench.analysis.perfmodel.tta_tables import measured_arms, validation, with_measured_overlap

    _powersgd_runs(tmp_path, "1gbit", 1.25e8, hidden=0.006)
    _powersgd_runs(tmp_path, "100mbit", 1.25e7, hidden=0.006)
    cal = with_measured_overlap(measured_arms(tmp_path, "lenet-mnist", 2, "1gbit"), links_of("1gbit", 2, 50e-6))
    assert cal["powersgd"].arm.hidden_s == pytest.approx(0.006, rel=1e-6)
    held = measured_arms(tmp_path, "lenet-mnist", 2, "100mbit")
    (row,) = validation(cal, held, links_of("100mbit", 2, 50e-6))
    assert row["held-out error"] == pytest.approx(0.0, abs=1e-6)
    for path in (tmp_path / "runs").glob("*.json"):
        record = json.loads(path.read_text())
        record["history"] = [{k: v for k, v in p.items() if k != "bytes_sent"} for p in record["history"]]
        path.write_text(json.dumps(record))
    cal = with_measured_overlap(measured_arms(tmp_path, "lenet-mnist", 2, "1gbit"), links_of("1gbit", 2, 50e-6))
    (row,) = validation(cal, measured_arms(tmp_path, "lenet-mnist", 2, "100mbit"), links_of("100mbit", 2, 50e-6))
    assert row["held-out error"] < -0.20


def test_an_exchange_waited_whole_carries_its_measured_overhead_to_the_held_out_link():
    """TernGrad's all-gather waited 8.6 ms a step at 1 Gbit/s where its bytes take 2.7 ms: the 5.9 ms beyond them
    (a message per tensor, the transport's own costs) do not shrink with the link, so the held-out link's step
    carries them; a cluster's projection scales them with the codecs (software measured on this host)."""
    from commbench.analysis.perfmodel.tta_tables import Measured, projection, with_measured_overlap

    cal_links, held = links_of("1gbit", 2, 0.0), links_of("100mbit", 2, 0.0)
    arm = Arm("terngrad", "allgather", 450, 0.314 * MB, codec_s=0.011)
    modelled = exchange_s("allgather", cal_links, 0.314 * MB)
    measured = {"terngrad": Measured(arm, "terngrad", 0.06, None, 3, 3, {}, modelled + 0.0059)}
    (cal,) = with_measured_overlap(measured, cal_links).values()
    assert cal.arm.overhead_s == pytest.approx(0.0059)
    assert step_s(cal.arm, held, 0.06) == pytest.approx(0.06 + 0.011 + 0.0059 + exchange_s("allgather", held, 0.314 * MB))
    (row,) = projection({"terngrad": cal}, held, 0.002, codec_scale=0.05)
    assert row["step s"] == pytest.approx(0.002 + 0.05 * (0.011 + 0.0059) + exchange_s("allgather", held, 0.314 * MB))
    # a wait shorter than the modelled bytes (the model's bytes too slow) gives no negative overhead
    quick = {"terngrad": Measured(arm, "terngrad", 0.06, None, 3, 3, {}, modelled / 2)}
    assert next(iter(with_measured_overlap(quick, cal_links).values())).arm.overhead_s == 0.0
