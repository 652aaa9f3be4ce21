"""TernGrad and the threshold methods (WGT/BGT/QGT) as PyTorch DDP communication hooks.

Usage (one state per DDP model; the state keeps per-parameter residuals, indices and the step counter)::

    ddp = DistributedDataParallel(model)
    ledger = ByteLedger()  # optional: counts this rank's bytes as the harness counts its own
    state = TernGradHookState(ddp, TernGradParams(wd_in_grad=False), worker_seed=1000 + rank, ledger=ledger)
    ddp.register_comm_hook(state, terngrad_hook)
    ...
    print(ledger.total_sent(), "bytes sent")

For the same local gradients and seeds, the averaged gradient a hook hands back to DDP is bit for bit the one
the harness's :class:`methods.terngrad.TernGrad` / :class:`methods.threshold.Threshold` compute (before their
weight decay): the hooks call the same codecs (clipping, ternarization, seed mixing, selection, wire
formats) and add in the same order. What differs is only how the bytes travel:

* DDP hands the hook one *bucket* at a time (a flat buffer holding several parameters' gradients, in an order
  that changes when DDP rebuilds its buckets after the first iteration). Everything a method keeps per tensor
  (TernGrad's tensor index j and float/ternary choice, a threshold residual) is therefore keyed by the
  parameter object, never by bucket index or position.
* Each bucket is one exchange: TernGrad packs the bucket's trits into one payload (the harness packs the
  whole gradient into one); the threshold methods encode the bucket's sent elements into one sparse payload
  (the harness encodes the whole gradient). Packing is lossless, so the decoded values do not change; only
  the number of collectives and the wire layout (sparse or bitmap, chosen per payload) do.
* TernGrad's float tensors are summed by the backend's allreduce, as on the harness's ``dist`` transport. The
  ``sim`` transport adds in rank order; with two workers both give a + b, beyond two the last bit may differ.

Limits: float32 gradients only (as the harness); weight decay is not part of either hook, so keep it in the
optimizer (``weight_decay=`` of SGD adds ``wd * w`` after the exchange, as the harness's
``wd_in_grad=False`` and threshold methods do); parameters with ``requires_grad=False`` are left out of the
tensor numbering (the harness assumes every parameter trains); DDP's ``join`` for uneven inputs is not
supported (it would shadow these collectives with allreduces).
"""
# No ``from __future__ import annotations``: DDP's register_comm_hook inspects the hook's annotations and
# accepts only the objects dist.GradBucket and torch.futures.Future[torch.Tensor], not their strings.
from typing import Iterable

import torch
import torch.distributed as dist
from torch import nn

from .codecs import sparse
from .codecs.bits import TRIT_PACKINGS, as_bytes
from .comm.ledger import ByteLedger, nbytes
from .codecs.fused_ternary import TernaryCodec
from .codecs.ternary import mix_seed
from .terngrad import TernGradParams, last_layer, mean_of_trits
from .threshold import ThresholdParams, select

__all__ = ["TernGradHookState", "ThresholdHookState", "terngrad_hook", "threshold_hook"]

Future = torch.futures.Future
TensorFuture = torch.futures.Future[torch.Tensor]  # the return annotation DDP requires of a hook


# -- shared pieces ----------------------------------------------------------------------------------------
def _trainable(model: nn.Module) -> list[tuple[str, nn.Parameter]]:
    """(name, parameter) in model order, without DDP's ``module.`` prefix, trainable ones only (DDP never
    puts a frozen parameter in a bucket)."""
    if isinstance(model, nn.parallel.DistributedDataParallel):
        model = model.module
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if not named:
        raise ValueError("the model has no trainable parameters")
    return named


class _ByParameter:
    """A table keyed by parameter identity. ``bucket.parameters()`` returns the model's own Parameter
    objects, and a parameter keeps its identity through ``model.to(...)``, where ``data_ptr`` would not."""

    def __init__(self, named: Iterable[tuple[str, nn.Parameter]], values: Iterable):
        named = list(named)
        self._params = [p for _, p in named]  # keeps the ids valid for the state's lifetime
        self.names = {id(p): n for n, p in named}
        self._values = {id(p): v for (_, p), v in zip(named, values)}

    def __getitem__(self, p: torch.Tensor):
        try:
            return self._values[id(p)]
        except KeyError:
            raise KeyError("a bucket parameter is not among the parameters the hook state was built from: "
                           "build the state from the model that DistributedDataParallel wraps") from None

    def __setitem__(self, p: torch.Tensor, value) -> None:
        self[p]  # only known parameters
        self._values[id(p)] = value

    def by_name(self) -> dict[str, object]:
        return {self.names[key]: v for key, v in self._values.items()}


