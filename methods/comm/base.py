"""The communicator interface every method is written against.

A communicator serves the *local* workers of one process: one worker under the ``dist`` transport (one OS
process per worker), all N workers under ``sim``. Every collective therefore takes a list with one tensor
per local worker, in the order of :attr:`Communicator.local_ranks`, and returns one result per local worker.
Method code loops over local workers and never needs to know which transport it runs on.

Byte accounting conventions (the ledger counts, per worker, what it hands to and takes from the network):

* allreduce: each worker sends its tensor once and receives the reduced tensor once.
* allgather: each worker sends its payload once and receives the N-1 payloads of the others. Variable-size
  payloads are first announced by an int64 size exchange, then padded to the largest; both the sizes and
  the padding are counted.
* broadcast: the source sends the tensor once; every other worker receives it once.
* send/recv and isend/irecv: the sender sends the tensor; the receiver receives it. ``control=True``
  marks a transfer the harness makes for itself (fetching a parameter server's weights to evaluate them);
  it crosses the same wire but is not part of the method's exchange, so it is not counted.

Parameter servers: a communicator may know ``num_servers`` server ranks beyond its workers (ranks
``world_size`` .. ``world_size + num_servers - 1``). Collectives run over the workers only; servers are
reached by point-to-point messages. Bytes a server sends or receives are ledgered under its own rank.

With a single worker nothing crosses a network, so nothing is counted.

The *control channel* (:meth:`Communicator.control_sum`) carries the harness's own bookkeeping (loss for the
progress line, divergence flags, byte totals). It is not part of any method's exchange and is not counted.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Sequence

import torch

from .ledger import ByteLedger, nbytes


class Handle(ABC):
    """An asynchronous operation in flight; :meth:`wait` returns its result."""

    @abstractmethod
    def wait(self): ...

    def future(self) -> torch.futures.Future:
        """A torch future completed when the operation is (what a DDP communication hook returns on)."""
        fut = torch.futures.Future()
        fut.set_result(self.wait())
        return fut

    def ready(self):
        """The result of an operation whose :meth:`future` has completed, without waiting (a future's callback
        must not wait on the work it completes)."""
        return self.wait()


class Done(Handle):
    def __init__(self, value=None):
        self.value = value

    def wait(self):
        return self.value


class Communicator(ABC):
    """Collectives over ``world_size`` workers, of which ``local_ranks`` live in this process."""

    transport: str

    def __init__(self, world_size: int, local_ranks: Sequence[int], ledger: ByteLedger | None = None,
                 num_servers: int = 0):
        self.world_size = world_size  # workers; collectives and averages are over these
        self.num_servers = num_servers
        self.local_ranks = list(local_ranks)
        self.ledger = ledger if ledger is not None else ByteLedger()

    @property
    def server_ranks(self) -> list[int]:
        return list(range(self.world_size, self.world_size + self.num_servers))

    @property
    def local_servers(self) -> list[int]:
        """The server ranks this process runs (all of them under sim; its own rank in a server process)."""
        return []

    # -- collectives, one tensor per local worker -------------------------------------------------------
    @abstractmethod
    def allreduce(self, tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """Sum over all workers. Inputs may be overwritten in place; the result for each local worker is
        returned (it may share memory between local workers: do not modify it in place)."""

    def allreduce_async(self, tensors: Sequence[torch.Tensor]) -> Handle:
        """Start an allreduce; ``wait()`` returns what :meth:`allreduce` would."""
        return Done(self.allreduce(tensors))

    def allgather_async(self, tensors: Sequence[torch.Tensor], same_size: bool = False) -> Handle:
        """Start an allgather; ``wait()`` returns what :meth:`allgather` would (the sizes, when they vary, are
        exchanged before this returns)."""
        return Done(self.allgather(tensors, same_size))

    @abstractmethod
    def allgather(self, tensors: Sequence[torch.Tensor], same_size: bool = False) -> list[list[torch.Tensor]]:
        """Gather one 1-D payload per worker (any dtype, sizes may differ unless ``same_size``).

        Returns, per local worker, the list of all ``world_size`` payloads in rank order. The returned
        tensors are shared between local workers: treat them as read-only.
        """

    @abstractmethod
    def broadcast(self, tensors: Sequence[torch.Tensor], src: int) -> list[torch.Tensor]:
        """Every worker ends with worker ``src``'s tensor (written into its own input tensor)."""

    @abstractmethod
    def send(self, tensor: torch.Tensor, src: int, dst: int) -> None:
        """Point-to-point: local worker ``src`` sends ``tensor`` to worker ``dst``."""

    @abstractmethod
    def recv(self, buffer: torch.Tensor, src: int, dst: int) -> torch.Tensor:
        """Point-to-point: local worker ``dst`` receives from ``src`` into ``buffer`` (same shape/dtype)."""

    @abstractmethod
    def isend(self, tensor: torch.Tensor, src: int, dst: int, control: bool = False) -> Handle:
        """Start sending ``tensor`` from local rank ``src`` (a worker or a server) to rank ``dst``. The caller
        must not modify ``tensor`` before ``wait()``."""

    @abstractmethod
    def irecv(self, buffer: torch.Tensor, src: int, dst: int, control: bool = False) -> Handle:
        """Start receiving into ``buffer`` at local rank ``dst`` from ``src``; ``wait()`` returns ``buffer``."""

    # -- harness bookkeeping, never counted -------------------------------------------------------------
    @abstractmethod
    def control_sum(self, values: torch.Tensor) -> torch.Tensor:
        """Sum a small float64 vector over processes (not workers): the caller has already combined its
        local workers' values. Uncounted: this is the harness talking, not the method."""

    def barrier(self) -> None:
        self.control_sum(torch.zeros(1, dtype=torch.float64))

    def close(self) -> None:
        pass

    # -- helpers for the implementations ----------------------------------------------------------------
    def _count(self, op: str, rank: int, sent: int, received: int) -> None:
        if self.world_size + self.num_servers > 1:
            self.ledger.record(op, rank, sent, received)

    def _count_allreduce(self, rank: int, t: torch.Tensor) -> None:
        self._count("allreduce", rank, nbytes(t), nbytes(t))

    def _count_allgather(self, rank: int, mine: torch.Tensor, padded_numel: int, sizes_exchanged: bool) -> None:
        width = mine.element_size()
        others = self.world_size - 1
        sent = padded_numel * width
        received = others * padded_numel * width
        if sizes_exchanged:  # one int64 size per worker, announced before the payload
            sent += 8
            received += 8 * others
        self._count("allgather", rank, sent, received)
