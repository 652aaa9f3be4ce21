"""SSD-SGD against the paper: Algorithm 1's pull schedule, Eq. 8 / Algorithm 2 by hand, the exchange's bytes
on both topologies, equality with synchronous SGD during warm-up, and sim == dist on whole runs.
(Algorithm 1 line by line on a tiny model: test_ssdsgd_algorithm1.py.)"""
from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from commbench.config import resolve
from commbench.methods import Worker
from commbench.methods.baseline import Baseline, BaselineParams
from commbench.methods.comm import SimCommunicator
from commbench.methods.ps import shard
from commbench.methods.ssdsgd import SSDSGD, SSDSGDParams, glu_grad_sync, pulls_at

from ..conftest import commbench, execute_and_load, run_and_load


# -- Algorithm 1's schedule ---------------------------------------------------------------------------------
def algorithm1_pulls(wp: int, k: int, iterations: int) -> set[int]:
    """A line-by-line transcription of Algorithm 1's control flow; returns the iterations that pull."""
    pulls, num = set(), 0
    while num <= wp and num < iterations:  # lines 3-14: push, then pull (line 8), every warm-up iteration
        pulls.add(num)
        num += 1
    while num < iterations:  # lines 15-27
        if num % k == k - 1:  # line 20
            pulls.add(num)
        num += 1
    return pulls


@pytest.mark.parametrize("wp,k", [(0, 1), (1, 2), (99, 4), (99, 5), (3, 1), (500, 3), (8, 3), (499, 5)])
def test_pull_schedule_is_algorithm_1(wp, k):
    assert (1 + wp) % k == 0
    iterations = wp + 6 * k + 3
    assert {s for s in range(iterations) if pulls_at(s, wp, k)} == algorithm1_pulls(wp, k, iterations)


def test_pull_schedule_after_a_99_step_warm_up_pulls_every_4th_step():
    pulls = [s for s in range(120) if pulls_at(s, 99, 4)]
    assert pulls == list(range(100)) + [103, 107, 111, 115, 119]


@pytest.mark.parametrize("warmup,k", [(500, 4), (98, 4), (0, 2)])
def test_warm_up_that_breaks_algorithm_1_is_refused(warmup, k):
    with pytest.raises(ValueError, match=r"warmup: Algorithm 1 needs \(1 \+ warmup\) % k == 0"):
        SSDSGDParams(k=k, warmup=warmup)


def test_cli_refuses_a_bad_warm_up_and_names_it(tmp_path):
    proc = commbench("run", "--task", "lenet-mnist", "--method", "ssdsgd", "--set", "method.k=4",
                     "--set", "method.warmup=100", "--out", str(tmp_path))
    assert proc.returncode == 2
    assert "method.warmup" in proc.stderr and "try warmup=99 or 103" in proc.stderr
    assert not (tmp_path / "runs").exists()


# -- GLU (Eq. 8, Algorithm 2) by hand -----------------------------------------------------------------------
def one_worker_method(params: SSDSGDParams, weights: dict, weight_decay: dict, momentum: float = 0.9):
    comm = SimCommunicator(1, num_servers=params.servers if params.topology == "ps" else 0)
    tensors = {n: torch.nn.Parameter(t.clone()) for n, t in weights.items()}
    worker = Worker(0, tensors, torch.optim.SGD(tensors.values(), lr=0.0, momentum=momentum))
    return SSDSGD(comm, [worker], params, weight_decay), worker


