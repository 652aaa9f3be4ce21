"""Performance models: TernGrad's (supplementary Eq. 6-9, ``terngrad``), SSD-SGD's (Eq. 2, 4, 7, ``ssdsgd``),
alpha-beta fits of collectives measured on gloo (``alphabeta``) and the bytes a method sends per step, read
from the byte ledger (``gradient_bytes.gradient_bytes``). ``command`` is ``commbench model``; plots and
reports call :func:`predict_throughput` and :func:`figure5`.
"""
from commbench.analysis.perfmodel.alphabeta import Fit, fit, measure
from commbench.analysis.perfmodel.terngrad import figure5, figure5_speedup, predict, predict_throughput

__all__ = ["Fit", "figure5", "figure5_speedup", "fit", "measure", "predict", "predict_throughput"]
