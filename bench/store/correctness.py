"""Which test images a run got right, as a record stores it (``metrics.eval_correct``): one bit per image of the
evaluation split, in the split's order, packed 8 to a byte (numpy's big-endian bit order) and base64-encoded
(1,668 characters for 10,000 images). Two runs evaluated on the same split can then be compared image by image,
which is what makes a paired interval of their accuracy gap (bench/analysis/papers/stats.py) far narrower than
two independent binomial errors."""
from __future__ import annotations

import base64

import numpy as np


def pack_correct(correct) -> dict:
    """``{"images": m, "bits": ...}`` from a bool tensor or array of m entries."""
    bits = np.asarray(correct, dtype=bool).reshape(-1)
    return {"images": int(bits.size), "bits": base64.b64encode(np.packbits(bits).tobytes()).decode("ascii")}


def unpack_correct(stored) -> np.ndarray | None:
    """The bool array :func:`pack_correct` packed; None for a missing or malformed entry."""
    if not isinstance(stored, dict) or not isinstance(stored.get("bits"), str) or \
            type(stored.get("images")) is not int or stored["images"] <= 0:
        return None
    try:
        raw = np.frombuffer(base64.b64decode(stored["bits"], validate=True), dtype=np.uint8)
    except ValueError:
        return None
    if raw.size != (stored["images"] + 7) // 8:
        return None
    return np.unpackbits(raw)[:stored["images"]].astype(bool)
