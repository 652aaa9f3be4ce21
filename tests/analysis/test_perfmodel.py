"""The performance models against hand arithmetic: TernGrad supp. Eq. 6-9, SSD-SGD Eq. 2, 4, 7; the alpha-beta
fit on synthetic timings; per-method bytes from the ledger; a small real gloo measurement; bad input."""
from __future__ import annotations

import argparse
import json
import random

import pytest

from commbench.cli import Parser
from commbench.config import ConfigError
from commbench.analysis.perfmodel import alphabeta
from commbench.cli import model as command
from commbench.config.parsers import rate_bytes
from commbench.analysis.perfmodel import ssdsgd
from commbench.analysis.perfmodel import terngrad
from commbench.analysis.perfmodel import gradient_bytes as gb
from commbench.analysis.perfmodel.terngrad import Cluster


def approx(x):
    return pytest.approx(x, rel=1e-12, abs=1e-15)


# -- TernGrad, supplementary Eq. 6-9 --------------------------------------------------------------------------
def test_terngrad_two_nodes_of_four():
    # i = 4, j = 2 (N = 8); C_gwd 10 GB/s, C_cwd 5 GB/s, C_nwd 1 GB/s, C_ncost 100 us; |g| = 100 MB; K = 32.
    c = Cluster(gpus_per_node=4, nodes=2, gpu_gpu_bw=10e9, cpu_gpu_bw=5e9, network_bw=1e9,
                network_latency_s=1e-4, batch=32, profiled_s=0.5, grad_bytes=1e8)
    # T_comm = 1e8/1e10 * log2 4 + 1e8/5e9 + (1e-4 + 1e8/1e9) * log2 2 = 0.02 + 0.02 + 0.1001 = 0.1401
    assert terngrad.t_comm(c) == approx(0.1401)
    # Eq. 6: (0.5 - 0.02) / 8 + 0.1401 = 0.06 + 0.1401 = 0.2001;  Eq. 7: 32 / 0.2001
    assert terngrad.t_strong(c) == approx(0.2001)
    assert terngrad.throughput_strong(c) == approx(32 / 0.2001)
    # Eq. 8: 0.5 + 0.02 + 0.1001 = 0.6201 (the C_cwd terms cancel);  Eq. 9: 8 * 32 / 0.6201
    assert terngrad.t_weak(c) == approx(0.6201)
    assert terngrad.throughput_weak(c) == approx(256 / 0.6201)


def test_terngrad_one_gpu_is_the_profile():
    # i = j = 1: no GPU-GPU and no network term; strong = (T - |g|/C_cwd) / 1 + |g|/C_cwd = T; weak = T.
    c = Cluster(1, 1, 1e9, 2e9, 1e8, 5e-5, 64, profiled_s=0.25, grad_bytes=4e6)
    assert terngrad.t_strong(c) == approx(0.25)
    assert terngrad.t_weak(c) == approx(0.25)
    assert terngrad.throughput(c, "weak") == approx(64 / 0.25)


def test_terngrad_eight_nodes_of_two():
    # i = 2, j = 8 (N = 16); |g| = 4 MB; C_gwd 2 GB/s -> 0.002 s a round; C_cwd 4 GB/s -> 0.001 s;
    # network 1 Gbit/s = 1.25e8 B/s -> 0.032 s + 50 us latency, log2 8 = 3 rounds -> 0.09615 s.
    c = Cluster(2, 8, 2e9, 4e9, 1.25e8, 5e-5, 16, profiled_s=0.101, grad_bytes=4e6)
    assert terngrad.t_inter(c) == approx(3 * 0.03205)
    # Eq. 6: (0.101 - 0.001) / 16 + 0.002 + 0.001 + 0.09615 = 0.00625 + 0.09915 = 0.1054
    assert terngrad.t_strong(c) == approx(0.1054)
    # Eq. 8: 0.101 + 0.002 + 0.09615 = 0.19915;  Eq. 9: 16 * 16 / 0.19915
    assert terngrad.t_weak(c) == approx(0.19915)
    assert terngrad.throughput_weak(c) == approx(256 / 0.19915)


