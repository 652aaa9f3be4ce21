"""The contract report (``commbench compressors``): every compressor of a registered kit method, checked against
what it declares (``Compressor.unbiased``, ``linear``, ``same_size``, ``payload_bytes``, its memory) and what its
method's paper claims (``claims``), on synthetic heavy-tailed tensors and on a task's real gradients.

* :mod:`.inputs`: the tensors (synthetic, a task's gradients, the error-feedback stream);
* :mod:`.subjects`: which compressors, with which parameters;
* :mod:`.fixture`: one worker's trip through a compressor, as the kit's exchange makes it;
* :mod:`.estimates` (bias and spread), :mod:`.targets` (what the output should average to), :mod:`.wire`
  (linearity and bytes), :mod:`.feedback` (error feedback), :mod:`.speed`: the checks;
* :mod:`.findings`: every check of one compressor; :mod:`.table`: the rows, as markdown or CSV.
"""
from __future__ import annotations

from pathlib import Path

from .findings import DRAWS, Findings, check, one_thread
from .inputs import Inputs, inputs
from .subjects import Subject, subjects
from .table import render


def report(method: str | None = None, settings: dict | None = None, task: str | None = "lenet-mnist",
           dataset: str = "synthetic", root: Path | str = "data", draws: int = DRAWS) -> tuple[list[Findings], Inputs]:
    """Check every kit method's compressor (or ``method``'s) on the synthetic tensors and ``task``'s gradients."""
    chosen = subjects(method, settings)  # first: a bad name or parameter fails before any work
    with one_thread():
        given = inputs(task, dataset, root)
        return [check(s, given, draws) for s in chosen], given


__all__ = ["DRAWS", "Findings", "Inputs", "Subject", "check", "inputs", "render", "report", "subjects"]
