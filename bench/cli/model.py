"""``commbench model``: the performance models on the command line.

    commbench model terngrad [--task T] [--method baseline,terngrad] [--gpus-per-node I] [--nodes 1,2,4,8]
                             [--network 1gbit] [--latency-us U] [--step-time S | --record PATH] [--batch K]
                             [--scaling strong|weak] [--calibration FILE] [--figure5] [--format md|csv|json]
    commbench model ssdsgd   [--task T] [--k 1..5] [--step-time S | --record PATH] [--network 56gbit] ...
    commbench model calibrate [--world-size 2] [--sizes 1KiB,...] [--out results/calibration/gloo-w2.json]

Bad input raises :class:`bench.config.ConfigError` (one line naming the item; the CLI exits 2).
"""
from __future__ import annotations

import argparse
import csv
import datetime
import io
import json
import math
import platform
import re
import sys
from pathlib import Path
from typing import Any

from commbench.config import ascii_float, ascii_int
from commbench.config import ConfigError, parse_set
from commbench.analysis.perfmodel import alphabeta
from commbench.analysis.perfmodel import ssdsgd
from commbench.analysis.perfmodel import terngrad

DEFAULT_TASK = "alexnet-imagenet"
_RATE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kKmMgGtT]?)(bit|bps|B|byte)(?:/s|ps)?\s*$",
                   re.IGNORECASE)
_SIZE = re.compile(r"^\s*([0-9]+)\s*(B|KiB|MiB|GiB|kB|KB|MB|GB)?\s*$")
_PREFIX = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_SIZE_UNIT = {None: 1, "B": 1, "KiB": 2 ** 10, "MiB": 2 ** 20, "GiB": 2 ** 30, "kB": 10 ** 3, "KB": 10 ** 3,
              "MB": 10 ** 6, "GB": 10 ** 9}


# -- input parsing ----------------------------------------------------------------------------------------
def parse_rate(text: str, what: str = "rate") -> float:
    """A link rate to bytes/s: ``1gbit``, ``100mbit``, ``10Gbps`` (bits/s, decimal prefixes) or ``15.75GB``,
    ``12GByte`` (bytes/s). A bare lower-case ``b`` is refused as ambiguous."""
    m = _RATE.match(str(text))
    if not m:
        raise ConfigError(f"{what}: cannot read rate {text!r} (examples: 1gbit, 100mbit, 10gbit, 15.75GB)")
    number, prefix, unit = float(m.group(1)), m.group(2).lower(), m.group(3)
    if unit.lower() in ("bit", "bps"):
        value = number * _PREFIX[prefix] / 8
    elif unit == "B" or unit.lower() == "byte":
        value = number * _PREFIX[prefix]
    else:
        raise ConfigError(f"{what}: {text!r} is ambiguous: write bit (bits/s) or B (bytes/s)")
    if not value > 0:
        raise ConfigError(f"{what}: must be positive, got {text!r}")
    return value


def parse_size(text: str) -> int:
    """A message size in bytes: ``4096``, ``64KiB``, ``1MiB``, ``1MB``."""
    m = _SIZE.match(str(text))
    if not m:
        raise ConfigError(f"sizes: cannot read size {text!r} (examples: 4096, 64KiB, 1MiB)")
    return int(m.group(1)) * _SIZE_UNIT[m.group(2)]


def parse_ints(text: str, what: str) -> list[int]:
    """``1,2,4,8`` or ``1..5`` (inclusive) to positive integers."""
    text = str(text).strip()
    try:
        if ".." in text:
            lo, hi = (int(x) for x in text.split("..", 1))
            values = list(range(lo, hi + 1))
        else:
            values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"{what}: cannot read {text!r} (examples: 1,2,4,8 or 1..5)") from None
    if not values or any(v < 1 for v in values):
        raise ConfigError(f"{what}: need positive integers, got {text!r}")
    return values


