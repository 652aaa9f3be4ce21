"""Deep Gradient Compression (Lin, Han, Mao, Wang & Dally, ICLR 2018): sparsified gradients with momentum
correction, local gradient clipping, momentum factor masking and warm-up training.

Per worker, per tensor, each step (the paper's Algorithm with momentum correction, Sec. 3):

1. its share of the mean gradient, g = grad / N (Algorithm 1: each node accumulates (1 / Nb) sum of its
   gradients), weight decay included (the gradient of the regularized loss: ``decay_before_exchange``);
2. local gradient clipping (Sec. 3.2), when ``clip_norm`` C > 0: g rescaled to L2 norm at most C N^(-1/2), the
   node's part of the global threshold (per tensor, as the authors' code clips);
3. momentum correction (Sec. 3.2): u <- m u + g; v <- v + u (m: ``momentum``, which the harness takes from the
   recipe's optimizer, whose step is then plain SGD: w <- w - lr x the exchanged sum);
4. the threshold (Sec. 5, sampling): the top share of a 1% uniform sample of |v| (``sample_ratio``; drawn from the
   worker's own stream, mix_seed(seed, step, j)); if far more than expected cross it (> 1.3 x the target), the
   precise top-k of those selected (the paper); if too few (< 0.7 x), the threshold x 0.7, up to 10 rounds (GRACE
   grace_dl/dist/compressor/dgc.py, where the paper is silent);
5. send v where |v| >= threshold; then v <- 0 there (accumulation), and momentum factor masking (Sec. 3.3):
   u <- 0 there too;
6. warm-up training (Sec. 3.3): the density rises exponentially over the first ``warmup_steps`` in
   ``warmup_stages`` equal stages, ratio^((e + 1) / (stages + 1)) in stage e: at 99.9% and 4 stages 74.9%, 93.7%,
   98.4%, 99.6% sparsity (the paper's 75%, 93.75%, 98.4375%, 99.6%: powers of 1/4, as 0.001 ~ 4^-5; the formula is
   the authors' code's warmup_coeff), then ``ratio``.

Wire: per sent element an int32 index and a float32 value, 64 bits, so about 64 x ratio bits per element (0.064 at
99.9% sparsity); each worker sends what crossed its threshold, a count of its own: a variable-size all-gather
(the sizes first, 8 bytes each). Decode: the workers' sent values scatter-added in rank order (the shares sum to
the mean). u and v live in :class:`DGCMemory`, float32 (the paper's and its code's dtype; masking zeroes what was
sent exactly), per worker, in the checkpoint. It is no error-feedback residual in the kit's sense (sent + v is not
the sum of the gradients given: momentum), so the contract report checks no residual identity.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..codecs.ternary import mix_seed
from ..kit import Compressor, KitMethod, Memory
from .topk import check_ratio, offsets, pack, scatter_sum, sent_index

UPPER, LOWER, ROUNDS = 1.3, 0.7, 10  # GRACE's bands around the target count, and its adjustment rounds
PAPER_WARMUP = (4, 164)  # Lin et al. Sec. 4: warm-up over 4 of CIFAR-10's 164 epochs


@dataclass(frozen=True)
class DGCParams:
    ratio: float = 0.001          # density after warm-up: 99.9% sparsity (the paper's)
    momentum: float = 0.9         # m of momentum correction (the paper's 0.9; a run takes its recipe's)
    warmup_steps: int = 0         # steps of sparsity warm-up (a run's default: 4/164 of it, DGC.run_defaults)
    warmup_stages: int = 4        # the exponential steps of the warm-up (the paper's 4 epochs)
    sample_ratio: float = 0.01    # share of each tensor sampled for the threshold (paper 0.1%-1%; GRACE 1%)
    clip_norm: float = 0.0        # the global L2 clipping threshold C (locally C / sqrt(N)); 0: no clipping
    momentum_masking: bool = True  # zero u where sent (Sec. 3.3); False: v only

    def __post_init__(self):
        check_ratio(self.ratio)
        check_ratio(self.sample_ratio, "sample_ratio")
        if not 0 <= self.momentum < 1:
            raise ValueError(f"momentum must be in [0, 1), got {self.momentum}")
        if self.warmup_steps < 0 or self.warmup_stages < 1:
            raise ValueError(f"warmup_steps must be >= 0 and warmup_stages >= 1, got {self.warmup_steps}, "
                             f"{self.warmup_stages}")
        if self.clip_norm < 0:
            raise ValueError(f"clip_norm must be >= 0, got {self.clip_norm}")


def select(v: torch.Tensor, density: float, sample_ratio: float, generator: torch.Generator) -> torch.Tensor:
    """The indices of one tensor's v that a worker sends (step 4 of the module docstring), ascending."""
    n, magnitude = v.numel(), v.abs()
    target = n * density
    sample = magnitude[torch.randint(n, (max(1, int(n * sample_ratio)),), generator=generator).to(v.device)]
    threshold = sample.topk(max(1, int(sample.numel() * density))).values.min()
    index = (magnitude >= threshold).nonzero().view(-1)
    for adjusted in range(ROUNDS + 1):
        if index.numel() > UPPER * target:  # far more than expected: the precise top-k of those selected
            return index[magnitude[index].topk(max(1, int(target))).indices].sort().values
        if index.numel() >= LOWER * target or adjusted == ROUNDS:
            break
        threshold = threshold * LOWER
        index = (magnitude >= threshold).nonzero().view(-1)
    return index


