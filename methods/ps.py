"""A parameter server in the manner of MXNet's kvstore ``dist_sync``, over the communicator's point-to-point.

Keys (parameter tensors) are sharded over S servers as MXNet does: a tensor of at least ``BIGARRAY_BOUND``
elements is cut into S near-equal contiguous pieces, one per server; a smaller one lives whole on server
``(key_index * 9973) % S`` (ps-lite's hash). Every step each worker pushes one message per server (the
concatenation of that server's pieces of its raw data gradient); each server sums the W pushes in rank order,
divides by W, adds weight decay and applies its own optimizer (the workers' optimizer type and settings:
momentum SGD for the papers). When the method pulls, each server sends its weights back in one message.

The server's arithmetic mirrors :class:`commbench.methods.baseline.Baseline` per tensor, so a run that pushes and pulls
every step on a PS computes the same weights as the allreduce baseline, bit for bit.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import torch

from .averaging import MovingAverage
from .comm import Communicator, Handle

BIGARRAY_BOUND = 1_000_000  # MXNET_KVSTORE_BIGARRAY_BOUND's default
KEY_HASH = 9973  # ps-lite: server of a small key = key * 9973 % num_servers


@dataclass(frozen=True)
class Piece:
    """Elements [start, stop) of the flattened tensor ``name``."""

    name: str
    start: int
    stop: int

    @property
    def numel(self) -> int:
        return self.stop - self.start


def shard(sizes: Mapping[str, int], num_servers: int, bound: int = BIGARRAY_BOUND) -> list[list[Piece]]:
    """The pieces each server holds, in key order. ``sizes``: elements per tensor, in parameter order."""
    if num_servers < 1:
        raise ValueError(f"need at least one server, got {num_servers}")
    pieces: list[list[Piece]] = [[] for _ in range(num_servers)]
    for key, (name, numel) in enumerate(sizes.items()):
        if numel >= bound and num_servers > 1:
            edges = [numel * s // num_servers for s in range(num_servers + 1)]
            for s in range(num_servers):
                pieces[s].append(Piece(name, edges[s], edges[s + 1]))
        else:
            pieces[key * KEY_HASH % num_servers].append(Piece(name, 0, numel))
    return pieces


def gather_pieces(tensors: Mapping[str, torch.Tensor], pieces: Sequence[Piece]) -> torch.Tensor:
    """One server's message: its pieces of ``tensors``, concatenated (a new tensor)."""
    if not pieces:
        return torch.empty(0)
    return torch.cat([tensors[p.name].detach().reshape(-1)[p.start:p.stop] for p in pieces])


def scatter_pieces(flat: torch.Tensor, pieces: Sequence[Piece], into: Mapping[str, torch.Tensor]) -> None:
    """Write a server's message back into the named tensors, in place."""
    offset = 0
    with torch.no_grad():
        for p in pieces:
            into[p.name].view(-1)[p.start:p.stop].copy_(flat[offset:offset + p.numel])
            offset += p.numel


class ServerShard:
    """One server's part of the global state: a tensor per piece and an optimizer over them."""

    def __init__(self, rank: int, pieces: Sequence[Piece], init: Mapping[str, torch.Tensor],
                 optimizer: torch.optim.Optimizer, weight_decay: Mapping[str, float], num_workers: int,
                 ema: float = 0.0):
        self.rank, self.pieces, self.num_workers = rank, list(pieces), num_workers
        self.weights = [init[p.name].detach().reshape(-1)[p.start:p.stop].clone() for p in self.pieces]
        self.decay = [weight_decay.get(p.name, 0.0) for p in self.pieces]
        # The workers' optimizer class and settings, over this server's tensors (MXNet pickles the optimizer
        # to the servers the same way).
        self.optimizer = type(optimizer)(self.weights, **optimizer.defaults) if self.weights else None
        self.numel = sum(p.numel for p in self.pieces)
        # The evaluation average lives where the weights do, as TF's code places it on the PS.
        self.average = MovingAverage(dict(enumerate(self.weights)), ema) if ema and self.weights else None

    def message(self, averaged: bool = False) -> torch.Tensor:
        """The weights (or their moving average) as one flat message (a new tensor)."""
        if not self.weights:
            return torch.empty(0)
        return torch.cat(list(self.average.shadow.values()) if averaged and self.average else self.weights)

    def apply(self, pushes: Sequence[torch.Tensor], lr: float) -> None:
        """Eq. 6: average the workers' pushes (rank order), add weight decay, take one optimizer step."""
        if self.optimizer is None:
            return
        total = pushes[0].clone()
        for p in pushes[1:]:
            total += p
        mean = total / self.num_workers
        offset = 0
        for w, wd, piece in zip(self.weights, self.decay, self.pieces):
            g = mean[offset:offset + piece.numel]
            w.grad = g.add(w, alpha=wd) if wd else g
            offset += piece.numel
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.optimizer.step()
        if self.average:
            self.average.update()

    def state_dict(self) -> dict:
        return {"weights": [w.detach().clone() for w in self.weights],
                "optimizer": self.optimizer.state_dict() if self.optimizer else None,
                "average": self.average.state_dict() if self.average else None}

    def load_state_dict(self, state: dict) -> None:
        with torch.no_grad():
            for w, saved in zip(self.weights, state["weights"]):
                w.copy_(saved)
        if self.optimizer is not None:
            self.optimizer.load_state_dict(state["optimizer"])
        if self.average:
            self.average.load_state_dict(state["average"])