def positive(value: float | None, what: str) -> float | None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise ConfigError(f"{what}: must be a positive number, got {value!r}")
    return value


def non_negative(value: float | None, what: str) -> float | None:
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise ConfigError(f"{what}: must be a number >= 0, got {value!r}")
    return value


def load_record(path: str) -> dict:
    """One worker's step time and batch from a run record: metrics.train_s / metrics.steps."""
    try:
        record = json.loads(Path(path).read_text())
        metrics, config = record["metrics"], record["config"]
        train_s, steps = float(metrics["train_s"]), int(metrics["steps"])
    except FileNotFoundError:
        raise ConfigError(f"--record: no file {path}") from None
    except (ValueError, KeyError, TypeError):
        raise ConfigError(f"--record: {path} is not a run record with metrics.train_s and metrics.steps") from None
    if not (train_s > 0 and steps > 0):
        raise ConfigError(f"--record: {path} has no timed steps (train_s={train_s}, steps={steps})")
    return {"step_time_s": train_s / steps, "batch": config.get("batch_per_worker"), "task": config.get("task"),
            "workers": config.get("workers"), "backend": config.get("backend"), "path": path}


def load_calibration(path: str, op: str = "allreduce") -> alphabeta.Fit:
    try:
        data = json.loads(Path(path).read_text())
        f = data["fits"][op]
        fit = alphabeta.Fit(float(f["alpha_s"]), float(f["beta_s_per_byte"]), float(f["r2"]),
                            float(f["residual_rms_s"]), int(f["n"]), str(f.get("weighting", "ols")))
    except FileNotFoundError:
        raise ConfigError(f"--calibration: no file {path}") from None
    except (ValueError, KeyError, TypeError):
        raise ConfigError(f"--calibration: {path} has no {op} fit (write one with: commbench model calibrate)") \
            from None
    if fit.alpha_s < 0 or fit.beta_s_per_byte <= 0:
        raise ConfigError(f"--calibration: the {op} fit in {path} has alpha {fit.alpha_s:.3g} s, beta "
                          f"{fit.beta_s_per_byte:.3g} s/B; a latency and a bandwidth need alpha >= 0 and beta > 0 "
                          "(refit with --weighting relative, or give --network and --latency-us)")
    return fit


def method_overrides(settings: dict[str, Any], methods: list[str]) -> dict[str, dict]:
    """``--set method.x=v`` applied to each listed method that has parameter x."""
    from commbench.methods import METHODS, param_fields

    out: dict[str, dict] = {m: {} for m in methods}
    for key, value in settings.items():
        if not key.startswith("method."):
            raise ConfigError(f"--set {key}: only method.<param> settings apply to the model")
        name = key.split(".", 1)[1]
        takers = [m for m in methods if name in param_fields(METHODS[m].Params)]
        if not takers:
            raise ConfigError(f"--set {key}: none of {', '.join(methods)} has parameter {name!r}")
        for m in takers:
            out[m][name] = value
    return out


def check_task(name: str) -> str:
    from commbench.tasks import TASKS

    if name not in TASKS:
        raise ConfigError(f"task: unknown task {name!r} (known: {', '.join(TASKS)})")
    return name


def check_methods(text: str) -> list[str]:
    from commbench.methods import METHODS

    methods = [m.strip() for m in str(text).split(",") if m.strip()]
    if not methods:
        raise ConfigError("method: no method given")
    for m in methods:
        if m not in METHODS:
            raise ConfigError(f"method: unknown method {m!r} (known: {', '.join(METHODS)})")
    return methods