@pytest.mark.parametrize("rule", ["glu", "glu_code", "sgd", "dcasgd"])
def test_the_code_scale_moves_the_local_gradient_term_by_exactly_one_over_w(rule):
    """MXNet's rescale_grad: with 4 workers, the gradient term of every local rule moves w' by exactly a quarter
    of what the paper's unscaled reading moves it (first update: grad_sync and the DC-ASGD-a compensation are 0;
    no weight decay)."""
    moved = {}
    for scale in ("code", "paper"):
        comm = SimCommunicator(4, num_servers=1)
        ws = []
        for rank in range(4):
            tensors = {"w": torch.nn.Parameter(torch.tensor([1.0, -2.0, 0.5]))}
            ws.append(Worker(rank, tensors, torch.optim.SGD(tensors.values(), lr=0.0, momentum=0.9)))
        method = SSDSGD(comm, ws, SSDSGDParams(k=1, warmup=0, local_rule=rule, local_grad_scale=scale), {})
        w = {"w": torch.tensor([1.0, -2.0, 0.5])}
        method.local_update(0, w, {"w": torch.tensor([0.5, 0.25, -1.0])}, lr=0.125)
        moved[scale] = torch.tensor([1.0, -2.0, 0.5]) - w["w"]
    if rule == "dcasgd":  # its mean square sees the scaled gradient too: the step is 1/W of the gradient term only
        assert torch.allclose(moved["code"] * 4, moved["paper"], rtol=1e-6)
    else:
        assert torch.equal(moved["code"] * 4, moved["paper"])


def test_glu_update_matches_a_hand_computed_example():
    # w' = [1, 2], pre_weight = [1.5, 1], m = 0.9, lr = 0.1, k = 2:
    #   grad_sync = (pre - w')(1 - m)/(lr k) = [0.5, -1] * 0.5 = [0.25, -0.5]
    # g = [0.2, -0.4], wd = 0.1, alpha 2, beta 0.5, loc_lr = 4 lr = 0.4:
    #   w' - 0.4 (2g + wd w' + 0.5 grad_sync) = [1, 2] - 0.4 [0.625, -0.85] = [0.75, 2.34]
    method, worker = one_worker_method(SSDSGDParams(k=2, warmup=1, local_rule="glu", local_grad_scale="paper"),
                                       {"w": torch.tensor([1.0, 2.0])}, {"w": 0.1})
    state = method.local[0]
    state.previous = {"w": torch.tensor([1.5, 1.0])}
    state.updates = 2  # a multiple of k: Algorithm 2 refreshes pre_weight to w' after computing grad_sync
    method.local_update(0, worker.params, {"w": torch.tensor([0.2, -0.4])}, lr=0.1)
    assert torch.allclose(worker.params["w"].detach(), torch.tensor([0.75, 2.34]), atol=1e-6)
    assert torch.equal(state.previous["w"], torch.tensor([1.0, 2.0]))
    assert state.updates == 3


def test_glu_keeps_pre_weight_between_refreshes_and_starts_it_at_w():
    method, worker = one_worker_method(SSDSGDParams(k=2, warmup=1, local_rule="glu", local_grad_scale="paper"),
                                       {"w": torch.tensor([1.0, 2.0])}, {})
    method.local_update(0, worker.params, {"w": torch.tensor([1.0, 1.0])}, lr=0.1)  # first update: grad_sync = 0
    assert torch.allclose(worker.params["w"].detach(), torch.tensor([1.0 - 0.8, 2.0 - 0.8]))
    assert torch.equal(method.local[0].previous["w"], torch.tensor([1.0, 2.0]))  # not refreshed (updates = 0)
    method.local_update(0, worker.params, {"w": torch.tensor([0.0, 0.0])}, lr=0.1)  # updates = 1: still not refreshed
    # grad_sync = ([1, 2] - [0.2, 1.2]) * 0.1 / 0.2 = [0.4, 0.4]; step 0.4 * 0.5 * 0.4 = 0.08
    assert torch.allclose(worker.params["w"].detach(), torch.tensor([0.12, 1.12]), atol=1e-6)
    assert torch.equal(method.local[0].previous["w"], torch.tensor([1.0, 2.0]))


def test_grad_sync_is_its_formula():
    torch.manual_seed(0)
    pre, w = {"a": torch.randn(7)}, {"a": torch.randn(7)}
    got = glu_grad_sync(pre, w, momentum=0.9, lr=0.4, k=3)["a"]
    assert torch.allclose(got, (pre["a"] - w["a"]) * (1 - 0.9) / (0.4 * 3))


