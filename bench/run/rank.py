"""What one process of a dist run does, by its rank: serve (a parameter server) or train (a worker)."""
from __future__ import annotations

from pathlib import Path

from commbench.config import RunConfig
from commbench.methods.comm import Communicator
from commbench.run.checkpoint import Checkpoints
from commbench.run.node_link import agree_on_node_link
from commbench.run.server import serve
from commbench.run.train import Outcome, Reporter, train


def run_rank(cfg: RunConfig, comm: Communicator, report: Reporter | None = None,
             keep_weights: bool = False, checkpoint_dir: Path | None = None) -> Outcome | None:
    """What one dist process does: serve, if its rank is a parameter server's, else train."""
    if cfg.node_link:  # every process, on every node, before its first exchange
        agree_on_node_link(cfg.node_link, comm)
    serves = bool(comm.local_servers and not comm.local_ranks)
    checkpoints = None
    if checkpoint_dir is not None:
        rank = comm.local_servers[0] if serves else comm.local_ranks[0]
        checkpoints = Checkpoints(Path(checkpoint_dir), cfg.checkpoint_every, key=f"rank{rank}", writer=rank == 0)
    if serves:
        serve(cfg, comm, checkpoints)
        return None
    return train(cfg, comm, report=report, keep_weights=keep_weights, checkpoints=checkpoints)
