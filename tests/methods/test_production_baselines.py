"""The baselines people run instead of a compression method: fp16 and bf16 all-reduce and PowerSGD. Each must
compute what torch's own DDP communication hook computes (bit for bit, on real gloo processes), count its
bytes exactly, and give the same weights and bytes under sim and dist, overlapped with backward or not."""
from __future__ import annotations

import os
import traceback

import pytest
import torch
import torch.nn as nn

from commbench.methods import Worker
from commbench.methods.comm import SimCommunicator, make_dist_communicator
from commbench.methods.lowprec import BF16, FP16
from commbench.methods.powersgd import BatchedPowerSGD, PowerSGD, PowerSGDParams

from ..gloo import spawn

WORLD, STEPS = 2, 5


def model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(48, 32), nn.ReLU(), nn.Linear(32, 10))


def batch(rank: int, step: int):
    g = torch.Generator().manual_seed(100 * step + rank)
    return torch.randn(16, 48, generator=g), torch.randint(0, 10, (16,), generator=g)


def local_grads(net: nn.Module, rank: int, step: int) -> dict:
    net.zero_grad(set_to_none=True)
    x, y = batch(rank, step)
    nn.functional.cross_entropy(net(x), y).backward()
    return {n: p.grad.detach().clone() for n, p in net.named_parameters()}


CASES = {"fp16": lambda: (FP16, None), "bf16": lambda: (BF16, None),
         "powersgd": lambda: (PowerSGD, PowerSGDParams(rank=2, start_iter=2)),
         "powersgd-batched": lambda: (BatchedPowerSGD, PowerSGDParams(rank=2, start_iter=2))}


def _against_torch(rank: int, port: int, queue) -> None:
    """Per step: torch's hook on a DDP model, and the method on the same local gradients (lr 0: the gradient
    the method hands to the optimizer is its average)."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
    from torch.nn.parallel import DistributedDataParallel as DDP

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(WORLD))
    # torch 2.14's batched_powerSGD_hook hands its 2-D Q and P to an _orthogonalize that asserts a batch (3-D) and
    # fails at its first compressed step; the same arithmetic on a batch of one is what it means
    orthogonalize = powerSGD_hook._orthogonalize
    powerSGD_hook._orthogonalize = lambda m, epsilon=0: orthogonalize(m.unsqueeze(0) if m.dim() == 2 else m, epsilon)
    try:
        comm = make_dist_communicator(backend="gloo", timeout_s=60)
        out = {}
        for name, make in CASES.items():
            cls, params = make()
            ddp = DDP(model(), bucket_cap_mb=25)
            if name.startswith("powersgd"):
                state = powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=2,
                                                    start_powerSGD_iter=2)
                ddp.register_comm_hook(state, powerSGD_hook.powerSGD_hook if name == "powersgd"
                                       else powerSGD_hook.batched_powerSGD_hook)
            else:
                ddp.register_comm_hook(None, default_hooks.fp16_compress_hook if name == "fp16"
                                       else default_hooks.bf16_compress_hook)
            ours = model()
            tensors = dict(ours.named_parameters())
            worker = Worker(rank, tensors, torch.optim.SGD(tensors.values(), lr=0.0))
            method = cls(comm, [worker], params or cls.Params(), {})
            same = []
            for step in range(STEPS):
                ddp.zero_grad(set_to_none=True)
                x, y = batch(rank, step)
                nn.functional.cross_entropy(ddp(x), y).backward()
                theirs = {n.removeprefix("module."): p.grad.clone() for n, p in ddp.named_parameters()}
                grads = local_grads(ours, rank, step)
                method.finish_step([method.begin_bucket(list(reversed(list(grads))), [grads], step)], [grads],
                                   0.0, step)
                same.append(all(torch.equal(theirs[n], tensors[n].grad) for n in grads))
            out[name] = same
        queue.put((rank, out))
        comm.close()
    except BaseException:
        queue.put((rank, traceback.format_exc()))
        raise


def test_each_method_computes_what_torchs_ddp_hook_computes():
    results = spawn(_against_torch, WORLD, timeout_s=180)
    for rank in range(WORLD):
        for name, same in results[rank].items():
            assert all(same), (rank, name, same)


@pytest.mark.parametrize("cls,width", [(FP16, 2), (BF16, 2)])
def test_half_precision_bytes_by_hand(cls, width):
    net = model()
    numel = sum(p.numel() for p in net.parameters())
    comm = SimCommunicator(WORLD)
    workers = [Worker(r, dict(model().named_parameters()), torch.optim.SGD(model().parameters(), lr=0.0))
               for r in range(WORLD)]
    method = cls(comm, workers, cls.Params(), {})
    grads = [local_grads(net, r, 0) for r in range(WORLD)]
    method.step(grads, 0.0, 0)
    assert comm.ledger.sent[0] == comm.ledger.received[0] == width * numel


def bytes_of_four_steps(cls) -> int:
    """What worker 0 sends in 4 steps of ``cls`` at rank 2 with start_iter 2: two plain, two compressed."""
    net = model()
    comm = SimCommunicator(WORLD)
    workers = [Worker(r, dict(model().named_parameters()), torch.optim.SGD(model().parameters(), lr=0.0))
               for r in range(WORLD)]
    method = cls(comm, workers, PowerSGDParams(rank=2, start_iter=2), {})
    for step in range(4):
        method.step([local_grads(net, r, step) for r in range(WORLD)], 0.0, step)
    return comm.ledger.sent[0]


def test_powersgd_bytes_by_hand():
    """Linear(48, 32) and Linear(32, 10) at rank 2: the weights compress ((32 + 48) 2 = 160 < 1536 / 2;
    (10 + 32) 2 = 84 < 320 / 2), the biases (42 elements) do not. P: 32 x 2 + 10 x 2 = 84 elements, Q: 48 x 2 +
    32 x 2 = 160: (42 + 84 + 160) x 4 = 1,144 bytes per compressed step, against 4 x 1,898 before start_iter."""
    assert bytes_of_four_steps(PowerSGD) == 2 * 4 * 1898 + 2 * 1144


def test_batched_powersgd_bytes_by_hand():
    """The whole gradient (1,898 elements) as one 44 x 44 matrix (1,936, zero-padded) at rank 2: P and Q 44 x 2
    each, (88 + 88) x 4 = 704 bytes per compressed step and worker, nothing sent uncompressed."""
    assert bytes_of_four_steps(BatchedPowerSGD) == 2 * 4 * 1898 + 2 * 704


def test_powersgd_refuses_torchs_invalid_start():
    with pytest.raises(ValueError, match="start_iter must be > 1"):
        PowerSGDParams(start_iter=1)


def test_a_short_powersgd_run_compresses_by_default_and_one_that_never_does_says_so(tmp_path):
    """torch's 1,000 plain steps would make a 60-step PowerSGD run the baseline under another name: by default it
    compresses from a tenth of the run (step 6), and sends fewer bytes than the baseline; a start_iter the run
    never reaches is named in the dry run and in the run's summary line."""
    import json

    from ..conftest import commbench

    common = ["--task", "lenet-mnist", "--dataset", "fashion-mnist", "--workers", "2", "--backend", "sim",
              "--steps", "60", "--results", str(tmp_path), "--set", "eval.every=60"]
    sent = {}
    for method in ("baseline", "powersgd"):
        done = commbench("run", "--method", method, *common)
        assert done.returncode == 0, done.stderr
        assert "never compresses" not in done.stdout
        [path] = [p for p in (tmp_path / "runs").glob(f"*_{method}_*.json")]
        record = json.loads(path.read_text())
        sent[method] = record["metrics"]["bytes_sent"]
        if method == "powersgd":
            assert record["config"]["method_params"]["start_iter"] == 6
            assert record["config"]["sources"]["method.start_iter"].startswith("powersgd default: min(1000")
    assert sent["powersgd"] < sent["baseline"] / 2
    idle = ["--method", "powersgd", *common, "--set", "method.start_iter=1000"]
    dry = commbench("run", *idle, "--dry-run")
    assert "note: powersgd never compresses: start_iter 1000 >= 60 steps" in dry.stdout
    ran = commbench("run", *idle)
    assert ran.returncode == 0 and "note: powersgd never compresses" in ran.stdout


