"""The contract report (``commbench compressors``): the stated facts of today's kit methods read as stated, and each
check fails where the property is broken (a biased decoder, a byte formula off by an index, a leaking residual).

Small tensors and few draws (through the functions' parameters, not the CLI's defaults) keep it to seconds."""
from __future__ import annotations

import csv
import dataclasses
import io

import pytest

from commbench.analysis.contract import check, inputs, subjects
from commbench.analysis.contract.fixture import Fixture
from commbench.analysis.contract.subjects import Subject
from commbench.analysis.contract.table import render
from commbench.analysis.contract.wire import wire
from commbench.methods import registry
from commbench.methods.base import NoParams
from commbench.methods.ddp_hooks import PlainAllReduce
from commbench.methods.kit import Residual
from commbench.methods.terngrad import TernaryCompressor, TernGrad, TernGradParams
from commbench.methods.threshold import WGT, WGTCompressor

from ..conftest import commbench

SHAPES = {"dense.weight": (48, 40), "conv.weight": (8, 3, 3, 3), "dense.bias": (48,), "out.bias": (5,)}
DRAWS = 80


@pytest.fixture(scope="module")
def small():
    """Synthetic tensors only (no task's gradients), ten steps of error feedback."""
    return inputs(None, shapes=SHAPES, feedback_steps=10)


def run(subject: Subject, given, draws: int = DRAWS):
    return check(subject, given, draws=draws, repeats=0)


def builtin(name: str) -> Subject:
    return next(s for s in subjects(name) if s.label == name)


def test_terngrad_is_unbiased_for_its_clipped_input_and_its_clip_off_row_for_the_input(small):
    clipped, clip_off = subjects("terngrad")
    assert clip_off.label == "terngrad clip=0" and clip_off.params.clip == 0 and clip_off.target == "the input"
    assert "clipped" in clipped.target
    for subject in (clipped, clip_off):
        found = run(subject, small)
        assert found.bias.holds and found.bias.tests == 2 * (len(SHAPES) + 1), (subject.label, found.bias)
        assert found.estimates[0].draws == DRAWS and found.failures == []
    # the clipped target is what makes the first read unbiased: against the plain input, clipping is a bias
    against_input = run(dataclasses.replace(clipped, target="the input"), small)
    assert not against_input.bias.holds and "unbiased" in against_input.failures


@pytest.mark.parametrize("name", ["wgt", "bgt", "qgt"])
def test_the_threshold_methods_residual_identity_is_exact(small, name):
    found = run(builtin(name), small)
    assert found.feedback is not None and found.feedback.exact, found.feedback
    assert found.bias is None  # declared biased: nothing to test
    assert found.failures == []


def test_the_identity_compressor_is_linear_and_all_reduced(small):
    found = run(Subject("allreduce", PlainAllReduce, NoParams(), PlainAllReduce.compressor.unbiased), small)
    assert all(lin.holds for lin in found.linear) and found.collective_confirmed
    assert found.estimates[0].deterministic and found.bias.holds
    assert [w.bits_per_element for w in found.wires] == [32.0] and found.failures == []


@pytest.mark.parametrize("name", ["fp16", "bf16"])
def test_the_half_precision_casts_are_linear_as_their_all_reduce_assumes(small, name):
    found = run(builtin(name), small)
    assert found.subject.method.compressor.linear and found.collective_confirmed, found.linear
    assert [w.bits_per_element for w in found.wires] == [16.0] and all(w.exact for w in found.wires)
    assert found.failures == []


def test_a_float_payload_that_does_not_add_up_refutes_a_declared_all_reduce(small):
    class Squared(registry.get("fp16").compressor):  # x^2 is no linear map: its payloads cannot be summed
        def encode(self, group, flat, local, shared, sender):
            return (flat * flat.abs()).to(self.dtype)

    cls = type("SquaredFP16", (registry.get("fp16"),), {"compressor": Squared, "__module__": __name__})
    found = run(Subject("squared", cls, NoParams(), None), small)
    assert not found.collective_confirmed and "linear" in found.failures


@pytest.mark.parametrize("params", [
    TernGradParams(), TernGradParams(scaler_sharing=False), TernGradParams(packing="base3"),
    TernGradParams(packing="base3", scaler_sharing=False), TernGradParams(min_size=50),
    TernGradParams(layerwise=False)], ids=lambda p: f"{p.packing}-shared{p.scaler_sharing}-min{p.min_size}"
                                                    f"-layerwise{p.layerwise}")
def test_the_terngrad_byte_formula_is_exact(small, params):
    (label, workers), = small.pairs
    result = wire(Fixture.of(TernGrad, params, workers[0].shapes), workers, label)
    assert result.exact, result


