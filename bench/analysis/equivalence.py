"""Is one setting the same experiment as another? (``commbench compare``)

Runs that differ in one configuration field (``--factor``, e.g. ``precision``: fp32 against bf16-autocast) and in
nothing else are paired by seed, and compared as the paper tables compare a reproduction with a paper
(bench/analysis/papers/stats.py): the mean over the paired seeds of the difference, with the seeds' error and the
test set's (a paired bootstrap over seeds and test images where every run stored which images it got right, else
the binomial floor). Two quantities per setting: each method's top-1, and each method's gap to the baseline of
the same setting and seed (does the factor change what a comparison of methods finds?). Equivalent when the 90%
interval of the difference lies within +-margin (two one-sided tests at 5%); different when the 95% interval lies
outside it; otherwise inconclusive.
"""
from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass

from commbench.analysis.runs import Run, as_run
from commbench.config import IMPLICIT, NOT_COMPARED
from commbench.analysis.papers.evidence import test_se
from commbench.analysis.papers import stats

EQUIVALENT, DIFFERENT, INCONCLUSIVE = "equivalent", "different", "inconclusive"


@dataclass(frozen=True)
class Comparison:
    what: str           # "baseline top-1", "terngrad - baseline gap"
    setting: str        # what the runs share, short
    estimate: stats.Estimate
    margin: float
    verdict: str

    def row(self) -> dict:
        low, high = self.estimate.interval(0.90)
        return {"what": self.what, "setting": self.setting, "paired seeds": self.estimate.n,
                "difference (points)": round(self.estimate.value, 3), "90% low": round(low, 3),
                "90% high": round(high, 3), "se": round(self.estimate.se, 3), "se from": self.estimate.how,
                "margin": self.margin, "verdict": self.verdict}


def _shared(run: Run, factor: str) -> str:
    """The run's setting less the factor, the seed and the method: what two compared runs must share. Read as
    stored, so that the runs pair as they always have (filling the fields a record predates would pair more)."""
    cfg = {k: v for k, v in run.stored.items() if k not in NOT_COMPARED + (factor, "method", "method_params",
                                                                             "method_version")}
    return json.dumps(cfg, sort_keys=True, default=str)


def _verdict(est: stats.Estimate, margin: float) -> str:
    low, high = est.interval(0.90)
    if -margin <= low and high <= margin:
        return EQUIVALENT
    low, high = est.interval(0.95)
    return DIFFERENT if high < -margin or low > margin else INCONCLUSIVE


def _top1(run: Run) -> float:
    return run.metrics["top1"]


def compare(records: list[Run | dict], factor: str, reference: str, margin: float = 0.5) -> list[Comparison]:
    """Every method's top-1 and gap to the baseline at ``factor`` = each other value, against ``reference``.
    ``records``: runs, or record dicts (as ``commbench compare`` reads them)."""
    done = [r for r in map(as_run, records) if r.done and isinstance(r.metrics.get("top1"), (int, float))]
    # (shared setting, method, method parameters) -> factor value -> seed -> run
    runs: dict = defaultdict(lambda: defaultdict(dict))
    for r in done:
        # any field may be the factor, a dotted one too: its stored value, or for a record from before the field,
        # its implicit value
        value = r.stored.get(factor, IMPLICIT.get(factor))
        key = (_shared(r, factor), r.config.method, json.dumps(r.params, sort_keys=True))
        runs[key][str(value)][r.config.seed] = r
    out: list[Comparison] = []
    for (shared, method, _params), by_value in sorted(runs.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        if reference not in by_value:
            continue
        baseline = next((v for (s, m, _), v in runs.items() if s == shared and m == "baseline"), None)
        for value, seeds in sorted(by_value.items()):
            if value == reference:
                continue
            paired = sorted(set(seeds) & set(by_value[reference]), key=str)
            if not paired:
                continue
            label = f"{factor} {value} vs {reference}"
            # the test set's error (papers/evidence.py) reads each run's stored correctness
            terms = [[(1.0, seeds[s], by_value[reference][s])] for s in paired]
            values = [100 * (_top1(seeds[s]) - _top1(by_value[reference][s])) for s in paired]
            out.append(_comparison(f"{method} top-1", label, values, terms, margin))
            if method != "baseline" and baseline and value in baseline and reference in baseline:
                both = [s for s in paired if s in baseline[value] and s in baseline[reference]]
                if both:
                    terms = [[(1.0, seeds[s], baseline[value][s]),
                              (-1.0, by_value[reference][s], baseline[reference][s])] for s in both]
                    values = [100 * ((_top1(seeds[s]) - _top1(baseline[value][s]))
                                     - (_top1(by_value[reference][s]) - _top1(baseline[reference][s])))
                              for s in both]
                    out.append(_comparison(f"{method} - baseline gap", label, values, terms, margin))
    return out


def _comparison(what: str, setting: str, values: list[float], terms, margin: float) -> Comparison:
    se, how = test_se(terms, "top1")
    est = stats.estimate(values, se, how)
    return Comparison(what, setting, est, margin, _verdict(est, margin))