def test_glu_code_variant_is_the_authors_cosdcasgd():
    # prev starts as w'; grad_sync = ((1 - loc_lr wd) prev - w')/8; prev <- w' before the update
    method, worker = one_worker_method(SSDSGDParams(k=2, warmup=1, local_rule="glu_code"),
                                       {"w": torch.tensor([1.0])}, {"w": 0.5})
    method.local[0].previous = {"w": torch.tensor([2.0])}
    method.local_update(0, worker.params, {"w": torch.tensor([0.25])}, lr=0.25)  # loc_lr = 1
    sync = ((1 - 1.0 * 0.5) * 2.0 - 1.0) / 8.0  # = 0
    assert worker.params["w"].item() == pytest.approx(1.0 - 1.0 * (2 * 0.25 + 0.5 * 1.0 + 0.5 * sync))
    assert method.local[0].previous["w"].item() == 1.0


def test_sgd_and_dcasgd_local_rules():
    method, worker = one_worker_method(SSDSGDParams(k=1, warmup=0, local_rule="sgd", local_lr_scale=0.25),
                                       {"w": torch.tensor([1.0])}, {"w": 0.1})
    method.local_update(0, worker.params, {"w": torch.tensor([2.0])}, lr=0.4)  # loc_lr 0.1: 1 - 0.1 (2 + 0.1)
    assert worker.params["w"].item() == pytest.approx(0.79)
    method, worker = one_worker_method(SSDSGDParams(k=1, warmup=0, local_rule="dcasgd", local_lr_scale=1.0),
                                       {"w": torch.tensor([1.0])}, {})
    method.local_update(0, worker.params, {"w": torch.tensor([1.0])}, lr=0.1)  # w_prev = w: no compensation yet
    assert worker.params["w"].item() == pytest.approx(0.9)
    # MS = 0.95 (0.05 + 1e-7) + 0.05 * 0.25 + 1e-7; comp = 2 / sqrt(MS) * 0.25 * (0.9 - 1.0)
    ms = 0.95 * (0.05 + 1e-7) + 0.05 * 0.25 + 1e-7
    comp = 2.0 / ms ** 0.5 * 0.25 * (0.9 - 1.0)
    method.local_update(0, worker.params, {"w": torch.tensor([0.5])}, lr=0.1)
    assert worker.params["w"].item() == pytest.approx(0.9 - 0.1 * (0.5 + comp), rel=1e-5)


# -- bytes, to the byte, on a small model ------------------------------------------------------------------
SMALL = {"a": torch.arange(10.0), "b": torch.arange(3.0), "c": torch.arange(5.0)}  # 18 fp32 = 72 B


def small_method(params, workers: int = 2):
    comm = SimCommunicator(workers, num_servers=params.servers if params.topology == "ps" else 0)
    group = []
    for rank in range(workers):
        tensors = {n: torch.nn.Parameter(t.clone()) for n, t in SMALL.items()}
        group.append(Worker(rank, tensors, torch.optim.SGD(tensors.values(), lr=0.0, momentum=0.9)))
    return SSDSGD(comm, group, params, {"a": 1e-4}), comm


def run_steps(method, steps: int) -> None:
    g = torch.Generator().manual_seed(1)
    for step in range(steps):
        grads = [{n: torch.randn(t.shape, generator=g) for n, t in SMALL.items()} for _ in method.workers]
        method.step(grads, lr=0.1, step=step)


@pytest.mark.parametrize("servers", [1, 2])
def test_ps_bytes_push_every_step_and_pull_every_k(servers):
    params = SSDSGDParams(k=4, warmup=3, topology="ps", servers=servers)
    method, comm = small_method(params)
    steps = 22
    run_steps(method, steps)
    pulls = sum(pulls_at(s, 3, 4) for s in range(steps))
    assert pulls == 4 + 4  # warm-up 0..3, then 7, 11, 15, 19
    for worker in (0, 1):
        assert comm.ledger.sent[worker] == 72 * steps  # every push: the whole gradient, over all servers
        assert comm.ledger.received[worker] == 72 * pulls  # every pull: the whole weights
    for server in comm.server_ranks:  # sharded: each server gets its keys from both workers
        held = 4 * sum(p.numel for p in shard({n: t.numel() for n, t in SMALL.items()}, servers)[server - 2])
        assert comm.ledger.received[server] == 2 * held * steps
        assert comm.ledger.sent[server] == 2 * held * pulls
    assert comm.ledger.calls["send"] == 2 * servers * steps + 2 * servers * pulls


