"""TernGrad and the threshold methods as whole exchanges: level bounds, bytes by hand, sim == dist."""
from __future__ import annotations

import pytest
import torch

from commbench.methods import METHODS, Worker
from commbench.methods.comm import SimCommunicator
from commbench.methods.terngrad import TernGrad, TernGradParams
from commbench.methods.threshold import WGT, ThresholdParams

from ..conftest import run_and_load

SHAPES = {"fc.weight": (4, 3), "fc.bias": (4,), "out.weight": (2, 4), "out.bias": (2,)}


def workers(n, device="cpu"):
    out = []
    for rank in range(n):
        params = {k: torch.zeros(s, device=device, requires_grad=True) for k, s in SHAPES.items()}
        out.append(Worker(rank, params, torch.optim.SGD(params.values(), lr=0.0), seed=100 + rank))
    return out


def grads(n, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return [{k: torch.randn(s, generator=g) * scale for k, s in SHAPES.items()} for _ in range(n)]


def averaged(method_cls, params, n, gs, step=0, device="cpu"):
    comm = SimCommunicator(n, num_servers=method_cls.servers_needed(params))
    ws = workers(n, device)
    method = method_cls(comm, ws, params, {})
    method.step(gs, lr=0.0, step=step)
    return ws, comm


@pytest.mark.parametrize("n", [2, 3, 5])
def test_terngrad_average_has_at_most_2n_plus_1_levels(n):
    ws, _ = averaged(TernGrad, TernGradParams(wd_in_grad=False), n, grads(n))
    for name, shape in SHAPES.items():
        levels = torch.unique(ws[0].params[name].grad)
        assert len(levels) <= 2 * n + 1, name
        assert torch.equal(ws[0].params[name].grad, ws[-1].params[name].grad)  # every worker agrees


def test_without_scaler_sharing_the_bound_does_not_hold():
    n = 5
    big = grads(n, seed=1)
    for i, g in enumerate(big):  # workers with very different ranges: different scalers
        for k in g:
            g[k] = g[k] * (i + 1)
    # 12 elements of fc.weight per draw: over a few steps' draws, more than 2N + 1 distinct values appear
    levels = [len(torch.unique(averaged(TernGrad, TernGradParams(wd_in_grad=False, scaler_sharing=False, clip=0), n,
                                        big, step=step)[0][0].params["fc.weight"].grad)) for step in range(5)]
    assert max(levels) > 2 * n + 1, levels


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (the GPU check runs it)")
@pytest.mark.parametrize("sharing", [True, False])
def test_terngrad_on_the_gpu_averages_as_on_the_cpu(sharing):
    """The scalers are computed on the CPU and the trits packed where the gradient is: without sharing (GRACE's
    setting) each payload carries its worker's scalers, which once failed on a GPU (tensors on two devices)."""
    params, gs = TernGradParams(wd_in_grad=False, scaler_sharing=sharing), grads(3, seed=5)
    on_cpu, cpu_comm = averaged(TernGrad, params, 3, gs, step=2)
    on_gpu, gpu_comm = averaged(TernGrad, params, 3, [{k: v.cuda() for k, v in g.items()} for g in gs], step=2,
                                device="cuda")
    for name in SHAPES:
        torch.testing.assert_close(on_gpu[0].params[name].grad.cpu(), on_cpu[0].params[name].grad, rtol=1e-6,
                                   atol=1e-7)
    assert gpu_comm.ledger.sent == cpu_comm.ledger.sent


def test_terngrad_counts_the_zero_trits_of_its_largest_tensor():
    """Figure 4(c)'s sparsity: every worker's zero trits in the largest tensor (fc.weight here), counted again
    by ternarizing that tensor alone from the same (seed, step, tensor) stream."""
    from commbench.methods.codecs import fused_ternary as fused
    from commbench.methods.codecs.ternary import mix_seed

    n, params, gs = 3, TernGradParams(wd_in_grad=False, scaler_sharing=False), grads(3, seed=4)
    _, comm = averaged(TernGrad, params, n, gs, step=7)
    zeros = 0
    for rank, g in enumerate(gs):  # the plain torch path of the codec, on fc.weight alone
        flat = g["fc.weight"].reshape(-1)
        offsets = fused.offsets_of([12])
        bounds, scales = fused.scalers(flat, offsets, params.clip, params.scaler)
        trits = fused.trits_torch(flat, offsets, bounds, scales, [mix_seed(100 + rank, 7, 0)])
        zeros += int((trits == 0).sum())
    assert comm.ledger.total_extra("trits_largest") == n * 12
    assert comm.ledger.total_extra("zero_trits_largest") == zeros and 0 < zeros < n * 12


@pytest.mark.parametrize("packing, packed", [("2bit", 7), ("base3", 6)])
@pytest.mark.parametrize("sharing", [True, False])
def test_terngrad_bytes_by_hand(packing, packed, sharing):
    """26 elements in 4 tensors: ceil(26/4) = 7 B in 2bit, ceil(26/5) = 6 B in base3, plus 4 float32 scalers
    (sent in the sharing exchange, or in front of the payload without sharing)."""
    params = TernGradParams(wd_in_grad=False, packing=packing, scaler_sharing=sharing)
    _, comm = averaged(TernGrad, params, 2, grads(2))
    assert comm.ledger.sent[0] == comm.ledger.received[0] == packed + 4 * 4
    assert comm.ledger.calls["allgather"] == (2 if sharing else 1) and comm.ledger.calls["allreduce"] == 0


def test_float_last_layer_bytes_by_hand():
    params = TernGradParams(wd_in_grad=False, float_last_layer=True)
    _, comm = averaged(TernGrad, params, 2, grads(2))
    # fc.weight + fc.bias = 16 trits -> 4 B, 2 scalers -> 8 B; out.* = 10 float32 by allreduce -> 40 B
    assert comm.ledger.sent[0] == 4 + 8 + 40


def test_terngrad_base3_beats_2bit_on_a_large_tensor():
    sent = {}
    for packing in ("2bit", "base3"):
        comm = SimCommunicator(2)
        ws = []
        for rank in range(2):
            p = {"w": torch.zeros(1000, requires_grad=True)}
            ws.append(Worker(rank, p, torch.optim.SGD(p.values(), lr=0.0), seed=rank))
        TernGrad(comm, ws, TernGradParams(packing=packing, wd_in_grad=False), {}).step(
            [{"w": torch.randn(1000)} for _ in range(2)], 0.0, 0)
        sent[packing] = comm.ledger.sent[0]
    assert sent == {"2bit": 250 + 4, "base3": 200 + 4}


def test_float_layers_travel_as_float_and_average_exactly():
    params = TernGradParams(wd_in_grad=False, float_last_layer=True, min_size=5)
    gs = grads(2, seed=4)
    ws, _ = averaged(TernGrad, params, 2, gs)
    method = TernGrad(SimCommunicator(2), workers(2), params, {})
    assert method.tern_names == ["fc.weight"] and method.float_names == ["fc.bias", "out.weight", "out.bias"]
    for name in method.float_names:
        assert torch.equal(ws[0].params[name].grad, (gs[0][name] + gs[1][name]) / 2)


def test_wgt_bytes_by_hand():
    """Worker 0 sends 2 of 26 elements, worker 1 none: payloads 8 + min(16, 4 + 8) = 20 and 8 + 0 = 8 B."""
    gs = [{k: torch.zeros(s) for k, s in SHAPES.items()} for _ in range(2)]
    gs[0]["fc.weight"][0, 0], gs[0]["out.bias"][1] = 1.0, -1.0  # contribution g/N = +-0.5 >= T
    ws, comm = averaged(WGT, ThresholdParams(threshold=0.25), 2, gs)
    padded = 20  # both pad to the larger payload
    assert comm.ledger.sent[0] == comm.ledger.sent[1] == 8 + padded  # int64 size + padded payload
    assert comm.ledger.received[0] == 8 + padded
    assert ws[1].params["fc.weight"].grad[0, 0] == 0.5 and ws[1].params["out.bias"].grad[1] == -0.5
    assert comm.ledger.total_extra("paper_bytes") == 2 * 4  # two float32 values, indices not counted


SIM_DIST = {"terngrad": [], "wgt": ["--set", "method.threshold=0.002"], "bgt": ["--set", "method.threshold=0.002"],
            "qgt": ["--set", "method.threshold=0.0005"]}


# Three workers in the fast tier (uneven payloads padded to the largest of three); two repeat it in the slow one.
@pytest.mark.parametrize("workers", [pytest.param(2, marks=pytest.mark.slow), 3])
@pytest.mark.parametrize("method", sorted(SIM_DIST))
def test_sim_and_dist_agree(tmp_path, method, workers):
    (sim, w_sim), (dist, w_dist) = (
        run_and_load("--task", "lenet-mnist", "--dataset", "synthetic", "--method", method, "--workers", str(workers),
                     "--backend", backend, "--steps", "6", "--set", f"global_batch={16 * workers}",
                     "--set", "eval.every=6", *SIM_DIST[method], "--out", str(tmp_path))
        for backend in ("sim", "dist"))
    m_sim, m_dist = sim["metrics"], dist["metrics"]
    assert all(torch.equal(w_sim[k], w_dist[k]) for k in w_sim)
    for key in ("bytes_sent", "bytes_received", "top1", "paper_bytes"):
        assert m_sim.get(key) == m_dist.get(key), key
    assert m_sim["bytes_sent"] < m_sim["bytes_fp32_equiv"]


def test_every_method_is_registered():
    assert set(METHODS) >= {"baseline", "terngrad", "wgt", "bgt", "qgt"}


def sim_run(method: str, steps: int = 10, **params) -> dict:
    """A short in-process LeNet run on synthetic data; returns its metrics."""
    from commbench.config import resolve
    from commbench.run.train import train

    settings = {"task": "lenet-mnist", "method": method, "dataset": "synthetic", "workers": 2, "backend": "sim",
                "steps": steps, "eval.every": steps, **{f"method.{k}": v for k, v in params.items()}}
    cfg = resolve(settings)
    return train(cfg, SimCommunicator(cfg.workers)).metrics


@pytest.mark.parametrize("packing, bound", [("base3", 18), ("2bit", 15)])
def test_terngrad_all_layers_pushes_at_most_its_share_of_fp32(packing, bound):
    m = sim_run("terngrad", packing=packing, float_last_layer=False, min_size=1)
    assert m["bytes_sent"] * bound <= m["bytes_fp32_equiv"]


@pytest.mark.parametrize("method", ["wgt", "bgt", "qgt"])
def test_threshold_bytes_fall_as_the_threshold_rises(method):
    sent = [sim_run(method, steps=20, threshold=t)["bytes_sent"] for t in (1e-3, 3e-3, 1e-2)]
    assert sent[0] > sent[1] > sent[2]


@pytest.mark.parametrize("topology", ["allgather", "ps"])
@pytest.mark.parametrize("clip_bound", ["shared", "own"])
def test_with_a_shared_c_sigma_every_worker_clips_at_the_shared_scaler(monkeypatch, topology, clip_bound):
    """Two workers of different sigma (the second's gradient 4 times the first's): with the c sigma scaler shared
    (the authors' TF code), each clips at the shared scaler, max_i c sigma_i (version 5); ``clip_bound=own``
    keeps each worker's own c sigma_i (version 4)."""
    from commbench.methods.codecs import fused_ternary

    used = []
    for name in ("encode", "trits"):
        original = getattr(fused_ternary.TernaryCodec, name)

        def spy(self, flat, offsets, bounds, scales, keys, *rest, _original=original):
            used.append(bounds.clone())
            return _original(self, flat, offsets, bounds, scales, keys, *rest)

        monkeypatch.setattr(fused_ternary.TernaryCodec, name, spy)
    gs = grads(2, seed=3)
    for k in gs[1]:
        gs[1][k] = gs[1][k] * 4
    params = TernGradParams(wd_in_grad=False, scaler="std", topology=topology, clip_bound=clip_bound)
    codec = fused_ternary.TernaryCodec(2.5, "std", "2bit")
    own = [codec.scalers(torch.cat([g[k].reshape(-1) for k in SHAPES]), [torch.Size(s).numel()
                                                                          for s in SHAPES.values()])[1] for g in gs]
    averaged(TernGrad, params, 2, gs)
    assert len(used) == 2 and not torch.equal(own[0], own[1])
    if clip_bound == "shared":
        assert all(torch.equal(b, torch.maximum(own[0], own[1])) for b in used)
    else:
        assert torch.equal(used[0], own[0]) and torch.equal(used[1], own[1])


def test_terngrad_version_4_records_count_where_the_shared_clip_changes_nothing():
    assert TernGrad.computes_as(4, 2, {"scaler": "max", "scaler_sharing": True, "clip": 2.5})
    assert TernGrad.computes_as(4, 1, {"scaler": "std", "scaler_sharing": True, "clip": 2.5})
    assert TernGrad.computes_as(4, 4, {"scaler": "std", "scaler_sharing": True, "clip": 0})
    assert not TernGrad.computes_as(4, 2, {"scaler": "std", "scaler_sharing": True, "clip": 2.5})
    assert not TernGrad.computes_as(3, 2, {"scaler": "max"})
