"""Every zoo compressor on CUDA tensors averages as on the CPU, with the same bytes in the ledger: the shared
seeds' draws are made on the CPU and moved, so the GPU path differs from the CPU one only in the order its float
sums run (skipped without a GPU; the device check runs it)."""
from __future__ import annotations

import pytest
import torch

from commbench.methods import Worker, registry
from commbench.methods.catalog import CATALOG
from commbench.methods.comm import SimCommunicator

from .test_quantizers import SHAPES, averaged, grads

ZOO = sorted(n for n, e in CATALOG.items() if e.source.startswith("commbench.methods.zoo.")) + ["powersgd-batched"]
VARIANTS = {"qsgd": {"min_size": 1}, "qsgd-elias": {"min_size": 1, "coding": "elias"},
            "randomk-unscaled": {"scaled": False}, "topk-no-memory": {"memory": "none"}}
# PowerSGD's orthogonalisation and products run in another order on the GPU: its factors agree to float32's
# working precision, not to the last bit of a sum
TOLERANCE = {"powersgd-batched": {"rtol": 1e-4, "atol": 1e-7}}


def _on_the_gpu(name, gs, params):
    comm, ws = SimCommunicator(len(gs)), []
    for rank in range(len(gs)):
        p = {k: torch.zeros(s, device="cuda", requires_grad=True) for k, s in SHAPES.items()}
        ws.append(Worker(rank, p, torch.optim.SGD(p.values(), lr=0.0), seed=100 + rank))
    registry.get(name)(comm, ws, registry.params_for(name, params), {}).step(
        [{k: v.cuda() for k, v in g.items()} for g in gs], lr=0.0, step=0)
    return ws, comm


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (the GPU check runs it)")
@pytest.mark.parametrize("case", ZOO + sorted(k for k in VARIANTS if "-" in k))
def test_on_the_gpu_every_zoo_method_averages_as_on_the_cpu(case):
    name, params = case.split("-")[0] if case in VARIANTS else case, VARIANTS.get(case, {})
    gs = grads(3, seed=6)
    on_cpu, cpu_comm, _ = averaged(name, gs, **params)
    ws, comm = _on_the_gpu(name, gs, params)
    for k in SHAPES:
        assert ws[0].params[k].grad.device.type == "cuda"
        torch.testing.assert_close(ws[0].params[k].grad.cpu(), on_cpu[0][k],
                                   **TOLERANCE.get(name, {"rtol": 1e-6, "atol": 1e-9}))
    assert comm.ledger.sent == cpu_comm.ledger.sent