def test_allreduce_bytes_push_every_step_and_the_pull_is_local():
    method, comm = small_method(SSDSGDParams(k=4, warmup=3, topology="allreduce"))
    run_steps(method, 22)
    assert comm.ledger.calls["allreduce"] == 22
    for worker in (0, 1):
        assert comm.ledger.sent[worker] == comm.ledger.received[worker] == 72 * 22
    assert len(method.pending) == 2  # the pushes of steps 20 and 21 wait for the pull at step 23


def test_sharding_is_mxnets():
    sizes = {"k0": 10, "k1": 3, "k2": 2_000_000, "k3": 7}
    pieces = shard(sizes, 3)
    # small keys: server = key * 9973 % 3 -> k0: 0, k1: 1, k3: 29919 % 3 = 0; the big key is split in three
    assert [(p.name, p.start, p.stop) for p in pieces[0]] == [("k0", 0, 10), ("k2", 0, 666_666), ("k3", 0, 7)]
    assert [(p.name, p.start, p.stop) for p in pieces[1]] == [("k1", 0, 3), ("k2", 666_666, 1_333_333)]
    assert [(p.name, p.start, p.stop) for p in pieces[2]] == [("k2", 1_333_333, 2_000_000)]


def test_ps_and_allreduce_topologies_agree():
    a, _ = small_method(SSDSGDParams(k=3, warmup=2, topology="ps", servers=2))
    b, _ = small_method(SSDSGDParams(k=3, warmup=2, topology="allreduce"))
    run_steps(a, 17)
    run_steps(b, 17)
    for n in SMALL:
        assert torch.equal(a.eval_weights()[n], b.eval_weights()[n])
        assert torch.equal(a.workers[1].params[n], b.workers[1].params[n])


def test_baseline_on_a_ps_equals_the_allreduce_baseline():
    results = []
    for topology in ("allreduce", "ps"):
        comm = SimCommunicator(2, num_servers=1 if topology == "ps" else 0)
        group = []
        for rank in range(2):
            tensors = {n: torch.nn.Parameter(t.clone()) for n, t in SMALL.items()}
            group.append(Worker(rank, tensors, torch.optim.SGD(tensors.values(), lr=0.0, momentum=0.9)))
        method = Baseline(comm, group, BaselineParams(topology=topology), {"a": 1e-4})
        run_steps(method, 9)
        results.append((method, comm))
    (ar, ar_comm), (ps, ps_comm) = results
    for n in SMALL:
        assert torch.equal(ar.workers[0].params[n], ps.workers[0].params[n])
    assert ps_comm.ledger.sent[0] == ps_comm.ledger.received[0] == 72 * 9 == ar_comm.ledger.sent[0]


# -- whole runs ---------------------------------------------------------------------------------------------
def run_sim(data_root: Path, out: Path, method: str, **settings):
    base = {"task": "lenet-mnist", "dataset": "fashion-mnist", "method": method, "workers": 2,
            "backend": "sim", "steps": 24, "ema": 0.0, "eval.every": 24, "data_root": str(data_root), **settings}
    return execute_and_load(resolve(base), out)


