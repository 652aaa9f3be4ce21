"""commbench compare: runs that differ in one setting, paired by seed and image by image, and the equivalence
test the verdict rule uses (90% interval within the margin)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from commbench.analysis.equivalence import DIFFERENT, EQUIVALENT, compare
from commbench.store.correctness import pack_correct
from commbench.store.records import iter_records

from ..conftest import commbench
from ..helpers import write_record


def bits_record(root, run_id, correct: np.ndarray, **kw) -> None:
    record = write_record(root, run_id, top1=float(correct.mean()), **kw)
    record["metrics"]["eval_correct"] = pack_correct(correct)
    (root / "runs" / f"{run_id}.json").write_text(json.dumps(record))


def planted(root, shift_terngrad: int) -> None:
    """fp32 and bf16 runs of the baseline and TernGrad, 3 seeds: bf16 flips 30 images of the baseline's either
    way (no net change), and TernGrad under bf16 loses ``shift_terngrad`` more images than under fp32."""
    rng = np.random.default_rng(0)
    for seed in (1, 2, 3):
        base = rng.random(10_000) < 0.9
        tern = base.copy()
        tern[np.flatnonzero(tern)[:50]] = False  # TernGrad 0.5 points under the baseline
        for precision in ("fp32", "bf16-autocast"):
            b, t = base.copy(), tern.copy()
            if precision != "fp32":
                flip = rng.choice(10_000, 30, replace=False)
                b[flip] = ~b[flip]
                t[flip] = ~t[flip]
                t[np.flatnonzero(t)[:shift_terngrad]] = False
            extra = {"config": {"precision": precision}} if precision != "fp32" else {}
            bits_record(root, f"base-{precision}-{seed}", b, seed=seed, **extra)
            bits_record(root, f"tern-{precision}-{seed}", t, seed=seed, method="terngrad", **extra)


def test_a_factor_that_changes_nothing_beyond_noise_is_equivalent(tmp_path):
    planted(tmp_path, shift_terngrad=0)
    found = {c.what: c for c in compare(list(iter_records(tmp_path)), "precision", "fp32")}
    assert set(found) == {"baseline top-1", "terngrad top-1", "terngrad - baseline gap"}
    assert all(c.verdict == EQUIVALENT and c.estimate.n == 3 for c in found.values())
    assert found["baseline top-1"].estimate.how == "paired bootstrap over seeds and test images"


def test_a_factor_that_moves_one_method_changes_the_gap(tmp_path):
    planted(tmp_path, shift_terngrad=150)  # 1.5 points more lost under bf16
    found = {c.what: c for c in compare(list(iter_records(tmp_path)), "precision", "fp32")}
    assert found["baseline top-1"].verdict == EQUIVALENT
    assert found["terngrad - baseline gap"].verdict == DIFFERENT
    assert found["terngrad - baseline gap"].estimate.value == pytest.approx(-1.5, abs=0.05)


def test_the_command_prints_the_comparisons_and_refuses_what_it_cannot_pair(tmp_path):
    planted(tmp_path, shift_terngrad=0)
    done = commbench("compare", "--results", str(tmp_path), "--factor", "precision", "--reference", "fp32",
                     "--format", "csv")
    assert done.returncode == 0 and done.stdout.count("equivalent") == 3 and "90% low" in done.stdout
    none = commbench("compare", "--results", str(tmp_path), "--factor", "precision", "--reference", "fp16")
    assert none.returncode == 2 and "pair by seed with a run at precision = fp16" in none.stderr
