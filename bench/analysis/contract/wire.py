"""What travels: whether payloads add up in payload space (the collective a compressor declares rests on it), and
the bytes one real exchange puts on the wire against the compressor's declared formula.

Linearity: two workers with inputs a and b agree as two workers do, and each encodes under that shared state with
the same seed and step; then encode(a) + encode(b) must equal encode(a + b): exactly for integer payloads, within
two units in the last place of the largest operand per element for float ones (each of the three encodes rounds
once, the sum once). A compressor that declares ``linear`` is all-reduced on
that promise; for any other it should not hold (it would not refute the all-gather, but an all-reduce would do).

Bytes: one exchange of the kit (:class:`~commbench.methods.kit.Exchange`) among simulated workers, whose ledger
counts what each worker hands to the network, beside the declared formula: the agreement round, the payload
(``payload_bytes(group, sent)``, with ``sent`` the elements that worker's own decode carries, for a payload whose
size depends on them), 8 bytes of size announcement for a variable-size all-gather, and the tensors the
compressor leaves alone (float32, all-reduced). The worker with the largest payload is compared: the others' are
padded to it, and the ledger counts the padding.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from commbench.methods.comm import SimCommunicator, nbytes
from commbench.methods.kit import Exchange

from .fixture import Fixture
from .inputs import InputSet

SEED = 7
ULPS = 2  # how far a float payload's sum may be from the payload of the sum, in ulps of the largest operand


@dataclass(frozen=True)
class Linearity:
    holds: bool
    detail: str   # why not, or how closely


@dataclass(frozen=True)
class Wire:
    label: str
    elements: int           # every element of the model (compressed or not)
    ledger_bytes: int       # what the ledger counted for the compared worker
    declared_bytes: int | None  # the formula's count; None: the compressor declares no payload_bytes

    @property
    def bits_per_element(self) -> float:
        return 8 * self.ledger_bytes / self.elements

    @property
    def exact(self) -> bool | None:
        return None if self.declared_bytes is None else self.declared_bytes == self.ledger_bytes


def linearity(fx: Fixture, a: InputSet, b: InputSet) -> Linearity:
    """Does encode(a) + encode(b) == encode(a + b), under the state two workers a and b agree on?"""
    group = fx.group(0, workers=2)
    xa, xb = fx.flat(a.tensors), fx.flat(b.tensors)
    xab = xa + xb
    (la, lb), shared = fx.agree(group, [xa, xb])
    (lab,), _ = fx.agree(group, [xab])
    pa, pb, pab = (fx.encode(group, x, SEED, local=local, shared=shared).payload
                   for x, local in ((xa, la), (xb, lb), (xab, lab)))
    if not (pa.shape == pb.shape == pab.shape):
        return Linearity(False, f"payload sizes differ ({pa.numel()}, {pb.numel()}, {pab.numel()})")
    if not pab.is_floating_point():
        off = int((pa.long() + pb.long() != pab.long()).sum())
        return Linearity(off == 0, f"{off} of {pab.numel()} integer elements differ" if off else "exact")
    total = pa + pb
    if torch.equal(total, pab):
        return Linearity(True, "exact")
    # three encodes round once each (half an ulp of the largest operand) and the sum once (at most an ulp, its
    # magnitude up to twice the operands'): two ulps of the largest operand bound a linear float payload
    big = torch.maximum(torch.maximum(pa.abs(), pb.abs()), pab.abs())
    ulp = (torch.nextafter(big, torch.tensor(float("inf"), dtype=big.dtype)) - big).double()
    ulps = (total.double() - pab.double()).abs() / ulp
    off, most = int((ulps > ULPS).sum()), float(ulps.max())
    return Linearity(off == 0, f"{off} of {pab.numel()} elements beyond {ULPS} ulps" if off else
                     f"within {most:g} ulp of the largest operand")


def wire(fx: Fixture, workers: list[InputSet], label: str) -> Wire:
    """One exchange of ``workers``' gradients (one input set each): the ledger's bytes beside the formula."""
    comm = SimCommunicator(len(workers))
    seen = _Seen(fx.memory(comm.local_ranks))
    exchange = Exchange(comm, fx.compressor, seen, [SEED + w for w in range(len(workers))])
    exchange.finish(exchange.start(list(workers[0].tensors), [w.tensors for w in workers], 0))
    rank = max(seen.payloads, key=lambda r: nbytes(seen.payloads[r]), default=0)  # not padded: the largest
    plain = sum(t.numel() for n, t in workers[0].tensors.items() if n not in fx.compressor.index)
    compressed = _declared(fx, fx.group(0, len(workers)), seen.sent.get(rank)) if fx.names else 0
    return Wire(label, sum(t.numel() for t in workers[0].tensors.values()), comm.ledger.sent[rank],
                None if compressed is None else compressed + 4 * plain)


def _declared(fx: Fixture, group, sent: int | None) -> int | None:
    """The formula for one worker's compressed tensors: agreement, payload, and a variable size's announcement."""
    c = fx.compressor
    fixed = c.linear or c.same_size
    payload = c.payload_bytes(group, None if fixed else sent)
    return None if payload is None else c.agreement_bytes(group) + payload + (0 if fixed else 8)


class _Seen:
    """The method's memory, watched: each worker's payload, and how many elements its own decode carries."""

    def __init__(self, memory):
        self.inner = memory
        self.payloads: dict[int, torch.Tensor] = {}
        self.sent: dict[int, int] = {}

    def encode(self, compressor, group, flat, local, shared, sender):
        payload = self.inner.encode(compressor, group, flat, local, shared, sender)
        own = compressor.decode_own(group, payload, local, shared)
        self.payloads[sender.rank], self.sent[sender.rank] = payload, int(torch.count_nonzero(own))
        return payload
