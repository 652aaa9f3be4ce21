"""How gradients travel: methods, written once against the communicator interface.

``METHODS`` is a read-only view of the method registry (:mod:`commbench.methods.registry`): each method's
command-line name -> its class, the built-ins and a user's (entry points of the group ``commbench.methods``, the
modules of ``COMMBENCH_METHODS``). The built-ins' names, versions, families and summaries are in
:mod:`commbench.methods.catalog`, readable without torch.

The package is lazy (PEP 562): ``import commbench.methods`` imports neither torch nor a method, and the registry
loads the first time it is asked for a name. This package never imports ``bench`` or ``tasks``: a method sees
named tensors, not models or datasets.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .registry import METHODS

if TYPE_CHECKING:
    from .base import Method, NoParams, Worker, param_fields
    from .baseline import Baseline
    from .lowprec import BF16, FP16
    from .powersgd import PowerSGD
    from .ssdsgd import SSDSGD
    from .terngrad import TernGrad
    from .threshold import BGT, QGT, WGT

# name -> the submodule that defines it, imported at first use
_LAZY = {"Method": "base", "NoParams": "base", "Worker": "base", "param_fields": "base", "Baseline": "baseline",
         "FP16": "lowprec", "BF16": "lowprec", "PowerSGD": "powersgd", "SSDSGD": "ssdsgd", "TernGrad": "terngrad",
         "WGT": "threshold", "BGT": "threshold", "QGT": "threshold"}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = ["METHODS", "Method", "NoParams", "Worker", "param_fields"]
