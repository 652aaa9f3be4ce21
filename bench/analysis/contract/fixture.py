"""One compressor set up for the checks: its compressed tensors, and one worker's trip through it, called as the
kit's exchange calls it (agreement, the memory's encode, the decode of the worker's own payload).

The checks call the parts one at a time, rather than through :class:`~commbench.methods.kit.Exchange`, because
they need what the exchange keeps to itself: each worker's payload, its local and shared state, and fresh
randomness per draw (a draw is a step and a seed of its own, as the kit draws them).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from commbench.methods.comm.ledger import ByteLedger
from commbench.methods.kit import Compressor, Group, KitMethod, Memory
from commbench.methods.kit.compressor import Sender


@dataclass
class Encoded:
    """One worker's payload and the state it was encoded under (what its decode needs)."""

    payload: torch.Tensor
    local: object
    shared: object


@dataclass
class Fixture:
    """``method``'s compressor for tensors of ``shapes``: ``names`` are the compressed ones, in parameter order."""

    method: type[KitMethod]
    params: object
    compressor: Compressor
    shapes: dict[str, torch.Size]
    names: list[str]

    @classmethod
    def of(cls, method: type[KitMethod], params, shapes, device="cpu") -> Fixture:
        compressor = method.compressor_for(params)(params, dict(shapes), device)
        return cls(method, params, compressor, dict(shapes), [n for n in shapes if n in compressor.index])

    @property
    def sizes(self) -> list[int]:
        return [self.shapes[n].numel() for n in self.names]

    def group(self, step: int = 0, workers: int = 1) -> Group:
        return Group(list(self.names), self.sizes, [self.compressor.index[n] for n in self.names], step, workers)

    def flat(self, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
        """The compressed tensors, flat and float32, where the compressor lives."""
        return torch.cat([tensors[n].reshape(-1) for n in self.names]).float().to(self.compressor.device)

    def memory(self, ranks=(0,)) -> Memory:
        """A fresh memory of the method's kind (a residual of zeros, or none)."""
        return self.method.memory_for(self.params)(self.shapes, list(self.names), list(ranks),
                                                   self.compressor.device)

    def agree(self, group: Group, flats: list[torch.Tensor]) -> tuple[list, object]:
        """Each worker's local state, and what the workers agree on (None where the compressor asks nothing)."""
        agreed = [self.compressor.agreement(group, flat) for flat in flats]
        shares = [share for _, share in agreed]
        return [local for local, _ in agreed], (None if shares[0] is None else self.compressor.agree(shares))

    def encode(self, group: Group, flat: torch.Tensor, seed: int, memory: Memory | None = None, local=None,
               shared=None, rank: int = 0) -> Encoded:
        """One worker's payload through ``memory`` (a fresh one if none: one shot, nothing carried); the worker
        agrees alone unless ``local`` is given."""
        if local is None:
            (local,), shared = self.agree(group, [flat])
        sender = Sender(rank, seed, ByteLedger())
        payload = (memory or self.memory([rank])).encode(self.compressor, group, flat, local, shared, sender)
        return Encoded(payload, local, shared)

    def decode_own(self, group: Group, encoded: Encoded, dtype=torch.float64) -> torch.Tensor:
        """D(C(x)) of one worker's payload, as ``dtype`` (a copy: a decoder may reuse its output buffer)."""
        out = self.compressor.decode_own(group, encoded.payload, encoded.local, encoded.shared)
        return out.to(dtype, copy=True)

    def round_trip(self, flat: torch.Tensor, step: int, seed: int, dtype=torch.float64) -> torch.Tensor:
        """D(C(x)) of one worker's one-shot payload at ``step`` with ``seed``: its own random stream."""
        group = self.group(step)
        return self.decode_own(group, self.encode(group, flat, seed), dtype)