def step_and_task(args) -> tuple[str, float | None, int | None, str]:
    """(task, step time, batch, where the step time came from), from --task, --step-time, --record, --batch."""
    record = load_record(args.record) if args.record else None
    task = args.task or (record or {}).get("task") or DEFAULT_TASK
    check_task(task)
    if record and record["task"] and args.task and record["task"] != args.task:
        raise ConfigError(f"--record: {args.record} is a run of {record['task']}, not of --task {args.task}")
    step = positive(args.step_time, "--step-time")
    source = "--step-time"
    batch = args.batch
    if record:
        step, source = record["step_time_s"], f"record {args.record} (train_s / steps)"
        if record["workers"] and record["workers"] != 1:
            print(f"commbench: note: {args.record} is a {record['workers']}-worker {record['backend']} run; its step "
                  "time includes that run's exchange, not one worker's computation alone", file=sys.stderr)
        batch = batch or record["batch"]
    if batch is not None and batch < 1:
        raise ConfigError(f"--batch: must be a positive integer, got {batch}")
    return task, step, batch, source


def paper_batch(task: str) -> int:
    """Samples per worker in the task's default recipe (global batch / workers)."""
    from commbench.tasks import TASKS

    recipe = next(iter(TASKS[task].recipes.values()))
    workers = recipe["workers"].value if "workers" in recipe else 1
    return recipe["global_batch"].value // workers


def network(args, default_rate: str, default_latency_s: float) -> tuple[float, float, str]:
    """(bytes/s, latency s, description) from --calibration or --network/--latency-us (or the defaults)."""
    latency = non_negative(args.latency_us, "--latency-us")
    if args.calibration:
        if args.network or latency is not None:
            raise ConfigError("--calibration: gives the network's latency and bandwidth; drop --network/--latency-us")
        fit = load_calibration(args.calibration)
        return (fit.bandwidth_bytes_per_s, fit.alpha_s,
                f"calibration {args.calibration}: allreduce alpha {fit.alpha_s:.3g} s, 1/beta "
                f"{fit.bandwidth_bytes_per_s:.4g} B/s")
    rate = parse_rate(args.network or default_rate, "--network")
    latency_s = default_latency_s if latency is None else latency * 1e-6
    return rate, latency_s, f"{args.network or default_rate} = {rate:.4g} B/s, latency {latency_s:.3g} s"


# -- output ---------------------------------------------------------------------------------------------
def render(rows: list[dict], notes: list[str], fmt: str, extra: dict | None = None) -> str:
    if fmt == "json":
        return json.dumps({"notes": notes, **(extra or {}), "rows": rows}, indent=2, default=str) + "\n"
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]) if rows else [])
        writer.writeheader()
        writer.writerows(rows)
        return buffer.getvalue()

    def cell(v):
        if isinstance(v, float):
            return f"{v:.4g}"
        return "—" if v is None else str(v)

    lines = [f"- {n}" for n in notes]
    if rows:
        head = list(rows[0])
        lines += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(cell(r[k]) for k in head) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def emit(text: str, out: str | None) -> None:
    if out:
        from commbench.store.records import atomic_write

        atomic_write(Path(out), text)
    sys.stdout.write(text)