class _Capturing(SimCommunicator):
    """A sim communicator that keeps what each all-reduce was handed: the payloads of PowerSGD's rounds."""

    def __init__(self, world: int):
        super().__init__(world)
        self.handed: list[list[torch.Tensor]] = []

    def allreduce_async(self, tensors):
        self.handed.append([t.clone() for t in tensors])
        return super().allreduce_async(tensors)

    def allreduce(self, tensors):
        self.handed.append([t.clone() for t in tensors])
        return super().allreduce(tensors)


def _rounds(grads: list[dict]) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """One compressed PowerSGD step (the third: after two plain ones) of len(grads) workers: each worker's P and Q
    payloads, as handed to the all-reduces (no error feedback: the input is the gradient itself)."""
    comm = _Capturing(len(grads))
    workers = [Worker(r, dict(model().named_parameters()), torch.optim.SGD(model().parameters(), lr=0.0))
               for r in range(len(grads))]
    method = PowerSGD(comm, workers, PowerSGDParams(rank=2, start_iter=2, error_feedback=False), {})
    for step in range(3):
        method.step(grads, 0.0, step)
    _, p, q = comm.handed[-3:]  # the plain tensors, P, Q
    return p, q


def test_each_powersgd_round_is_linear_as_its_all_reduce_assumes():
    """The contract PowerSGD's all-reduces rest on, round by round: under the same Q, P = M Q of two workers' inputs
    sums to P of their sum; under the same P, so does Q = M^T P (float32 matmuls: equal to rounding). The Q round's
    P is the orthogonalized all-reduced P, which the sum of the inputs gives again up to rounding."""
    net = model()
    a, b = local_grads(net, 0, 0), local_grads(net, 1, 0)
    both = {n: a[n] + b[n] for n in a}
    (pa, pb), (qa, qb) = _rounds([a, b])
    (p_sum,), (q_sum,) = _rounds([both])
    torch.testing.assert_close(pa + pb, p_sum, rtol=1e-5, atol=1e-6 * float(p_sum.abs().max()))
    torch.testing.assert_close(qa + qb, q_sum, rtol=1e-4, atol=1e-5 * float(q_sum.abs().max()))
    assert not torch.allclose(pa, pb)  # two workers' payloads, not one twice
