"""DDP communication hooks (methods.ddp_hooks) on real gloo processes.

The averaged gradients a hook hands to DDP equal, bit for bit, those the harness's own TernGrad and WGT/BGT/QGT
compute on the sim transport for the same local gradients and seeds, including after DDP rebuilds its
buckets (second iteration) and with residuals carried over (threshold methods). A short run trains with the
hook; unsupported settings fail at state construction.
"""
from __future__ import annotations

import functools
import os
import traceback
from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F

from commbench.methods import Worker
from commbench.methods.comm import ByteLedger, SimCommunicator
from commbench.methods.ddp_hooks import TernGradHookState, ThresholdHookState, terngrad_hook, threshold_hook
from commbench.methods.terngrad import TernGrad, TernGradParams
from commbench.methods.threshold import BGT, QGT, WGT, ThresholdParams
from commbench.tasks.data import make_synthetic
from commbench.tasks.models import LeNet

from ..gloo import spawn

WORLD = 2
SEED = 1000
LR = 0.01
TIMEOUT_S = 120


@dataclass(frozen=True)
class Case:
    method: str                       # "terngrad", "wgt", "bgt" or "qgt"
    iterations: int
    terngrad: TernGradParams | None = None
    bucket_cap_mb: float = 25.0       # DDP's default; smaller caps give more buckets that mix layers
    state_from_ddp: bool = True       # build the state from the DDP model (module. prefix) or the bare module
    threshold: float = 1e-3           # T of the threshold methods: 1e-3 sends about a third of the elements per
                                      # step (bitmap payloads), 1e-2 a few percent (mostly sparse payloads)


CASES = {
    "terngrad": Case("terngrad", 2, TernGradParams(wd_in_grad=False)),
    "terngrad-base3": Case("terngrad", 2, TernGradParams(wd_in_grad=False, packing="base3"),
                           bucket_cap_mb=1.0, state_from_ddp=False),
    "terngrad-floats": Case("terngrad", 2, TernGradParams(wd_in_grad=False, float_last_layer=True, min_size=600),
                            bucket_cap_mb=0.05),
    "terngrad-own-scalers": Case("terngrad", 2, TernGradParams(wd_in_grad=False, scaler_sharing=False,
                                                               scaler="std")),
    "wgt": Case("wgt", 3),
    "bgt": Case("bgt", 3, bucket_cap_mb=1.0),
    "qgt": Case("qgt", 3, state_from_ddp=False, threshold=1e-2),
}
THRESHOLD_METHODS = {"wgt": WGT, "bgt": BGT, "qgt": QGT}


def batch(rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each rank's own fixed batch."""
    g = torch.Generator().manual_seed(rank)
    return torch.randn((8, 1, 28, 28), generator=g), torch.randint(10, (8,), generator=g)


def lenet() -> LeNet:
    torch.manual_seed(0)
    return LeNet("tf")


# -- the DDP side, in spawned processes ----------------------------------------------------------------------
def _join(rank: int, port: int) -> None:
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(WORLD))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="env://")


