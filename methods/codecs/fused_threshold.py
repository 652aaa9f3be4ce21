"""The worker side of the threshold methods in one pass: accumulate into the float64 residual, select the elements
whose magnitude reaches T, take what each sends (WGT its value, BGT sign x T, QGT sign x m x T with m =
floor(|G| / T) capped at 255, in float32 as receivers rebuild it) and subtract exactly that from the residual.
The same numbers as :func:`methods.threshold.select` and its bookkeeping, bit for bit, without the full-length
masks and gathers (compiled by numba; the torch path stands in where numba is missing or on CUDA)."""
from __future__ import annotations

import numpy as np
import torch

from . import sparse
from .jit import cache_ok, numba

KIND_CODE = {"wgt": 0, "bgt": 1, "qgt": 2}


def _compile():
    if numba is None:
        return None
    cache = cache_ok(__file__)

    @numba.njit(cache=cache, nogil=True, error_model="numpy")
    def select(acc, contribution, t32, kind, indices, values, negative, multiples):
        k = 0
        t = np.float32(t32)
        t64 = np.float64(t)
        for i in range(acc.size):
            a = acc[i] + np.float64(contribution[i])
            if abs(a) >= t64:
                indices[k] = i
                neg = a < 0
                if kind == 0:
                    v = np.float32(a)
                elif kind == 1:
                    v = -t if neg else t
                else:
                    m = min(np.floor(abs(a) / t64), 255.0)
                    multiples[k] = np.uint8(m)
                    v = np.float32(m) * (-t if neg else t)
                values[k] = v
                negative[k] = neg
                a = a - np.float64(v)
                k += 1
            acc[i] = a
        return k

    return select


_SELECT = _compile()


def select_into(kind: str, acc: torch.Tensor, contribution: torch.Tensor, threshold: float) -> sparse.Sent:
    """Accumulate ``contribution`` into ``acc`` (float64, in place), select, keep the rest; what is sent."""
    if _SELECT is None or acc.is_cuda:
        from ..threshold import select

        acc += contribution.double()
        sent, values = select(kind, acc, threshold)
        acc[sent.indices] -= values
        return sent
    n = acc.numel()
    indices = np.empty(n, dtype=np.int64)
    values = np.empty(n, dtype=np.float32)
    negative = np.empty(n, dtype=np.bool_)
    multiples = np.empty(n if kind == "qgt" else 0, dtype=np.uint8)
    t32 = float(np.float32(threshold))
    k = _SELECT(acc.numpy(), contribution.numpy(), t32, KIND_CODE[kind], indices, values, negative, multiples)
    idx = torch.from_numpy(indices[:k])
    if kind == "wgt":
        return sparse.Sent(idx, values=torch.from_numpy(values[:k]))
    sent = sparse.Sent(idx, negative=torch.from_numpy(negative[:k]))
    if kind == "qgt":
        sent.multiples = torch.from_numpy(multiples[:k])
    return sent