def test_profiled_time_and_the_implied_compute():
    assert terngrad.profiled_time(0.1, 1e9, 1e10) == approx(0.2)  # compute + |g| / C_cwd
    # (C + 2) / (C + 0.5) = 3 at C = (2 - 3 * 0.5) / 2 = 0.25
    assert terngrad.compute_for_speedup(3.0, 2.0, 0.5) == approx(0.25)


def test_predict_uses_the_ledger_bytes():
    # LeNet baseline: |g| = 5,024,320 B (see below); 2 nodes of 1 GPU, 1 Gbit/s, 50 us, PCIe 15.75e9 B/s.
    p = terngrad.predict("lenet-mnist", "baseline", 2, 1.25e8, step_time_s=0.01, batch=32, latency_s=5e-5)
    g, pcie = 5_024_320, 15.75e9
    t = (0.01 + g / pcie) + 0 + (5e-5 + g / 1.25e8) * 1  # Eq. 8 with T(1,1,K,|g|) = step + |g| / C_cwd
    assert p.grad_bytes == g
    assert p.iteration_s == approx(t)
    assert p.images_per_s == approx(2 * 32 / t)
    assert terngrad.predict_throughput("lenet-mnist", "baseline", 2, 1.25e8, step_time_s=0.01, batch=32,
                                       latency_s=5e-5) == approx(2 * 32 / t)


def test_figure5_curves_follow_eq8(monkeypatch):
    """The plumbing of figure5(): stub byte counts, then check AlexNet at 8 GPUs of cluster (a) by hand."""
    def fake(task, method, params=None, **_):
        sent = 4e8 if method == "baseline" else 4e8 / 16
        return gb.GradientBytes(task, method, {}, 2, 10**8, 1, sent, sent, {}, "stub")

    monkeypatch.setattr(gb, "gradient_bytes", fake)
    curves = terngrad.figure5(clusters=("a",), tasks=("alexnet-imagenet",), compute_s={("a", "alexnet-imagenet"): 0.2})
    base, tern = curves
    assert base.gpus == terngrad.FIGURE5_GPUS and (base.method, tern.method) == ("baseline", "terngrad")
    pcie, net, lat = 15.75e9, 1.25e8, 5e-5
    at8 = base.gpus.index(8)  # i = 4, j = 2
    t_base = 0.2 + 4e8 / pcie + 4e8 / pcie * 2 + (lat + 4e8 / net)
    t_tern = 0.2 + 2.5e7 / pcie + 2.5e7 / pcie * 2 + (lat + 2.5e7 / net)
    assert base.images_per_s[at8] == approx(8 * 128 / t_base)
    assert tern.images_per_s[at8] == approx(8 * 128 / t_tern)
    at1 = base.gpus.index(1)  # one GPU: T(1,1,K,|g|) alone
    assert base.images_per_s[at1] == approx(128 / (0.2 + 4e8 / pcie))


# -- SSD-SGD, Eq. 2, 4, 7 -------------------------------------------------------------------------------------
def test_ssdsgd_communication_bound():
    c = ssdsgd.IterationCosts(t_f=0.02, t_b=0.04, t_c=0.2, h_b_last=0.005, h_c_first=0.01, h_loc_first=0.002)
    # S = T_c / 2 = 0.1.  Eq. 2: T_b - h_b^L = 0.035 <= T_c - h_c^1 = 0.19 -> case 2: 0.02 + 0.2 + 0.005 = 0.225
    assert ssdsgd.ssgd_iteration(c) == ssdsgd.Time(pytest.approx(0.225), 2)
    # Eq. 4: S = 0.1 >= T_b + T_f + h_loc^1 = 0.062 -> case 2: 0.1 + (0.2 + 0.005 - 0.04 - 0.1) / k = 0.1 + 0.065 / k
    assert ssdsgd.ssd_average_iteration(c, 1).seconds == approx(0.165)
    assert ssdsgd.ssd_average_iteration(c, 5) == ssdsgd.Time(pytest.approx(0.113), 2)
    # Eq. 7 case 2, k = 5: 5 * 0.02 + 4 / 2 * 0.2 + 4 * 0.005 + 0.04 = 0.1 + 0.4 + 0.02 + 0.04 = 0.56
    assert ssdsgd.saved_time(c, 5).seconds == approx(0.56)
    assert 5 * (0.225 - 0.113) == pytest.approx(0.56)  # = k (Eq. 2 - Eq. 4), as Eq. 7 is derived
    rows = ssdsgd.table(c, [1, 5], batch=32)
    assert rows[1].speedup_vs_ssgd == approx(0.225 / 0.113) and rows[1].speedup_vs_k1 == approx(0.165 / 0.113)
    assert rows[1].images_per_s == approx(32 / 0.113)


