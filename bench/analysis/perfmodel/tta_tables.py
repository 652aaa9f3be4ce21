"""``commbench model tta``'s tables: measured arms from the records of an emulated-network grid, the held-out
validation (calibrated on one link, predicted on another before it is read), the projection to a named cluster
and the crossover map against link bandwidth.

An arm is one method (with its parameters) on one link: its seeds' steps to the target (the step of the first
evaluation at or above it), their time to it, and the per-step costs the model needs, from the records' time
breakdown (the process holding worker 0): compute = training time less the exposed wait, encode and decode;
codec = encode + decode; bytes per worker per step as the ledger counts them, and, where the history records the
cumulative bytes, each seed's run in segments of constant bytes per step (a method whose bytes change over the run
is timed stretch by stretch: projection's ``Segment``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from commbench.analysis.runs import Run, as_run, read_runs
from commbench.analysis.table import chosen_params
from commbench.config import ConfigError
from commbench.config.parsers import net_rate_bits
from commbench.methods import registry
from commbench.store.safe_io import write_with
from commbench.store.records import UNKNOWN_CPU

from .projection import TCP_ETHERNET_SHARE, Arm, Links, Segment, exchange_s, relative_error, time_to_target_s
from .ranked import projection
from .tta_links import link_blocks

ALLREDUCE_METHODS = ("baseline", "fp16", "bf16", "powersgd")
NO_LINK = "none"  # --calibrate-on none: the runs behind no emulated link (config net null; sim or dist)
VALIDATION_LIMIT = 0.20  # the held-out error a projection must stay within (issue 38)


@dataclass(frozen=True)
class Measured:
    arm: Arm
    method: str
    compute_s: float        # per step, this arm's own records
    tta_s: float | None     # mean measured time to target (None: a seed did not reach it)
    seeds: int
    reached: int
    times: dict             # seed -> seconds to target (None: not reached)
    wait_s: float = 0.0     # per step, the exchange computation did not hide (the records' exposed wait)
    whole: tuple = ()       # each seed's whole run in segments (empty: a history without cumulative bytes)
    steps: dict = field(default_factory=dict)  # seed -> steps to target (None: not reached)


def _topology(run: Run) -> str:
    """How the run's payloads travel: its own topology setting, else all-reduce for the all-reduce baselines and
    for a kit method whose compressor is linear (random-k over a shared seed: its payloads add up), else
    all-gather."""
    if topology := run.params.get("topology"):
        return topology
    return "allreduce" if run.config.method in ALLREDUCE_METHODS or _linear(run) else "allgather"


def _linear(run: Run) -> bool:
    cls = registry.get(run.config.method) if registry.is_registered(run.config.method) else None
    if cls is None or not hasattr(cls, "compressor_for"):
        return False
    known = {f.name for f in fields(cls.Params)}  # a record of an older version may hold a retired parameter
    params = registry.params_for(run.config.method, {k: v for k, v in run.params.items() if k in known})
    return bool(cls.compressor_for(params).linear)


def _label(run: Run) -> str:
    params = chosen_params(run.stored)  # what the run set itself: its sources, as stored
    return run.config.method + (f" ({params})" if params else "")


def _per_step(run: Run) -> dict:
    m = run.metrics
    steps, workers = m["steps"], run.config.workers
    t = m.get("time_breakdown") or {}
    encode, decode, wait = (t.get(k) or 0.0 for k in ("encode_s", "decode_s", "wait_s"))
    return {"compute": (m["train_s"] - wait - encode - decode) / steps,
            "codec": _one_workers_codec_s(run, encode, decode) / steps, "wait": wait / steps,
            "sent": m["bytes_sent"] / (workers * steps), "received": m["bytes_received"] / (workers * steps)}


def _one_workers_codec_s(run: Run, encode: float, decode: float) -> float:
    """One worker's encode + decode over the run. A dist record's breakdown is one worker's (its process holds
    worker 0 alone). A sim record's is the one thread that runs all W workers (run/train.py, time_breakdown: "all
    its local workers together"): its encode_s is the SUM over the W workers (every method encodes each worker's
    gradient in a loop inside one timed block: methods/kit/exchange.py start, baseline's and powersgd's
    begin_bucket), so it is divided by W; its decode_s is a sum over the workers where the method decodes each
    worker's view (PowerSGD, the fp32 all-reduce's means), but the kit's exchange (the zoo compressors, fp16,
    bf16, TernGrad) decodes the one gathered list the simulated workers share once (methods/kit/exchange.py
    _per_worker): there it is one worker's already, as a dist worker decodes that same list itself."""
    if run.config.backend != "sim" or run.config.workers <= 1:
        return encode + decode
    workers = run.config.workers
    return encode / workers + (decode if _decodes_once_under_sim(run.config.method) else decode / workers)