# -- subcommands ------------------------------------------------------------------------------------------
def run_terngrad(args) -> int:
    if args.figure5:
        return run_figure5(args)
    if args.utilization is not None:
        raise ConfigError("--utilization: only with --figure5")
    from commbench.analysis.perfmodel.gradient_bytes import gradient_bytes

    task, step, batch, source = step_and_task(args)
    if step is None:
        raise ConfigError("step time: give --step-time SECONDS or --record PATH (one worker's measured step)")
    batch = batch or paper_batch(task)
    methods = check_methods(args.method)
    if args.fraction_sent is not None and not set(methods) & {"wgt", "bgt", "qgt"}:
        raise ConfigError("--fraction-sent: only for the threshold methods wgt, bgt, qgt")
    overrides = method_overrides(parse_set(args.set), methods)
    nodes = parse_ints(args.nodes, "--nodes")
    i = args.gpus_per_node
    if i < 1:
        raise ConfigError(f"--gpus-per-node: must be a positive integer, got {i}")
    rate, latency_s, described = network(args, "1gbit", terngrad.LATENCY_1GBE.value)
    gwd = parse_rate(args.intra_node, "--intra-node") if args.intra_node else terngrad.PCIE3_X16.value
    cwd = parse_rate(args.cpu_gpu, "--cpu-gpu") if args.cpu_gpu else terngrad.PCIE3_X16.value
    rows, per = [], {}
    for method in methods:
        g = gradient_bytes(task, method, overrides[method],
                           fraction_sent=args.fraction_sent if method in ("wgt", "bgt", "qgt") else None)
        for j in nodes:
            p = terngrad.predict(task, method, i * j, rate, step_time_s=step, batch=batch, gpus_per_node=i,
                                 latency_s=latency_s, gpu_gpu_bytes_per_s=gwd, cpu_gpu_bytes_per_s=cwd,
                                 scaling=args.scaling, grad_bytes=g.sent)
            per[(method, j)] = p.images_per_s
            rows.append({"method": method, "gpus_per_node": i, "nodes": j, "workers": p.workers,
                         "grad_bytes": int(g.sent), "iteration_s": p.iteration_s, "comm_s": p.comm_s,
                         "images_per_s": p.images_per_s})
    reference = "baseline" if "baseline" in methods else methods[0]
    for r in rows:
        r[f"speedup_vs_{reference}"] = r["images_per_s"] / per[(reference, r["nodes"])]
    notes = [f"TernGrad performance model (supp. Eq. {'6-7' if args.scaling == 'strong' else '8-9'}, "
             f"{args.scaling} scaling), task {task}, K = {batch} samples "
             f"{'in all' if args.scaling == 'strong' else 'per worker'}",
             f"step time {step:.4g} s from {source}; T(1,1,K,|g|) = step + |g| / C_cwd",
             f"network C_nwd/C_ncost: {described}",
             f"C_gwd {gwd:.4g} B/s, C_cwd {cwd:.4g} B/s" + ("" if args.intra_node and args.cpu_gpu
                                                             else f" (default: {terngrad.PCIE3_X16.source})"),
             "|g| = bytes one worker sends per step, from one ledgered step of the method (paper parameters of "
             "the task, then --set)"]
    emit(render(rows, notes, args.format), args.out)
    return 0


def run_figure5(args) -> int:
    given = [flag for flag, value in (("--step-time", args.step_time), ("--record", args.record),
                                      ("--network", args.network), ("--latency-us", args.latency_us),
                                      ("--calibration", args.calibration), ("--batch", args.batch),
                                      ("--set", args.set), ("--task", args.task))
             if value]
    if given:
        raise ConfigError(f"--figure5: uses the paper's settings (and --utilization); drop {given[0]}")
    utilization = terngrad.FIGURE5_UTILIZATION.value if args.utilization is None else args.utilization
    if not 0 < utilization <= 1:
        raise ConfigError(f"--utilization: must be in (0, 1], got {utilization}")
    curves = terngrad.figure5(utilization=utilization)
    rows = []
    by = {(c.cluster, c.task, c.method): c for c in curves}
    for c in curves:
        if c.method != "baseline":
            continue
        tern = by[(c.cluster, c.task, "terngrad")]
        for n, base_v, tern_v in zip(c.gpus, c.images_per_s, tern.images_per_s):
            rows.append({"cluster": c.cluster, "task": c.task, "gpus": n, "baseline_images_per_s": base_v,
                         "terngrad_images_per_s": tern_v, "speedup": tern_v / base_v})
    check = terngrad.figure5_speedup(utilization=utilization)
    notes = ["TernGrad Figure 5 from the model (weak scaling, supp. Eq. 8-9); every parameter with its source:"]
    for cl in terngrad.FIGURE5_CLUSTERS.values():
        for name in ("gpus_per_node", "max_nodes", "network_bw", "network_latency_s", "gpu_gpu_bw", "cpu_gpu_bw",
                     "gpu_peak_flops"):
            v = getattr(cl, name)
            notes.append(f"({cl.name}) {name} = {v.value:.4g}: {v.source}")
    for task, b in terngrad.FIGURE5_BATCH.items():
        compute = next(c.compute_s for c in curves if c.task == task and c.cluster == "a")
        notes.append(f"{task}: batch {b.value} per GPU ({b.source}); compute on (a) {compute:.4g} s")
    notes.append(f"utilization {utilization} ({terngrad.FIGURE5_UTILIZATION.source})")
    for label, v in check["variants"].items():
        implied = v["compute_s_for_paper_speedup"]
        notes.append(
            f"AlexNet, 8 GPUs (4 x 2 nodes), 1 Gbps: model {v['speedup']:.2f}x vs paper {check['paper_speedup']}x "
            f"-> {'reproduced' if abs(v['speedup'] - check['paper_speedup']) < 0.05 else 'NOT reproduced'} "
            f"(TernGrad {label}: |g| {v['terngrad_grad_bytes']:.0f} B vs baseline "
            f"{check['baseline_grad_bytes']:.0f} B); "
            f"3.04x would need a single-GPU compute of {implied:.3g} s per {check['batch_per_gpu']} images"
            + (f" ({v['images_per_s_per_gpu_for_paper_speedup']:.0f} images/s per GPU, utilization "
               f"{v['utilization_for_paper_speedup']:.3f})" if implied > 0 else " (none: above the bound)"))
    emit(render(rows, notes, args.format, {"speedup_check": check}), args.out)
    return 0