def _run_case(rank: int, case: Case) -> dict:
    """Train ``case.iterations`` steps under DDP with the hook; per iteration, the bucket inputs (local
    gradients) and the averaged gradients DDP leaves in p.grad, as numpy arrays (pickled by value)."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = lenet()
    ddp = DDP(model, bucket_cap_mb=case.bucket_cap_mb)
    owner = ddp if case.state_from_ddp else model
    ledger = ByteLedger()
    if case.method == "terngrad":
        state = TernGradHookState(owner, case.terngrad, worker_seed=SEED + rank, ledger=ledger)
        hook = terngrad_hook
    else:
        state, hook = ThresholdHookState(owner, case.method, case.threshold, ledger=ledger), threshold_hook
    names = {id(p): n for n, p in model.named_parameters()}
    local: dict[str, torch.Tensor] = {}
    buckets: list[int] = []
    shapes: list[tuple[int, int, int]] = []  # per bucket call: ternarized tensors, their elements, float elements

    @functools.wraps(hook)  # DDP checks the signature, which inspect follows to the real hook
    def recording(state, bucket):
        buckets.append(bucket.index())
        if case.method == "terngrad":
            tern = [p.numel() for p in bucket.parameters() if state.index[p] is not None]
            floats = [p.numel() for p in bucket.parameters() if state.index[p] is None]
            shapes.append((len(tern), sum(tern), sum(floats)))
        for p, g in zip(bucket.parameters(), bucket.gradients()):
            local[names[id(p)]] = g.detach().clone().view_as(p)
        return hook(state, bucket)

    ddp.register_comm_hook(state, recording)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=LR)
    x, y = batch(rank)
    iterations = []
    for _ in range(case.iterations):
        optimizer.zero_grad()
        buckets.clear()
        F.cross_entropy(ddp(x), y).backward()
        iterations.append({"local": {n: t.numpy() for n, t in local.items()},
                           "avg": {n: p.grad.detach().clone().numpy() for n, p in model.named_parameters()},
                           "buckets": len(buckets)})
        optimizer.step()
    return {"iterations": iterations, "step": getattr(state, "step", None), "shapes": shapes,
            "sent": ledger.total_sent(), "received": ledger.total_received()}


def _equality_worker(rank: int, port: int, queue) -> None:
    try:
        _join(rank, port)
        queue.put((rank, {name: _run_case(rank, case) for name, case in CASES.items()}))
    except BaseException:
        queue.put((rank, traceback.format_exc()))
        raise


def _train_worker(rank: int, port: int, queue) -> None:
    try:
        _join(rank, port)
        from torch.nn.parallel import DistributedDataParallel as DDP

        data = make_synthetic((1, 28, 28), 10, 640, 64, signal=0.5)  # learnable within 30 steps
        model = lenet()
        ddp = DDP(model)
        ddp.register_comm_hook(TernGradHookState(ddp, TernGradParams(wd_in_grad=False), SEED + rank), terngrad_hook)
        optimizer = torch.optim.SGD(ddp.parameters(), lr=0.02, momentum=0.9)
        x, y = data.train_x[rank::WORLD], data.train_y[rank::WORLD]

        def full_loss() -> float:
            with torch.no_grad():
                return F.cross_entropy(model(data.train_x), data.train_y).item()

        start = full_loss()
        for step in range(30):
            i = (step * 32) % x.shape[0]
            optimizer.zero_grad()
            F.cross_entropy(ddp(x[i:i + 32]), y[i:i + 32]).backward()
            optimizer.step()
        queue.put((rank, {"start": start, "end": full_loss()}))
    except BaseException:
        queue.put((rank, traceback.format_exc()))
        raise


@pytest.fixture(scope="module")
def ddp_results() -> dict[int, dict]:
    """Every case, run once on 2 gloo processes (one spawn for the module)."""
    return spawn(_equality_worker, WORLD, TIMEOUT_S)


# -- the harness side, in this process ------------------------------------------------------------------------
def harness_run(case: Case) -> list[dict]:
    """The harness's method on the sim transport: per iteration, each worker's local gradient and the
    averaged gradient ``apply_update`` leaves in p.grad."""
    models = [lenet() for _ in range(WORLD)]
    comm = SimCommunicator(WORLD)
    workers = [Worker(r, dict(m.named_parameters()), torch.optim.SGD(m.parameters(), lr=0.0), seed=SEED + r)
               for r, m in enumerate(models)]
    if case.method == "terngrad":
        method = TernGrad(comm, workers, case.terngrad, weight_decay={})
    else:
        method = THRESHOLD_METHODS[case.method](comm, workers, ThresholdParams(case.threshold), weight_decay={})
    batches = [batch(r) for r in range(WORLD)]
    iterations = []
    for it in range(case.iterations):
        grads = []
        for m, (x, y) in zip(models, batches):
            m.zero_grad()
            F.cross_entropy(m(x), y).backward()
            grads.append({n: p.grad.clone() for n, p in m.named_parameters()})
        method.step(grads, lr=LR, step=it)
        iterations.append({"local": grads, "avg": [{n: p.grad.clone() for n, p in m.named_parameters()}
                                                   for m in models]})
    return iterations


@pytest.fixture
def one_thread():
    """The DDP workers run on one thread; so does the reproduction, so that local gradients agree exactly."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("name", list(CASES))
