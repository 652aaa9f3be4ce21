"""The fused codecs' kernels come from numba's cache in a later process. Compiling them takes seconds, and every
process of a threshold or TernGrad run pays it again (each dist worker, each run a sweep or a test starts) when a
kernel's key in the cache changes from process to process, as it did for any kernel that called another."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("numba")

PROBE = """
import numpy as np, torch
from commbench.methods.codecs import fused_ternary as g, fused_threshold as t
n = 10_000
x = torch.randn(n, generator=torch.Generator().manual_seed(0)) * 1e-3
for kind in ("wgt", "qgt"):
    payload, _ = t.encode_into(kind, torch.zeros(n, dtype=torch.float64), x, 1e-3)
    t.add_into(kind, payload, n, 1e-3, torch.zeros(n))
offsets = g.offsets_of([n])
bounds, scales = g.scalers(x, offsets, 2.5, "max")
packed, _ = g.encode(x, offsets, bounds, scales, [7], "2bit")
g._decode_numba(np.stack([packed.numpy()] * 2), n, offsets, scales.numpy(), np.empty(n, np.float32), "2bit")
decoders = [c.cell_contents for c in g._KERNELS["decode_2bit"][0].__closure__ if hasattr(c.cell_contents, "stats")]
kernels = [t._SELECT, t._PACK_SIGNS, t._ADD, g._KERNELS["stats"], g._KERNELS["encode_2bit"][0], *decoders]
used = [k for k in kernels if k.signatures]
print(len(used), sum(sum(k.stats.cache_hits.values()) for k in used),
      sum(sum(k.stats.cache_misses.values()) for k in used))
"""


def probe(cache: str) -> tuple[int, int, int]:
    env = {**os.environ, "NUMBA_CACHE_DIR": cache}
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    used, hits, misses = map(int, out.stdout.split())
    return used, hits, misses


def test_a_second_process_loads_every_kernel_from_the_cache(tmp_path):
    used, hits, misses = probe(str(tmp_path))
    assert used >= 6 and hits == 0 and misses == used  # an empty cache: each kernel compiled once
    assert probe(str(tmp_path)) == (used, used, 0)  # then loaded, none compiled again
