"""commbench: a reproducibility benchmark and experiment harness for communication-efficient distributed deep
learning. The command line is ``commbench`` (``python -m commbench``); a script reads the results with
:func:`load_records` (docs/analysis.md)."""
from __future__ import annotations

from importlib import metadata

try:
    __version__ = metadata.version("commbench")
except metadata.PackageNotFoundError:  # a source tree run without installing (a Slurm job's code copy)
    __version__ = "unknown"


def load_records(results, *, history: bool = False):
    """The records under ``results`` as a pandas DataFrame, one row per run
    (:func:`commbench.analysis.frame.load_records`)."""
    from commbench.analysis.frame import load_records as load

    return load(results, history=history)