def test_hook_matches_harness(name, ddp_results, one_thread):
    case = CASES[name]
    expected = harness_run(case)
    names = list(expected[0]["local"][0])
    for rank in range(WORLD):
        got = ddp_results[rank][name]
        if case.method == "terngrad":
            assert got["step"] == case.iterations
        assert len(got["iterations"]) == case.iterations
        for it, (mine, theirs) in enumerate(zip(got["iterations"], expected)):
            where = f"{name}, rank {rank}, iteration {it}"
            # Precondition: both sides start from the same local gradient (same weights, batch and threads).
            for n in names:
                assert torch.equal(torch.from_numpy(mine["local"][n]), theirs["local"][rank][n]), f"{where}: local {n}"
            for n in names:
                avg = torch.from_numpy(mine["avg"][n])
                diff = (avg - theirs["avg"][rank][n]).abs().max().item()
                assert diff == 0.0, f"{where}: {n} differs from the harness by {diff}"
        if case.bucket_cap_mb <= 1:  # buckets rebuilt after the first iteration mix layers, in reverse order
            assert got["iterations"][-1]["buckets"] >= 2, got["iterations"][-1]["buckets"]

    # The hook really compressed: not the plain mean of the local gradients.
    first = expected[0]
    plain = {n: sum(g[n] for g in first["local"]) / WORLD for n in names}
    avg = {n: torch.from_numpy(ddp_results[0][name]["iterations"][0]["avg"][n]) for n in names}
    if case.method == "terngrad":
        params = case.terngrad
        floats = {n for n in names if plain[n].numel() < params.min_size}
        if params.float_last_layer:
            floats |= {"classifier.3.weight", "classifier.3.bias"}
        for n in names:
            if n in floats:
                assert torch.equal(avg[n], plain[n]), n
            elif params.scaler_sharing:  # mean of N trits times one shared scaler: at most 2N + 1 levels
                assert avg[n].unique().numel() <= 2 * WORLD + 1, n
            else:
                assert not torch.equal(avg[n], plain[n]), n
        assert floats or not params.float_last_layer
    else:
        flat = torch.cat([avg[n].reshape(-1) for n in names])
        sent = int((flat != 0).sum())
        assert 0 < sent < flat.numel() // 2, f"threshold {case.threshold} sends {sent} of {flat.numel()} elements"


def test_training_with_terngrad_hook_learns():
    results = spawn(_train_worker, WORLD, TIMEOUT_S)
    assert results[0] == results[1]  # identical replicas: the hook gives every rank the same gradient
    assert results[0]["end"] < 0.6 * results[0]["start"], results[0]


def test_unsupported_settings_fail_at_state_construction():
    model = LeNet("tf")
    with pytest.raises(ValueError, match="wd_in_grad"):
        TernGradHookState(model, TernGradParams(), worker_seed=0)
    with pytest.raises(ValueError, match="layerwise"):
        TernGradHookState(model, TernGradParams(wd_in_grad=False, layerwise=False), worker_seed=0)
    with pytest.raises(ValueError, match="kind"):
        ThresholdHookState(model, "topk", 1e-3)
    with pytest.raises(ValueError, match="threshold"):
        ThresholdHookState(model, "wgt", 0.0)


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c.method == "terngrad"])
def test_the_terngrad_hook_counts_its_bytes_as_the_harness_does(name, ddp_results):
    """Counted by hand from the buckets DDP handed over: per bucket of T ternarized tensors (n elements) and f
    float elements, the shared scalers' all_gather (4T bytes out, 4T in from the other rank), the packed trits
    (ceil(n/4) bytes, or ceil(n/5) in base 3; own scalers travel in front of them) and the floats' all_reduce
    (4f out, 4f in)."""
    case = CASES[name]
    p = case.terngrad
    per_byte = 4 if p.packing == "2bit" else 5
    for rank in range(WORLD):
        result = ddp_results[rank][name]
        sent = received = 0
        for tensors, n, f in result["shapes"]:
            packed = -(-n // per_byte) if n else 0
            scalers = 4 * tensors
            payload = packed + (0 if p.scaler_sharing else scalers) if n else 0
            sent += (scalers if p.scaler_sharing and n else 0) + payload + 4 * f
            received += (scalers if p.scaler_sharing and n else 0) + (WORLD - 1) * payload + 4 * f
        assert (result["sent"], result["received"]) == (sent, received), rank
        assert result["sent"] > 0


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c.method != "terngrad"])
def test_the_threshold_hook_counts_its_bytes(name, ddp_results):
    """Two ranks: each sends its padded payload and its 8-byte size per bucket and receives the other's, so
    what one rank sends the other receives."""
    sent = [ddp_results[r][name]["sent"] for r in range(WORLD)]
    received = [ddp_results[r][name]["received"] for r in range(WORLD)]
    assert sent == received and sent[0] == sent[1] and sent[0] > 8 * CASES[name].iterations