@pytest.mark.parametrize("name", ["wgt", "bgt", "qgt"])
def test_the_threshold_byte_formulas_are_exact(small, name):
    cls = registry.get(name)
    (label, workers), = small.pairs
    result = wire(Fixture.of(cls, cls.Params(), workers[0].shapes), workers, label)
    assert result.exact and result.declared_bytes > 8, result


def test_the_report_flags_a_biased_terngrad(small):
    class TooLoud(TernaryCompressor):
        def decode(self, group, payloads, shared):
            return super().decode(group, payloads, shared) * 1.1

    class LoudTernGrad(TernGrad):
        name, compressor = "terngrad-loud", TooLoud

    subject = dataclasses.replace(builtin("terngrad"), method=LoudTernGrad)
    found = run(subject, small)
    assert not found.bias.holds and found.failures == ["unbiased"]
    assert found.estimates[0].model.scale_bias == pytest.approx(0.1, abs=0.03)


def test_the_report_flags_a_byte_formula_off_by_an_index(small):
    class OffByAnIndex(WGTCompressor):
        def payload_bytes(self, group, sent=None):
            return super().payload_bytes(group, sent) + 4 * (sent or 0)

    class Off(WGT):
        name, compressor = "wgt-off", OffByAnIndex

    found = run(Subject("wgt-off", Off, Off.Params(), None), small)
    assert found.failures == ["bytes"]
    (w,) = found.wires
    assert w.declared_bytes > w.ledger_bytes


def test_the_report_flags_a_residual_that_leaks(small):
    class Leaky(Residual):
        def encode(self, compressor, group, flat, local, shared, sender):
            payload = super().encode(compressor, group, flat, local, shared, sender)
            self.residual[sender.rank].mul_(0.99)  # drops 1% of what it holds, every step
            return payload

    class LeakyWGT(WGT):
        name, memory = "wgt-leaky", Leaky

    found = run(Subject("wgt-leaky", LeakyWGT, LeakyWGT.Params(), None), small)
    assert found.failures == ["residual"] and found.feedback.error > 1e-6


def test_a_users_registered_kit_method_is_reported_by_name(small):
    class Mine(WGT):
        name, summary = "contract-test-mine", "a user's method"

    registry.register(Mine)
    try:
        (subject,) = subjects("contract-test-mine", {"method.threshold": 0.002})
        assert subject.method is Mine and subject.params.threshold == 0.002
        text = render([run(subject, small)], small, "md")
        assert "| contract-test-mine (WGTCompressor) |" in text and "| holds |" in text
    finally:
        registry.unregister("contract-test-mine")


def test_the_paper_claims_stand_beside_their_measurement(small):
    rows = [run(s, small, draws=20) for s in [builtin("terngrad"), builtin("wgt")]]
    text = render(rows, small, "md")
    assert "Eq. 3: E[s_t * b_t] = clip(g_t) (unbiased for the clipped gradient) -> holds" in text
    assert "sent + residual = accumulated gradient (Sec. 2.1) -> holds (relative error 0)" in text
    table = list(csv.DictReader(io.StringIO(render(rows, small, "csv"))))
    assert [r["verdict"] for r in table] == ["holds", "holds"] and table[1]["residual_error"] == "0.0"


def test_the_command_reports_terngrad_as_csv():
    proc = commbench("compressors", "--method", "terngrad", "--format", "csv", timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert [r["compressor"] for r in rows] == ["terngrad", "terngrad clip=0"]
    for column in ("bias_holds", "bias_worst", "bias_critical", "omega_or_delta_synthetic", "omega_or_delta_step0",
                   "omega_or_delta_step100", "linear_holds", "bits_per_element_synthetic", "bytes_formula",
                   "encode_x_copy_cpu", "decode_x_copy_cpu", "claims", "verdict"):
        assert column in rows[0], column
    assert [r["verdict"] for r in rows] == ["holds", "holds"]
    assert [r["bytes_formula"] for r in rows] == ["exact", "exact"]


def test_an_unknown_method_is_one_line_and_exit_2():
    proc = commbench("compressors", "--method", "no-such-method", timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "unknown method 'no-such-method'" in proc.stderr


def test_every_registered_method_is_accounted_for_checked_or_listed(small):
    """The report checks the kit methods' compressors and lists the others by name, so that none goes unmentioned:
    at least 20 registered (the papers' 9 with the zoo's 12)."""
    from commbench.analysis.contract.subjects import kit_methods, unchecked

    others, kit = unchecked(), kit_methods()
    assert set(others) >= {"baseline", "powersgd", "powersgd-batched", "ssdsgd"} and not set(others) & set(kit)
    assert len(others) + len(kit) == len(registry.names()) >= 20
    row = run(builtin("wgt"), small, draws=4)
    text = render([row], small, "md", others)
    assert f"{1 + len(others)} registered methods: the 1 kit methods above" in text
    assert all(f"- `{name}`: " in text for name in others) and "- `wgt`" not in text
