"""What a compressor is: one worker's group of tensors in, a payload out; every worker's payloads in, their
average out.

A *group* is the tensors one exchange carries: a bucket of the overlapped exchange, the whole gradient after
backward, or a DDP bucket. The same compressor serves all three, so a tensor's payload and the average do not
depend on how the tensors are grouped (a compressor whose math spans the whole gradient says so with
``per_tensor = False``, and is then exchanged after backward only).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar, Mapping, Sequence

import torch

from ..comm.ledger import ByteLedger


@dataclass(frozen=True)
class Group:
    """The compressed tensors of one exchange, in order: their names, sizes, and each one's index among the
    method's compressed tensors (its own random stream: a tensor draws the same numbers in any grouping)."""

    names: list[str]
    sizes: list[int]
    indices: list[int]
    step: int
    workers: int

    @property
    def numel(self) -> int:
        return sum(self.sizes)


@dataclass
class Sender:
    """Who encodes: the worker's rank and own seed, the ledger its method-specific counts go to, and the seed
    every worker of the run shares (for draws that must agree across workers)."""

    rank: int
    seed: int
    ledger: ByteLedger
    shared_seed: int = 0


class Compressor:
    """Subclasses implement :meth:`encode` and :meth:`decode`, and set the class attributes that say what they
    are (the contract report, ``commbench compressors``, checks each claim)."""

    # payloads add up in payload space: encode(a) + encode(b) == encode(a + b), under the same shared state;
    # then one all-reduce carries them and decode sees their sum
    linear: ClassVar[bool] = False
    # payload size depends only on the group (a same-size all-gather); else each worker's is its own size
    same_size: ClassVar[bool] = True
    # what the decoded average is an unbiased estimate of ("the input", "the clipped input"), or None (biased)
    unbiased: ClassVar[str | None] = None
    # the math is per tensor: a tensor's payload does not depend on the others in its group
    per_tensor: ClassVar[bool] = True

    def __init__(self, params, shapes: Mapping[str, torch.Size], device: torch.device | str = "cpu"):
        self.params, self.device = params, torch.device(device)
        self.shapes = dict(shapes)
        compressed = [n for n in shapes if self.compresses(n)]
        self.index = {n: j for j, n in enumerate(compressed)}

    def compresses(self, name: str) -> bool:
        """Whether tensor ``name`` is compressed; the others travel as a plain all-reduced mean."""
        return True

    def contribution(self, flat: torch.Tensor, workers: int) -> torch.Tensor:
        """What a worker compresses: its gradient (the default), or its share of the mean (g / N), if the
        compressor's decode sums instead of averaging."""
        return flat

    def agreement(self, group: Group, flat: torch.Tensor) -> tuple[object, torch.Tensor | None]:
        """(this worker's local state for :meth:`encode`, a small tensor every worker must see first): a
        same-size all-gather carries the second before anything is encoded (TernGrad's scalers). None: none."""
        return None, None

    def agree(self, gathered: Sequence[torch.Tensor]) -> torch.Tensor:
        """What the workers agree on from what they gathered (rank order); by default the elementwise max."""
        return torch.stack(list(gathered)).amax(dim=0)

    def encode(self, group: Group, flat: torch.Tensor, local, shared, sender: Sender) -> torch.Tensor:
        """This worker's payload for the group: a 1-D tensor of any dtype, whose bytes are what travels."""
        raise NotImplementedError

    def decode(self, group: Group, payloads, shared) -> torch.Tensor:
        """The workers' average (flat, float32) from their payloads in rank order, ``group.workers`` of them (a
        linear compressor: from their sum)."""
        raise NotImplementedError

    def payload_bytes(self, group: Group, sent: int | None) -> int | None:
        """The declared wire size of one worker's payload for ``group`` (``sent``: how many elements it carries,
        for a compressor whose payload depends on it), which the contract report (``commbench compressors``)
        holds to the ledger's count, byte for byte; None where the compressor declares none."""
        return None

    def agreement_bytes(self, group: Group) -> int:
        """Bytes one worker sends in the agreement round before encoding (0 where there is none)."""
        return 0

    def draws_needed(self) -> int:
        """How many independent draws a test of its bias needs, at least (0: the report's default): a compressor
        that keeps each element only rarely (random-k keeps k of n) needs enough draws that each element is
        kept some 30 times, or its mean is nowhere near normal and a z test would call it biased."""
        return 0

    def warm_up(self) -> None:
        """Compile what the compressor's first call would (numba kernels), before the run's clock starts; it must
        draw from no generator, so that the run computes the same numbers. Nothing by default."""

    def decode_own(self, group: Group, payload: torch.Tensor, local, shared) -> torch.Tensor:
        """D(C(x)) of this worker's own payload: what error feedback subtracts (a decode of one worker)."""
        return self.decode(replace(group, workers=1), payload if self.linear else [payload], shared)