def test_ssdsgd_case_one():
    c = ssdsgd.IterationCosts(t_f=0.03, t_b=0.06, t_c=0.17, h_b_last=0.002, h_c_first=0.004, h_loc_first=0.001)
    # Eq. 2: 0.058 <= 0.166 -> case 2: 0.03 + 0.17 + 0.002 = 0.202
    assert ssdsgd.ssgd_iteration(c).seconds == approx(0.202)
    # Eq. 4: S = 0.085 < 0.091 -> case 1: 0.091 + (0.17 + 0.002 - 0.03 - 0.12 - 0.001) / k = 0.091 + 0.021 / k
    assert ssdsgd.ssd_average_iteration(c, 3) == ssdsgd.Time(pytest.approx(0.098), 1)
    # Eq. 7 case 1, k = 3: 2 * (0.17 - 0.06 + 0.002 - 0.001) + (0.03 + 0.06) = 0.222 + 0.09 = 0.312 = 3 (0.202 - 0.098)
    assert ssdsgd.saved_time(c, 3) == ssdsgd.Time(pytest.approx(0.312), 1)


def test_ssdsgd_computation_bound():
    c = ssdsgd.IterationCosts(t_f=0.05, t_b=0.2, t_c=0.05, h_b_last=0.01, h_c_first=0.005)
    # Eq. 2: T_b - h_b^L = 0.19 > T_c - h_c^1 = 0.045 -> case 1: 0.05 + 0.2 + 0.005 = 0.255
    assert ssdsgd.ssgd_iteration(c) == ssdsgd.Time(pytest.approx(0.255), 1)
    # Eq. 4 case 1's 1/k term: 0.05 + 0.01 - 0.05 - 0.4 - 0 < 0: computation ends last, case 3 = 0.25 for any k
    assert ssdsgd.ssd_average_iteration(c, 4) == ssdsgd.Time(pytest.approx(0.25), 3)


def test_ssdsgd_costs_from_measurements():
    # step 0.3 s, backward 2/3; push 1e6 B and pull 1e6 B at alpha 1 ms, beta 1e-9 s/B -> 2 ms each.
    c = ssdsgd.estimate_costs(0.3, backward_share=2 / 3, push_bytes=1e6, pull_bytes=1e6, alpha_s=1e-3,
                              beta_s_per_byte=1e-9, layers=4, first_layer_share=0.25)
    assert (c.t_f, c.t_b) == (approx(0.1), approx(0.2))
    assert c.t_c == approx(0.004) and c.s == approx(0.002)  # T_c = push + pull; S = push
    assert c.h_b_last == approx(0.05) and c.h_c_first == approx(0.001)


# -- alpha-beta ----------------------------------------------------------------------------------------------
SIZES = [2 ** e for e in range(10, 25, 2)]  # 1 KiB .. 16 MiB


def test_fit_recovers_exact_alpha_beta():
    f = alphabeta.fit([(b, 5e-5 + 1e-9 * b) for b in SIZES])
    assert f.alpha_s == pytest.approx(5e-5, rel=1e-9) and f.beta_s_per_byte == pytest.approx(1e-9, rel=1e-9)
    assert f.r2 == pytest.approx(1.0) and f.residual_rms_s == pytest.approx(0.0, abs=1e-15)
    assert f.bandwidth_bytes_per_s == pytest.approx(1e9)
    g = alphabeta.fit([(b, 5e-5 + 1e-9 * b) for b in SIZES], "relative")
    assert g.alpha_s == pytest.approx(5e-5, rel=1e-9) and g.beta_s_per_byte == pytest.approx(1e-9, rel=1e-9)


