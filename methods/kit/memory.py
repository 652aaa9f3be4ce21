"""What a worker keeps between steps: nothing, or what it did not send (error feedback).

With a residual e, a worker compresses p = e + x (x its contribution), sends C(p), and keeps e <- p - D(C(p)), so
that over steps everything it was given is eventually sent: sent + residual == everything given, exactly where
the residual is float64 and D(C(p)) is a float32 value (the threshold methods). The residual lives per worker,
flat over the method's compressed tensors in parameter order, and is part of the method's checkpoint, so a
resumed run continues exactly.
"""
from __future__ import annotations

from typing import Mapping

import torch

from .compressor import Compressor, Group, Sender


class Memory:
    """No memory: a worker compresses its contribution as it is."""

    def __init__(self, shapes: Mapping[str, torch.Size], names: list[str], ranks: list[int], device):
        self.names = names

    def encode(self, compressor: Compressor, group: Group, flat: torch.Tensor, local, shared,
               sender: Sender) -> torch.Tensor:
        return compressor.encode(group, flat, local, shared, sender)

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


NoMemory = Memory


class Residual(Memory):
    """Error feedback: per worker a float64 residual over the compressed tensors. A compressor that fuses the
    accumulation into its encoding (``encode_accumulated(group, acc, flat, local, shared, sender)``: adds
    ``flat`` into the float64 ``acc`` in place, encodes, and leaves what was not sent in ``acc``) is called so;
    any other is given p = e + x and its own decode subtracted."""

    def __init__(self, shapes, names, ranks, device):
        super().__init__(shapes, names, ranks, device)
        self.at, offset = {}, 0
        for name in names:  # where each tensor's residual lies in the flat residual
            numel = shapes[name].numel()
            self.at[name] = (offset, offset + numel)
            offset += numel
        self.residual = {rank: torch.zeros(offset, dtype=torch.float64, device=device) for rank in ranks}

    def encode(self, compressor, group, flat, local, shared, sender):
        residual = self.residual[sender.rank]
        acc = torch.cat([residual[slice(*self.at[n])] for n in group.names])
        fused = getattr(compressor, "encode_accumulated", None)
        if fused is not None:
            payload = fused(group, acc, flat, local, shared, sender)
        else:
            acc += flat.double()
            payload = compressor.encode(group, acc.float(), local, shared, sender)
            acc -= compressor.decode_own(group, payload, local, shared).double()
        at = 0
        for name in group.names:  # what was not sent waits in the residual
            lo, hi = self.at[name]
            residual[lo:hi].copy_(acc[at:at + hi - lo])
            at += hi - lo
        return payload

    def state_dict(self):
        return {"residual": {r: t.clone() for r, t in self.residual.items()}}

    def load_state_dict(self, state):
        for r, t in state["residual"].items():
            self.residual[int(r)].copy_(t)
