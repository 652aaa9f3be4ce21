"""The ``dist`` transport: one OS process per worker, joined by torch.distributed (gloo on CPU, NCCL on CUDA)."""
from __future__ import annotations

import datetime
import os
import socket

import torch
import torch.distributed as dist

from .base import Communicator, Done, Handle
from .ledger import nbytes


def free_port() -> int:
    """A TCP port free on this host now, for a process group's rendezvous (MASTER_PORT)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Pending(Handle):
    def __init__(self, work, result, outstanding: set | None = None):
        self._work, self._result, self._outstanding = work, result, outstanding
        if outstanding is not None:
            outstanding.add(self)

    def wait(self):
        self._work.wait()
        if self._outstanding is not None:
            self._outstanding.discard(self)
        return self._result

    def future(self) -> torch.futures.Future:
        return self._work.get_future()

    def ready(self):
        if self._outstanding is not None:
            self._outstanding.discard(self)
        return self._result


def local_gpu() -> torch.device:
    """This process's GPU: cuda:LOCAL_RANK when it sees the node's GPUs (torchrun, srun without binding), cuda:0
    when the launcher bound one GPU to it (srun --gpus-per-task, --gpu-bind)."""
    local_rank, visible = int(os.environ.get("LOCAL_RANK", 0)), torch.cuda.device_count()
    if visible == 1:
        return torch.device("cuda", 0)
    if local_rank >= visible:
        raise RuntimeError(f"LOCAL_RANK {local_rank} but this process sees {visible} GPUs: one task per GPU")
    return torch.device("cuda", local_rank)


class DistCommunicator(Communicator):
    """Wraps the default process group; ``init`` joins it from the env:// variables (RANK, WORLD_SIZE,
    MASTER_ADDR, MASTER_PORT), which both the harness's own launcher and torchrun/Slurm set.

    With ``num_servers`` S, the last S ranks of the group are parameter servers: ``world_size`` counts the
    workers only, collectives run in a workers-only group, and the control channel spans everyone."""

    transport = "dist"

    def __init__(self, backend: str | None = None, device: torch.device | None = None, timeout_s: float = 1800.0,
                 num_servers: int = 0):
        if not dist.is_initialized():
            if backend is None:
                backend = "nccl" if torch.cuda.is_available() else "gloo"
            dist.init_process_group(backend, init_method="env://", timeout=datetime.timedelta(seconds=timeout_s))
        self.backend = dist.get_backend()
        self.rank = dist.get_rank()
        # asynchronous collectives not yet waited for (close() waits for them; every rank issued them, so they end;
        # a point-to-point receive might not, and is not kept here)
        self._outstanding: set = set()
        self.device = device or (local_gpu() if self.backend == "nccl" else torch.device("cpu"))
        total = dist.get_world_size()
        if not 0 <= num_servers < total:
            raise ValueError(f"{num_servers} parameter servers need more than {total} processes")
        super().__init__(total - num_servers, [self.rank] if self.rank < total - num_servers else [],
                         num_servers=num_servers)
        # Collectives are the workers' business; every process must still take part in creating the group.
        self.group = dist.new_group(list(range(self.world_size))) if num_servers else None

    @property
    def is_server(self) -> bool:
        return self.rank >= self.world_size

    @property
    def local_servers(self):
        return [self.rank] if self.is_server else []

    def _one(self, tensors):
        if len(tensors) != 1:
            raise ValueError(f"dist collective takes one tensor per process, got {len(tensors)}")
        return tensors[0]

    def allreduce(self, tensors):
        return self.allreduce_async(tensors).wait()

    def _on_wire(self, t: torch.Tensor) -> torch.Tensor:
        """The tensor the collective moves: NCCL moves GPU memory only, so a CPU tensor (TernGrad's scalers, which
        the CPU computes) goes through this process's GPU; gloo moves either."""
        return t.to(self.device) if self.backend == "nccl" and t.device.type == "cpu" else t

    def allreduce_async(self, tensors):
        given = self._one(tensors)
        t = self._on_wire(given)
        self.ledger.count_call("allreduce")
        self._count_allreduce(self.rank, t)
        work = dist.all_reduce(t, group=self.group, async_op=True)
        if t is not given:  # a small CPU tensor through the GPU: back in place now (the sum is what it asked for)
            work.wait()
            return Done([given.copy_(t)])
        return _Pending(work, [t], self._outstanding)

    def allgather(self, tensors, same_size=False):
        return self.allgather_async(tensors, same_size).wait()

    def allgather_async(self, tensors, same_size=False):
        given = self._one(tensors).reshape(-1)
        t = self._on_wire(given)
        self.ledger.count_call("allgather")
        if same_size:
            sizes = [t.numel()] * self.world_size
        else:
            mine = torch.tensor([t.numel()], dtype=torch.int64, device=t.device)
            all_sizes = [torch.zeros_like(mine) for _ in range(self.world_size)]
            dist.all_gather(all_sizes, mine, group=self.group)
            sizes = [int(s.item()) for s in all_sizes]
        padded = max(sizes)
        self._count_allgather(self.rank, t, padded, sizes_exchanged=not same_size)
        if padded == 0:  # gloo hangs on empty tensors: nobody has anything, so nothing is sent
            return Done([[t.new_empty(0) for _ in sizes]])
        if t.numel() < padded:
            t = torch.cat([t, t.new_zeros(padded - t.numel())])
        out = [t.new_empty(padded) for _ in sizes]
        work = dist.all_gather(out, t, group=self.group, async_op=True)
        if t is not given:  # through the GPU: the pieces come back where the caller keeps them
            work.wait()
            return Done([[o[:n].to(given.device) for o, n in zip(out, sizes)]])
        return _Pending(work, [[o[:n] for o, n in zip(out, sizes)]], self._outstanding)

    def broadcast(self, tensors, src):
        given = self._one(tensors)
        t = self._on_wire(given)
        self.ledger.count_call("broadcast")
        dist.broadcast(t, src, group=self.group)
        if t is not given:
            t = given.copy_(t)
        self._count("broadcast", self.rank, nbytes(t) if self.rank == src else 0, 0 if self.rank == src else nbytes(t))
        return [t]

    def send(self, tensor, src, dst):
        assert src == self.rank, f"rank {self.rank} cannot send on behalf of worker {src}"
        self.ledger.count_call("send")
        dist.send(tensor, dst)
        self._count("p2p", src, nbytes(tensor), 0)

    def recv(self, buffer, src, dst):
        assert dst == self.rank, f"rank {self.rank} cannot receive on behalf of worker {dst}"
        dist.recv(buffer, src)
        self._count("p2p", dst, 0, nbytes(buffer))
        return buffer

    def isend(self, tensor, src, dst, control=False):
        assert src == self.rank, f"rank {self.rank} cannot send on behalf of rank {src}"
        if not control:
            self.ledger.count_call("send")
            self._count("p2p", src, nbytes(tensor), 0)
        return _Pending(dist.isend(tensor, dst), None)

    def irecv(self, buffer, src, dst, control=False):
        assert dst == self.rank, f"rank {self.rank} cannot receive on behalf of rank {dst}"
        if not control:
            self._count("p2p", dst, 0, nbytes(buffer))
        return _Pending(dist.irecv(buffer, src), buffer)

    def control_sum(self, values):
        v = values.to(self.device, copy=True)
        if self.backend == "nccl":
            v = v.double()
        dist.all_reduce(v)
        return v.cpu()

    def close(self):
        """Wait for every collective still in flight, then tear the process group down. A process group destroyed
        under a pending collective (an SSD-SGD push never waited for) leaves gloo's worker thread
        joinable, and its destructor ends the process with std::terminate ("terminate called without an active
        exception") after all its results are in: a failed exit for a finished run."""
        for handle in list(self._outstanding):
            try:
                handle.wait()
            except Exception:  # noqa: BLE001 - a peer gone at the end: nothing left to finish
                self._outstanding.discard(handle)
        if dist.is_initialized():
            dist.destroy_process_group()


class GroupCommunicator(DistCommunicator):
    """A communicator over a process group someone else made (DistributedDataParallel's): this process is one
    worker of ``process_group`` (the default group where None), its collectives and their bytes are counted as
    the harness counts its own, in ``ledger``. Nothing is initialised or torn down here."""

    def __init__(self, process_group=None, ledger=None, device: torch.device | None = None):
        self.group = process_group
        self.backend = dist.get_backend(process_group)
        self.rank = dist.get_rank(process_group)
        self._outstanding = set()
        self.device = device or (local_gpu() if self.backend == "nccl" else torch.device("cpu"))
        Communicator.__init__(self, dist.get_world_size(process_group), [self.rank], ledger=ledger)

    def close(self):
        pass