def _decodes_once_under_sim(method: str) -> bool:
    """Whether the method exchanges through the kit (methods/kit/method.py: its classes build an Exchange); a
    method this installation does not know is taken to decode per worker (the smaller codec time)."""
    try:
        return hasattr(registry.get(method), "build_exchange")
    except registry.MethodRegistryError:
        return False


def _segments(run: Run | dict, upto: int | None = None) -> tuple[Segment, ...]:
    """The run to step ``upto`` (None: its last history point) in segments of constant bytes per worker per step,
    from the history's cumulative ``bytes_sent`` and ``bytes_received`` (all workers); a record whose history has
    no received bytes (older than that field) in the whole run's proportion of received to sent. Empty where a
    point lacks the cumulative bytes sent. A record dict is read as a run (tests build one from a trainer's
    outcome)."""
    run = as_run(run)
    m, workers = run.metrics, run.config.workers
    ratio = m["bytes_received"] / m["bytes_sent"] if m.get("bytes_sent") else None
    segments: list[Segment] = []
    step, sent, received = 0, 0.0, 0.0
    for point in run.history:
        if upto is not None and point["step"] > upto:
            break
        if not isinstance(point.get("bytes_sent"), (int, float)):
            return ()
        steps = point["step"] - step
        if steps <= 0:
            continue
        per_step = (point["bytes_sent"] - sent) / (workers * steps)
        if isinstance(point.get("bytes_received"), (int, float)):
            back = (point["bytes_received"] - received) / (workers * steps)
            received = point["bytes_received"]
        else:
            back = None if ratio is None else per_step * ratio
        last = segments[-1] if segments else None
        if last is not None and math.isclose(last.sent, per_step, rel_tol=1e-9) and (
                last.received == back or (last.received is not None and back is not None
                                          and math.isclose(last.received, back, rel_tol=1e-9))):
            segments[-1] = replace(last, steps=last.steps + steps)
        else:
            segments.append(Segment(steps, per_step, back))
        step, sent = point["step"], point["bytes_sent"]
    return tuple(segments)


def _crossing(run: Run, target: float) -> tuple[int | None, float | None]:
    for point in run.history:
        if isinstance(point.get("top1"), (int, float)) and point["top1"] >= target:
            return point.get("step"), point.get("train_s")
    return None, None


def _grid_runs(results: Path, task: str, workers: int, net: str):
    for r in read_runs(results):
        c = r.config
        if r.done and c.task == task and c.workers == workers and c.net == net and r.metrics.get("train_s"):
            yield r


def link_name(net: str | None) -> str:
    """A calibration link as a reader names it: its rate, or the runs behind none (--calibrate-on none)."""
    return "no emulated link" if net is None else net


