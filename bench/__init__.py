"""commbench: a reproducibility benchmark and experiment harness for communication-efficient distributed deep
learning. The command line is ``commbench`` (``python -m commbench``); a script reads the results with
:func:`load_records` (docs/analysis.md)."""
from __future__ import annotations


def __getattr__(name: str):
    # ``__version__`` read at first use (PEP 562): importlib.metadata is a fifth of the command line's start-up,
    # and ``commbench --help`` (every command, through this package) does not need it
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import metadata

    try:
        version = metadata.version("commbench")
    except metadata.PackageNotFoundError:  # a source tree run without installing (a Slurm job's code copy)
        version = "unknown"
    globals()["__version__"] = version
    return version


def load_records(results, *, history: bool = False):
    """The records under ``results`` as a pandas DataFrame, one row per run
    (:func:`commbench.analysis.frame.load_records`)."""
    from commbench.analysis.frame import load_records as load

    return load(results, history=history)
