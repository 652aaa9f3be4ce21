"""TernGrad (Wen et al., NeurIPS 2017): stochastic ternary gradients, Algorithm 1, Eq. 1-4 and 21.

Per worker and per tensor (layer-wise) or for the whole gradient (``layerwise=False``): clip at c sigma
(Eq. 21), take the scaler s (the paper's max|clipped g|, or the official code's c sigma), optionally share
the scaler as the max over workers (Eq. 4, so the average has at most 2N+1 levels), and ternarize with
Bernoulli rounding: sign(g) with probability |g|/s (Eq. 1-3, unbiased). The trits are packed (2 bits each,
or 5 to a byte in base 3) and exchanged by one of two topologies (``topology``):

* ``allgather`` (default): every worker receives all N payloads and averages them itself. It computes the
  same average as ``ps`` and keeps the records' settings of the paper-table runs; its cost is the receive
  side, (N - 1) / 4 bytes per element per worker with 2-bit packing (four times fp32 at N = 64).
* ``ps`` (the paper's Figure 1): workers push trits to S parameter servers, which sum them into levels in
  [-N, N] and send those back packed at ceil(log2(2N + 1)) bits (:mod:`commbench.methods.terngrad_ps`).

With scaler sharing (Eq. 4) the average is (sum of the N workers' trits, an integer level) x s / N, computed
from the integer level on both topologies, so it has exactly 2N + 1 values per tensor.

The paper's text and the official code differ in places; each difference is a parameter:
``scaler`` (max | std), ``wd_in_grad`` (the code ternarizes g + wd*w), ``float_last_layer`` and ``min_size``
(the code keeps the logits and small tensors float by default; its LeNet/CIFAR scripts ternarize all).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from .codecs import fused_ternary
from .codecs.bits import TRIT_PACKINGS, as_bytes, from_bytes
from .codecs.fused_ternary import TernaryCodec, offsets_of
from .codecs.ternary import mix_seed
from .kit import Compressor, KitMethod
from .terngrad_ps import TernaryExchange, TernaryServerRole

TOPOLOGIES = ("allgather", "ps")


@dataclass(frozen=True)
class TernGradParams:
    layerwise: bool = True          # one scaler per tensor (Sec. 3.3) or one for the whole gradient
    clip: float = 2.5               # c in Eq. 21; 0 disables clipping
    scaler: str = "max"             # "max": max|clipped g| (paper); "std": c * sigma (official code)
    scaler_sharing: bool = True     # Eq. 4: every worker uses the max of the workers' scalers
    float_last_layer: bool = False  # keep the last layer's weight and bias in float32
    min_size: int = 1               # tensors with fewer elements stay float32 (official --size_to_binarize)
    wd_in_grad: bool = True         # ternarize g + wd*w as the official code does; else decay after exchange
    packing: str = "2bit"           # "2bit": 4 trits a byte; "base3": 5 trits a byte
    topology: str = "allgather"     # allgather | ps (push trits, pull levels: the paper's Figure 1)
    clip_bound: str = "shared"      # scaler=std with sharing: clip at the shared c sigma (the TF code) or own
    servers: int = 1                # parameter servers (ps topology)

    def __post_init__(self):
        if self.topology not in TOPOLOGIES:
            raise ValueError(f"topology must be one of {', '.join(TOPOLOGIES)}, got {self.topology!r}")
        if self.servers < 1:
            raise ValueError(f"servers must be >= 1, got {self.servers}")
        if self.topology == "ps" and not self.scaler_sharing:
            raise ValueError("topology: ps needs scaler_sharing (Eq. 4): without a shared scaler the servers' sums "
                             "are not integer levels, and there is nothing small to send back")
        if self.clip_bound not in ("shared", "own"):
            raise ValueError(f"clip_bound must be shared or own, got {self.clip_bound!r}")
        if self.scaler not in ("max", "std"):
            raise ValueError(f"scaler must be max or std, got {self.scaler!r}")
        if self.packing not in TRIT_PACKINGS:
            raise ValueError(f"packing must be one of {', '.join(TRIT_PACKINGS)}, got {self.packing!r}")
        if self.clip < 0:
            raise ValueError(f"clip must be >= 0, got {self.clip}")
        if self.min_size < 1:
            raise ValueError(f"min_size must be >= 1, got {self.min_size}")


def mean_of_trits(payloads: list[torch.Tensor], shared: torch.Tensor | None, sizes: torch.Tensor,
                  unpack: Callable[[torch.Tensor, int], torch.Tensor]) -> torch.Tensor:
    """The receiving side: the mean over workers of s_i * trits_i, float32.

    ``payloads``: one per worker, packed trits, prefixed by that worker's float32 scalers unless ``shared``
    (the scalers every worker used) is given. ``sizes``: elements per scaler (per tensor, or one for all).
    With ``shared`` the trits are summed as integers (:func:`mean_of_levels`); without, s_i * trits_i are added
    in rank order. The harness, both topologies and the DDP hook all call this, so they agree bit for bit."""
    n_scalers, n_tern = sizes.numel(), int(sizes.sum())
    if shared is not None:
        levels = None
        for payload in payloads:
            trits = unpack(payload, n_tern)
            levels = trits.to(torch.int16) if levels is None else levels.add_(trits)
        return mean_of_levels(levels, shared, sizes, len(payloads))
    total = None
    for payload in payloads:
        scale = torch.repeat_interleave(from_bytes(payload[:4 * n_scalers], torch.float32), sizes)
        value = unpack(payload[4 * n_scalers:], n_tern).float() * scale
        total = value if total is None else total.add_(value)
    return total / len(payloads)


def mean_of_levels(levels: torch.Tensor, shared: torch.Tensor, sizes: torch.Tensor, workers: int) -> torch.Tensor:
    """level x (s / N): the average of N workers' trits under one shared scaler per tensor (Eq. 4), where the
    level is the exact integer sum of the trits and s / N is rounded once per tensor (as the fused decoder,
    :func:`commbench.methods.codecs.fused_ternary.decode_shared`, computes it)."""
    return levels.float().mul_(torch.repeat_interleave(shared / workers, sizes))


def kept_float(params: TernGradParams, numel: dict[str, int]) -> set[str]:
    """The tensors TernGrad leaves in float32: fewer than ``min_size`` elements, and with ``float_last_layer``
    the last module's (the official code's defaults; its LeNet/CIFAR scripts ternarize all)."""
    floats = {n for n, k in numel.items() if k < params.min_size}
    return floats | last_layer(list(numel)) if params.float_last_layer else floats


def last_layer(names: list[str]) -> set[str]:
    """The tensors of the last module (its weight and bias): same prefix as the last parameter."""
    prefix = names[-1].rsplit(".", 1)[0]
    return {n for n in names if n.rsplit(".", 1)[0] == prefix}


class TernaryCompressor(Compressor):
    """TernGrad's steps for one worker's group: clip at c sigma, take each tensor's scaler (or one for the
    group, ``layerwise=False``), share the scalers as the workers' max (Eq. 4) where asked, draw each tensor's
    Bernoulli trits from its own (seed, step, tensor) stream and pack them (one fused pass,
    :class:`commbench.methods.codecs.fused_ternary.TernaryCodec`). The average: with shared scalers the integer level
    sum x s / N; without, each worker's s_i x trits_i added in rank order (its scalers travel at its payload's head).
    Tensors under ``min_size`` elements and, with ``float_last_layer``, the last module's travel as float32."""

    unbiased = "the input clipped at c sigma (the scaler's bound)"
    claims = {"unbiased": "Eq. 3: E[s_t * b_t] = clip(g_t) (unbiased for the clipped gradient)"}

    def __init__(self, params: TernGradParams, shapes, device="cpu"):
        self.floats = kept_float(params, {n: s.numel() for n, s in shapes.items()})
        super().__init__(params, shapes, device)
        self.pack, self.unpack, _ = TRIT_PACKINGS[params.packing]
        self.codec = TernaryCodec(params.clip, params.scaler, params.packing, params.layerwise, params.clip_bound)
        sizes = {n: shapes[n].numel() for n in self.index}
        self.largest = max(sizes, key=sizes.get) if sizes else None  # Figure 4(c)'s tensor (AlexNet's fc6)
        self.decoded: dict[str, torch.Tensor] = {}  # per group (its first tensor): where its average is decoded

    def warm_up(self):
        fused_ternary.warm_up(self.codec.packing)

    def compresses(self, name):
        return name not in self.floats

    def agreement(self, group, flat):
        offsets, bounds, own = self.codec.scalers(flat, group.sizes)
        return (offsets, bounds, own), (own if self.params.scaler_sharing else None)

    def encode(self, group, flat, local, shared, sender):
        offsets, bounds, own = local
        keys = [mix_seed(sender.seed, group.step, j) for j in group.indices]
        bounds = self.codec.bounds_under(bounds, shared, len(group.names))
        count = group.names.index(self.largest) if self.largest in group.names else None
        packed, zeros = self.codec.encode(flat, offsets, bounds, own if shared is None else shared, keys, count)
        if count is not None:  # Figure 4(c): the zero trits of the largest ternarized tensor
            sender.ledger.add_extra("zero_trits_largest", sender.rank, float(zeros[count]))
            sender.ledger.add_extra("trits_largest", sender.rank, float(group.sizes[count]))
        # the scalers come back on the CPU (computed there), the trits where the gradient is: on a GPU the payload
        # is built on the GPU (GRACE's unshared scalers once failed there)
        return packed if shared is not None else torch.cat([as_bytes(own.to(packed.device)), packed])

    def _scalers(self, group) -> int:
        return len(group.sizes) if self.params.layerwise else 1

    def payload_bytes(self, group, sent=None):
        """The packed trits (2 bits each, or 5 to a byte in base 3), behind the worker's float32 scalers where
        they are not shared."""
        packed = TRIT_PACKINGS[self.params.packing][2](group.numel)
        return packed + (0 if self.params.scaler_sharing else 4 * self._scalers(group))

    def agreement_bytes(self, group):
        return 4 * self._scalers(group) if self.params.scaler_sharing else 0  # the scalers, before the trits

    def decode(self, group, payloads, shared):
        if shared is not None:  # one output buffer per group, reused every step: the step consumes it first
            mean = self.codec.decode(payloads, group.numel, offsets_of(group.sizes), shared,
                                     self.decoded.get(group.names[0]))
            self.decoded[group.names[0]] = mean
            return mean
        sizes = torch.tensor(group.sizes if self.params.layerwise else [group.numel], device=payloads[0].device)
        return mean_of_trits(payloads, None, sizes, self.unpack)