def run_ssdsgd(args) -> int:
    ks = parse_ints(args.k, "--k")
    direct = {name: non_negative(getattr(args, name), f"--{name.replace('_', '-')}")
              for name in ("tf", "tb", "tc", "hb_last", "hc_first", "hloc_first", "hs")}
    if args.backward_share is not None and not 0 < args.backward_share < 1:
        raise ConfigError(f"--backward-share: must be in (0, 1), got {args.backward_share}")
    task, step, batch, source = step_and_task(args)
    notes = [f"SSD-SGD iteration-time model (Eq. 2, 4, 7), task {task}"]
    if direct["tf"] is not None and direct["tb"] is not None and direct["tc"] is not None:
        if step is not None:
            raise ConfigError("--step-time/--record: not with --tf, --tb and --tc (they give the costs)")
        from commbench.analysis.perfmodel.gradient_bytes import layer_groups

        costs = ssdsgd.IterationCosts(t_f=direct["tf"], t_b=direct["tb"], t_c=direct["tc"],
                                      h_b_last=direct["tb"] / len(layer_groups(task)))
        notes.append(f"T_f, T_b, T_c as given; h_b^L = T_b / L ({ssdsgd.LAYER_BACKWARD})")
    else:
        if step is None:
            raise ConfigError("step time: give --step-time SECONDS or --record PATH (or --tf, --tb and --tc)")
        overrides = method_overrides(parse_set(args.set), ["ssdsgd"])["ssdsgd"]
        rate, latency_s, described = network(args, "56gbit", ssdsgd.IB_LATENCY.value)
        costs = ssdsgd.task_costs(task, step, latency_s, 1.0 / rate, overrides, args.backward_share)
        share = "given" if args.backward_share is not None else "from counted FLOPs"
        notes += [f"T_f + T_b = {step:.4g} s from {source}; backward share {costs.t_b / step:.3f} ({share})",
                  f"network: {described}; T_c = push + pull ({ssdsgd.SYNC_AND_UPDATE_S.source})",
                  ssdsgd.PUSH_TIME, ssdsgd.LAYER_BACKWARD, ssdsgd.LAYER_COMM, ssdsgd.LOCAL_UPDATE_FIRST_S.source]
    changes = {k: v for k, v in (("t_f", direct["tf"]), ("t_b", direct["tb"]), ("t_c", direct["tc"]),
                                 ("h_b_last", direct["hb_last"]), ("h_c_first", direct["hc_first"]),
                                 ("h_loc_first", direct["hloc_first"]), ("h_s_total", direct["hs"])) if v is not None}
    if changes:
        import dataclasses

        costs = dataclasses.replace(costs, **changes)
        notes.append("given directly: " + ", ".join(f"{k} = {v:.4g} s" for k, v in changes.items()))
    batch = batch or paper_batch(task)
    notes.append(f"costs (s): T_f {costs.t_f:.4g}, T_b {costs.t_b:.4g}, T_c {costs.t_c:.4g}, "
                 f"h_b^L {costs.h_b_last:.4g}, h_c^1 {costs.h_c_first:.4g}, h_loc^1 {costs.h_loc_first:.4g}, "
                 f"S {costs.s:.4g}; batch {batch} per worker")
    notes.append("Eq. 4 case 3 = the compute-bound floor T_f + T_b + h_loc^1; Eq. 7 is printed as in the paper "
                 "(S = T_c / 2), which ignores case 3")
    rows = [{"k": r.k, "case": r.case, "t_avg_s": r.t_avg_s, "ssgd_s": r.ssgd_s, "ssgd_case": r.ssgd_case,
             "speedup_vs_ssgd": r.speedup_vs_ssgd, "speedup_vs_k1": r.speedup_vs_k1, "saved_s_eq7": r.saved_s_eq7,
             "images_per_s_per_worker": r.images_per_s}
            for r in ssdsgd.table(costs, ks, batch)]
    emit(render(rows, notes, args.format), args.out)
    return 0


