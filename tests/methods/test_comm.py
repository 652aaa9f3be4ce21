"""Communicators: the collectives' results and the byte ledger, in sim and on real gloo processes."""
from __future__ import annotations

import os
import traceback

import pytest
import torch

from commbench.methods.comm import SimCommunicator, make_dist_communicator

from ..gloo import spawn

WORLD = 3


def payloads(rank: int) -> dict:
    """Per-rank inputs: dense floats, a variable-size uint8 payload (rank 1's is empty), a broadcast buffer."""
    return {
        "dense": torch.arange(6, dtype=torch.float32) * (rank + 1),
        "var": torch.arange(rank * 2 + (0 if rank != 1 else -2), dtype=torch.uint8) + rank,
        "bcast": torch.full((4,), float(rank)),
    }


def exercise(comm) -> dict:
    """The same sequence of calls on any communicator; returns each local worker's view of the results."""
    ranks = comm.local_ranks
    inputs = {r: payloads(r) for r in ranks}
    summed = comm.allreduce([inputs[r]["dense"].clone() for r in ranks])
    gathered = comm.allgather([inputs[r]["var"] for r in ranks])
    empty = comm.allgather([torch.empty(0, dtype=torch.int32) for _ in ranks])
    fixed = comm.allgather([inputs[r]["dense"][:2] for r in ranks], same_size=True)
    bcast = comm.broadcast([inputs[r]["bcast"].clone() for r in ranks], src=2)
    # point to point: 0 -> 2
    got = None
    if 0 in ranks:
        comm.send(torch.tensor([7.0, 8.0]), src=0, dst=2)
    if 2 in ranks:
        got = comm.recv(torch.zeros(2), src=0, dst=2)
    return {r: {"sum": summed[i], "gathered": gathered[i], "empty": empty[i], "fixed": fixed[i],
                "bcast": bcast[i], "p2p": got if r == 2 else None,
                "sent": comm.ledger.sent[r], "received": comm.ledger.received[r]}
            for i, r in enumerate(ranks)}


def expected_bytes(rank: int) -> tuple[int, int]:
    sizes = [len(payloads(r)["var"]) for r in range(WORLD)]
    pad = max(sizes)
    sent = 24                        # allreduce: 6 float32
    sent += 8 + pad                  # allgather: int64 size + padded uint8 payload
    sent += 8                        # empty allgather: the size, no payload
    sent += 8                        # fixed-size allgather: 2 float32, no size exchange
    sent += 16 if rank == 2 else 0   # broadcast source
    sent += 8 if rank == 0 else 0    # p2p sender
    received = 24 + (WORLD - 1) * (8 + pad) + (WORLD - 1) * 8 + (WORLD - 1) * 8
    received += 0 if rank == 2 else 16
    received += 8 if rank == 2 else 0
    return sent, received


def check(results: dict) -> None:
    for r, res in results.items():
        assert torch.equal(res["sum"], torch.arange(6, dtype=torch.float32) * 6)
        assert [t.tolist() for t in res["gathered"]] == [payloads(q)["var"].tolist() for q in range(WORLD)]
        assert all(t.numel() == 0 for t in res["empty"])
        assert torch.equal(torch.stack(res["fixed"]), torch.stack([payloads(q)["dense"][:2] for q in range(WORLD)]))
        assert torch.equal(res["bcast"], torch.full((4,), 2.0))
        if r == 2:
            assert res["p2p"].tolist() == [7.0, 8.0]
        assert (res["sent"], res["received"]) == expected_bytes(r), r


def test_sim_collectives_and_ledger():
    check(exercise(SimCommunicator(WORLD)))


def test_single_worker_counts_nothing():
    comm = SimCommunicator(1)
    comm.allreduce([torch.ones(10)])
    assert comm.ledger.total_sent() == comm.ledger.total_received() == 0


def _dist_worker(rank: int, port: int, queue) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(WORLD))
    try:
        comm = make_dist_communicator(backend="gloo", timeout_s=60)
        res = exercise(comm)
        queue.put((rank, {k: ([t.clone() for t in v] if isinstance(v, list) else v) for k, v in res[rank].items()}))
        comm.close()
    except BaseException:
        queue.put((rank, traceback.format_exc()))
        raise


def test_dist_gloo_matches_sim():
    results = spawn(_dist_worker, WORLD, timeout_s=120)
    check(results)
    sim = exercise(SimCommunicator(WORLD))
    assert {r: (v["sent"], v["received"]) for r, v in results.items()} == \
        {r: (v["sent"], v["received"]) for r, v in sim.items()}


def test_sim_recv_without_send_fails_loudly():
    with pytest.raises(RuntimeError, match="nothing was sent"):
        SimCommunicator(2).recv(torch.zeros(1), src=0, dst=1)