def timing_cpu(results: Path, task: str, workers: int, nets: list[str | None], cpu: str | None = None) -> str:
    """The one CPU whose runs the model reads: ``cpu`` where given (it must have runs on every link in
    ``nets``; None: no emulated link), else the only CPU the runs on those links were timed on. Times from two
    CPUs never mix: per-step compute calibrated on one machine says nothing of another's."""
    counts: dict[str, dict[str, int]] = {}
    for net in nets:
        for r in _grid_runs(results, task, workers, net):
            counts.setdefault(r.cpu, {}).setdefault(link_name(net), 0)
            counts[r.cpu][link_name(net)] += 1
    listed = "; ".join(f"{name} ({', '.join(f'{c} on {n}' for n, c in per.items())})"
                       for name, per in sorted(counts.items()))
    names = [link_name(net) for net in nets]
    if cpu is not None:
        missing = [net for net in names if net not in counts.get(cpu, {})]
        if missing:
            raise ConfigError(f"--cpu {cpu!r}: no done {task} runs of {workers} workers on {', '.join(missing)} timed "
                              f"on it; the runs there were timed on: {listed or 'nothing'}")
        return cpu
    if len(counts) > 1:
        raise ConfigError(f"the {task} runs of {workers} workers on {', '.join(names)} were timed on more than one "
                          f"CPU: {listed}; choose one with --cpu (times from two machines do not mix)")
    return next(iter(counts), UNKNOWN_CPU)


def measured_arms(results: Path, task: str, workers: int, net: str | None, target: float | None = None,
                  cpu: str | None = None) -> dict:
    """label -> :class:`Measured`, from the done runs of ``task`` on ``workers`` workers behind ``net`` links
    (None: behind none, config net null), timed on ``cpu`` (None: whatever CPU)."""
    runs: dict[str, list[Run]] = {}
    for r in _grid_runs(results, task, workers, net):
        if cpu is None or r.cpu == cpu:
            runs.setdefault(_label(r), []).append(r)
    arms = {}
    for label, seeds in sorted(runs.items()):
        goal = target if target is not None else seeds[0].config.eval_target
        if goal is None:
            raise ConfigError(f"{label} on {link_name(net)}: the runs declared no target (eval.target); pass --target")
        crossings = [_crossing(r, goal) for r in seeds]
        costs = [_per_step(r) for r in seeds]
        mean = lambda key: sum(c[key] for c in costs) / len(costs)  # noqa: E731
        steps = [s for s, _ in crossings]
        times = [t for _, t in crossings]
        first = seeds[0]
        reached = None not in steps
        to_target = tuple(_segments(r, s) for r, s in zip(seeds, steps)) if reached else ()
        whole = tuple(_segments(r) for r in seeds)
        arm = Arm(label, _topology(first), sum(steps) / len(steps) if reached else None, mean("sent"),
                  mean("received"), int(first.params.get("servers") or 1), mean("codec"),
                  first.config.exchange == "overlapped" and first.config.method in ALLREDUCE_METHODS,
                  runs=to_target if all(to_target) else ())
        arms[label] = Measured(arm, first.config.method, mean("compute"),
                               sum(times) / len(times) if None not in times else None, len(seeds),
                               sum(t is not None for t in times),
                               {r.config.seed: t for r, t in zip(seeds, times)}, mean("wait"),
                               whole if all(whole) else (), {r.config.seed: s for r, s in zip(seeds, steps)})
    return arms


def links_of(net: str, workers: int, latency_s: float) -> Links:
    """The emulated network: every worker (and server) on its own link of rate ``net``, a rate tbf counts in
    Ethernet frames of TCP segments."""
    return Links(workers, 1, net_rate_bits(net) / 8, None, latency_s, TCP_ETHERNET_SHARE)


