"""``commbench model``: the performance models on the command line. This module reads and checks the arguments;
the tables come from :mod:`commbench.analysis.perfmodel.tables`.

    commbench model terngrad [--task T] [--method baseline,terngrad] [--gpus-per-node I] [--nodes 1,2,4,8]
                             [--network 1gbit] [--latency-us U] [--step-time S | --record PATH] [--batch K]
                             [--scaling strong|weak] [--calibration FILE] [--figure5] [--format md|csv|json]
    commbench model ssdsgd   [--task T] [--k 1..5] [--step-time S | --record PATH] [--network 56gbit] ...
    commbench model calibrate [--world-size 2] [--sizes 1KiB,...] [--out results/calibration/gloo-w2.json]
    commbench model tta      --results DIR [--task T] [--workers 2] [--calibrate-on 1gbit|none] [--validate-on 100mbit]
                             [--cluster NAME|FILE] [--links RATE,...] [--compute-s S] [--target TOP1]
                             [--sweep-bandwidth FIGURE]

Bad input raises :class:`commbench.config.ConfigError` (one line naming the item; the CLI exits 2).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from commbench.analysis.perfmodel import alphabeta, ssdsgd, terngrad
from commbench.config import ConfigError, ascii_float, ascii_int, check_names, parse_set
from commbench.config.parsers import (MAX_LIST_VALUE, bounded, existing_results_folder, int_list, output_file,
                                      output_folder, rate_bytes, size_bytes)
from commbench.store.results_folder import ResultsFolder
from commbench.store.safe_io import output_root

# The tables (and the byte ledger under them) import torch: each command imports them when it runs, so that the
# parser, and --help, start at once.
if TYPE_CHECKING:
    from commbench.analysis.perfmodel.tables import Network, StepTime

DEFAULT_TASK = "alexnet-imagenet"
MAX_BATCH = 10 ** 9           # samples per step: past any data set's size
MAX_LATENCY_US = 1_000_000    # a second per message: slower than any link the models describe
FIGURE_FORMATS = ("png", "pdf", "svg")


def methods_of(text: str) -> list[str]:
    methods = [m.strip() for m in str(text).split(",") if m.strip()]
    if not methods:
        raise ConfigError("method: no method given")
    for method in methods:
        check_names({"method": method})
    return methods


def step_and_task(args) -> tuple[str, StepTime]:
    """The task and one worker's step time (with its batch and source), from --task, --step-time, --record,
    --batch."""
    from commbench.analysis.perfmodel.measured import step_time_of
    from commbench.analysis.perfmodel.tables import StepTime

    record = step_time_of(args.record) if args.record else None
    task = args.task or (record or {}).get("task") or DEFAULT_TASK
    check_names({"task": task})
    if record and record["task"] and args.task and record["task"] != args.task:
        raise ConfigError(f"--record: {args.record} is a run of {record['task']}, not of --task {args.task}")
    step, source, batch = bounded(args.step_time, "--step-time", above=0), "--step-time", args.batch
    if record:
        step, source = record["step_time_s"], f"record {args.record} (train_s / steps)"
        if record["workers"] and record["workers"] != 1:
            print(f"commbench: note: {args.record} is a {record['workers']}-worker {record['backend']} run; its step "
                  "time includes that run's exchange, not one worker's computation alone", file=sys.stderr)
        batch = batch or record["batch"]
    if batch is not None and not 1 <= batch <= MAX_BATCH:
        raise ConfigError(f"--batch: must be an integer from 1 to {MAX_BATCH:,}, got {batch}")
    return task, StepTime(step, batch, source)


def network_of(args, default_rate: str, default_latency_s: float) -> Network:
    """The network from --calibration, or --network and --latency-us (or the model's defaults)."""
    from commbench.analysis.perfmodel.tables import Network

    latency = bounded(args.latency_us, "--latency-us", at_least=0, at_most=MAX_LATENCY_US)
    if args.calibration:
        if args.network or latency is not None:
            raise ConfigError("--calibration: gives the network's latency and bandwidth; drop --network/--latency-us")
        fit = alphabeta.load_fit(args.calibration)
        return Network(fit.bandwidth_bytes_per_s, fit.alpha_s,
                       f"calibration {args.calibration}: allreduce alpha {fit.alpha_s:.3g} s, 1/beta "
                       f"{fit.bandwidth_bytes_per_s:.4g} B/s")
    rate = rate_bytes(args.network or default_rate, "--network")
    latency_s = default_latency_s if latency is None else latency * 1e-6
    return Network(rate, latency_s, f"{args.network or default_rate} = {rate:.4g} B/s, latency {latency_s:.3g} s")


def emit(text: str, out: str | None) -> None:
    if out:
        from commbench.store.records import atomic_write

        atomic_write(Path(out), text)
    sys.stdout.write(text)


# -- subcommands ------------------------------------------------------------------------------------------
def run_terngrad(args) -> int:
    from commbench.analysis.perfmodel.tables import method_overrides, render, terngrad_table

    if args.figure5:
        return run_figure5(args)
    if args.utilization is not None:
        raise ConfigError("--utilization: only with --figure5")
    task, step = step_and_task(args)
    if step.seconds is None:
        raise ConfigError("step time: give --step-time SECONDS or --record PATH (one worker's measured step)")
    methods = methods_of(args.method)
    if not 1 <= args.gpus_per_node <= MAX_LIST_VALUE:
        raise ConfigError(f"--gpus-per-node: must be an integer from 1 to {MAX_LIST_VALUE:,}, got {args.gpus_per_node}")
    # a threshold method that sends no element exchanges nothing and learns nothing: no throughput to model
    bounded(args.fraction_sent, "--fraction-sent", above=0, at_most=1)
    rows, notes = terngrad_table(
        task, methods, step, network_of(args, "1gbit", terngrad.LATENCY_1GBE.value),
        gpus_per_node=args.gpus_per_node, nodes=int_list(args.nodes, "--nodes"),
        gpu_gpu=rate_bytes(args.intra_node, "--intra-node") if args.intra_node else None,
        cpu_gpu=rate_bytes(args.cpu_gpu, "--cpu-gpu") if args.cpu_gpu else None, scaling=args.scaling,
        fraction_sent=args.fraction_sent, overrides=method_overrides(parse_set(args.set), methods))
    emit(render(rows, notes, args.format), args.out)
    return 0


def run_figure5(args) -> int:
    from commbench.analysis.perfmodel.tables import figure5_table, render

    given = [flag for flag, value in (("--step-time", args.step_time), ("--record", args.record),
                                      ("--network", args.network), ("--latency-us", args.latency_us),
                                      ("--calibration", args.calibration), ("--batch", args.batch),
                                      ("--set", args.set), ("--task", args.task))
             if value]
    if given:
        raise ConfigError(f"--figure5: uses the paper's settings (and --utilization); drop {given[0]}")
    rows, notes, extra = figure5_table(terngrad.FIGURE5_UTILIZATION.value if args.utilization is None
                                       else args.utilization)
    emit(render(rows, notes, args.format, extra), args.out)
    return 0


def run_ssdsgd(args) -> int:
    from commbench.analysis.perfmodel.tables import method_overrides, render, ssdsgd_costs, ssdsgd_table

    ks = int_list(args.k, "--k")
    direct = {name: bounded(getattr(args, name), f"--{name.replace('_', '-')}", at_least=0)
              for name in ("tf", "tb", "tc", "hb_last", "hc_first", "hloc_first", "hs")}
    task, step = step_and_task(args)
    estimated = not all(direct[k] is not None for k in ("tf", "tb", "tc"))
    costs, notes = ssdsgd_costs(task, step, network_of(args, "56gbit", ssdsgd.IB_LATENCY.value) if estimated
                                else None, direct, args.backward_share,
                                method_overrides(parse_set(args.set), ["ssdsgd"])["ssdsgd"])
    rows, notes = ssdsgd_table(task, ks, step, costs, notes)
    emit(render(rows, notes, args.format), args.out)
    return 0


def run_calibrate(args) -> int:
    from commbench.analysis.perfmodel.tables import calibration

    if not 2 <= args.world_size <= alphabeta.MAX_WORLD_SIZE:  # each a process on this machine
        raise ConfigError(f"--world-size: a calibration runs 2 to {alphabeta.MAX_WORLD_SIZE} processes on this "
                          f"machine, got {args.world_size}")
    sizes = [size_bytes(s, "--sizes", alphabeta.MAX_SIZE_BYTES) for s in str(args.sizes).split(",") if s.strip()] \
        if args.sizes else list(alphabeta.DEFAULT_SIZES)
    ops = [o.strip() for o in str(args.ops).split(",") if o.strip()]
    result = calibration(ops, sizes, args.world_size, args.repeats, args.warmup, args.weighting)
    emit(json.dumps(result, indent=2) + "\n", args.out or f"results/calibration/gloo-w{args.world_size}.json")
    return 0


def run_tta(args) -> int:
    from commbench.analysis.perfmodel import clusters, tta_tables, tta_unlinked
    from commbench.analysis.perfmodel.tables import render
    from commbench.analysis.perfmodel.tta_links import link_rates

    results = existing_results_folder(args.results).root
    unlinked = args.calibrate_on == tta_tables.NO_LINK
    calibrate_on = None if unlinked else args.calibrate_on
    for flag, rate in (("--calibrate-on", calibrate_on), ("--validate-on", args.validate_on)):
        if rate:
            rate_bytes(rate, flag)
    links = link_rates(args.links) if args.links is not None else None
    if args.target is not None and not 0 < args.target <= 1:
        raise ConfigError(f"--target {args.target}: a top-1 as a fraction, in (0, 1]")
    latency_s = bounded(args.latency_us, "--latency-us", at_least=0, at_most=MAX_LATENCY_US) * 1e-6
    figure, root = figure_of(args, results)  # before any work: a bad name must not cost the whole model
    cluster = clusters.load(args.cluster) if args.cluster else None
    compute = bounded(args.compute_s, "--compute-s", above=0)
    if unlinked:
        tta_unlinked.check_unlinked(cluster, args.task, compute, args.validate_on)
    if (figure or links) and cluster is None:
        raise ConfigError(f"{'--sweep-bandwidth' if figure else '--links'}: needs --cluster (the shape and compute "
                          f"{'the map sweeps the link of' if figure else 'whose link is replaced'})")
    if unlinked:
        rows, notes, calibration, cpu = tta_unlinked.report(results, args.task, args.workers, cluster, compute,
                                                            args.target, args.cpu, links)
    else:
        rows, notes, calibration, cpu = tta_tables.report(results, args.task, args.workers, args.calibrate_on,
                                                          args.validate_on, cluster, compute, args.target, latency_s,
                                                          args.cpu, links)
    if figure:
        step = compute if compute is not None else cluster.compute_s(args.task)[0]
        nets = [] if unlinked else [net for net in (args.calibrate_on, args.validate_on) if net]
        tta_tables.draw_crossover(figure, results, args.task, args.workers, calibration, nets, cluster, step,
                                  args.target, latency_s, cpu, root=root)
        notes.append(f"crossover map: {figure}")
    emit(render(tta_tables.readable(rows) if args.format == "md" else rows, notes, args.format), args.out)
    return 0


def figure_of(args, results: Path) -> tuple[Path | None, Path | None]:
    """Where ``--sweep-bandwidth`` draws, and the folder below which nothing is written through a link: a bare
    name goes into ``--figures`` (default ``RESULTS/figures``), never the folder the command was started in; a
    path with a folder in it is taken as given. Checked before any work."""
    name = args.sweep_bandwidth
    if name is None:
        if args.figures is not None:
            raise ConfigError("--figures: only with --sweep-bandwidth (the folder its map is drawn into)")
        return None, None
    given = Path(name)
    suffix = given.suffix.lower().lstrip(".")
    if name.endswith(("/", "/.", "/..")) or given.name in ("", ".", "..") or given.name.startswith("."):
        raise ConfigError(f"--sweep-bandwidth {name}: not a file name (e.g. crossover.png)")
    if suffix not in FIGURE_FORMATS:
        raise ConfigError(f"--sweep-bandwidth {name}: the figure's name must end in "
                          f"{', '.join('.' + f for f in FIGURE_FORMATS[:-1])} or .{FIGURE_FORMATS[-1]}")
    bare = given.parent == Path(".") and "/" not in name
    if not bare and args.figures is not None:
        raise ConfigError(f"--figures: only with a bare --sweep-bandwidth name; {name} names its folder already")
    if bare:
        folder = (output_folder("--figures", args.figures) if args.figures is not None
                  else ResultsFolder(results).figures)
        given = folder / given.name
    output_file("--sweep-bandwidth", str(given))
    return given, output_root(given.parent, results)


# -- argparse -------------------------------------------------------------------------------------------
def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--task", help=f"task name (default: the record's, else {DEFAULT_TASK})")
    timing = p.add_mutually_exclusive_group()
    timing.add_argument("--step-time", type=ascii_float, metavar="S", help="one worker's compute time per step, seconds")
    timing.add_argument("--record", metavar="PATH", help="a run record: step time = train_s / steps")
    p.add_argument("--batch", type=ascii_int, metavar="K", help="samples per step (default: the record's per-worker "
                                                         "batch, else the task recipe's)")
    p.add_argument("--network", metavar="RATE", help="network bandwidth, e.g. 1gbit, 100mbit, 10gbit")
    p.add_argument("--latency-us", type=ascii_float, metavar="US",
                   help=f"network latency, microseconds (0 to {MAX_LATENCY_US:,})")
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
    tg.add_argument("--nodes", default="1,2,4,8", metavar="J,...",
                    help="node counts to model, 1,2,4 or 1..8 (at most 10,000 of them, each at most 1,000,000; "
                         "default: %(default)s)")
    tg.add_argument("--intra-node", metavar="RATE", help="GPU-GPU bandwidth C_gwd (default PCIe 3.0 x16)")
    tg.add_argument("--cpu-gpu", metavar="RATE", help="CPU-GPU bandwidth C_cwd (default PCIe 3.0 x16)")
    tg.add_argument("--scaling", choices=list(terngrad.SCALINGS), default="weak",
                    help="weak: batch per worker fixed; strong: total batch fixed (default: %(default)s)")
    tg.add_argument("--fraction-sent", type=ascii_float, metavar="F",
                    help="threshold methods: fraction of elements sent, in (0, 1]")
    tg.add_argument("--figure5", action="store_true", help="reproduce Figure 5's setting and the 3.04x check")
    tg.add_argument("--utilization", type=ascii_float, help="--figure5: fraction of GPU peak FLOP/s (default 0.5)")

    sd = sub.add_parser("ssdsgd", help="SSD-SGD's model (Eq. 2, 4, 7): iteration time for k delay steps")
    _common(sd)
    sd.add_argument("--k", default="1..5", help="delay steps: 1..5 or 1,2,4 (at most 10,000 of them, each at most "
                                                "1,000,000)")
    sd.add_argument("--backward-share", type=ascii_float, help="T_b / (T_f + T_b) (default: from counted FLOPs)")
    for flag, what in (("--tf", "T_f"), ("--tb", "T_b"), ("--tc", "T_c"), ("--hb-last", "h_b^L"),
                       ("--hc-first", "h_c^1"), ("--hloc-first", "h_loc^1"), ("--hs", "sum_j h_s^j")):
        sd.add_argument(flag, type=ascii_float, metavar="S", help=f"{what} in seconds, instead of the estimate")

    cal = sub.add_parser("calibrate", help="measure and fit allreduce/allgather on gloo (alpha-beta)")
    cal.add_argument("--world-size", type=ascii_int, default=2,
                     help=f"gloo processes to measure, 2 to {alphabeta.MAX_WORLD_SIZE} (default: %(default)s)")
    cal.add_argument("--sizes", help="comma-separated bytes per worker (4096, 64KiB, 1MiB; default 1KiB..16MiB; "
                                     "at most 256 MiB each, and world size x 2 (world size + 1) x the largest at most "
                                     "8 GiB: the memory the processes hold at once)")
    cal.add_argument("--ops", default="allreduce,allgather", help="collectives to time (default: %(default)s)")
    cal.add_argument("--repeats", type=ascii_int, default=10,
                     help="timed repeats per size, 1 to 10,000 (default: %(default)s)")
    cal.add_argument("--warmup", type=ascii_int, default=3, help="untimed repeats first, 0 to 10,000 (default: "
                                                                 "%(default)s)")
    cal.add_argument("--weighting", choices=list(alphabeta.WEIGHTINGS), default="ols",
                     help="ols: plain least squares; relative: residuals / t (alpha not swamped by large sizes)")
    cal.add_argument("--out", metavar="FILE", help="default results/calibration/gloo-w<world size>.json")
    _add_tta(sub)
    return model


def _add_tta(sub) -> None:
    tta = sub.add_parser("tta", help="time to accuracy: validated on a held-out link, projected to a cluster")
    tta.add_argument("--results", required=True, help="the records of an emulated-network grid (network-tta)")
    tta.add_argument("--task", default="lenet-mnist", help="the task (default: %(default)s)")
    tta.add_argument("--workers", type=ascii_int, default=2, help="the runs' workers (default: %(default)s)")
    tta.add_argument("--calibrate-on", default="1gbit", metavar="RATE|none",
                     help="the link whose runs give steps to target and per-step costs (default: %(default)s); none: "
                          "the runs behind no emulated link (sim accuracy grids; needs --cluster)")
    tta.add_argument("--validate-on", metavar="RATE", help="a held-out link: predicted, then compared (100mbit)")
    tta.add_argument("--cluster", metavar="NAME|FILE",
                     help="a cluster profile (shipped: terngrad-fig5, ssdsgd-paper, zoo-v100)")
    tta.add_argument("--links", metavar="RATE,...", help="project to the cluster once per link rate between its "
                                                          "nodes (1gbit,10gbit,100gbit), each against that link's "
                                                          "strongest all-reduce")
    tta.add_argument("--compute-s", type=ascii_float, metavar="S", help="one worker's compute per step on the "
                                                                        "cluster (default: the profile's)")
    tta.add_argument("--target", type=ascii_float, metavar="TOP1", help="default: the runs' declared eval.target")
    tta.add_argument("--latency-us", type=ascii_float, default=50.0, metavar="US",
                     help=f"the emulated links' latency per message, microseconds (0 to {MAX_LATENCY_US:,}; "
                          f"default: %(default)s)")
    tta.add_argument("--cpu", metavar="MODEL", help="read only the runs timed on this CPU (the records' env.cpu_model; "
                                                     "needed where the runs were timed on more than one)")
    tta.add_argument("--sweep-bandwidth", metavar="FIGURE",
                     help="draw the crossover map into this file (.png, .pdf or .svg); a bare name goes into --figures")
    tta.add_argument("--figures", metavar="DIR", help="the folder for a bare --sweep-bandwidth name (default: "
                                                      "RESULTS/figures, below --results)")
    tta.add_argument("--format", choices=["md", "csv", "json"], default="md", help="output format (default: %(default)s)")
    tta.add_argument("--out", metavar="FILE", help="also write the output here")


def run(args) -> int:
    # the output is checked before any work: a calibration or a model of many rows must not fail at its last step
    out = args.out or (f"results/calibration/gloo-w{args.world_size}.json" if args.model_command == "calibrate"
                       else None)
    if out is not None:
        output_file("--out", out)
    return {"terngrad": run_terngrad, "ssdsgd": run_ssdsgd, "calibrate": run_calibrate,
            "tta": run_tta}[args.model_command](args)