class TernGrad(KitMethod):
    name = "terngrad"
    summary = "TernGrad: stochastic ternary gradients with scaler sharing, packed 2 bits (or 1.6 bits) each"
    Params = TernGradParams
    # 5: with the c sigma scaler shared, every worker clips at the shared scaler (the TF code's implicit clip),
    # not at its own c sigma_i; 4: sigma's sums in fixed float32 lanes (the same bits on any CPU; 3's
    # compiler-ordered sums could round otherwise); 3: Bernoulli draws from a counter-based stream (fused codec),
    # the average as level x (s / N); 2: the shared-scaler average from the integer sum of the trits; 1: s *
    # trits added in float32
    version = 5
    # Figure 4(c): how many of the largest layer's gradients (AlexNet's fc6) are ternarized to zero; summed over
    # workers and steps, their ratio is the average share
    extra_metrics = ("zero_trits_largest", "trits_largest")

    @classmethod
    def can_bucket(cls, params) -> bool:
        return params.layerwise and params.topology == "allgather"

    @classmethod
    def why_not_bucketed(cls, params) -> str:
        return ("one scaler for the whole gradient needs all of it first" if not params.layerwise
                else "the parameter-server topology pushes the whole gradient at once")

    @classmethod
    def computes_as(cls, version: int, workers: int, params: dict) -> bool:
        # versions 1 and 2 drew their Bernoulli variables from torch's generator: other trits, other numbers;
        # version 3's clipping bound could differ in its last bit; version 4 clipped at each worker's own c sigma,
        # which differs from 5 only where c sigma is the scaler, shared by several workers
        if version == 4:
            shared_std = (params.get("scaler") == "std" and params.get("scaler_sharing", True)
                          and (params.get("clip") or 0) > 0 and workers > 1)
            return not shared_std
        return version == cls.version

    @classmethod
    def servers_needed(cls, params):
        return params.servers if params.topology == "ps" else 0

    @classmethod
    def make_server(cls, comm, params, template, weight_decay, ema=0.0):
        return TernaryServerRole(cls.exchange_for(comm, params, template.params))

    @staticmethod
    def split_names(params: TernGradParams, tensors: dict[str, torch.Tensor]) -> tuple[list[str], list[str]]:
        """(ternarized, float32) tensor names, in parameter order."""
        floats = kept_float(params, {n: t.numel() for n, t in tensors.items()})
        return [n for n in tensors if n not in floats], [n for n in tensors if n in floats]

    @classmethod
    def exchange_for(cls, comm, params: TernGradParams, tensors: dict[str, torch.Tensor]) -> TernaryExchange:
        tern, _ = cls.split_names(params, tensors)
        pack, unpack, packed_size = TRIT_PACKINGS[params.packing]
        device = next(iter(tensors.values())).device
        return TernaryExchange(comm, {n: t.numel() for n, t in tensors.items()}, tern, pack, unpack, packed_size,
                               device)

    compressor = TernaryCompressor

    @classmethod
    def decay_before_exchange(cls, params) -> bool:
        return params.wd_in_grad  # the official code ternarizes g + wd w

    def __init__(self, comm, workers, params, weight_decay, **kwargs):
        super().__init__(comm, workers, params, weight_decay, **kwargs)
        codec = self.exchange.compressor
        self.tern_names = [n for n in self.names if n in codec.index]
        self.float_names = [n for n in self.names if n not in codec.index]
        self.exchange_ps = self.exchange_for(comm, params, self.workers[0].params) if params.topology == "ps" \
            else None
        self.sizes = [self.workers[0].params[n].numel() for n in self.tern_names]
        self.n_tern = sum(self.sizes)
        self.sizes_t = torch.tensor(self.sizes if params.layerwise else [self.n_tern],
                                    device=next(iter(self.workers[0].params.values())).device)

    def step(self, grads, lr, step):
        """After backward: the whole gradient as one group (in parameter order), or the parameter server's push
        and pull."""
        if self.exchange_ps is None:
            super().step(grads, lr, step)
            return
        p, n, codec = self.params, self.comm.world_size, self.exchange.compressor
        with self.timed("encode"):
            if p.wd_in_grad:
                grads = [self.add_weight_decay(w, g) for w, g in zip(self.workers, grads)]
            flats = [self.flatten(g, self.tern_names) for g in grads]
            prepared = [codec.codec.scalers(f, self.sizes) for f in flats]
        with self.timed("wait"):
            everyone = self.comm.allgather([scales for _, _, scales in prepared], same_size=True)
        shared = torch.stack(everyone[0]).amax(dim=0)  # topology ps needs scaler sharing (TernGradParams)
        with self.timed("encode"):
            trits_of = [self._trits(w, flat, offsets, bounds, shared, step)
                        for w, flat, (offsets, bounds, _) in zip(self.workers, flats, prepared)]
        with self.timed("wait"):
            means, sums = self.push_and_pull(grads, trits_of, shared)
        with self.timed("update"):
            for worker, g, mean, total in zip(self.workers, grads, means, sums):
                out = {}
                if mean is not None:
                    out.update(self.unflatten(mean, g, self.tern_names))
                if total is not None:
                    out.update(self.unflatten(total / n, g, self.float_names))
                if not p.wd_in_grad:
                    out = self.add_weight_decay(worker, out)
                self.apply_update(worker, out, lr)

    def _trits(self, worker, flat, offsets, bounds, shared, step) -> torch.Tensor:
        """A worker's unpacked trits for the servers (the parameter server cuts the vector itself), counting the
        largest tensor's zeros as the all-gather path does."""
        codec = self.exchange.compressor
        keys = [mix_seed(worker.seed, step, j) for j in range(len(self.tern_names))]
        bounds = codec.codec.bounds_under(bounds, shared, len(self.tern_names))
        trits = codec.codec.trits(flat, offsets, bounds, shared, keys)
        if codec.largest is not None:
            j = codec.index[codec.largest]
            largest = trits[int(offsets[j]):int(offsets[j + 1])]
            self.comm.ledger.add_extra("zero_trits_largest", worker.rank, float((largest == 0).sum()))
            self.comm.ledger.add_extra("trits_largest", worker.rank, float(largest.numel()))
        return trits

    def push_and_pull(self, grads, trits_of, shared):
        """The ps topology: every local worker pushes, the local servers (all of them under sim) sum and answer,
        every local worker pulls its levels; returns each worker's mean of the ternarized tensors (flat) and the
        float tensors' sums (flat), as the all-gather path does."""
        for worker, g, trits in zip(self.workers, grads, trits_of):
            self.exchange_ps.push(worker.rank, trits, {n: g[n] for n in self.float_names})
        self.exchange_ps.serve_step(self.comm.local_servers)
        means, sums = [], []
        for worker in self.workers:
            levels, floats = self.exchange_ps.pull(worker.rank)
            means.append(mean_of_levels(levels, shared, self.sizes_t, self.comm.world_size) if self.n_tern else None)
            sums.append(torch.cat([floats[n] for n in self.float_names]) if self.float_names else None)
        return means, sums