def with_measured_overlap(calibration: dict, links: Links) -> dict:
    """The calibration arms with what the calibration ``links`` measured of each exchange beside its bytes.

    - Overlapped: what computation hid, the modelled exchange there less the exposed wait the records measured
      (at least 0). How much of an exchange a backward pass hides depends on the buckets' order and sizes, not on
      the link, so it carries over. Where the runs come in segments of different bytes, the hidden time is the
      one that leaves, summed over the segments, the measured wait (a step whose exchange is shorter than it
      exposes nothing).
    - Waited whole: the overhead, the measured wait less the modelled exchange (at least 0): the transport's
      per-message costs (TernGrad's all-gather sends a message per tensor), the servers' work, a cost per step
      that does not scale with the link's bandwidth, so it carries over too."""
    out = {}
    for label, cal in calibration.items():
        arm = cal.arm
        if arm.overlapped:
            if cal.whole:
                hidden = _hidden_for_wait(arm, cal.whole, links, cal.wait_s)
            else:
                hidden = max(0.0, exchange_s(arm.topology, links, arm.sent, arm.received, arm.servers) - cal.wait_s)
            arm = replace(arm, hidden_s=hidden)
        else:
            arm = replace(arm, overhead_s=max(0.0, cal.wait_s - _mean_exchange_s(arm, cal.whole, links)))
        out[label] = replace(cal, arm=arm)
    return out


def _segment_costs(arm: Arm, runs: tuple, links: Links) -> list[list[tuple[int, float]]]:
    """Each run's segments as (steps, modelled exchange per step at the segment's own bytes)."""
    return [[(seg.steps, exchange_s(arm.topology, links, seg.sent, seg.received, arm.servers)) for seg in run]
            for run in runs]


def _mean_exposed_s(costs: list[list[tuple[int, float]]], hidden_s: float) -> float:
    """The runs' mean exposed exchange per step when ``hidden_s`` of each step's exchange is hidden."""
    return sum(sum(n * max(0.0, x - hidden_s) for n, x in run) / sum(n for n, _ in run) for run in costs) / len(costs)


def _mean_exchange_s(arm: Arm, runs: tuple, links: Links) -> float:
    """The modelled exchange per step over the runs (each segment at its own bytes), or at the arm's mean bytes."""
    if not runs:
        return exchange_s(arm.topology, links, arm.sent, arm.received, arm.servers)
    return _mean_exposed_s(_segment_costs(arm, runs, links), 0.0)


def _hidden_for_wait(arm: Arm, runs: tuple, links: Links, wait_s: float) -> float:
    """The h for which the runs' mean exposed wait per step, sum of steps x max(0, exchange - h) over the segments,
    is ``wait_s``: it falls as h grows, so bisection finds it (0 where even h = 0 exposes no more than the wait)."""
    costs = _segment_costs(arm, runs, links)
    low, high = 0.0, max(x for run in costs for _, x in run)
    if _mean_exposed_s(costs, low) <= wait_s:
        return 0.0
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if _mean_exposed_s(costs, mid) > wait_s else (low, mid)
    return (low + high) / 2


def compute_of(arms: dict) -> float:
    """One worker's compute per step: the fp32 baseline's, on the calibration link."""
    base = [m for m in arms.values() if m.method == "baseline"]
    if not base:
        raise ConfigError("calibration: no baseline runs on the calibration link to take the compute time from")
    return base[0].compute_s


def validation(calibration: dict, held_out: dict, links: Links) -> list[dict]:
    """Each arm's time to target on the held-out link, predicted from the calibration link's steps and costs,
    beside the measurement there, and its predicted ratio to the strongest all-reduce on that link. Both links are
    this machine's, so each arm keeps its own compute per step (casting to fp16 is compute, for instance)."""
    ratios = {r["method"]: r["vs strongest"] for r in projection(calibration, links, None)}
    rows = []
    for label, cal in calibration.items():
        predicted = time_to_target_s(cal.arm, links, cal.compute_s)
        measured = held_out.get(label)
        error = relative_error(predicted, measured.tta_s if measured else None)
        rows.append({"method": label, "steps to target": cal.arm.steps_to_target, "predicted s": predicted,
                     "measured s": measured.tta_s if measured else None, "held-out error": error,
                     "within 20%": None if error is None else abs(error) <= VALIDATION_LIMIT,
                     "vs strongest": ratios[label]})
    return rows