def run_calibrate(args) -> int:
    import socket

    import torch

    sizes = [parse_size(s) for s in str(args.sizes).split(",") if s.strip()] if args.sizes \
        else list(alphabeta.DEFAULT_SIZES)
    ops = [o.strip() for o in str(args.ops).split(",") if o.strip()]
    samples = alphabeta.measure_many(ops, sizes, args.world_size, args.repeats, args.warmup)
    fits = {}
    for op, s in samples.items():
        f = alphabeta.fit(s, args.weighting)
        fits[op] = {**f.to_dict(), "samples": [[b, t] for b, t in s]}
    result = {
        "transport": "torch.distributed gloo, CPU, tcp://127.0.0.1 (one thread per process)",
        "world_size": args.world_size, "hostname": socket.gethostname(), "torch": torch.__version__,
        "python": platform.python_version(), "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "repeats": args.repeats, "warmup": args.warmup, "statistic": "median over repeats of rank 0's time",
        "bytes": "per worker: the tensor each rank passes to all_reduce, or contributes to all_gather",
        "model": "t = alpha_s + beta_s_per_byte * bytes, least squares"
                 + (" of relative residuals (t - fit) / t" if args.weighting == "relative" else ""),
        "fits": fits,
    }
    out = args.out or f"results/calibration/gloo-w{args.world_size}.json"
    emit(json.dumps(result, indent=2) + "\n", out)
    return 0


