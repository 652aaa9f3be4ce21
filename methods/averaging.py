"""TF's ExponentialMovingAverage with num_updates, over named tensors: the evaluation average of TernGrad's
code. The harness averages a model's weights with it; methods that keep global weights of their own (a
parameter server's, SSD-SGD's) average those, where TF's code would place the average (on the server)."""
from __future__ import annotations

from typing import Mapping

import torch


class MovingAverage:
    """shadow <- d * shadow + (1 - d) * live with d = min(decay, (1 + n) / (10 + n)) at update n.

    ``live`` tensors are read at every :meth:`update`; keep references to tensors updated in place."""

    def __init__(self, live: Mapping[str, torch.Tensor], decay: float):
        self.decay = decay
        self.updates = 0
        self.live = {k: v.detach() for k, v in live.items()}
        self.shadow = {k: v.clone() for k, v in self.live.items()}

    @torch.no_grad()
    def update(self) -> None:
        self.updates += 1
        d = min(self.decay, (1.0 + self.updates) / (10.0 + self.updates))
        for k, s in self.shadow.items():
            s.mul_(d).add_(self.live[k], alpha=1.0 - d)

    def state_dict(self) -> dict:
        return {"updates": self.updates, "shadow": {k: v.clone() for k, v in self.shadow.items()}}

    def load_state_dict(self, state: dict) -> None:
        self.updates = state["updates"]
        with torch.no_grad():
            for k, v in state["shadow"].items():
                self.shadow[k].copy_(v)