def _group(process_group: dist.ProcessGroup | None) -> dist.ProcessGroup:
    return process_group if process_group is not None else dist.group.WORLD


def _bucket_gradients(bucket: dist.GradBucket) -> list[torch.Tensor]:
    """The bucket's gradients as flat views; they tile ``bucket.buffer()`` in this order."""
    buffer = bucket.buffer()
    if buffer.dtype != torch.float32:
        raise TypeError(f"the TernGrad/threshold DDP hooks take float32 gradients, got {buffer.dtype}")
    grads = [g.reshape(-1) for g in bucket.gradients()]
    if sum(g.numel() for g in grads) != buffer.numel():
        raise RuntimeError("bucket gradients do not tile the bucket buffer; cannot lay the result out")
    return grads


def _count(ledger: ByteLedger | None, group: dist.ProcessGroup, op: str, sent: int, received: int) -> None:
    """The harness's ledger conventions (:mod:`methods.comm.base`): an all_gather sends one's payload and
    receives the others'; an all_reduce sends and receives the tensor once."""
    if ledger is not None and group.size() > 1:
        ledger.record(op, group.rank(), sent, received)


def _all_gather_same(t: torch.Tensor, group: dist.ProcessGroup, async_op: bool, ledger=None):
    """all_gather of equal-size tensors. Returns (outputs, work); with ``async_op=False`` work is None and
    the outputs are filled."""
    _count(ledger, group, "allgather", nbytes(t), (group.size() - 1) * nbytes(t))
    out = [torch.empty_like(t) for _ in range(group.size())]
    work = dist.all_gather(out, t, group=group, async_op=async_op)
    return out, work


def _all_gather_variable(payload: torch.Tensor, group: dist.ProcessGroup, ledger=None) -> Future:
    """The dist transport's variable-size allgather: an int64 size each (synchronous, as the padded length
    must be known before sending), then the payloads padded to the largest (asynchronous). The future's value
    is the list of payloads in rank order, trimmed. ``payload`` must not be empty (gloo hangs on empty
    tensors; the sparse wire format always has an 8-byte header)."""
    mine = torch.tensor([payload.numel()], dtype=torch.int64, device=payload.device)
    sizes, _ = _all_gather_same(mine, group, async_op=False, ledger=ledger)
    sizes = [int(s.item()) for s in sizes]
    padded = max(sizes)
    if payload.numel() < padded:
        payload = torch.cat([payload, payload.new_zeros(padded - payload.numel())])
    out, work = _all_gather_same(payload, group, async_op=True, ledger=ledger)

    def trim(fut: Future) -> list[torch.Tensor]:
        fut.wait()  # re-raises a failed collective
        return [o[:k] for o, k in zip(out, sizes)]

    return work.get_future().then(trim)


# -- TernGrad -----------------------------------------------------------------------------------------------
class TernGradHookState:
    """State of :func:`terngrad_hook`: the method's parameters, this worker's seed, the step counter and, per
    parameter, its index j among the ternarized tensors (model parameter order) or ``None`` if it stays float.

    ``model`` is the module DDP wraps or the DDP model itself. ``worker_seed`` is this rank's own seed (the
    harness's ``Worker.seed``); each tensor's Bernoulli draws come from ``mix_seed(worker_seed, step, j)``.
    ``step`` starts at 0 and counts backward passes; set it when resuming from a checkpoint. ``ledger``: a
    :class:`methods.comm.ByteLedger` that counts every byte this rank sends and receives, as the harness
    counts its own (``ledger.total_sent()``).
    """

    def __init__(self, model: nn.Module, params: TernGradParams, worker_seed: int,
                 process_group: dist.ProcessGroup | None = None, ledger: ByteLedger | None = None):
        if params.wd_in_grad:
            raise ValueError("TernGradParams.wd_in_grad=True is not supported by the DDP hook: the hook sees only "
                             "the data-loss gradient; pass wd_in_grad=False and put weight decay in the optimizer")
        if not params.layerwise:
            raise ValueError("TernGradParams.layerwise=False is not supported by the DDP hook: one scaler for the "
                             "whole gradient needs every bucket at once, and DDP hands over one bucket at a time")
        named = _trainable(model)
        names = [n for n, _ in named]
        floats = {n for n, p in named if p.numel() < params.min_size}
        if params.float_last_layer:
            floats |= last_layer(names)
        position = {n: j for j, n in enumerate(n for n in names if n not in floats)}
        self.index = _ByParameter(named, [position.get(n) for n in names])
        self.params = params
        self.worker_seed = int(worker_seed)
        self.process_group = process_group
        self.pack, self.unpack, _ = TRIT_PACKINGS[params.packing]
        self.codec = TernaryCodec(params.clip, params.scaler, params.packing, layerwise=True,
                                  clip_bound=params.clip_bound)
        self.step = 0
        self.ledger = ledger


