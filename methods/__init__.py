"""How gradients travel: methods, written once against the communicator interface.

``METHODS`` maps each method's command-line name to its class. This package never imports ``bench`` or
``tasks``: a method sees named tensors, not models or datasets.
"""
from .base import Method, NoParams, Worker, param_fields
from .baseline import Baseline
from .lowprec import BF16, FP16
from .powersgd import PowerSGD
from .ssdsgd import SSDSGD
from .terngrad import TernGrad
from .threshold import BGT, QGT, WGT

METHODS: dict[str, type[Method]] = {cls.name: cls for cls in (Baseline, TernGrad, WGT, BGT, QGT, SSDSGD, FP16, BF16,
                                                                 PowerSGD)}

__all__ = ["METHODS", "Method", "NoParams", "Worker", "param_fields"]