class ParameterServer:
    """The PS exchange for the workers of one process and the servers that live in it.

    Under ``sim`` every worker and every server is local and the servers run inline between the pushes and the
    pulls. Under ``dist`` a worker process holds one worker and no server, and a server process (see
    :meth:`serve_step`) one server and no worker.
    """

    def __init__(self, comm: Communicator, init: Mapping[str, torch.Tensor], optimizer: torch.optim.Optimizer,
                 weight_decay: Mapping[str, float], servers: int, ema: float = 0.0):
        if comm.num_servers != servers:
            raise ValueError(f"servers={servers}, but the communicator has {comm.num_servers} server ranks")
        self.comm = comm
        self.names = list(init)
        self.shapes = {n: init[n].shape for n in self.names}
        self.device = init[self.names[0]].device
        self.dtype = init[self.names[0]].dtype  # messages travel in the parameters' own precision
        self.pieces = shard({n: init[n].numel() for n in self.names}, comm.num_servers)
        self.first_server = comm.world_size
        self.servers = {s: ServerShard(s, self.pieces[s - self.first_server], init, optimizer, weight_decay,
                                       comm.world_size, ema) for s in comm.local_servers}
        self._sends: list[Handle] = []

    def _pieces(self, server: int) -> list[Piece]:
        return self.pieces[server - self.first_server]

    # -- worker side ----------------------------------------------------------------------------------
    def push(self, rank: int, grads: Mapping[str, torch.Tensor]) -> None:
        """Worker ``rank`` sends its raw gradient, one message per server; the sends complete in the
        background (waited for at the next push or pull)."""
        for server in self.comm.server_ranks:
            if self._pieces(server):
                self._sends.append(self.comm.isend(gather_pieces(grads, self._pieces(server)), rank, server))

    def push_all(self, workers, grads, lr: float, answer_pull: bool) -> None:
        """Every local worker pushes; then the servers that live here (all under sim, none in a dist worker)
        apply the step and, if the workers pull now, send the weights back."""
        for worker, g in zip(workers, grads):
            self.push(worker.rank, g)
        self.serve_step(lr, answer_pull)

    def pull(self, rank: int, into: Mapping[str, torch.Tensor], control: bool = False) -> None:
        """Worker ``rank`` receives every server's weights and writes them into ``into`` (w' = w)."""
        self.wait_sends()
        handles = [(server, self.comm.irecv(torch.empty(sum(p.numel for p in self._pieces(server)), device=self.device,
                                                        dtype=self.dtype),
                                            server, rank, control=control))
                   for server in self.comm.server_ranks if self._pieces(server)]
        for server, handle in handles:
            scatter_pieces(handle.wait(), self._pieces(server), into)

    def wait_sends(self) -> None:
        for handle in self._sends:
            handle.wait()
        self._sends.clear()

    # -- server side ----------------------------------------------------------------------------------
    def serve_step(self, lr: float, answer_pull: bool) -> None:
        """Each local server: receive the W pushes, apply them, and (if the workers pull now) send back."""
        self.wait_sends()
        for server in self.servers.values():
            if not server.numel:
                continue
            handles = [self.comm.irecv(torch.empty(server.numel, device=self.device, dtype=self.dtype), worker,
                                       server.rank)
                       for worker in range(self.comm.world_size)]
            server.apply([h.wait() for h in handles], lr)
            if answer_pull:
                message = server.message()
                self._sends.extend(self.comm.isend(message, server.rank, worker)
                                   for worker in range(self.comm.world_size))

    def send_global(self, dst: int = 0) -> None:
        """Each local server sends its (averaged) weights to worker ``dst`` for evaluation. This is the
        harness looking, not the method exchanging: a control transfer, not counted."""
        for server in self.servers.values():
            if server.numel:
                self._sends.append(self.comm.isend(server.message(averaged=True), server.rank, dst, control=True))
        self.wait_sends()

    def fetch_global(self, rank: int = 0) -> dict[str, torch.Tensor]:
        """Worker ``rank``'s side of :meth:`send_global` (dist), or the local servers' state read directly
        (sim, where every server is here): the global weights, averaged if the servers keep an average."""
        out = {n: torch.empty(self.shapes[n], device=self.device, dtype=self.dtype) for n in self.names}
        if len(self.servers) == self.comm.num_servers:
            for server in self.servers.values():
                scatter_pieces(server.message(averaged=True), server.pieces, out)
        else:
            self.pull(rank, out, control=True)
        return out

    def state_dict(self) -> dict:
        return {s: server.state_dict() for s, server in self.servers.items()}

    def load_state_dict(self, state: dict) -> None:
        for s, server in self.servers.items():
            server.load_state_dict(state[s])


class ServerRole:
    """What a dist server process runs each step: serve the pushes, answer the pulls the schedule says the
    workers make (``pulls_at(step)``), and send the weights to worker 0 when it evaluates them."""

    def __init__(self, ps: ParameterServer, pulls_at, answers_eval: bool):
        self.ps, self.pulls_at, self.answers_eval = ps, pulls_at, answers_eval

    def step(self, step: int, lr: float) -> None:
        self.ps.serve_step(lr, self.pulls_at(step))

    def send_global(self) -> None:
        if self.answers_eval:
            self.ps.send_global(0)

    def state_dict(self) -> dict:
        self.ps.wait_sends()
        return self.ps.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.ps.load_state_dict(state)

    def close(self) -> None:
        self.ps.wait_sends()