def crossover(calibration: dict, links: Links, compute_s: float, codec_scale: float = 1.0,
              bits_per_s: tuple[float, float] = (1e7, 1e11), points: int = 41) -> dict:
    """label -> [(link bits/s, time to target relative to the strongest all-reduce at that link)]."""
    lo, hi = (math.log10(b) for b in bits_per_s)
    curves: dict[str, list] = {label: [] for label in calibration}
    for i in range(points):
        rate = 10 ** (lo + (hi - lo) * i / (points - 1))
        rows = projection(calibration, replace(links, between_bytes_s=rate / 8), compute_s, codec_scale)
        for row in rows:
            if row["vs strongest"]:
                curves[row["method"]].append((rate, 1 / row["vs strongest"]))
    return {label: curve for label, curve in curves.items() if curve}


def report(results: Path, task: str, workers: int, calibrate_on: str, validate_on: str | None, cluster=None,
           compute_s: float | None = None, target: float | None = None, latency_s: float = 50e-6,
           cpu: str | None = None, links: list[str] | None = None) -> tuple[list[dict], list[str], dict, str]:
    """The validation rows (when ``validate_on`` is given), then the projection to ``cluster`` (when given; one
    block per rate in ``links`` where given): rows, notes, the calibration arms for a crossover map, and the CPU
    the runs read were timed on."""
    cpu = timing_cpu(results, task, workers, [calibrate_on] + ([validate_on] if validate_on else []), cpu)
    calibration = measured_arms(results, task, workers, calibrate_on, target, cpu)
    if not calibration:
        raise ConfigError(f"--calibrate-on {calibrate_on}: no done {task} runs of {workers} workers on that link "
                          f"under {results}")
    calibration = with_measured_overlap(calibration, links_of(calibrate_on, workers, latency_s))
    notes = [f"steps to target and per-step costs from {task}, {workers} workers, on {calibrate_on} links "
             f"({sum(m.seeds for m in calibration.values())} runs under {results}, timed on {cpu})"]
    rows: list[dict] = []
    errors: dict[str, float | None] = {}
    if validate_on:
        rows += _validation_rows(results, task, workers, calibration, validate_on, target, latency_s, cpu, errors,
                                 notes)
    if cluster is not None:
        rows += cluster_rows(calibration, cluster, task, workers, compute_s, links, errors, notes)
    return same_columns(rows), notes, calibration, cpu


def _validation_rows(results: Path, task: str, workers: int, calibration: dict, validate_on: str,
                     target: float | None, latency_s: float, cpu: str, errors: dict, notes: list[str]) -> list[dict]:
    """The held-out link's rows; each arm's error into ``errors``, the worst into ``notes``."""
    rows = []
    held_out = measured_arms(results, task, workers, validate_on, target, cpu)
    for row in validation(calibration, held_out, links_of(validate_on, workers, latency_s)):
        errors[row["method"]] = row["held-out error"]
        rows.append({"where": f"{validate_on} (held out, measured)", **row})
    worst = max((abs(e) for e in errors.values() if e is not None), default=None)
    notes.append(f"held-out validation on {validate_on}: worst error "
                 + (f"{100 * worst:.0f}% (limit {100 * VALIDATION_LIMIT:.0f}%)" if worst is not None
                    else "unknown (no run there reached the target)"))
    return rows


def cluster_rows(calibration: dict, cluster, task: str, workers: int, compute_s: float | None,
                 links: list[str] | None, errors: dict, notes: list[str]) -> list[dict]:
    """The projection to ``cluster``: one block on its own link, or one per rate in ``links`` (tta_links)."""
    compute, source = (compute_s, "--compute-s") if compute_s is not None else cluster.compute_s(task)
    notes.append(f"cluster {cluster.name}: {cluster.description} (compute {compute:g} s per step: {source}; "
                 f"codecs at {cluster.codec_scale:g}x their time here); a projection, not a measurement: steps to "
                 f"the target as measured with {workers} workers at the same global batch")
    if links:
        notes.append(f"links between nodes: {', '.join(links)} in turn (the cluster's {cluster.link} replaced; its "
                     f"shape, link within a node and latency kept); each arm against the strongest all-reduce on "
                     f"that link; seeds low/high: the 95% interval of the per-seed ratio, seeds paired")
        return link_blocks(calibration, cluster, compute, links, errors)
    return [{"where": f"{cluster.name} (projected)", "method": row["method"],
             "steps to target": row["steps to target"], "predicted s": row["time to target s"], "measured s": None,
             "held-out error": errors.get(row["method"]), "within 20%": None, "vs strongest": row["vs strongest"]}
            for row in projection(calibration, cluster.links, compute, cluster.codec_scale)]