# -- argparse -------------------------------------------------------------------------------------------
def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--task", help=f"task name (default: the record's, else {DEFAULT_TASK})")
    timing = p.add_mutually_exclusive_group()
    timing.add_argument("--step-time", type=ascii_float, metavar="S", help="one worker's compute time per step, seconds")
    timing.add_argument("--record", metavar="PATH", help="a run record: step time = train_s / steps")
    p.add_argument("--batch", type=ascii_int, metavar="K", help="samples per step (default: the record's per-worker "
                                                         "batch, else the task recipe's)")
    p.add_argument("--network", metavar="RATE", help="network bandwidth, e.g. 1gbit, 100mbit, 10gbit")
    p.add_argument("--latency-us", type=ascii_float, metavar="US", help="network latency, microseconds")
    p.add_argument("--calibration", metavar="FILE", help="take latency and bandwidth from an allreduce fit "
                                                         "(commbench model calibrate)")
    p.add_argument("--set", action="append", default=[], metavar="method.KEY=VALUE",
                   help="a method parameter for the model (e.g. method.k=5)")
    p.add_argument("--format", choices=["md", "csv", "json"], default="md", help="output format (default: %(default)s)")
    p.add_argument("--out", metavar="FILE", help="also write the output here")


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``model`` and its subcommands on the CLI's subparsers."""
    model = subparsers.add_parser("model", help="performance models (TernGrad, SSD-SGD) and their calibration")
    sub = model.add_subparsers(dest="model_command", required=True, parser_class=type(model))

    tg = sub.add_parser("terngrad", help="TernGrad's model (supp. Eq. 6-9): throughput per (method, nodes)")
    _common(tg)
    tg.add_argument("--method", default="baseline,terngrad", help="comma-separated methods")
    tg.add_argument("--gpus-per-node", type=ascii_int, default=1, metavar="I",
                    help="workers per node, on the fast link (default: %(default)s)")
    tg.add_argument("--nodes", default="1,2,4,8", metavar="J,...", help="node counts to model (default: %(default)s)")
    tg.add_argument("--intra-node", metavar="RATE", help="GPU-GPU bandwidth C_gwd (default PCIe 3.0 x16)")
    tg.add_argument("--cpu-gpu", metavar="RATE", help="CPU-GPU bandwidth C_cwd (default PCIe 3.0 x16)")
    tg.add_argument("--scaling", choices=list(terngrad.SCALINGS), default="weak",
                    help="weak: batch per worker fixed; strong: total batch fixed (default: %(default)s)")
    tg.add_argument("--fraction-sent", type=ascii_float, metavar="F", help="threshold methods: fraction of elements sent")
    tg.add_argument("--figure5", action="store_true", help="reproduce Figure 5's setting and the 3.04x check")
    tg.add_argument("--utilization", type=ascii_float, help="--figure5: fraction of GPU peak FLOP/s (default 0.5)")

    sd = sub.add_parser("ssdsgd", help="SSD-SGD's model (Eq. 2, 4, 7): iteration time for k delay steps")
    _common(sd)
    sd.add_argument("--k", default="1..5", help="delay steps: 1..5 or 1,2,4")
    sd.add_argument("--backward-share", type=ascii_float, help="T_b / (T_f + T_b) (default: from counted FLOPs)")
    for flag, what in (("--tf", "T_f"), ("--tb", "T_b"), ("--tc", "T_c"), ("--hb-last", "h_b^L"),
                       ("--hc-first", "h_c^1"), ("--hloc-first", "h_loc^1"), ("--hs", "sum_j h_s^j")):
        sd.add_argument(flag, type=ascii_float, metavar="S", help=f"{what} in seconds, instead of the estimate")

    cal = sub.add_parser("calibrate", help="measure and fit allreduce/allgather on gloo (alpha-beta)")
    cal.add_argument("--world-size", type=ascii_int, default=2, help="gloo processes to measure (default: %(default)s)")
    cal.add_argument("--sizes", help="comma-separated bytes per worker (4096, 64KiB, 1MiB; default 1KiB..16MiB)")
    cal.add_argument("--ops", default="allreduce,allgather", help="collectives to time (default: %(default)s)")
    cal.add_argument("--repeats", type=ascii_int, default=10, help="timed repeats per size (default: %(default)s)")
    cal.add_argument("--warmup", type=ascii_int, default=3, help="untimed repeats first (default: %(default)s)")
    cal.add_argument("--weighting", choices=list(alphabeta.WEIGHTINGS), default="ols",
                     help="ols: plain least squares; relative: residuals / t (alpha not swamped by large sizes)")
    cal.add_argument("--out", metavar="FILE", help="default results/calibration/gloo-w<world size>.json")
    return model


def run(args) -> int:
    return {"terngrad": run_terngrad, "ssdsgd": run_ssdsgd, "calibrate": run_calibrate}[args.model_command](args)
