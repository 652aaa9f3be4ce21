"""Every check of one compressor, on every input: what the report prints a row of."""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import torch

from .estimates import ALPHA, BiasVerdict, Estimate, bias_verdict, estimate
from .feedback import Feedback, feedback, has_residual
from .fixture import Fixture
from .inputs import Inputs
from .speed import REPEATS, Speed, devices as all_devices, speed
from .subjects import Subject
from .wire import Linearity, Wire, linearity, wire

DRAWS = 200


@dataclass(frozen=True)
class Findings:
    subject: Subject
    estimates: list[Estimate]
    bias: BiasVerdict | None
    linear: list[Linearity]
    wires: list[Wire]
    feedback: Feedback | None
    speeds: list[Speed]

    @property
    def collective_confirmed(self) -> bool:
        """The declared collective stands: a linear compressor's payloads add up, another's do not."""
        return all(lin.holds == self.subject.compressor.linear for lin in self.linear)

    @property
    def failures(self) -> list[str]:
        """The declared properties the measurements refute (empty: every one holds)."""
        failed = []
        if self.bias is not None and not self.bias.holds:
            failed.append("unbiased")
        if not self.collective_confirmed:
            failed.append("linear" if self.subject.compressor.linear else "collective")
        if any(w.exact is False for w in self.wires):
            failed.append("bytes")
        if self.feedback is not None and not self.feedback.holds:
            failed.append("residual")
        return failed


def check(subject: Subject, inputs: Inputs, draws: int = DRAWS, repeats: int = REPEATS, devices=None,
          alpha: float = ALPHA) -> Findings:
    """Measure ``subject``'s compressor on ``inputs``: ``draws`` per bias estimate, ``repeats`` per timing (0:
    none), on ``devices`` (default: the CPU, and CUDA where present)."""
    with one_thread():
        return _check(subject, inputs, draws, repeats, devices, alpha)


@contextmanager
def one_thread():
    """torch on one thread while the checks run: their vector passes are memory-bound, and on a shared machine
    torch's second thread spins against the other processes (a 200-draw estimate of LeNet's gradient took 15 s on
    two threads beside a test run, 1.4 s on one). The count is restored after: a caller's runs depend on it."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _check(subject, inputs, draws, repeats, devices, alpha) -> Findings:
    m, p = subject.method, subject.params
    fixtures = {}

    def fixture(shapes) -> Fixture:  # one per model: a compressor keeps per-tensor state (indices, buffers)
        key = tuple((n, tuple(s)) for n, s in shapes.items())
        return fixtures.setdefault(key, Fixture.of(m, p, shapes))

    estimates = [estimate(fx, s, subject.target, max(draws, fx.compressor.draws_needed()))
                 for s in inputs.sets for fx in [fixture(s.shapes)]]
    linear = [linearity(fixture(ws[0].shapes), *ws[:2]) for _, ws in inputs.pairs]
    wires = [wire(Fixture.of(m, p, ws[0].shapes), ws, label) for label, ws in inputs.pairs]
    ef = fixture(inputs.stream[0].shapes) if inputs.stream else None
    fed = feedback(ef, inputs.stream) if ef is not None and has_residual(ef) else None
    speeds = [speed(m, p, inputs.timed, d, repeats) for d in (devices or all_devices())] if repeats else []
    return Findings(subject, estimates, bias_verdict(estimates, alpha), linear, wires, fed, speeds)