# The parameter server in the fast tier; two servers and the all-reduce topology repeat it in the slow one (their
# transports against sim: test_ssdsgd_algorithm1.py and sim_and_dist below).
@pytest.mark.parametrize("settings", [
    pytest.param({"method.topology": "ps", "method.local_rule": "glu"}, id="ps-glu"),
    pytest.param({"method.topology": "ps", "method.local_rule": "none", "method.servers": 2}, id="ps2-none",
                 marks=pytest.mark.slow),
    pytest.param({"method.topology": "allreduce", "method.local_rule": "glu"}, id="allreduce-glu",
                 marks=pytest.mark.slow),
])
def test_a_warm_up_over_the_whole_run_is_synchronous_sgd_exactly(data_root, tmp_path, settings):
    """Algorithm 1's warm-up (lines 3-14) is SSGD: a run that never leaves it computes the baseline's weights."""
    base_rec, base_w = run_sim(data_root, tmp_path, "baseline")
    rec, w = run_sim(data_root, tmp_path, "ssdsgd", **{"method.k": 1, "method.warmup": 23, **settings})
    for name in base_w:
        assert torch.equal(base_w[name], w[name]), name
    assert rec["metrics"]["top1"] == base_rec["metrics"]["top1"]
    assert rec["metrics"]["bytes_sent"] == base_rec["metrics"]["bytes_sent"]


def test_server_average_is_the_baselines_ema(data_root, tmp_path):
    """With the task's EMA on, the servers' average is what the baseline's harness EMA evaluates."""
    base_rec, _ = run_sim(data_root, tmp_path, "baseline", ema=0.9999)
    rec, _ = run_sim(data_root, tmp_path, "ssdsgd", ema=0.9999, **{"method.k": 1, "method.warmup": 23})
    assert rec["metrics"]["top1"] == base_rec["metrics"]["top1"]


@pytest.mark.parametrize("settings", [pytest.param({"method.k": 1, "method.warmup": 9}, id="k1"),
                                      pytest.param({"method.k": 4, "method.warmup": 3}, id="k4",
                                                   marks=pytest.mark.slow)])  # k = 1, the subtle case, is fast
def test_delay_changes_the_run(data_root, tmp_path, settings):
    """After warm-up SSD-SGD is not SSGD, at k = 1 too (it computes on locally updated weights)."""
    _, base_w = run_sim(data_root, tmp_path, "baseline", **{"method.topology": "ps"})
    _, w = run_sim(data_root, tmp_path, "ssdsgd", **settings)
    assert any(not torch.equal(base_w[n], w[n]) for n in base_w)


def test_the_method_version_enters_the_run_id():
    """SSD-SGD's computation changed (version 3: the authors' local scale and rule, the local model scored):
    its runs must not match older records as done, and those records count in no table."""
    from commbench.config import run_id_of

    cfg = resolve({"task": "lenet-mnist", "method": "ssdsgd", "dataset": "fashion-mnist"})
    assert cfg.method_version == SSDSGD.version == 3
    assert (cfg.method_params["local_rule"], cfg.method_params["local_grad_scale"]) == ("glu_code", "code")
    for older in (1, 2):
        assert run_id_of({**cfg.to_dict(), "method_version": older}) != cfg.run_id
        assert not SSDSGD.computes_as(older, 4, cfg.method_params)
    # a method still at version 1 keeps the id it had before versions existed
    base = resolve({"task": "lenet-mnist", "method": "baseline", "dataset": "fashion-mnist"})
    assert base.run_id == run_id_of({k: v for k, v in base.to_dict().items() if k != "method_version"})


DIST_CASES = {"ps": ["--set", "method.topology=ps"], "ps2": ["--set", "method.servers=2"],
              "allreduce": ["--set", "method.topology=allreduce"]}


@pytest.fixture(scope="module")
def sim_and_dist(data_root, tmp_path_factory):
    """Each case's run on each transport, once, when a test first asks for it (a case whose tests are all in the
    slow tier costs the fast tier nothing). One evaluation, at the end: the tests compare weights and bytes, and
    each evaluation of the local and the global model over Fashion-MNIST's 10,000 test images costs seconds."""
    out = tmp_path_factory.mktemp("ssd")
    runs = {}

    def get(case, backend):
        if (case, backend) not in runs:
            runs[case, backend] = run_and_load(
                "--task", "lenet-mnist", "--dataset", "fashion-mnist", "--method", "ssdsgd", "--workers", "2",
                "--backend", backend, "--steps", "30", "--set", "method.k=4", "--set", "method.warmup=7",
                "--set", "eval.every=30", *DIST_CASES[case], "--set", f"data_root={data_root}",
                "--out", str(out / case / backend))
        return runs[case, backend]
    return get


