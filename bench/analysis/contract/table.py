"""The contract report as a table: one row per compressor, each declared property beside its measured value, and
the paper's claims beside the measurement they rest on. ``md`` to read, ``csv`` for numbers."""
from __future__ import annotations

import csv
import io
import math

from .estimates import ALPHA
from .findings import Findings
from .inputs import Inputs

CLAIMS = ("unbiased", "variance", "linear", "bytes", "residual")  # the claims' keys the report measures


def render(rows: list[Findings], inputs: Inputs, fmt: str = "md", others: dict[str, str] | None = None) -> str:
    """The report: a row per compressor checked; in markdown, ``others`` (registered methods that are not kit
    methods, with their summaries) listed below it, so that every registered method is accounted for."""
    if fmt == "csv":
        return _csv([_numbers(r) for r in rows])
    table = [_cells(r) for r in rows]
    return _intro(inputs) + _markdown(table) + _others(rows, others or {})


def _others(rows: list[Findings], others: dict[str, str]) -> str:
    if not others:
        return ""
    checked = len({f.subject.method.name for f in rows})
    listed = "\n".join(f"- `{name}`: {summary}" for name, summary in others.items())
    return (f"\n{checked + len(others)} registered methods: the {checked} kit methods above, and {len(others)} that "
            f"are not kit methods (no compressor to check; their own tests hold what they promise):\n{listed}\n")


def _cells(f: Findings) -> dict[str, str]:
    cells = {"compressor": f"{f.subject.label} ({f.subject.compressor.__name__})",
             "declared": _declared(f), "bias": _bias(f), "omega / delta": _spread(f), "linear": _linear(f),
             "bits / element": _bits(f), "error feedback": _feedback(f), "encode, decode x copy": _speed(f)}
    claims = [f"{text} -> {_measured(key, f)}" for key, text in f.subject.claims.items()]
    cells["paper's claim -> measured"] = "; ".join(claims) or "-"
    cells["verdict"] = "holds" if not f.failures else "FAILS: " + ", ".join(f.failures)
    return cells


def _declared(f: Findings) -> str:
    c = f.subject.compressor
    collective = "all-reduce" if c.linear else "all-gather, same size" if c.same_size else "all-gather, own size"
    return f"unbiased for {f.subject.target}; {collective}" if f.subject.target else f"biased; {collective}"


def _bias(f: Findings) -> str:
    b, draws = f.bias, max(e.draws for e in f.estimates)
    if b is None:
        first = f.estimates[0]
        untested = f" ({first.untested})" if first.untested else ""
        return f"biased{untested}: relative bias {_n(first.model.relative_error)} ({first.label})"
    word = "unbiased" if b.holds else "BIASED"
    if b.exact:
        return f"{word}: deterministic, relative error {_n(b.worst)} (limit {_n(b.critical)}; {b.where})"
    return f"{word}: largest z {b.worst:.1f} vs {b.critical:.1f} ({b.tests} tests, {draws} draws; at {b.where})"


def _spread(f: Findings) -> str:
    kind = "omega" if f.subject.target is not None else "delta"
    values = [e.model.spread if kind == "omega" else 1 - e.model.spread for e in f.estimates]
    return f"{kind} " + ", ".join(f"{_n(v)} ({e.label})" for v, e in zip(values, f.estimates))


def _linear(f: Findings) -> str:
    declared = f.subject.compressor.linear
    holds = all(lin.holds for lin in f.linear)
    word = "yes" if holds else "no"
    verdict = "as declared" if f.collective_confirmed else "REFUTES the declared collective"
    return f"{word}, {verdict} ({'linear' if declared else 'not linear'}): {f.linear[0].detail}"


def _bits(f: Findings) -> str:
    values = ", ".join(f"{w.bits_per_element:.3f} ({w.label})" for w in f.wires)
    exact = [w.exact for w in f.wires]
    if any(e is None for e in exact):
        formula = "formula not declared"
    elif all(exact):
        formula = "formula exact"
    else:
        w = next(w for w in f.wires if not w.exact)
        formula = f"FORMULA OFF: ledger {w.ledger_bytes} B, declared {w.declared_bytes} B ({w.label})"
    return f"{values}; {formula}"


def _feedback(f: Findings) -> str:
    fb = f.feedback
    if fb is None:
        return "no residual"
    identity = "exact" if fb.exact else f"holds to {_n(fb.error)}" if fb.holds else f"BROKEN, off by {_n(fb.error)}"
    settles = "settled" if fb.growth <= 1.25 else f"still growing x{fb.growth:.1f}"
    return (f"sent + residual = given: {identity}; residual / gradient at most {_n(fb.max_ratio)} (step "
            f"{fb.at_step} of {len(fb.ratios)}, {settles})")


