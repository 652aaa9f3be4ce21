"""The ``sim`` transport: N logical workers in one process, collectives done on lists of tensors.

The arithmetic matches the ``dist`` transport (sums in rank order, the same padding and size exchange), and
the byte ledger is charged exactly as the real collective would be, so a sim run and a dist run of one
configuration agree in weights and bytes.
"""
from __future__ import annotations

from collections import defaultdict, deque
from typing import Sequence

import torch

from .base import Communicator, Done, Handle
from .ledger import nbytes


class _MailboxRecv(Handle):
    """A receive completes when waited for, by which time the matching send has been made in this process."""

    def __init__(self, comm: "SimCommunicator", buffer, src: int, dst: int, control: bool):
        self._comm, self._args = comm, (buffer, src, dst, control)

    def wait(self):
        return self._comm._deliver(*self._args)


class SimCommunicator(Communicator):
    transport = "sim"

    def __init__(self, world_size: int, num_servers: int = 0):
        # All workers are local; so are the servers, which the methods run inline between pushes and pulls.
        super().__init__(world_size, range(world_size), num_servers=num_servers)
        self._mailbox: dict[tuple[int, int], deque] = defaultdict(deque)

    @property
    def local_servers(self):
        return self.server_ranks

    def _check(self, tensors: Sequence[torch.Tensor]) -> None:
        if len(tensors) != self.world_size:
            raise ValueError(f"sim collective needs {self.world_size} tensors, got {len(tensors)}")

    def allreduce(self, tensors):
        self._check(tensors)
        self.ledger.count_call("allreduce")
        total = tensors[0].clone()
        for t in tensors[1:]:
            total += t
        for rank, t in enumerate(tensors):
            self._count_allreduce(rank, t)
        return [total] * self.world_size

    def allgather(self, tensors, same_size=False):
        self._check(tensors)
        self.ledger.count_call("allgather")
        sizes = [t.numel() for t in tensors]
        if same_size and len(set(sizes)) != 1:
            raise ValueError(f"allgather(same_size=True) got payload sizes {sizes}")
        padded = max(sizes)
        for rank, t in enumerate(tensors):
            self._count_allgather(rank, t, padded, sizes_exchanged=not same_size)
        gathered = [t.reshape(-1) for t in tensors]
        return [gathered] * self.world_size

    def broadcast(self, tensors, src):
        self._check(tensors)
        self.ledger.count_call("broadcast")
        source = tensors[src]
        for rank, t in enumerate(tensors):
            if rank == src:
                self._count("broadcast", rank, nbytes(source), 0)
            else:
                t.copy_(source)
                self._count("broadcast", rank, 0, nbytes(source))
        return list(tensors)

    def send(self, tensor, src, dst):
        self.isend(tensor, src, dst)

    def recv(self, buffer, src, dst):
        return self._deliver(buffer, src, dst, control=False)

    def isend(self, tensor, src, dst, control=False):
        self._mailbox[(src, dst)].append(tensor.clone())
        if not control:
            self.ledger.count_call("send")
            self._count("p2p", src, nbytes(tensor), 0)
        return Done()

    def irecv(self, buffer, src, dst, control=False):
        return _MailboxRecv(self, buffer, src, dst, control)

    def _deliver(self, buffer, src, dst, control):
        queue = self._mailbox[(src, dst)]
        if not queue:
            raise RuntimeError(f"sim recv: rank {dst} waits for rank {src}, but nothing was sent")
        message = queue.popleft()
        if message.shape != buffer.shape or message.dtype != buffer.dtype:
            raise RuntimeError(f"sim recv: rank {dst} expects {tuple(buffer.shape)} {buffer.dtype} from rank {src}, "
                               f"got {tuple(message.shape)} {message.dtype}")
        buffer.copy_(message)
        if not control:
            self._count("p2p", dst, 0, nbytes(buffer))
        return buffer

    def control_sum(self, values):
        return values.clone()
