"""TernGrad (Wen et al., NeurIPS 2017): stochastic ternary gradients, Algorithm 1, Eq. 1-4 and 21.

Per worker and per tensor (layer-wise) or for the whole gradient (``layerwise=False``): clip at c sigma
(Eq. 21), take the scaler s (the paper's max|clipped g|, or the official code's c sigma), optionally share
the scaler as the max over workers (Eq. 4, so the average has at most 2N+1 levels), and ternarize with
Bernoulli rounding: sign(g) with probability |g|/s (Eq. 1-3, unbiased). The trits are packed (2 bits each,
or 5 to a byte in base 3) and all-gathered; every worker decodes all N payloads and averages.

The paper's text and the official code differ in places; each difference is a parameter:
``scaler`` (max | std), ``wd_in_grad`` (the code ternarizes g + wd*w), ``float_last_layer`` and ``min_size``
(the code keeps the logits and small tensors float by default; its LeNet/CIFAR scripts ternarize all).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from .base import Method
from .codecs.bits import TRIT_PACKINGS, as_bytes, from_bytes
from .codecs.ternary import clip_and_scale, mix_seed, ternarize


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

    def __post_init__(self):
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
    """The receiving side: (sum over workers, in rank order, of s_i * trits_i) / N, float32.

    ``payloads``: one per worker, packed trits, prefixed by that worker's float32 scalers unless ``shared``
    (the scalers every worker used) is given. ``sizes``: elements per scaler (per tensor, or one for all).
    The harness and the DDP hook both call this, so they add in the same order and agree bit for bit."""
    n_scalers, n_tern = sizes.numel(), int(sizes.sum())
    shared_scale = torch.repeat_interleave(shared, sizes) if shared is not None else None  # once, not per worker
    total = None
    for payload in payloads:
        if shared_scale is None:
            scale = torch.repeat_interleave(from_bytes(payload[:4 * n_scalers], torch.float32), sizes)
            packed = payload[4 * n_scalers:]
        else:
            scale, packed = shared_scale, payload
        value = unpack(packed, n_tern).float() * scale
        total = value if total is None else total.add_(value)
    return total / len(payloads)


def last_layer(names: list[str]) -> set[str]:
    """The tensors of the last module (its weight and bias): same prefix as the last parameter."""
    prefix = names[-1].rsplit(".", 1)[0]
    return {n for n in names if n.rsplit(".", 1)[0] == prefix}


class TernGrad(Method):
    name = "terngrad"
    summary = "TernGrad: stochastic ternary gradients with scaler sharing, packed 2 bits (or 1.6 bits) each"
    Params = TernGradParams
    # Figure 4(c): how many of the largest layer's gradients (AlexNet's fc6) are ternarized to zero; summed over
    # workers and steps, their ratio is the average share
    extra_metrics = ("zero_trits_largest", "trits_largest")

    def __init__(self, comm, workers, params, weight_decay, **kwargs):
        super().__init__(comm, workers, params, weight_decay, **kwargs)
        shapes = {n: t.shape for n, t in self.workers[0].params.items()}
        floats = {n for n in self.names if shapes[n].numel() < params.min_size}
        if params.float_last_layer:
            floats |= last_layer(self.names)
        self.tern_names = [n for n in self.names if n not in floats]
        self.float_names = [n for n in self.names if n in floats]
        self.sizes = [shapes[n].numel() for n in self.tern_names]
        self.n_tern = sum(self.sizes)
        if self.sizes:  # where the largest ternarized tensor lies among one worker's trits
            j = max(range(len(self.sizes)), key=self.sizes.__getitem__)
            self.largest = slice(sum(self.sizes[:j]), sum(self.sizes[:j + 1]))
        self.pack, self.unpack, _ = TRIT_PACKINGS[params.packing]
        device = next(iter(self.workers[0].params.values())).device
        self.generator = torch.Generator(device=device)
        self.sizes_t = torch.tensor(self.sizes if params.layerwise else [self.n_tern], device=device)

    # -- one worker's side -----------------------------------------------------------------------------
    def clip_and_scale(self, g: dict[str, torch.Tensor]) -> tuple[list[torch.Tensor], torch.Tensor]:
        """Clipped flat tensors and the scalers (float32, one per tensor, or one in all)."""
        p = self.params
        flats = [g[n].reshape(-1) for n in self.tern_names]
        if p.layerwise:
            pairs = [clip_and_scale(f, p.clip, p.scaler) for f in flats]
            return [c for c, _ in pairs], torch.stack([s for _, s in pairs]).float()
        whole, s = clip_and_scale(torch.cat(flats), p.clip, p.scaler)
        return list(whole.split(self.sizes)), s.reshape(1).float()

    def ternarize(self, seed: int, step: int, clipped: list[torch.Tensor], scalers: torch.Tensor) -> torch.Tensor:
        """All trits of one worker, tensor by tensor, each from its own (seed, step, tensor) stream."""
        per_tensor = scalers if self.params.layerwise else scalers.expand(len(clipped))
        trits = []
        for j, (c, s) in enumerate(zip(clipped, per_tensor)):
            self.generator.manual_seed(mix_seed(seed, step, j))
            trits.append(ternarize(c, s, self.generator))
        return torch.cat(trits) if trits else torch.zeros(0, dtype=torch.int8)

    def average(self, payloads: list[torch.Tensor], shared: torch.Tensor | None) -> torch.Tensor:
        return mean_of_trits(payloads, shared, self.sizes_t, self.unpack)

    def step(self, grads, lr, step):
        p, n = self.params, self.comm.world_size
        if p.wd_in_grad:
            grads = [self.add_weight_decay(w, g) for w, g in zip(self.workers, grads)]
        prepared = [self.clip_and_scale(g) for g in grads]
        shared = None
        if p.scaler_sharing and self.n_tern:
            everyone = self.comm.allgather([s for _, s in prepared], same_size=True)
            shared = torch.stack(everyone[0]).amax(dim=0)
        payloads = []
        for w, (clipped, scalers) in zip(self.workers, prepared):
            trits = self.ternarize(w.seed, step, clipped, scalers if shared is None else shared)
            if self.n_tern:
                largest = trits[self.largest]
                self.comm.ledger.add_extra("zero_trits_largest", w.rank, float((largest == 0).sum()))
                self.comm.ledger.add_extra("trits_largest", w.rank, float(largest.numel()))
            packed = self.pack(trits)
            payloads.append(packed if shared is not None else torch.cat([as_bytes(scalers), packed]))
        means = [None] * len(grads)
        if self.n_tern:
            gathered = self.comm.allgather(payloads, same_size=True)
            means = self.per_worker(gathered, lambda everyone: self.average(everyone, shared))
        sums = [None] * len(grads)
        if self.float_names:
            sums = self.comm.allreduce([self.flatten(g, self.float_names) for g in grads])
        for worker, g, mean, total in zip(self.workers, grads, means, sums):
            out = {}
            if mean is not None:
                out.update(self.unflatten(mean, g, self.tern_names))
            if total is not None:
                out.update(self.unflatten(total / n, g, self.float_names))
            if not p.wd_in_grad:
                out = self.add_weight_decay(worker, out)
            self.apply_update(worker, out, lr)
