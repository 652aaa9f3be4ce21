"""PowerSGD (Vogels et al., NeurIPS 2019) as torch's DDP communication hook ``powerSGD_hook`` computes it, over
the harness's communicator, so that it runs under ``sim`` too and every byte is counted.

Per bucket and per worker, torch's steps (torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook), with its
defaults: for the first ``start_iter`` iterations a plain all-reduce of the bucket (then / N). After that:
add the local error of the previous step (error feedback); split the bucket's tensors into those worth
compressing as an n x m matrix at rank r ((n + m) r * ``min_compression_rate`` < n m) and the rest, which are
all-reduced as they are; for each matrix M (grouped by shape, as torch orders them): Q from the previous step
(warm start; random, from a seed shared by all workers, the first time) orthogonalized, P = M Q, all-reduce
P, orthogonalize P, Q = M^T P, all-reduce Q, Q / N, M ~ P Q^T; the new local error is the input minus that.
The orthogonalization is torch's own function. Bytes per worker and bucket: the uncompressed tensors, P and Q
in float32 (an all-reduce each).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
from torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook import _orthogonalize, _should_compress

from .base import Method


@dataclass(frozen=True)
class PowerSGDParams:
    rank: int = 1                      # matrix_approximation_rank (torch default)
    start_iter: int = 1000             # start_powerSGD_iter: plain all-reduce before it (torch default; the
                                       # harness takes a tenth of a shorter run: PowerSGD.run_defaults)
    min_compression_rate: float = 2.0  # compress a tensor only if it shrinks by more than this (torch default)
    error_feedback: bool = True        # use_error_feedback (torch default)
    warm_start: bool = True            # reuse P and Q from the previous step (torch default)
    orthogonalization_epsilon: float = 0.0
    random_seed: int = 0               # the seed of the first Q, the same on every worker (torch default)

    def __post_init__(self):
        if self.rank < 1:
            raise ValueError(f"rank must be >= 1, got {self.rank}")
        if self.min_compression_rate < 0:
            raise ValueError(f"min_compression_rate must be >= 0, got {self.min_compression_rate}")
        if (self.error_feedback or self.warm_start) and self.start_iter <= 1:
            raise ValueError("start_iter must be > 1 with error_feedback or warm_start (torch's PowerSGDState rule: "
                             "compression starts after two plain iterations)")


@dataclass
class WorkerState:
    """One worker's PowerSGDState: iteration, local errors, P and Q memory per bucket, the Q seed stream."""

    rng: np.random.RandomState
    iter: int = 0
    error: dict = field(default_factory=dict)
    p_memory: dict = field(default_factory=dict)
    q_memory: dict = field(default_factory=dict)


@dataclass
class Pending:
    """One bucket in flight: its names, and either a plain all-reduce or PowerSGD's per-worker pieces."""

    names: list
    plain: object = None           # Handle of the plain all-reduce (before start_iter)
    buffers: list = None           # per worker: the bucket (error added), decompressed into in place
    copies: list = None            # per worker: the bucket before compression (for the error)
    views: list = None             # per worker: [(uncompressed views), (matrices, ps, qs)]
    uncompressed: object = None    # Handle
    p: object = None               # Handle


