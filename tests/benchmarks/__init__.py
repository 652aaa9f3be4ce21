"""The benchmarks (``make bench``): each writes its numbers to results/benchmarks/NAME.json with the machine that
measured them, since speeds and their ratios compare only on the same CPU."""
from __future__ import annotations

import json
import os


def write_result(name: str, result: dict) -> None:
    """``result`` under results/benchmarks/``name``.json, with ``machine``: the CPU, its speed-deciding instruction
    sets, its cores and the torch build."""
    import torch

    from commbench.store.provenance import cpu_identity
    from commbench.store.records import atomic_write

    from ..conftest import REPO

    model, flags = cpu_identity()
    machine = {"cpu_model": model, "cpu_flags": flags, "cpu_count": os.cpu_count(), "torch": torch.__version__}
    atomic_write(REPO / "results" / "benchmarks" / f"{name}.json", json.dumps({"machine": machine, **result},
                                                                               indent=1) + "\n")