def readable(rows: list[dict]) -> list[dict]:
    """The rows of :func:`report` as a person reads them (``model tta``'s markdown; csv and json keep the plain
    numbers): seconds to three significant digits, ratios as ``0.54x``, errors as signed percentages, yes or no."""
    cells = {"steps to target": _steps, "predicted s": _seconds, "measured s": _seconds, "held-out error": _percent,
             "within 20%": _yes_no, "vs strongest": _ratio, "seeds low": _ratio, "seeds high": _ratio}
    return [{key: cells.get(key, _as_is)(value) for key, value in row.items()} for row in same_columns(rows)]


def same_columns(rows: list[dict]) -> list[dict]:
    """Every row with every row's columns (None where it has none): a table, and a CSV, take one header."""
    keys = list(dict.fromkeys(key for row in rows for key in row))
    return [{key: row.get(key) for key in keys} for row in rows]


def _as_is(value) -> str:
    return "—" if value is None else str(value)


def _steps(value) -> str:
    return "—" if value is None else f"{value:,.0f}"


def _seconds(value) -> str:
    """``1,234``, ``12.3``, ``0.0123``: three significant digits, an exponent only below a millisecond."""
    if value is None:
        return "—"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}" if abs(value) >= 1e-3 else f"{value:.2e}"


def _percent(value) -> str:
    if value is None:
        return "—"
    return "0.0%" if round(100 * value, 1) == 0 else f"{100 * value:+.1f}%"  # no sign on a rounded zero


def _ratio(value) -> str:
    return "—" if value is None else f"{value:.2f}x"


def _yes_no(value) -> str:
    return "—" if value is None else "yes" if value else "no"


def measured_points(arms: dict, net: str) -> list[dict]:
    """The measured time to target relative to the strongest all-reduce on ``net``, seeds paired (tta.speedup)."""
    from commbench.analysis.tta import Arm as Timed, speedup, strongest

    timed = {label: Timed(m.method, m.times) for label, m in arms.items()}
    strong = strongest(list(timed.values()))
    points = []
    for label, arm in timed.items():
        paired = speedup(strong, arm) if strong else None
        if paired and paired.ratio:
            points.append({"method": label, "bits_per_s": net_rate_bits(net), "relative": 1 / paired.ratio,
                           "low": 1 / paired.high if paired.high else None,
                           "high": 1 / paired.low if paired.low else None})
    return points


def draw_crossover(path: Path, results: Path, task: str, workers: int, calibration: dict, nets: list[str], cluster,
                   compute_s: float, target: float | None, latency_s: float, cpu: str | None = None,
                   root: Path | None = None) -> None:
    """The crossover map: the measured shape's lines and points (on the emulated links ``nets``; none where the
    runs were behind no emulated link, ``--calibrate-on none``), and the cluster's lines."""
    cluster_shape = crossover(calibration, cluster.links, compute_s, cluster.codec_scale)
    if not nets:
        crossover_figure(path, {}, cluster_shape, [],
                         f"{task}: {workers} workers' steps to target, {cluster.name} (dashed), projected", root)
        return
    measured_shape = crossover(calibration, links_of(nets[0], workers, latency_s), compute_of(calibration))
    points = [p for net in nets for p in measured_points(measured_arms(results, task, workers, net, target, cpu), net)]
    crossover_figure(path, measured_shape, cluster_shape, points,
                     f"{task}: {workers} workers as measured (solid, points) and {cluster.name} (dashed), projected",
                     root)


