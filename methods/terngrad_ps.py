"""TernGrad on parameter servers, as the paper runs it (Sec. 3.1, Figure 1: parameter localization).

Every worker keeps its own copy of the weights (initialised alike, so they stay alike) and the servers keep no
weights at all: they hold *gradients*. Each step every worker pushes its packed trits to the servers (tensors
sharded over S servers as MXNet/ps-lite shard keys, :func:`commbench.methods.ps.shard`); each server sums the N workers'
trits per element into an integer level in [-N, N] and sends the levels back, packed at ceil(log2(2N + 1))
bits each (5 bits at N = 8). With scaler sharing every worker already holds the shared scalers (they travel
in the workers' small all-gather, the paper's "2N floating scalers"), so the average is level x s / N on
every worker, the same numbers as the all-gather topology's :func:`commbench.methods.terngrad.mean_of_levels`.

Tensors kept in float32 (``float_last_layer``, ``min_size``) are pushed as float32 and the server returns
their sum, added in rank order.
"""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

import torch

from .codecs.bits import as_bytes, from_bytes, level_bits, pack_uint, unpack_uint
from .comm import Communicator, Handle
from .ps import Piece, shard


class TernaryExchange:
    """The push and pull of ternary gradients, worker side and server side, for the workers and servers of
    one process (under sim: all of them; under dist: one worker, or one server)."""

    def __init__(self, comm: Communicator, sizes: Mapping[str, int], ternary: Sequence[str],
                 pack: Callable[[torch.Tensor], torch.Tensor], unpack: Callable[[torch.Tensor, int], torch.Tensor],
                 packed_size: Callable[[int], int], device: torch.device):
        self.comm, self.pack, self.unpack, self.packed_size, self.device = comm, pack, unpack, packed_size, device
        self.ternary = set(ternary)
        # where each ternarized tensor starts in a worker's flat vector of trits (ternarized tensors, in order)
        self.offset, at = {}, 0
        for name in ternary:
            self.offset[name] = at
            at += sizes[name]
        self.n_tern = at
        self.width = level_bits(comm.world_size)
        self.pieces = {server: pieces for server, pieces in zip(comm.server_ranks, shard(dict(sizes), comm.num_servers))}
        self._sends: list[Handle] = []

    # -- what one server holds ------------------------------------------------------------------------------
    def _split(self, server: int) -> tuple[list[Piece], list[Piece]]:
        pieces = self.pieces[server]
        return [p for p in pieces if p.name in self.ternary], [p for p in pieces if p.name not in self.ternary]

    def _counts(self, server: int) -> tuple[int, int]:
        tern, floats = self._split(server)
        return sum(p.numel for p in tern), sum(p.numel for p in floats)

    def push_size(self, server: int) -> int:
        n_tern, n_float = self._counts(server)
        return (self.packed_size(n_tern) if n_tern else 0) + 4 * n_float

    def reply_size(self, server: int) -> int:
        n_tern, n_float = self._counts(server)
        return (n_tern * self.width + 7) // 8 + 4 * n_float

    # -- worker side ----------------------------------------------------------------------------------------
    def push(self, rank: int, trits: torch.Tensor, floats: Mapping[str, torch.Tensor]) -> None:
        """Worker ``rank`` sends each server its pieces: packed trits, then float32 values (sent in the
        background, waited for at the pull)."""
        for server in self.comm.server_ranks:
            tern, flt = self._split(server)
            parts = []
            if tern:
                parts.append(self.pack(torch.cat([trits[self.offset[p.name] + p.start:self.offset[p.name] + p.stop]
                                                  for p in tern])))
            if flt:
                parts.append(as_bytes(torch.cat([floats[p.name].reshape(-1)[p.start:p.stop] for p in flt])))
            if parts:
                self._sends.append(self.comm.isend(torch.cat(parts), rank, server))

    def pull(self, rank: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Worker ``rank`` receives every server's reply: the levels (int16, the flat layout of the trits) and the
        float tensors' sums over the workers (flat, by name)."""
        self.wait_sends()
        handles = [(server, self.comm.irecv(torch.empty(self.reply_size(server), dtype=torch.uint8, device=self.device),
                                            server, rank))
                   for server in self.comm.server_ranks if self.pieces[server]]
        levels = torch.empty(self.n_tern, dtype=torch.int16, device=self.device)
        sums: dict[str, torch.Tensor] = {}
        for server, handle in handles:
            reply = handle.wait()
            tern, flt = self._split(server)
            n_tern, n_float = self._counts(server)
            packed_levels = (n_tern * self.width + 7) // 8
            if tern:
                values = unpack_uint(reply[:packed_levels], n_tern, self.width).to(torch.int16) - self.comm.world_size
                at = 0
                for p in tern:
                    levels[self.offset[p.name] + p.start:self.offset[p.name] + p.stop] = values[at:at + p.numel]
                    at += p.numel
            if flt:
                values, at = from_bytes(reply[packed_levels:], torch.float32), 0
                for p in flt:
                    sums.setdefault(p.name, []).append((p.start, values[at:at + p.numel]))
                    at += p.numel
        return levels, {name: torch.cat([v for _, v in sorted(parts, key=lambda x: x[0])])
                        for name, parts in sums.items()}

    def wait_sends(self) -> None:
        for handle in self._sends:
            handle.wait()
        self._sends.clear()

    # -- server side ----------------------------------------------------------------------------------------
    def serve_step(self, local_servers: Sequence[int]) -> None:
        """Each server of this process: receive the N pushes, sum the trits into levels (and the floats, in rank
        order), and send the packed levels back to every worker."""
        self.wait_sends()
        workers = self.comm.world_size
        for server in local_servers:
            if not self.pieces[server]:
                continue
            n_tern, n_float = self._counts(server)
            handles = [self.comm.irecv(torch.empty(self.push_size(server), dtype=torch.uint8, device=self.device),
                                       worker, server) for worker in range(workers)]
            levels, total = None, None
            tern_bytes = self.packed_size(n_tern) if n_tern else 0
            for handle in handles:
                message = handle.wait()
                if n_tern:
                    trits = self.unpack(message[:tern_bytes], n_tern)
                    levels = trits.to(torch.int16) if levels is None else levels.add_(trits)
                if n_float:
                    values = from_bytes(message[tern_bytes:], torch.float32)
                    total = values.clone() if total is None else total.add_(values)
            parts = []
            if n_tern:
                parts.append(pack_uint(levels.add_(workers), self.width))
            if n_float:
                parts.append(as_bytes(total))
            reply = torch.cat(parts)
            self._sends.extend(self.comm.isend(reply, server, worker) for worker in range(workers))


class TernaryServerRole:
    """What a dist server process of TernGrad runs each step: sum the pushes and answer every worker. The
    servers hold no weights (parameter localization), so there is nothing to send for evaluation and nothing
    to checkpoint but the sends in flight."""

    def __init__(self, exchange: TernaryExchange):
        self.exchange = exchange

    def step(self, step: int, lr: float) -> None:
        self.exchange.serve_step(self.exchange.comm.local_servers)

    def send_global(self) -> None:
        pass

    def state_dict(self) -> dict:
        self.exchange.wait_sends()
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass

    def close(self) -> None:
        self.exchange.wait_sends()