def _ternarize_and_send(state: TernGradHookState, group: dist.ProcessGroup,
                        tern: list[tuple[int, torch.Tensor]]) -> Future:
    """One worker's side of TernGrad for the bucket's ternarized tensors (``(j, flat gradient)`` pairs), with the
    harness's own codec (:class:`methods.codecs.fused_ternary.TernaryCodec`): clip and take each tensor's scaler
    s_j; with sharing, s_j = max over workers (a synchronous all_gather: the trits depend on it); trits_j from
    stream mix_seed(seed, step, j), packed in one fused pass into one payload (prefixed by this worker's scalers
    when they are not shared), all_gathered asynchronously. The future's value is the mean, flat over the
    bucket's ternarized tensors."""
    p = state.params
    flat = torch.cat([g for _, g in tern])
    sizes = [g.numel() for _, g in tern]
    offsets, bounds, scalers = state.codec.scalers(flat, sizes)
    scalers = scalers.to(flat.device)
    used = torch.stack(_all_gather_same(scalers, group, async_op=False, ledger=state.ledger)[0]).amax(dim=0) \
        if p.scaler_sharing else scalers
    keys = [mix_seed(state.worker_seed, state.step, j) for j, _ in tern]
    bounds = state.codec.bounds_under(bounds, used.cpu() if p.scaler_sharing else None, len(tern))
    packed, _ = state.codec.encode(flat, offsets, bounds, used.cpu(), keys)
    packed = packed.to(flat.device)
    payload = packed if p.scaler_sharing else torch.cat([as_bytes(scalers), packed])
    # same bucket layout: the same size everywhere
    out, work = _all_gather_same(payload, group, async_op=True, ledger=state.ledger)
    shared = used if p.scaler_sharing else None

    def average(fut: Future) -> torch.Tensor:
        fut.wait()
        if shared is not None:
            return state.codec.decode(out, flat.numel(), offsets, shared.cpu()).to(flat.device)
        return mean_of_trits(out, None, torch.tensor(sizes, device=flat.device), state.unpack)

    return work.get_future().then(average)


def _allreduce_mean(flat: torch.Tensor, group: dist.ProcessGroup, ledger=None) -> Future:
    """Sum over workers, then / N (the harness's float tensors: allreduce, divide after). The sum is the
    backend's; with two workers it is exactly a + b on every rank."""
    n = group.size()
    _count(ledger, group, "allreduce", nbytes(flat), nbytes(flat))
    work = dist.all_reduce(flat, group=group, async_op=True)

    def divide(fut: Future) -> torch.Tensor:
        fut.wait()
        return flat / n

    return work.get_future().then(divide)