def test_fit_with_noise():
    rng = random.Random(0)
    additive = [(b, 5e-5 + 1e-9 * b + rng.gauss(0, 2e-6)) for b in SIZES for _ in range(3)]
    f = alphabeta.fit(additive)
    assert f.beta_s_per_byte == pytest.approx(1e-9, rel=0.01)
    assert f.alpha_s == pytest.approx(5e-5, rel=0.05)
    assert 0 < f.residual_rms_s < 5e-6 and f.r2 > 0.999
    # 2 % multiplicative noise: plain least squares is ruled by the 16 MiB points; the relative fit is not.
    relative = [(b, (5e-5 + 1e-9 * b) * (1 + rng.gauss(0, 0.02))) for b in SIZES for _ in range(3)]
    g = alphabeta.fit(relative, "relative")
    assert g.alpha_s == pytest.approx(5e-5, rel=0.1) and g.beta_s_per_byte == pytest.approx(1e-9, rel=0.02)


def test_fit_needs_two_sizes():
    with pytest.raises(ConfigError, match="two distinct"):
        alphabeta.fit([(1024, 1e-4), (1024, 2e-4)])


def test_measure_on_gloo():
    """Both collectives on 2 gloo processes: one sample per size, in order, each a median of positive times.
    Each worker also checks the collective's values at every size (alphabeta._verify), so a wrong op or size
    fails the measurement. Which size is faster is not asserted: that is a timing, and timings belong in
    benchmarks."""
    sizes = [4096, 262144]
    samples = alphabeta.measure_many(["allreduce", "allgather"], sizes, world_size=2, repeats=3, warmup=1)
    for op in ("allreduce", "allgather"):
        assert [b for b, _ in samples[op]] == sizes
        assert all(t > 0 for _, t in samples[op])


def test_verify_catches_a_wrong_collective(monkeypatch):
    import torch.distributed as dist

    monkeypatch.setattr(dist, "all_reduce", lambda tensor: None)  # a collective that does nothing
    with pytest.raises(RuntimeError, match="allreduce of 8 float32 on 2 ranks returned wrong values"):
        alphabeta._verify("allreduce", 8, 0, 2)


def test_measure_rejects_bad_input():
    with pytest.raises(ConfigError, match="op"):
        alphabeta.measure("broadcast", [4096])
    with pytest.raises(ConfigError, match="world size"):
        alphabeta.measure("allreduce", [4096], world_size=1)
    with pytest.raises(ConfigError, match="multiple of 4"):
        alphabeta.measure("allreduce", [4097])


# -- bytes from the ledger -----------------------------------------------------------------------------------
def test_lenet_baseline_and_terngrad_bytes():
    from commbench.tasks import TASKS

    n = TASKS["lenet-mnist"].parameter_count()
    assert n == 1_256_080
    base = gb.gradient_bytes("lenet-mnist", "baseline")
    assert base.sent == 4 * n == 5_024_320  # one float32 allreduce of the flat gradient
    tern = gb.gradient_bytes("lenet-mnist", "terngrad")
    # The LeNet recipe ternarizes all 8 tensors (run_multi_gpus_lenet.sh), with scaler sharing (Eq. 4):
    # allgather of 8 float32 scalers (same size: no int64 size header) = 32 B, then allgather of the trits
    # packed 4 to a byte: 1,256,080 / 4 = 314,020 B.  32 + 314,020 = 314,052 B, 1/15.998 of the baseline.
    assert tern.sent == 8 * 4 + n // 4 == 314_052
    assert tern.by_op == {"allgather": 2 * 314_052}
    assert tern.ratio == pytest.approx(16, rel=1e-3)


def test_threshold_bytes_follow_fraction_sent():
    wgt = gb.gradient_bytes("lenet-mnist", "wgt", fraction_sent=0.01)
    # round(0.01 * 1,256,080) = 12,561 elements: sparse layout, int32 index + float32 value each, 8-byte
    # header, plus the allgather's int64 size announcement: 12,561 * 8 + 8 + 8 = 100,504 B.
    assert wgt.sent == 12_561 * 8 + 16 == 100_504
    with pytest.raises(ConfigError, match="fraction_sent"):
        gb.gradient_bytes("lenet-mnist", "bgt")
    with pytest.raises(ConfigError, match="fraction_sent"):
        gb.gradient_bytes("lenet-mnist", "baseline", fraction_sent=0.1)


