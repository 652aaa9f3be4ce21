"""What one stored run says, as the reproduction reads it (a typed :class:`~commbench.analysis.runs.Run`, its
method parameters ``run.params``): its setting (everything but the seed), its share of the fp32 bytes, how its
gradients travel, and whether it learns from data at all."""
from __future__ import annotations

import json
import math

from commbench.analysis.papers.reference import Reference
from commbench.analysis.runs import Run
from commbench.config import NOT_COMPARED


# configuration fields that do not tell one setting from another (declared with each setting in config)
NOT_SETTING = NOT_COMPARED


def same_value(a, b) -> bool:
    return a is not None and b is not None and math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)


def percent(value: float | None) -> float | None:
    return None if value is None else 100.0 * value


def setting_of(run: Run, drop_params: tuple[str, ...] = ()) -> str:
    """The run's setting: its resolved configuration without the seed (and without ``drop_params``). Read as the
    record stores it (a field it predates left out, not filled), so that runs group as they always have."""
    cfg = {k: v for k, v in run.stored.items() if k not in NOT_SETTING}
    cfg["method_params"] = {k: v for k, v in run.params.items() if k not in drop_params}
    return json.dumps(cfg, sort_keys=True, default=str)


def fp32_fraction(run: Run, paper_accounting: bool) -> float | None:
    """Bytes sent over what fp32 gradients would have sent (the paper's accounting, or ours on the wire).
    A baseline has no paper_bytes: it sends fp32, its fraction is its own bytes over the fp32 count."""
    m = run.metrics
    count = m.get("paper_bytes") if paper_accounting and m.get("paper_bytes") is not None else m.get("bytes_sent")
    fp32 = m.get("bytes_fp32_equiv")
    return count / fp32 if count is not None and fp32 else None


def uses_paper_accounting(ref: Reference) -> bool:
    return "ours" not in ref.variants


def learns_nothing(run: Run) -> bool:
    """A run whose accuracy, gradients or bytes say nothing about training: on synthetic data (random inputs
    and labels), or made to time a rate-limited link (``net``, ``node_link``: such runs stop after a few steps,
    and the same computation on an unlimited link is the run that counts)."""
    return bool(run.data.get("synthetic") or run.config.net or run.config.node_link)


def link_of(run: Run) -> str:
    return run.config.net or "loopback"


def exchange_of(run: Run) -> tuple:
    """How gradients travel: among the workers (a collective: TernGrad's all-gather of trits is compared with
    the baseline's all-reduce, as in the paper), or through S parameter servers (a PS method pairs with a PS
    baseline on as many servers)."""
    params = run.params
    if params.get("topology") == "ps":
        return "ps", params.get("servers")
    return "collective", None


def overlapped_or_ps(run: Run) -> bool:
    """A baseline a speed-up may be measured against: an all-reduce that overlaps backward in buckets, as
    DistributedDataParallel does (records from before the overlap read as after backward), or synchronous
    SGD on parameter servers, which a PS method is compared with on the same servers."""
    return exchange_of(run)[0] == "ps" or run.config.exchange == "overlapped"
