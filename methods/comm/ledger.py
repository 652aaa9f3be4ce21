"""The byte ledger: one place where every byte a worker hands to, or takes from, the network is counted.

Both transports call :meth:`ByteLedger.record` at every collective, with the tensors that were actually
passed, so the counts are the real payload sizes (dtype width x elements, padding and metadata included),
never a formula of what a method *meant* to send.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import torch


def nbytes(t: torch.Tensor) -> int:
    """Bytes a tensor occupies on the wire: elements x dtype width."""
    return t.numel() * t.element_size()


@dataclass
class ByteLedger:
    """Per-worker byte counters for the workers that live in this process.

    ``sent[r]`` / ``received[r]``: bytes worker ``r`` handed to / took from the network (bytes).
    ``by_op[op]``: bytes sent per collective kind, summed over local workers (for diagnostics).
    """

    sent: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    received: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    by_op: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    calls: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    extras: dict[str, dict[int, float]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(float)))

    def record(self, op: str, rank: int, sent: int, received: int) -> None:
        self.sent[rank] += sent
        self.received[rank] += received
        self.by_op[op] += sent

    def add_extra(self, name: str, rank: int, amount: float) -> None:
        """A method's own secondary accounting (e.g. a paper's byte convention); not wire bytes."""
        self.extras[name][rank] += amount

    def total_extra(self, name: str) -> float:
        return sum(self.extras[name].values())

    def count_call(self, op: str) -> None:
        self.calls[op] += 1

    def total_sent(self, below: int | None = None) -> int:
        """Bytes sent by every rank here, or by ranks < ``below`` only (the workers, not the servers)."""
        return sum(v for r, v in self.sent.items() if below is None or r < below)

    def total_received(self, below: int | None = None) -> int:
        return sum(v for r, v in self.received.items() if below is None or r < below)

    def state_dict(self) -> dict:
        return {
            "sent": dict(self.sent),
            "received": dict(self.received),
            "by_op": dict(self.by_op),
            "calls": dict(self.calls),
            "extras": {k: dict(v) for k, v in self.extras.items()},
        }

    def load_state_dict(self, state: dict) -> None:
        for name in ("sent", "received", "by_op", "calls"):
            target = getattr(self, name)
            target.clear()
            target.update({(int(k) if name in ("sent", "received") else k): int(v) for k, v in state[name].items()})
        self.extras.clear()
        for name, per_rank in state.get("extras", {}).items():
            self.extras[name].update({int(r): float(v) for r, v in per_rank.items()})