def test_gradient_bytes_bad_names():
    with pytest.raises(ConfigError, match="task: unknown task 'nope'"):
        gb.gradient_bytes("nope", "baseline")
    with pytest.raises(ConfigError, match="method: unknown method 'nope'"):
        gb.gradient_bytes("lenet-mnist", "nope")
    with pytest.raises(ConfigError, match="method.nope"):
        gb.gradient_bytes("lenet-mnist", "terngrad", {"nope": 1})


# -- input checks ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text,value", [("1gbit", 1.25e8), ("100mbit", 1.25e7), ("10gbit", 1.25e9),
                                        ("10Gbps", 1.25e9), ("15.75GB", 15.75e9), ("1 Gbit/s", 1.25e8)])
def test_parse_rate(text, value):
    assert rate_bytes(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["fast", "1gb", "-1gbit", "0mbit", "gbit", ""])
def test_parse_rate_rejects(text):
    with pytest.raises(ConfigError, match="--network"):
        rate_bytes(text, "--network")


def test_non_positive_parameters():
    with pytest.raises(ConfigError, match="network_bw"):
        Cluster(1, 2, 1e9, 1e9, 0.0, 0.0, 32, 0.1, 1e6)
    with pytest.raises(ConfigError, match="nodes"):
        Cluster(1, 0, 1e9, 1e9, 1e9, 0.0, 32, 0.1, 1e6)
    with pytest.raises(ConfigError, match="profiled_s"):
        terngrad.t_strong(Cluster(1, 2, 1e9, 1e6, 1e9, 0.0, 32, 0.1, 1e6))  # T(1,1,K) < |g| / C_cwd
    with pytest.raises(ConfigError, match="t_c"):
        ssdsgd.IterationCosts(t_f=0.1, t_b=0.1, t_c=-1.0)
    with pytest.raises(ConfigError, match="k"):
        ssdsgd.ssd_average_iteration(ssdsgd.IterationCosts(0.1, 0.1, 0.1), 0)


# -- the command line (built here; bench/cli.py wires it in) ---------------------------------------------
def cli(*argv: str) -> argparse.Namespace:
    p = Parser(prog="commbench")
    command.add_parser(p.add_subparsers(dest="command", required=True, parser_class=Parser))
    return p.parse_args(list(argv))


def run_json(capsys, *argv: str) -> dict:
    assert command.run(cli(*argv, "--format", "json")) == 0
    return json.loads(capsys.readouterr().out)


def test_cli_terngrad_table(capsys):
    out = run_json(capsys, "model", "terngrad", "--task", "lenet-mnist", "--step-time", "0.01", "--batch", "32",
                   "--nodes", "1,2", "--network", "1gbit", "--latency-us", "50")
    rows = {(r["method"], r["nodes"]): r for r in out["rows"]}
    assert set(rows) == {("baseline", 1), ("baseline", 2), ("terngrad", 1), ("terngrad", 2)}
    assert rows[("baseline", 2)]["speedup_vs_baseline"] == 1.0
    g = 5_024_320
    t = 0.01 + g / 15.75e9 + 5e-5 + g / 1.25e8
    assert rows[("baseline", 2)]["images_per_s"] == approx(2 * 32 / t)
    assert rows[("terngrad", 2)]["grad_bytes"] == 314_052
    assert rows[("terngrad", 2)]["speedup_vs_baseline"] > 1


def test_cli_record_and_calibration(tmp_path, capsys):
    from tests.helpers import write_record

    written = write_record(tmp_path, "lenet-mnist_baseline_w1_0123456789", workers=1, backend="sim", steps=100,
                           config={"batch_per_worker": 16})
    record = tmp_path / "runs" / "lenet-mnist_baseline_w1_0123456789.json"
    record.write_text(json.dumps({**written, "metrics": {**written["metrics"], "train_s": 2.0}}))
    calibration = tmp_path / "cal.json"
    calibration.write_text(json.dumps({"fits": {"allreduce": {"alpha_s": 1e-4, "beta_s_per_byte": 1e-8, "r2": 1.0,
                                                              "residual_rms_s": 0.0, "n": 4}}}))
    out = run_json(capsys, "model", "terngrad", "--record", str(record), "--calibration", str(calibration),
                   "--method", "baseline", "--nodes", "2")
    (row,) = out["rows"]
    t = 0.02 + 5_024_320 / 15.75e9 + 1e-4 + 5_024_320 * 1e-8  # step = 2.0 / 100; C_nwd = 1 / beta
    assert row["iteration_s"] == approx(t) and row["images_per_s"] == approx(2 * 16 / t)
    calibration.write_text(json.dumps({"fits": {"allreduce": {"alpha_s": -1e-4, "beta_s_per_byte": 1e-8, "r2": 1.0,
                                                              "residual_rms_s": 0.0, "n": 4}}}))
    with pytest.raises(ConfigError, match="--calibration"):
        command.run(cli("model", "terngrad", "--record", str(record), "--calibration", str(calibration)))