def _crossover_lines(ax, measured_shape: dict, cluster_shape: dict, points: list[dict]) -> list:
    """Each method's lines and points in its colour across every figure (figure_style.method_color), a variant of a
    method told by its marker; returns the legend's entry for each."""
    from matplotlib.lines import Line2D

    from commbench.analysis.figure_style import variant_styles

    styles = variant_styles(set(measured_shape) | set(cluster_shape) | {p["method"] for p in points})
    entries = []
    for label, style in styles.items():
        color, marker = style["color"], style["marker"]
        for curves, ls in ((measured_shape, "-"), (cluster_shape, "--")):
            if label in curves:  # a marker every few points: the lines of two variants of a method apart
                ax.plot([c[0] for c in curves[label]], [c[1] for c in curves[label]], ls=ls, color=color, lw=1.2,
                        marker=marker, ms=3.5, markevery=max(1, len(curves[label]) // 5))
        for point in (p for p in points if p["method"] == label):
            low, high = point.get("low"), point.get("high")
            err = [[point["relative"] - low], [high - point["relative"]]] if low is not None else None
            ax.errorbar(point["bits_per_s"], point["relative"], yerr=err, fmt=marker, ms=6, color=color, capsize=3,
                        markeredgecolor="white", markeredgewidth=0.6, zorder=3)
        entries.append(Line2D([], [], color=color, marker=marker, ms=4, label=label))
    return entries


def _crossover_axes(ax, measured_shape: dict, cluster_shape: dict, points: list[dict], title: str) -> None:
    """The crossover map on ``ax``: bandwidth ticks in Mbit/s and Gbit/s, ratios as 0.3x, 3x, and the legend
    right of the axes, naming each method once and each line style once."""
    from matplotlib.lines import Line2D

    from commbench.analysis.figure_style import (REFERENCE, bits_per_s_label, legend_outside, ratio_label,
                                                 readable_log_ticks)

    entries = _crossover_lines(ax, measured_shape, cluster_shape, points)
    ax.axhline(1.0, color=REFERENCE, lw=0.8, ls=":")
    if measured_shape or points:  # a map calibrated behind no emulated link has the cluster's lines alone
        entries += [Line2D([], [], color=REFERENCE, ls="-", label="as measured: the runs' own links")]
    entries += [Line2D([], [], color=REFERENCE, ls="--", label="the cluster, projected")]
    if points:
        entries += [Line2D([], [], color=REFERENCE, marker="o", ls="none",
                           label="measured: seeds paired, 95% interval")]
    entries += [Line2D([], [], color=REFERENCE, ls=":", lw=0.8, label="1x: as fast as the strongest all-reduce")]
    ax.set_xscale("log")
    ax.set_yscale("log")
    readable_log_ticks(ax, bits_per_s_label)
    readable_log_ticks(ax, ratio_label, axis="y")
    ax.set(xlabel="link bandwidth (log)", ylabel="time to target / the strongest all-reduce's (log)")
    ax.set_title(title, fontsize=9)
    legend_outside(ax, entries, [e.get_label() for e in entries])


def crossover_figure(path: Path, measured_shape: dict, cluster_shape: dict, points: list[dict], title: str,
                     root: Path | None = None) -> None:
    """Projected time to target relative to the strongest all-reduce against link bandwidth (log): per method, a
    solid line for the measured runs' own shape (the points, with their paired intervals, should lie on it: the
    validation, drawn) and a dashed one for the named cluster."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.0, 4.8))
    try:  # never through a link below root, never over a special file (store/safe_io.py)
        _crossover_axes(ax, measured_shape, cluster_shape, points, title)
        # cropped to what was drawn: the legend lies right of the axes
        write_with(path, lambda f: fig.savefig(f, format=path.suffix.lstrip(".").lower() or "png",
                                               bbox_inches="tight", pad_inches=0.08), root)
    finally:
        plt.close(fig)