def terngrad_hook(state: TernGradHookState, bucket: dist.GradBucket) -> TensorFuture:
    """TernGrad (Wen et al. 2017) for one DDP bucket; the future's value is the averaged bucket buffer.

    Per ternarized tensor j of this worker i: s_ij = max|clip(g_ij)| (or c sigma), shared as max_i s_ij when
    ``scaler_sharing``; the result is (1/N) sum_i s_ij * ternarize(g_ij / s_ij), summed in rank order. Float
    tensors (``min_size``, ``float_last_layer``) are allreduced and divided by N. Collectives per bucket: an
    all_gather of the scalers (sharing only, synchronous), an all_gather of the packed trits, an allreduce of
    the float tensors (both asynchronous, decoded in ``.then`` callbacks). The step counter advances after the
    bucket DDP marks last, so every bucket of one backward uses the same step.
    """
    group = _group(state.process_group)
    grads = _bucket_gradients(bucket)
    slots = [state.index[p] for p in bucket.parameters()]
    tern = [(j, g) for j, g in zip(slots, grads) if j is not None]
    floats = [g for j, g in zip(slots, grads) if j is None]
    parts: list[Future] = []
    if tern:
        parts.append(_ternarize_and_send(state, group, tern))
    if floats:
        parts.append(_allreduce_mean(torch.cat(floats), group, state.ledger))  # cat copies: the bucket stays intact
    if bucket.is_last():
        state.step += 1

    def assemble(fut: Future) -> torch.Tensor:
        values = [f.value() for f in fut.value()]  # value() re-raises a failed part
        tern_iter = iter(values[0].split([g.numel() for _, g in tern])) if tern else iter(())
        float_iter = iter(values[-1].split([g.numel() for g in floats])) if floats else iter(())
        return torch.cat([next(tern_iter) if j is not None else next(float_iter) for j in slots])

    return torch.futures.collect_all(parts).then(assemble)


# -- WGT / BGT / QGT ----------------------------------------------------------------------------------------
class ThresholdHookState:
    """State of :func:`threshold_hook`: the rule (``kind`` in wgt, bgt, qgt), the threshold T, and this
    worker's float64 residual per parameter (allocated on first use, on the gradient's device).

    ``residuals()`` returns them by parameter name (for checkpoints or inspection). ``ledger``: a
    :class:`methods.comm.ByteLedger` counting this rank's bytes, as for :class:`TernGradHookState`.
    """

    def __init__(self, model: nn.Module, kind: str, threshold: float,
                 process_group: dist.ProcessGroup | None = None, ledger: ByteLedger | None = None):
        if kind not in sparse.KINDS:
            raise ValueError(f"kind must be one of {', '.join(sparse.KINDS)}, got {kind!r}")
        self.kind = kind
        self.threshold = ThresholdParams(float(threshold)).threshold  # validates T > 0
        named = _trainable(model)
        self.residual = _ByParameter(named, [None] * len(named))
        self.process_group = process_group
        self.ledger = ledger

    def residual_of(self, p: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
        r = self.residual[p]
        if r is None:
            r = torch.zeros(grad.numel(), dtype=torch.float64, device=grad.device)
            self.residual[p] = r
        return r

    def residuals(self) -> dict[str, torch.Tensor]:
        return {name: r for name, r in self.residual.by_name().items() if r is not None}


def threshold_hook(state: ThresholdHookState, bucket: dist.GradBucket) -> TensorFuture:
    """Thresholded gradient synchronization (Anoosheh et al.) for one DDP bucket: WGT, BGT or QGT.

    Per worker i: G_i += g_i / N (float32 division, accumulated in float64); send the elements with
    |G_i| >= T (WGT: G itself as float32; BGT: sign * T; QGT: sign * min(floor(|G|/T), 255) * T) and subtract
    exactly what was sent from G_i. The result is sum_i sent_i (float32, added in rank order, no division:
    each worker already sent its share of the mean). Elements below T stay in the residual for later steps.
    Collectives per bucket: an all_gather of the payload sizes (int64, synchronous), then of the padded sparse
    payloads (asynchronous, decoded in a ``.then`` callback).
    """
    group = _group(state.process_group)
    n = group.size()
    grads = _bucket_gradients(bucket)
    residuals = [state.residual_of(p, g) for p, g in zip(bucket.parameters(), grads)]
    acc = torch.cat(residuals)
    acc += (torch.cat(grads) / n).double()
    sent, values = select(state.kind, acc, state.threshold)
    acc[sent.indices] -= values
    for r, part in zip(residuals, acc.split([g.numel() for g in grads])):
        r.copy_(part)
    numel, device = acc.numel(), acc.device
    gathered = _all_gather_variable(sparse.encode(state.kind, sent, numel), group, state.ledger)

    def aggregate(fut: Future) -> torch.Tensor:
        # Threshold.aggregate: a float32 zero vector, each worker's values added in rank order.
        total = torch.zeros(numel, dtype=torch.float32, device=device)
        for payload in fut.value():
            sparse.add_into(state.kind, payload, numel, state.threshold, total)
        return total

    return gathered.then(aggregate)