def test_cli_ssdsgd_direct_costs(capsys):
    out = run_json(capsys, "model", "ssdsgd", "--task", "lenet-mnist", "--tf", "0.02", "--tb", "0.04", "--tc",
                   "0.2", "--k", "1,5", "--batch", "32")
    rows = {r["k"]: r for r in out["rows"]}
    # LeNet has L = 4 layers with parameters: h_b^L = 0.04 / 4 = 0.01; h_c^1 = h_loc^1 = 0; S = 0.1.
    # Eq. 4 case 2: 0.1 + (0.2 + 0.01 - 0.04 - 0.1) / k = 0.1 + 0.07 / k;  Eq. 2 case 2: 0.02 + 0.2 + 0.01 = 0.23
    assert rows[5]["t_avg_s"] == approx(0.114) and rows[1]["t_avg_s"] == approx(0.17)
    assert rows[5]["speedup_vs_ssgd"] == approx(0.23 / 0.114)


def test_cli_calibrate_writes_fits(tmp_path, capsys, monkeypatch):
    fake = {"allreduce": [(1024, 1e-4 + 1024e-9), (4096, 1e-4 + 4096e-9)],
            "allgather": [(1024, 2e-4 + 2048e-9), (4096, 2e-4 + 8192e-9)]}
    monkeypatch.setattr(alphabeta, "measure_many", lambda ops, *a, **k: {op: fake[op] for op in ops})
    out = tmp_path / "cal" / "gloo-w2.json"
    assert command.run(cli("model", "calibrate", "--sizes", "1KiB,4096", "--out", str(out))) == 0
    data = json.loads(out.read_text())
    assert data["world_size"] == 2 and data["torch"] and data["hostname"] and data["date"]
    assert data["fits"]["allreduce"]["alpha_s"] == pytest.approx(1e-4)
    assert data["fits"]["allgather"]["beta_s_per_byte"] == pytest.approx(2e-9)
    assert data["fits"]["allreduce"]["samples"] == [[1024, 1e-4 + 1024e-9], [4096, 1e-4 + 4096e-9]]
    assert json.loads(capsys.readouterr().out) == data


@pytest.mark.parametrize("argv,match", [
    (["terngrad", "--task", "nope", "--step-time", "1"], "task: unknown task 'nope'"),
    (["terngrad", "--task", "lenet-mnist", "--method", "baseline,nope", "--step-time", "1"], "method: unknown"),
    (["terngrad", "--task", "lenet-mnist", "--step-time", "1", "--network", "fast"], "--network"),
    (["terngrad", "--task", "lenet-mnist", "--step-time", "0"], "--step-time"),
    (["terngrad", "--task", "lenet-mnist"], "step time"),
    (["terngrad", "--task", "lenet-mnist", "--step-time", "1", "--nodes", "0,2"], "--nodes"),
    (["terngrad", "--task", "lenet-mnist", "--step-time", "1", "--latency-us", "-5"], "--latency-us"),
    (["terngrad", "--figure5", "--step-time", "1"], "--figure5"),
    (["terngrad", "--task", "lenet-mnist", "--record", "/nonexistent.json"], "--record"),
    (["ssdsgd", "--task", "lenet-mnist", "--step-time", "1", "--k", "0..2"], "--k"),
    (["ssdsgd", "--task", "lenet-mnist", "--tf", "0.1", "--tb", "-1", "--tc", "1"], "--tb"),
    (["calibrate", "--sizes", "4097"], "multiple of 4"),
    (["calibrate", "--sizes", "big"], "sizes"),
])
def test_cli_bad_input(argv, match):
    with pytest.raises(ConfigError, match=match):
        command.run(cli("model", *argv))