def _speed(f: Findings) -> str:
    timed = [f"{s.device}: encode {s.encode_ratio:.1f}x, decode {s.decode_ratio:.1f}x" for s in f.speeds]
    if timed and all(s.device != "cuda" for s in f.speeds):
        timed.append("no CUDA here")
    return "; ".join(timed) or "not timed"


def _measured(key: str, f: Findings) -> str:
    """The measurement a claim of ``key`` rests on, in a few words."""
    if key == "unbiased":
        b = f.bias
        if b is None:
            return "not tested (declared biased)"
        return ("holds" if b.holds else "FAILS") + (f" (largest z {b.worst:.1f} vs {b.critical:.1f})" if
                                                     not b.exact else f" (relative error {_n(b.worst)})")
    if key == "residual":
        return "no residual" if f.feedback is None else ("holds" if f.feedback.holds else "FAILS") + \
            f" (relative error {_n(f.feedback.error)})"
    if key == "linear":
        return "holds" if all(lin.holds for lin in f.linear) else "FAILS"
    if key == "bytes":
        return ", ".join(f"{w.bits_per_element:.3f} bits/element ({w.label})" for w in f.wires)
    if key == "variance":
        return _spread(f)
    return f"not measured (the report measures {', '.join(CLAIMS)})"


def _intro(inputs: Inputs) -> str:
    """What the numbers were measured on, above the table."""
    def size(s):
        return f"{len(s.tensors)} tensors, {sum(t.numel() for t in s.tensors.values()):,} elements"
    sets = "; ".join(f"{s.key}: {s.label} ({size(s)})" for s in inputs.sets)
    return (f"Inputs: {sets}. Bias: z statistics per tensor and for the model over independent draws, Bonferroni-"
            f"corrected (family-wise alpha {ALPHA:g}); omega = E norm(D(C(x)) - x)^2 / norm(x)^2 (unbiased), delta = "
            f"1 - that (biased). Bits per element: one exchange of 2 simulated workers, the ledger's count of the "
            f"worker with the largest payload. Error feedback: {len(inputs.stream)} steps of a persistent gradient "
            f"plus noise. Speed: median time over that of a memory copy of the same tensor ({inputs.timed.key}), on "
            f"one thread.\n\n")


def _markdown(rows: list[dict[str, str]]) -> str:
    header = list(rows[0]) if rows else []
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r[h].replace("|", "\\|") for h in header) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _numbers(f: Findings) -> dict[str, object]:
    c, b, fb = f.subject.compressor, f.bias, f.feedback
    row = {"compressor": f.subject.label, "method": f.subject.method.name, "class": c.__name__,
           "declared_unbiased_for": f.subject.target or "", "declared_linear": c.linear,
           "declared_same_size": c.same_size, "bias_holds": "" if b is None else b.holds,
           "bias_worst": "" if b is None else b.worst, "bias_critical": "" if b is None else b.critical,
           "bias_tests": "" if b is None else b.tests, "draws": max(e.draws for e in f.estimates)}
    omega = f.subject.target is not None
    row["omega_or_delta"] = "omega" if omega else "delta"
    row.update({f"omega_or_delta_{e.label}": e.model.spread if omega else 1 - e.model.spread for e in f.estimates})
    row["linear_holds"] = all(lin.holds for lin in f.linear)
    row.update({f"bits_per_element_{w.label}": w.bits_per_element for w in f.wires})
    exact = [w.exact for w in f.wires]
    row["bytes_formula"] = "not declared" if None in exact else "exact" if all(exact) else "off"
    row.update({"residual_error": "" if fb is None else fb.error, "residual_max_ratio": "" if fb is None else
                fb.max_ratio, "residual_growth": "" if fb is None else fb.growth})
    for s in f.speeds:
        row[f"encode_x_copy_{s.device}"], row[f"decode_x_copy_{s.device}"] = s.encode_ratio, s.decode_ratio
    row["claims"] = "; ".join(f"{k}: {v}" for k, v in f.subject.claims.items())
    row["verdict"] = "holds" if not f.failures else "fails: " + ", ".join(f.failures)
    return row


def _csv(rows: list[dict[str, object]]) -> str:
    header = list(dict.fromkeys(k for r in rows for k in r))
    out = io.StringIO()
    writer = csv.DictWriter(out, header, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def _n(v: float) -> str:
    """Three significant digits; 0 as 0."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return "0" if v == 0 else f"{v:.3g}"
