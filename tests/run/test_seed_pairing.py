"""One seed fixes a run's initial weights and every worker's data order, whatever the method and the transport.

The paper tables pair each method's run with the baseline run of the same seed and take the spread of the
differences (bench/analysis/papers/stats.py): that is only a paired comparison if the seed, and nothing else,
decides where training starts and which images each worker sees at each step. A method must not draw from the
generators that initialise the model or order the data; sim (one process) and dist (real gloo processes) must
start the same model and feed the same batches.
"""
from __future__ import annotations

import functools
import hashlib
import os
import traceback

import pytest

from commbench.config import resolve
from commbench.methods.comm import SimCommunicator, make_dist_communicator
from commbench.config.resolve import server_count
from commbench.run.train import Trainer, weights_digest

from ..gloo import spawn

METHODS = ("baseline", "terngrad", "bgt", "ssdsgd", "fp16")
WORKERS, BATCHES = 2, 3


def config(root, method: str, seed: int, backend: str):
    return resolve({"task": "lenet-mnist", "dataset": "fashion-mnist", "method": method, "workers": WORKERS, "seed": seed,
                    "backend": backend, "steps": 10, "global_batch": 8, "data_root": str(root), "threads": 1})


def start(trainer: Trainer) -> tuple[str, dict]:
    """The initial weights' digest, and a digest of each local worker's first batches (images and labels)."""
    batches = {}
    for rank in trainer.comm.local_ranks:
        h = hashlib.sha256()
        for _ in range(BATCHES):
            x, y = next(trainer.streams[rank])
            h.update(x.numpy().tobytes())
            h.update(y.numpy().tobytes())
        batches[rank] = h.hexdigest()
    return weights_digest(trainer.models[0].state_dict()), batches


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    return tmp_path_factory.mktemp("data")  # Fashion-MNIST, provisioned from Debian's package (make test)


def sim_start(root, method: str, seed: int):
    cfg = config(root, method, seed, "sim")
    return start(Trainer(cfg, SimCommunicator(WORKERS, num_servers=server_count(cfg)), checkpoints=None))


def test_one_seed_starts_every_method_alike_and_another_seed_does_not(data_root):
    starts = {m: sim_start(data_root, m, seed=3) for m in METHODS}
    assert len({s[0] for s in starts.values()}) == 1, "initial weights differ between methods"
    assert len({tuple(sorted(s[1].items())) for s in starts.values()}) == 1, "data order differs between methods"
    weights, batches = starts["baseline"]
    assert batches[0] != batches[1]  # the workers see different images
    other_weights, other_batches = sim_start(data_root, "baseline", seed=4)
    assert other_weights != weights and other_batches != batches


def _dist_start(rank: int, port: int, queue, root: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(WORKERS))
    try:
        comm = make_dist_communicator(backend="gloo", timeout_s=60)
        out = {m: start(Trainer(config(root, m, 3, "dist"), comm, checkpoints=None)) for m in ("baseline", "terngrad")}
        queue.put((rank, out))
        comm.close()
    except BaseException:
        queue.put((rank, traceback.format_exc()))


def test_dist_starts_where_sim_does(data_root):
    """Real gloo processes: each rank starts the same weights as sim and reads sim's batches of its rank."""
    sim = {m: sim_start(data_root, m, seed=3) for m in ("baseline", "terngrad")}
    results = spawn(functools.partial(_dist_start, root=str(data_root)), WORKERS)
    for method in ("baseline", "terngrad"):
        weights, batches = sim[method]
        for rank in range(WORKERS):
            dist_weights, dist_batches = results[rank][method]
            assert dist_weights == weights and dist_batches == {rank: batches[rank]}