class DGCCompressor(Compressor):
    """One worker's selection from its velocity v (what :class:`DGCMemory` hands it), index and value each."""

    same_size = False  # each worker sends what crossed its own threshold
    claims = {"bytes": "abstract: 99.9% of the gradient exchange in distributed SGD are redundant (sparsity 99.9%)"}

    def contribution(self, flat, workers):
        return flat / workers  # Algorithm 1: a node accumulates (1 / Nb) x its gradients, its share of the mean

    def density(self, step: int) -> float:
        """The share of elements sent at ``step``: warm-up stage e's ratio^((e + 1) / (stages + 1)), then ratio."""
        p = self.params
        if step >= p.warmup_steps:
            return p.ratio
        stage = step * p.warmup_stages // p.warmup_steps
        return p.ratio ** ((stage + 1) / (p.warmup_stages + 1))

    def clipped(self, group, flat: torch.Tensor) -> torch.Tensor:
        """Local gradient clipping: each tensor of the share to L2 norm at most C / sqrt(N) (no host sync)."""
        if not self.params.clip_norm:
            return flat
        bound = self.params.clip_norm / math.sqrt(group.workers)
        return torch.cat([t * (bound / (t.norm() + 1e-6)).clamp(max=1.0)
                          for t in flat.split(group.sizes)])

    def encode(self, group, flat, local, shared, sender):
        """``flat``: the worker's v over the group; its sent elements, packed."""
        density = self.density(group.step)
        index = torch.cat([select(flat[at:at + n], density, self.params.sample_ratio,
                                  torch.Generator().manual_seed(mix_seed(sender.seed, group.step, j))) + at
                           for at, n, j in zip(offsets(group.sizes), group.sizes, group.indices)])
        return pack(index, flat[index])

    def decode(self, group, payloads, shared):
        return scatter_sum(payloads, group.numel)  # each worker sent its share: their sum is the mean

    def payload_bytes(self, group, sent=None):
        return 8 * (sent or 0)  # an int32 index and a float32 value per sent element


class DGCMemory(Memory):
    """Per worker u (momentum) and v (velocity, the accumulated update), float32, flat over the compressed
    tensors in parameter order; the compressor's parameters give m, the clipping and the masking."""

    def __init__(self, shapes, names, ranks, device):
        super().__init__(shapes, names, ranks, device)
        self.at, offset = {}, 0
        for name in names:
            numel = shapes[name].numel()
            self.at[name] = (offset, offset + numel)
            offset += numel
        self.u = {rank: torch.zeros(offset, dtype=torch.float32, device=device) for rank in ranks}
        self.v = {rank: torch.zeros(offset, dtype=torch.float32, device=device) for rank in ranks}

    def _span(self, group) -> slice | None:
        """The group's tensors as one slice of the flat buffers, where they lie there in order (else None)."""
        bounds = [self.at[n] for n in group.names]
        if all(hi == lo for (_, hi), (lo, _) in zip(bounds, bounds[1:])):
            return slice(bounds[0][0], bounds[-1][1])
        return None

    def encode(self, compressor, group, flat, local, shared, sender):
        p, span = compressor.params, self._span(group)
        buffers = (self.u[sender.rank], self.v[sender.rank])
        u, v = (b[span] if span else torch.cat([b[slice(*self.at[n])] for n in group.names]) for b in buffers)
        u.mul_(p.momentum).add_(compressor.clipped(group, flat))  # momentum correction: u <- m u + g
        v.add_(u)                                                  # v <- v + u
        payload = compressor.encode(group, v, local, shared, sender)
        sent = sent_index(payload).to(v.device)
        v[sent] = 0.0
        if p.momentum_masking:
            u[sent] = 0.0
        if span is None:  # copies: back where they live
            for buffer, values in zip(buffers, (u, v)):
                for name, part in zip(group.names, values.split(group.sizes)):
                    buffer[slice(*self.at[name])].copy_(part)
        return payload

    def state_dict(self):
        return {"u": {r: t.clone() for r, t in self.u.items()}, "v": {r: t.clone() for r, t in self.v.items()}}

    def load_state_dict(self, state):
        for key, buffers in (("u", self.u), ("v", self.v)):
            for r, t in state[key].items():
                buffers[int(r)].copy_(t)


class DGC(KitMethod):
    name = "dgc"
    Params, compressor, memory = DGCParams, DGCCompressor, DGCMemory
    owns_momentum = True  # momentum correction acts before the sparsification, where no optimizer sees it
    param_sources = {
        "ratio": "Lin et al. 2018 Sec. 4: gradient sparsity 99.9%",
        "momentum": "Lin et al. 2018 Sec. 3.2 (momentum correction): a run takes its recipe's optimizer.momentum "
                    "(0 under plain SGD); 0.9 where there is no recipe",
        "warmup_stages": "Lin et al. 2018 Sec. 3.3: 75%, 93.75%, 98.4375%, 99.6%, then 99.9%, exponentially",
        "sample_ratio": "Lin et al. 2018 Sec. 5: sample 0.1% to 1%; GRACE grace_dl/dist/compressor/dgc.py: 1%",
        "clip_norm": "GRACE grace_dl/dist/helper.py: gradient_clipping off (the paper gives no ResNet threshold)",
        "momentum_masking": "Lin et al. 2018 Sec. 3.3",
    }

    @classmethod
    def decay_before_exchange(cls, params) -> bool:
        return True  # the gradient of the regularized loss goes through momentum correction

    @classmethod
    def run_defaults(cls, steps: int) -> dict[str, tuple[object, str]]:
        epochs, total = PAPER_WARMUP
        warmup = round(steps * epochs / total)
        return {"warmup_steps": (warmup, f"dgc default: round(steps x {epochs} / {total}) = {warmup}: Lin et al. "
                                         f"Sec. 4 warm up over {epochs} of CIFAR-10's {total} epochs (a method "
                                         f"sees steps, not epochs)")}