# The all-reduce topology's transports agree bit for bit in test_ssdsgd_algorithm1.py; its whole run repeats that
# in the slow tier. The parameter server, with one server and with two, stays in the fast one.
@pytest.mark.parametrize("case", ["ps", "ps2", pytest.param("allreduce", marks=pytest.mark.slow)])
def test_sim_and_dist_agree(sim_and_dist, case):
    (sim, sim_w), (dist, dist_w) = sim_and_dist(case, "sim"), sim_and_dist(case, "dist")
    assert dist["status"] == "done"
    diff = max((sim_w[k] - dist_w[k]).abs().max().item() for k in sim_w)
    assert diff < 1e-5
    for key in ("bytes_sent", "bytes_received", "server_bytes_sent", "server_bytes_received"):
        assert sim["metrics"].get(key) == dist["metrics"].get(key), key


def test_dist_ps_received_bytes_are_the_pulls(sim_and_dist):
    rec, weights = sim_and_dist("ps", "dist")
    size = 4 * sum(t.numel() for t in weights.values())
    pulls = sum(pulls_at(s, 7, 4) for s in range(30))  # 8 warm-up + 11, 15, ..., 27
    assert pulls == 8 + 5
    assert rec["metrics"]["bytes_sent"] == 2 * size * 30
    assert rec["metrics"]["bytes_received"] == 2 * size * pulls
    assert rec["metrics"]["server_bytes_received"] == 2 * size * 30
    assert rec["env"]["world_size"] == 2 and rec["env"]["parameter_servers"] == 1



def test_a_method_that_does_not_bucket_says_so_when_asked_to():
    """SSD-SGD exchanges whole weights after backward: the per-bucket hooks name it and why."""
    method, worker = one_worker_method(SSDSGDParams(), {"w": torch.zeros(3)}, {})
    assert not SSDSGD.can_bucket(method.params)
    with pytest.raises(TypeError, match="method ssdsgd does not exchange per bucket"):
        method.begin_bucket(["w"], [{"w": torch.zeros(3)}], 0)
    with pytest.raises(TypeError, match="calls step\\(\\) after backward"):
        method.finish_step([], [{"w": torch.zeros(3)}], 0.1, 0)


class SlowLink:
    """A parameter server whose push and pull each block for ``delay`` seconds, as a dist worker does on a slow
    link: sleep never returns early, so the time booked as wait has a floor."""

    def __init__(self, delay: float):
        self.delay, self.calls = delay, 0

    def push_all(self, workers, grads, lr, answer_pull):
        self.calls += 1
        time.sleep(self.delay)

    def pull(self, rank, into, control=False):
        self.calls += 1
        time.sleep(self.delay)


@pytest.mark.parametrize("method_name", ["ssdsgd", "baseline"])
def test_time_blocked_in_the_ps_push_and_pull_is_booked_as_wait(method_name):
    """The push and every pull (the warm-up's too) are waiting on the link: the time breakdown must book them
    as wait, not as the unexplained rest the performance model would read as compute."""
    weights = {"w": torch.zeros(3)}
    if method_name == "ssdsgd":
        method, worker = one_worker_method(SSDSGDParams(k=2, warmup=1), weights, {})
    else:
        comm = SimCommunicator(1, num_servers=1)
        tensors = {"w": torch.nn.Parameter(torch.zeros(3))}
        worker = Worker(0, tensors, torch.optim.SGD(tensors.values(), lr=0.0))
        method = Baseline(comm, [worker], BaselineParams(topology="ps"), {})
    method.ps = link = SlowLink(0.02)
    for step in range(4):  # SSD-SGD: 2 warm-up steps (push + pull), then 2 pushes and the pulls of k = 2
        method.step([{"w": torch.ones(3)}], 0.1, step)
    assert link.calls >= 6
    assert method.times.get("wait", 0.0) >= link.calls * link.delay
