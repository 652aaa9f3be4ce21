"""numba for the fused codecs, set up once: where compiled code may be cached, and the vector width.

On a CPU with AVX-512, LLVM's tuning for these CPUs keeps loops at 256-bit vectors by default ("prefer-256-bit",
to avoid the clock drop of wide instructions in mixed code). The codec loops are long, integer- and compare-bound
streams where the 512-bit form runs 1.3-1.5x faster (measured on the benchmark's 4M-element gradient), so the
preference is lifted when numba's code generator has not started yet and the user has not chosen features
(``NUMBA_CPU_FEATURES``). The kernels are written so that their results do not depend on the vector width: no
loop relies on the compiler's reassociation of floating-point sums.
"""
from __future__ import annotations

import os

try:
    import numba
except ImportError:  # pragma: no cover - numba is a dependency; the torch paths stand in without it
    numba = None


def _lift_256_bit_preference() -> None:
    from numba.core import config

    if config.CPU_FEATURES is not None or config.CPU_NAME is not None:
        return  # the user's choice
    import llvmlite.binding as llvm

    features = llvm.get_host_cpu_features()
    if not features.get("avx512f"):
        return
    config.CPU_FEATURES = features.flatten() + ",-prefer-256-bit"


if numba is not None:
    _lift_256_bit_preference()


def cache_ok(module_file: str) -> bool:
    """Cache compiled code beside the module where that folder can be written (else compile once per process)."""
    return os.access(os.path.dirname(os.path.abspath(module_file)), os.W_OK) or bool(os.environ.get("NUMBA_CACHE_DIR"))


def called_by_kernels(**options):
    """The decorator for a kernel that only other kernels call: compiled into each caller, not a dispatcher of its
    own. A dispatcher held in a caller's closure pickles with a random id, so the caller's key in numba's cache
    would change in every process and the caller would be compiled again each time (seconds per process)."""
    from numba.extending import register_jitable

    return register_jitable(nogil=True, error_model="numpy", **options)
