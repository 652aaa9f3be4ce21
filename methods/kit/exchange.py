"""One exchange of a group of tensors, for the workers that live in this process: the one orchestration that the
method's exchange after backward, its overlapped buckets and its DDP hook all run.

Per group: every worker's compressed tensors are flattened into its contribution; where the compressor asks,
the workers first agree on a small shared tensor (a same-size all-gather, blocking: the payloads depend on it);
each worker encodes through its memory; the payloads travel by the collective the compressor's declarations
pick (all-reduce if linear, else a same-size or a variable-size all-gather), started asynchronously; the
tensors the compressor leaves alone travel in a plain all-reduce beside them. :meth:`Exchange.finish` waits and
decodes: every local worker's average, by name.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import torch

from ..comm import Communicator
from .compressor import Compressor, Group, Sender
from .memory import Memory

Grads = Mapping[str, torch.Tensor]


@dataclass
class Pending:
    """An exchange in flight: what :meth:`Exchange.finish` needs to complete it."""

    group: Group
    plain: list[str]
    shared: object
    compressed: object  # the payloads' handle, or None
    summed: object      # the plain tensors' handle, or None
    like: list[Grads]   # each local worker's gradients (shapes for the result's views)

    def handles(self) -> list:
        return [h for h in (self.compressed, self.summed) if h is not None]


class Exchange:
    """``comm``'s local workers exchanging groups through ``compressor`` and ``memory``. ``seeds``: each local
    worker's seed, in the communicator's order; ``shared_seed``: the run's seed all workers share. ``timed(phase)``: where the seconds go (a method's clocks)."""

    def __init__(self, comm: Communicator, compressor: Compressor, memory: Memory, seeds: Sequence[int],
                 timed=None, shared_seed: int = 0):
        self.comm, self.compressor, self.memory = comm, compressor, memory
        self.senders = [Sender(rank, seed, comm.ledger, shared_seed) for rank, seed in zip(comm.local_ranks, seeds)]
        self.timed = timed or _untimed

    def start(self, names: Sequence[str], grads: Sequence[Grads], step: int) -> Pending:
        """Encode the tensors ``names`` of every local worker's gradients and start their exchange."""
        c, n = self.compressor, self.comm.world_size
        compressed = [name for name in names if name in c.index]
        plain = [name for name in names if name not in c.index]
        group = Group(compressed, [grads[0][name].numel() for name in compressed], [c.index[m] for m in compressed],
                      step, n)
        shared, handle = None, None
        if compressed:
            with self.timed("encode"):
                flats = [c.contribution(_flat(g, compressed), n) for g in grads]
                agreed = [c.agreement(group, flat) for flat in flats]
            if agreed[0][1] is not None:
                with self.timed("wait"):
                    everyone = self.comm.allgather([share for _, share in agreed], same_size=True)
                shared = c.agree(everyone[0])
            with self.timed("encode"):
                payloads = [self.memory.encode(c, group, flat, local, shared, sender)
                            for flat, (local, _), sender in zip(flats, agreed, self.senders)]
            with self.timed("wait"):  # a variable-size all-gather exchanges the sizes first (blocking)
                handle = (self.comm.allreduce_async(payloads) if c.linear else
                          self.comm.allgather_async(payloads, same_size=c.same_size))
        summed = self.comm.allreduce_async([_flat(g, plain) for g in grads]) if plain else None
        return Pending(group, plain, shared, handle, summed, list(grads))

    def finish(self, pending: Pending, ready: bool = False) -> list[dict[str, torch.Tensor]]:
        """Wait for the exchange, decode: every local worker's averaged tensors, by name. ``ready``: the
        collectives have completed (a DDP hook's future), so their results are taken without waiting."""
        c, n = self.compressor, self.comm.world_size
        out: list[dict[str, torch.Tensor]] = [{} for _ in pending.like]
        if pending.compressed is not None:
            with self.timed("wait"):
                everyone = pending.compressed.ready() if ready else pending.compressed.wait()
            with self.timed("decode"):
                means = _per_worker(everyone, lambda payloads: c.decode(pending.group, payloads, pending.shared))
                for o, mean, g in zip(out, means, pending.like):
                    o.update(_views(mean, g, pending.group.names))
        if pending.summed is not None:
            with self.timed("wait"):
                totals = pending.summed.ready() if ready else pending.summed.wait()
            with self.timed("decode"):
                for o, total, g in zip(out, totals, pending.like):
                    o.update(_views(total / n, g, pending.plain))
        return out


def _flat(grads: Grads, names: Sequence[str]) -> torch.Tensor:
    return torch.cat([grads[name].reshape(-1) for name in names])


def _views(flat: torch.Tensor, like: Grads, names: Sequence[str]) -> dict[str, torch.Tensor]:
    out, offset = {}, 0
    for name in names:
        numel = like[name].numel()
        out[name] = flat[offset:offset + numel].view_as(like[name])
        offset += numel
    return out


def _per_worker(gathered: Sequence, decode) -> list:
    """``decode(payloads)`` for each local worker's view of a collective. Under sim every worker holds the very
    same list (or sum), so it is decoded once and shared; under dist there is one worker anyway."""
    results, last, value = [], None, None
    for payloads in gathered:
        if payloads is not last:
            value, last = decode(payloads), payloads
        results.append(value)
    return results


class _Untimed:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _untimed(phase: str) -> _Untimed:
    return _Untimed()