class PowerSGD(Method):
    name = "powersgd"
    summary = "PowerSGD: rank-r approximation of each gradient matrix, error feedback, warm start (torch's hook)"
    Params = PowerSGDParams

    @classmethod
    def replicas_agree(cls, params) -> bool:
        return True  # every worker applies the same exchanged update

    def __init__(self, comm, workers, params, weight_decay, **kwargs):
        super().__init__(comm, workers, params, weight_decay, **kwargs)
        self.state = {w.rank: WorkerState(np.random.RandomState(params.random_seed)) for w in self.workers}

    @classmethod
    def can_bucket(cls, params) -> bool:
        return True

    TORCH_START = 1000  # torch's start_powerSGD_iter

    @classmethod
    def run_defaults(cls, steps: int) -> dict[str, tuple[object, str]]:
        """torch's 1,000 plain iterations would leave any shorter run uncompressed, the baseline under another
        name: a tenth of the run instead, at least 2 (torch's least with error feedback or warm start)."""
        start = min(cls.TORCH_START, max(2, steps // 10))
        return {"start_iter": (start, f"powersgd default: min(1000, max(2, floor(0.1 x steps))) = {start}: torch's "
                                      f"1,000 plain iterations (start_powerSGD_iter), or a tenth of a shorter run, at "
                                      f"least 2 (torch's least with error feedback)")}

    @classmethod
    def never_acts(cls, params, steps: int) -> str | None:
        if params.start_iter >= steps:
            return (f"powersgd never compresses: start_iter {params.start_iter} >= {steps} steps (every step is a "
                    f"plain all-reduce, the baseline's)")
        return None

    # -- one bucket ------------------------------------------------------------------------------------
    def begin_bucket(self, names, grads, step):
        names = list(names)
        key = tuple(names)
        with self.timed("encode"):
            if self.state[self.workers[0].rank].iter < self.params.start_iter:
                return Pending(names, plain=self.comm.allreduce_async([self.flatten(g, names) for g in grads]))
            buffers = [self._bucket_buffer(self.flatten(g, names)) for g in grads]
            pending = Pending(names, buffers=buffers, copies=[], views=[])
            uncompressed, ps_memory = [], []
            for worker, buffer, g in zip(self.workers, buffers, grads):
                s = self.state[worker.rank]
                if self.params.error_feedback:
                    if key in s.error:
                        buffer.add_(s.error[key])
                    else:
                        s.error[key] = torch.zeros_like(buffer)
                    pending.copies.append(buffer.clone())
                plain, matrices, ps, qs = self._split(s, key, buffer, g, names)
                uncompressed.append(torch.cat([t.reshape(-1) for t in plain]) if plain
                                    else torch.empty(0, dtype=buffer.dtype, device=buffer.device))
                for m, q, p in zip(matrices, qs, ps):
                    torch.bmm(m, q, out=p)
                ps_memory.append(s.p_memory[key])
                pending.views.append((plain, matrices, ps, qs))
        pending.uncompressed = self.comm.allreduce_async(uncompressed)
        pending.p = self.comm.allreduce_async(ps_memory)
        return pending

    def _bucket_buffer(self, flat: torch.Tensor) -> torch.Tensor:
        """The bucket as this method compresses it: a copy (decompressed into in place)."""
        return flat.clone()

    def _split(self, s: WorkerState, key, buffer, g, names):
        """torch's steps I-III for one worker: the tensors' views of ``buffer``, those left uncompressed, the
        matrices (grouped by shape) with their P and Q views, Q warm-started or drawn and orthogonalized."""
        tensors, offset = [], 0
        for n in names:
            numel = g[n].numel()
            tensors.append(buffer[offset:offset + numel].view_as(g[n]))
            offset += numel
        plain, to_compress, p_size, q_size = [], [], 0, 0
        for t in tensors:
            matrix = t.view(t.shape[0], -1) if t.dim() > 0 else t.view(1, 1)
            n, m = matrix.shape
            r = min(n, m, self.params.rank)
            if _should_compress(n, m, r, self.params.min_compression_rate)[0]:
                to_compress.append(matrix)
                p_size, q_size = p_size + n * r, q_size + m * r
            else:
                plain.append(t)
        randomize = not self.params.warm_start or key not in s.p_memory
        if randomize:
            s.p_memory[key] = torch.empty(p_size, dtype=buffer.dtype, device=buffer.device)
            s.q_memory[key] = torch.empty(q_size, dtype=buffer.dtype, device=buffer.device)
        by_shape: dict = {}
        for matrix in to_compress:
            by_shape.setdefault(matrix.shape, []).append(matrix)
        matrices, ps, qs, p_at, q_at = [], [], [], 0, 0
        for group in by_shape.values():
            for matrix in group:
                n, m = matrix.shape
                r = min(n, m, self.params.rank)
                matrices.append(matrix.unsqueeze(0))
                ps.append(s.p_memory[key][p_at:p_at + n * r].view(1, n, r))
                qs.append(s.q_memory[key][q_at:q_at + m * r].view(1, m, r))
                p_at, q_at = p_at + n * r, q_at + m * r
        self._start_qs(s, qs, randomize, buffer.dtype)
        return plain, matrices, ps, qs

    def _start_qs(self, s: WorkerState, qs, randomize: bool, dtype) -> None:
        """Q warm-started (orthogonalized again) or drawn from the seed all workers share, then orthogonalized."""
        if not randomize:
            for q in qs:
                _orthogonalize(q, self.params.orthogonalization_epsilon)
        else:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(s.rng.randint(1_000_000_000))
                for q in qs:
                    q.copy_(torch.randn(*q.shape, device="cpu", dtype=dtype))
                    _orthogonalize(q, self.params.orthogonalization_epsilon)

    def _finish_bucket(self, pending: Pending, grads) -> list[dict]:
        n = self.comm.world_size
        if pending.plain is not None:
            with self.timed("wait"):
                summed = pending.plain.wait()
            with self.timed("decode"):
                return [self.unflatten(total / n, g, pending.names) for total, g in zip(summed, grads)]
        with self.timed("wait"):
            summed = pending.uncompressed.wait()
        with self.timed("decode"):
            for (plain, *_), total in zip(pending.views, summed):
                total = total.div(n)
                at = 0
                for t in plain:
                    t.copy_(total[at:at + t.numel()].view_as(t))
                    at += t.numel()
        with self.timed("wait"):
            summed_p = pending.p.wait()
        qs_memory = []
        with self.timed("decode"):
            for worker, (plain, matrices, ps, qs), total in zip(self.workers, pending.views, summed_p):
                s = self.state[worker.rank]
                s.p_memory[tuple(pending.names)].copy_(total)
                for p in ps:
                    _orthogonalize(p, self.params.orthogonalization_epsilon)
                for m, p, q in zip(matrices, ps, qs):
                    torch.bmm(m.transpose(1, 2), p, out=q)
                qs_memory.append(s.q_memory[tuple(pending.names)])
        with self.timed("wait"):
            summed_q = self.comm.allreduce(qs_memory)
        out = []
        with self.timed("decode"):
            for i, (worker, (plain, matrices, ps, qs), total) in enumerate(zip(self.workers, pending.views, summed_q)):
                s = self.state[worker.rank]
                key = tuple(pending.names)
                s.q_memory[key].copy_(total).div_(n)
                for p, q, m in zip(ps, qs, matrices):
                    torch.bmm(p, q.transpose(1, 2), out=m)
                if self.params.error_feedback:
                    s.error[key] = pending.copies[i] - pending.buffers[i]
                if not self.params.warm_start:
                    s.p_memory.clear()
                    s.q_memory.clear()
                out.append(self.unflatten(pending.buffers[i], grads[i], pending.names))
        return out

    def finish_step(self, pending, grads, lr, step):
        means = [{} for _ in self.workers]
        for bucket in pending:
            for mean, part in zip(means, self._finish_bucket(bucket, grads)):
                mean.update(part)
        for s in self.state.values():
            s.iter += 1
        with self.timed("update"):
            for worker, mean in zip(self.workers, means):
                self.apply_update(worker, self.add_weight_decay(worker, mean), lr)

    def step(self, grads, lr, step):
        self.finish_step([self.begin_bucket(self.names, grads, step)], grads, lr, step)

    # -- checkpoints: tensors and plain values only --------------------------------------------------------
    def state_dict(self):
        out = {}
        for rank, s in self.state.items():
            name, keys, pos, has_gauss, cached = s.rng.get_state()
            out[rank] = {"iter": s.iter, "error": dict(s.error), "p": dict(s.p_memory), "q": dict(s.q_memory),
                         "rng": (name, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss),
                                 float(cached))}
        return out

    def load_state_dict(self, state):
        for rank, saved in state.items():
            s = self.state[int(rank)]
            s.iter, s.error, s.p_memory, s.q_memory = saved["iter"], dict(saved["error"]), dict(saved["p"]), \
                dict(saved["q"])
            name, keys, pos, has_gauss, cached = saved["rng"]
            s.rng.set_state((name, keys.cpu().numpy().astype(np.uint32), pos, has_gauss, cached))


class BatchedPowerSGD(PowerSGD):
    """torch's ``batched_powerSGD_hook``: not tensor by tensor, but the whole bucket as one square matrix (its
    flat gradient padded with zeros to side x side, side = ceil(sqrt(numel))), compressed at rank r: P = M Q,
    all-reduce P, orthogonalize, Q = M^T P, all-reduce Q, Q / N, M ~ P Q^T; error feedback and warm start as the
    per-tensor hook. Faster than it (two small all-reduces per bucket) and, by torch's own warning, much less
    accurate unless r = 1, because the tensors' rows and columns are not aligned in the square. Bytes per
    worker and bucket: 2 x side x r float32 (``min_compression_rate`` does not apply: torch compresses every
    bucket)."""

    name = "powersgd-batched"
    summary = "batched PowerSGD: the whole bucket as one square matrix at rank r (torch's batched_powerSGD_hook)"

    def _bucket_buffer(self, flat: torch.Tensor) -> torch.Tensor:
        side = math.ceil(math.sqrt(flat.numel()))
        buffer = torch.zeros(side * side, dtype=flat.dtype, device=flat.device)
        buffer[:flat.numel()].copy_(flat)
        return buffer

    def _split(self, s: WorkerState, key, buffer, g, names):
        side, r = math.isqrt(buffer.numel()), self.params.rank  # torch's: r as given, not min(side, r)
        randomize = not self.params.warm_start or key not in s.p_memory
        if randomize:
            s.p_memory[key] = torch.empty(side * r, dtype=buffer.dtype, device=buffer.device)
            s.q_memory[key] = torch.empty(side * r, dtype=buffer.dtype, device=buffer.device)
        p, q = s.p_memory[key].view(1, side, r), s.q_memory[key].view(1, side, r)
        self._start_qs(s, [q], randomize, buffer.dtype)
        return [], [buffer.view(1, side, side)], [p], [q]
