"""signSGD with majority vote and Signum (Bernstein et al., ICML 2018, "signSGD: Compressed Optimisation for
Non-Convex Problems", and ICLR 2019, "signSGD with Majority Vote is Communication Efficient and Fault Tolerant").

signSGD with majority vote: each worker sends the sign of its gradient, one bit per element; the aggregate is the
majority vote sign(sum_m sign(g_m)), and every worker steps x <- x - lr * vote. Signum: each worker m keeps its own
momentum v_m <- (1 - beta) g_m + beta v_m (v_m = 0 at first) and sends sign(v_m) instead (ICLR 2019, Algorithm 1;
beta = 0 is signSGD). A worker's sign of 0 is +1 (one bit has no zero; QSGD's sgn(0) = 1 and GRACE's g >= 0); a
tied vote (an even number of workers, split evenly) is sign(0) = 0: that element does not move this step.

Weight decay after the vote, x <- x - lr (vote + lambda x), as the paper's Algorithm 1 and its authors' code
(github.com/jiaweizzhao/signSGD-with-Majority-Vote, Signum_optimizer.py) apply it: the kit's default. Signum owns
its momentum (``owns_momentum``): a run's recipe momentum becomes ``method.momentum`` and its optimizer steps
plain SGD; the momentum buffers are the method's memory, per worker, in its checkpoints.

Wire format: one bit per element (1: negative), packed 8 to a byte. The vote is biased (sign is not linear). No
error feedback. Collective: a same-size all-gather of the packed bits (the paper's parameter server receives the
workers' bits and sends the vote back; an all-reduce of small integers could carry the sum, but the paper sends
bits); each worker sums the signs as integers and takes the vote itself.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..codecs.bits import pack_bits, unpack_bits
from ..kit import Compressor, KitMethod, Memory


class SignCompressor(Compressor):
    """Per element one sign bit; the decode is the majority vote of the workers' signs."""

    claims = {"bytes": "1 bit per element from each worker (the vote: 1 bit back)"}

    def encode(self, group, flat, local, shared, sender):
        return pack_bits(flat < 0)

    def payload_bytes(self, group, sent=None):
        """One bit per element, packed 8 to a byte."""
        return -(-group.numel // 8)

    def decode(self, group, payloads, shared):
        """sign(sum of the workers' signs): the majority vote, 0 where the vote is tied."""
        total = torch.zeros(group.numel, dtype=torch.int32, device=payloads[0].device)
        for payload in payloads:  # +1 per worker, -2 where it sent a negative: 1 - 2 * negative
            total.add_(1).sub_(unpack_bits(payload, group.numel).to(torch.int32), alpha=2)
        return total.sign().to(torch.float32)


class Momentum(Memory):
    """Each worker's own momentum v <- (1 - beta) g + beta v (float32, flat over the compressed tensors in parameter
    order; beta from the compressor's ``momentum``), compressed in place of the gradient. Checkpointed."""

    def __init__(self, shapes, names, ranks, device):
        super().__init__(shapes, names, ranks, device)
        self.at, offset = {}, 0
        for name in names:
            numel = torch.Size(shapes[name]).numel()
            self.at[name] = (offset, offset + numel)
            offset += numel
        self.buffers = {rank: torch.zeros(offset, dtype=torch.float32, device=device) for rank in ranks}

    def encode(self, compressor, group, flat, local, shared, sender):
        beta, buffer = compressor.params.momentum, self.buffers[sender.rank]
        parts, at = [], 0
        for name, n in zip(group.names, group.sizes):
            v = buffer[slice(*self.at[name])]
            v.mul_(beta).add_(flat[at:at + n], alpha=1 - beta)
            parts.append(v)
            at += n
        return compressor.encode(group, torch.cat(parts), local, shared, sender)

    def state_dict(self):
        return {"momentum": {r: t.clone() for r, t in self.buffers.items()}}

    def load_state_dict(self, state):
        for r, t in state["momentum"].items():
            self.buffers[int(r)].copy_(t)


@dataclass(frozen=True)
class SignumParams:
    momentum: float = 0.9  # beta; resolving a run sets it from the recipe's optimizer momentum

    def __post_init__(self):
        if not 0.0 <= self.momentum < 1.0:
            raise ValueError(f"momentum must be in [0, 1), got {self.momentum}")


class SignSGD(KitMethod):
    name = "signsgd"
    compressor = SignCompressor


class Signum(KitMethod):
    name = "signum"
    Params, compressor, memory = SignumParams, SignCompressor, Momentum
    owns_momentum = True
    param_sources = {"momentum": "Bernstein et al. ICML 2018 and ICLR 2019: beta = 0.9 in their experiments "
                                 "(GRACE grace_dl/dist/helper.py: 0.9)"}
