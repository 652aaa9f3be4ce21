"""``commbench``: the command line (docs/contract.md). Exit 0 done/diverged, 1 failed run, 2 bad input, 75 a run
interrupted by a checkpoint signal (resumable)."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from commbench.config import (SETTING, ConfigError, ascii_float, ascii_int, describe, never_acts, parse_set, resolve,
                              run_flags)
from commbench.config.grid import GRIDS_DIR
from commbench.analysis.papers.reference import PAPERS
from commbench.config.parsers import existing_results_folder, output_file, output_folder
from commbench.methods.registry import MethodRegistryError
from commbench.store.safe_io import UnsafePath
from commbench.cli import model as model_command
from commbench.cli import status as status_command
from commbench.cli.grids import grid_runs
from commbench.store.records import EXIT_INTERRUPTED, Status, part_way_line

DATA_SETS = ("mnist", "fashion-mnist", "cifar10", "cifar10-jpeg")
# a user's runs go here unless told otherwise: not results/, which holds what the project commits
DEFAULT_RESULTS = "local-results"
PROJECT_RESULTS = "results"  # the committed records: what the paper tables judge by default


class BadInput(SystemExit):
    def __init__(self, message: str):
        print(f"commbench: error: {message}", file=sys.stderr)
        super().__init__(2)


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2 (argparse would print the usage block too)
        raise BadInput(message)


class Version(argparse.Action):
    """``--version``, as argparse's own action prints it, but with the version read only when asked: reading it
    (importlib.metadata) would slow every command's start, ``--help`` included."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                 help="show program's version number and exit"):
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from commbench import __version__

        formatter = parser._get_formatter()
        formatter.add_text(f"commbench {__version__}")
        parser._print_message(formatter.format_help(), sys.stdout)
        parser.exit()


def build_parser() -> Parser:
    p = Parser(prog="commbench", description="Benchmark harness for communication-efficient distributed SGD.")
    p.add_argument("--version", action=Version)
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)

    _add_run_command(sub)
    _add_sweep_command(sub)
    _add_status_command(sub)
    _add_table_command(sub)
    _add_compare_command(sub)
    _add_plot_command(sub)
    _add_report_command(sub)
    model_command.add_parser(sub)
    _add_data_command(sub)
    _add_list_command(sub)
    _add_compressors_command(sub)
    return p


def _add_run_command(sub) -> None:
    """``run``: one configuration, its settings as flags as config declares them."""
    run = sub.add_parser("run", help="run one configuration")
    groups: dict[str, argparse._MutuallyExclusiveGroup] = {}
    for flag, setting in run_flags():  # the settings that are flags too, as config declares them
        options = dict(setting.flag)
        group = options.pop("group", None)
        if group and group not in groups:
            groups[group] = run.add_mutually_exclusive_group()
        target = groups[group] if group else run
        target.add_argument(flag, dest=setting.key, **options)
    run.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                     help="any setting, e.g. lr_schedule.base_lr=0.05 or method.clip=0 (docs/contract.md lists them)")
    results_option(run)
    run.add_argument("--dry-run", action="store_true",
                     help="print the resolved configuration, each value with its source, and the run id; run and "
                          "write nothing")
    run.add_argument("--force", action="store_true", help="run again even if a done record exists")
    run.add_argument("--save-weights", action="store_true", help="also save worker 0's final weights")
    run.add_argument("--quiet", action="store_true", help="no progress output")


def _add_sweep_command(sub) -> None:
    """``sweep``: every run of a grid."""
    sweep = sub.add_parser("sweep", help="run every configuration of a grid file")
    sweep.add_argument("grid", help="a grid file, or a shipped grid's name (commbench list grids names them)")
    sweep.add_argument("--launcher", choices=["local", "slurm"], default="local", help="where the runs execute")
    sweep.add_argument("--profile", help="slurm: cluster profile, a name in slurm/profiles/ or a path "
                                         "(default: the grid's slurm.profile)")
    sweep.add_argument("--wait", action="store_true", help="slurm: block until every run has a record")
    results_option(sweep)
    sweep.add_argument("--dry-run", action="store_true", help="list the runs (and their Slurm shape); run nothing")
    sweep.add_argument("--data-root", help="where the runs read data (default: each run's data_root, else data/)")
    sweep.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="a setting for every run of the grid (not one of its axes), e.g. steps=500")
    sweep.add_argument("--only", action="append", default=[], metavar="AXIS=V1,V2",
                       help="run only the runs whose AXIS takes one of these values (a part of a long campaign)")
    sweep.add_argument("--quiet", action="store_true", help="no progress output")
    sweep.add_argument("--max-runs", type=ascii_int, default=None, metavar="N",
                       help="allow a grid of more than 10,000 runs (the product of its axes), up to N")


def _add_status_command(sub) -> None:
    """``status``: each stored run and its state."""
    status = sub.add_parser("status", help="each stored run and its state")
    results_option(status)
    status.add_argument("--grid", action="append", default=[], metavar="GRID",
                        help="also list this grid's runs that have no record yet (what is left); "
                             "repeat it for several grids, each under its name")
    status.add_argument("--summary", action="store_true",
                        help="no line per run: the count of each state and the estimate of the training left, on "
                             "stdout (per grid, and over all of them)")
    status.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="as for sweep")
    status.add_argument("--only", action="append", default=[], metavar="AXIS=V1,V2", help="as for sweep")
    status.add_argument("--max-runs", type=ascii_int, default=None, metavar="N", help="as for sweep")


def _add_table_command(sub) -> None:
    """``table``: the comparison table, or a paper's tables."""
    table = sub.add_parser("table", help="comparison table from the stored records")
    results_option(table, alias=False, papers=True)
    table.add_argument("--paper", choices=[*PAPERS, "all"],
                       help="rebuild a paper's tables: its values beside the reproduced ones (grace: a peer's "
                            "released runs, judged alike)")
    table.add_argument("--format", choices=["md", "csv", "json", "latex"], default="md",
                       help="md: a table to read; csv, json: plain numbers, units in the column names, top-1 as a "
                            "fraction (default: %(default)s)")
    table.add_argument("--out", help="write the table to this file (default: print it)")
    table.add_argument("--target", type=ascii_float, metavar="TOP1",
                       help="time to accuracy: seconds until a run first reaches this top-1 (a fraction, e.g. 0.85); "
                            "default: the setting's baseline's final top-1 minus 0.005")
    table.add_argument("--full", action="store_true",
                       help="--paper on a terminal: print the whole tables, not their summary (a pipe or --out "
                            "always gets the whole)")


def _add_compare_command(sub) -> None:
    """``compare``: one value of a setting against another."""
    compare = sub.add_parser("compare", help="is one value of a setting the same experiment as another? (runs "
                                             "paired by seed, image by image)")
    results_option(compare, alias=False)
    compare.add_argument("--factor", required=True, metavar="FIELD",
                         help="the configuration field the runs differ in (e.g. precision)")
    compare.add_argument("--reference", required=True, metavar="VALUE", help="its value to compare against (fp32)")
    compare.add_argument("--margin", type=ascii_float, default=0.5, metavar="POINTS",
                         help="equivalent within +-this many points of top-1 (default: %(default)s)")
    compare.add_argument("--format", choices=["md", "csv"], default="md",
                         help="md: a table to read; csv: plain numbers (default: %(default)s)")


def _add_plot_command(sub) -> None:
    """``plot``: figures."""
    plot = sub.add_parser("plot", help="figures from the stored records (PNG and PDF)")
    results_option(plot, alias=False, papers=True)
    plot.add_argument("--out", help="folder for the figures (default: RESULTS/figures)")
    plot.add_argument("--paper", action="store_true", help="also the papers' own figures (accuracy and speed "
                                                            "against the published curves)")


def _add_report_command(sub) -> None:
    """``report``: every table and figure in one document."""
    report = sub.add_parser("report", help="every table and figure in one markdown report and HTML page")
    results_option(report, alias=False, papers=True)
    report.add_argument("--out", help="folder for report.md, report.html and figures (default: RESULTS/report)")
    report.add_argument("--paper", action="store_true", help="also the paper tables and figures (always on for "
                                                             "a folder of the campaign's records)")


def _add_data_command(sub) -> None:
    """``data``: provision the real data sets."""
    data = sub.add_parser("data", help="provision real data sets into the data root (local mirror, Debian's "
                                       "package, download) and say which are there")
    data.add_argument("names", nargs="*", metavar="NAME",
                      help=f"data sets to provision (default: all of {', '.join(DATA_SETS)})")
    data.add_argument("--data-root", default="data", help="where runs read data (default: %(default)s)")
    data.add_argument("--quiet", action="store_true", help="print nothing; the exit status says it all")


def _add_list_command(sub) -> None:
    """``list``: tasks, methods, grids."""
    lst = sub.add_parser("list", help="tasks, methods or grids")
    lst.add_argument("what", choices=["tasks", "methods", "grids"], help="what to list")


def _add_compressors_command(sub) -> None:
    """``compressors``: the contract report of the kit methods' compressors."""
    comp = sub.add_parser("compressors", help="check each kit method's compressor against what it declares: bias, "
                                              "variance, linearity, bytes, error feedback, speed")
    comp.add_argument("--method", metavar="NAME", help="one method (default: every registered kit method)")
    comp.add_argument("--set", action="append", default=[], metavar="method.KEY=VALUE",
                      help="a parameter of --method (default: the method's own defaults)")
    comp.add_argument("--task", default="lenet-mnist", help="whose real gradients (default: %(default)s)")
    comp.add_argument("--dataset", default="synthetic", help="the task's data set (default: %(default)s)")
    comp.add_argument("--data-root", default="data", help="where the data set is (default: %(default)s)")
    comp.add_argument("--format", choices=["md", "csv"], default="md",
                      help="md: a table to read; csv: plain numbers (default: %(default)s)")


def results_option(parser: argparse.ArgumentParser, alias: bool = True, papers: bool = False) -> None:
    """The results folder, one name everywhere (``--out`` stays an alias where it named it before). With
    ``papers`` (table, plot, report) the default depends on --paper: the project's records for the papers."""
    names = ["--results", "--out"] if alias else ["--results"]
    default = (f"{DEFAULT_RESULTS}; with --paper: {PROJECT_RESULTS}, the project's committed records" if papers
               else f"{DEFAULT_RESULTS}; the project's committed campaign is results/campaign")
    parser.add_argument(*names, dest="results", default=None if papers else DEFAULT_RESULTS, metavar="DIR",
                        help=f"the results folder: runs/ (records), logs/, checkpoints/, slurm/ (default: {default})")


def results_of(args) -> str:
    """The results folder a reading command uses: --results, else the project's records for --paper, else
    the user's default folder."""
    return args.results or (PROJECT_RESULTS if getattr(args, "paper", None) else DEFAULT_RESULTS)


def run_settings(args) -> dict:
    settings = {s.key: getattr(args, s.key) for _, s in run_flags()}
    settings = {k: v for k, v in settings.items() if v is not None}
    for key, value in parse_set(args.set).items():
        if key in settings and settings[key] != value:
            raise ConfigError(f"{key}: given both as a flag and by --set")
        settings[key] = value
    return settings


def cmd_run(args) -> int:
    from commbench.launch.runner import RankFailed, RecordNotWritten, RunningElsewhere, execute, summary

    from commbench.launch.preflight import check_runs

    cfg = resolve(run_settings(args))
    if args.dry_run:
        print(describe(cfg))
        return 0
    check_runs([cfg], args.results)
    try:
        result = execute(cfg, Path(args.results), force=args.force, save_weights=args.save_weights,
                         show_progress=not args.quiet)
    except RankFailed as exc:  # one process of a torchrun/srun launch: exit 1 so the launcher stops the rest
        print(f"commbench: {cfg.run_id}: failed: {exc}", file=sys.stderr)
        return 1
    except RecordNotWritten as exc:
        print(f"commbench: {exc}", file=sys.stderr)
        return 1
    except RunningElsewhere as exc:
        print(f"commbench: {exc}; its record will say how it went (commbench status --results "
              f"{args.results})", file=sys.stderr)
        return 1
    if result.path is None:
        return 0
    if result.skipped:
        print(f"skip: {cfg.run_id} already {result.record['status']} ({result.path}; --force runs it again)")
    print(summary(cfg, result.record))
    status = result.record["status"]
    return 1 if status == Status.FAILED else EXIT_INTERRUPTED if status == Status.INTERRUPTED else 0


def cmd_sweep(args) -> int:
    grid, runs = grid_runs(args.grid, args.set, args.only, args.data_root, args.max_runs)
    nets = sorted({cfg.net for cfg in runs if cfg.net})
    if nets and args.launcher != "local":
        raise ConfigError(f"net: an emulated network ({', '.join(nets)}) needs --launcher local (it puts the "
                          f"processes of one machine in network namespaces); a Slurm job uses the cluster's network")
    if not args.dry_run:
        from commbench.launch.preflight import check_runs

        check_runs(runs, args.results, local=args.launcher == "local")
    profile = None
    if args.launcher == "slurm":
        from commbench.launch.profile import load_profile, run_shape

        profile = load_profile(args.profile, grid.slurm)
        if profile.slurm_conf:  # the profile's cluster, for sbatch, squeue and sacct here and in its jobs
            if not Path(profile.slurm_conf).is_file():
                raise ConfigError(f"profile {profile.name}: slurm_conf {profile.slurm_conf}: no such file (is that "
                                  f"cluster up?)")
            os.environ["SLURM_CONF"] = profile.slurm_conf
    elif args.profile or args.wait:
        raise ConfigError(f"{'--profile' if args.profile else '--wait'}: only with --launcher slurm")
    if args.dry_run:
        for cfg in runs:
            line = (f"{cfg.run_id}  {cfg.task} {cfg.method} workers={cfg.workers} backend={cfg.backend} "
                    f"dataset={cfg.dataset} steps={cfg.steps} seed={cfg.seed} "
                    f"{f'net={cfg.net} ' if cfg.net else ''}{f'node_link={cfg.node_link} ' if cfg.node_link else ''}"
                    + " ".join(f"method.{k}={v}" for k, v in cfg.method_params.items())).rstrip()
            idle = never_acts(cfg)
            print(line + (f"  [slurm: {run_shape(cfg, profile).describe()}]" if profile else "")
                  + (f"  note: {idle}" if idle else ""))
        return 0
    if profile is not None:
        from commbench.launch.slurm import SubmitError, submit, wait

        try:
            submitted = submit(runs, Path(args.results), profile, grid.name)
        except SubmitError as exc:
            print(f"commbench: error: {exc}", file=sys.stderr)
            return 1
        if not args.wait:
            if submitted:
                print(f"jobs submitted; follow them with: commbench status --results {args.results}",
                      file=sys.stderr)
            return 0
        return wait(Path(args.results), [c.run_id for c in runs], show_progress=not args.quiet)
    from commbench.launch.sweep import run_local_sweep

    return run_local_sweep(runs, Path(args.results), show_progress=not args.quiet)


def cmd_table(args) -> int:
    given = args.results
    args.results = results_of(args)
    if args.paper and not given and not Path(args.results).is_dir():
        # outside a checkout: the campaign's records are not package data
        raise ConfigError(f"--paper: no {PROJECT_RESULTS}/ folder here; pass the folder that holds the records "
                          f"to judge (--results DIR; the project's committed ones are a checkout's results/)")
    existing_results_folder(args.results)
    if args.out and Path(args.out).is_dir():  # checked first: an hour's table must not fail at its last step
        raise ConfigError(f"--out {args.out}: a folder; --out names the file the table is written to "
                          f"(the records are read from --results)")
    if args.out:  # a FIFO, device or link, a parent that is a file or in /proc: refused before any work, in one line
        output_file("--out", args.out)
    if args.paper:  # where the records come from, on stderr (the table itself may be piped)
        print(f"commbench: the paper tables judge the records under {Path(args.results).resolve()}", file=sys.stderr)
    if under_way := part_way_line(Path(args.results)):  # the evidence is not all in yet: say so
        print(f"commbench: {under_way}", file=sys.stderr)
    if args.target is not None and not 0 < args.target <= 1:
        raise ConfigError(f"--target {args.target}: a top-1 as a fraction, in (0, 1]")
    if args.paper:
        from commbench.analysis.papers.tables import build, render as render_paper, render_summary, rows

        table = rows(build(args.paper, Path(args.results)))
        # some 100 KB of tables would scroll past on a terminal: there, their summary and how to get them whole
        if sys.stdout.isatty() and not args.out and args.format == "md" and not args.full:
            import shlex

            results = f" --results {shlex.quote(given)}" if given else ""
            text = render_summary(table, f"commbench table --paper {args.paper}{results} --full (or --out FILE)")
        else:
            text = render_paper(table, args.format)
    else:
        from commbench.analysis.table import comparison, comparison_data, records_frame, render

        if args.format == "latex":
            raise ConfigError("--format latex: only for --paper tables (use md, csv or json)")
        frame = records_frame(Path(args.results))
        table = comparison(frame, args.target) if args.format == "md" else comparison_data(frame, args.target)
        text = render(table, args.format)
    if args.out:
        from commbench.store.records import atomic_write

        atomic_write(Path(args.out), text)
    else:
        sys.stdout.write(text)
    return 0


def cmd_compare(args) -> int:
    import math

    import pandas as pd

    from commbench.analysis.equivalence import compare
    from commbench.store.records import iter_records

    existing_results_folder(args.results)
    if not math.isfinite(args.margin) or args.margin <= 0:
        raise ConfigError(f"--margin {args.margin}: a positive number of points")
    rows = [c.row() for c in compare(list(iter_records(Path(args.results))), args.factor, args.reference,
                                     args.margin)]
    if not rows:
        raise ConfigError(f"--factor {args.factor}: no runs under {args.results} pair by seed with a run at "
                          f"{args.factor} = {args.reference} (and otherwise the same setting)")
    frame = pd.DataFrame(rows)
    sys.stdout.write(frame.to_csv(index=False) if args.format == "csv" else frame.to_markdown(index=False) + "\n")
    return 0


def cmd_plot(args) -> int:
    from commbench.analysis.plots import plot_all

    args.results = results_of(args)
    results = existing_results_folder(args.results)
    # before any work: a folder that is a file, is below one or is in /proc is bad input, named
    out = output_folder("--out", args.out or str(results.figures))
    written = plot_all(Path(args.results), out, paper=args.paper)
    for path in written:
        print(path)
    if not written:
        print(f"plot: no done runs under {args.results}; nothing to draw", file=sys.stderr)
    return 0


def cmd_report(args) -> int:
    from commbench.analysis.report import write_report

    args.results = results_of(args)
    results = existing_results_folder(args.results)
    # before any work: a folder that is a file, is below one or is in /proc is bad input, named
    out = output_folder("--out", args.out or str(results.report.root))
    for path in write_report(Path(args.results), out, paper=args.paper):
        print(path)
    return 0


def cmd_data(args) -> int:
    """Exit 0 when every named data set is ready (with no names: always, after saying which are), 1 if not."""
    from commbench.tasks.data import DataUnavailable, provisioners

    unknown = [n for n in args.names if n not in DATA_SETS]
    if unknown:
        raise ConfigError(f"data set {unknown[0]!r}: not one commbench provisions; one of {', '.join(DATA_SETS)}")
    SETTING["data_root"].parse("--data-root", args.data_root)  # a folder, not a file or a system one
    missing = 0
    for name in args.names or DATA_SETS:
        if not args.quiet and sys.stderr.isatty():  # decoding cifar10-jpeg the first time takes ~20 s
            print(f"{name}: provisioning in {args.data_root} ...", end="\r", file=sys.stderr, flush=True)
        try:
            found = provisioners()[name](Path(args.data_root))
        except DataUnavailable as exc:
            missing += 1
            line = str(exc).splitlines()[0]
            text = f"{name:14s} unavailable  {line[len(name) + 2:] if line.startswith(name + ':') else line}"
        else:
            found = found if isinstance(found, dict) else {"source": found}
            checked = (f"; MD5 verified ({len(found['md5'])} files)" if found.get("verified") == "md5" and
                       found.get("md5") else "")
            stands = f"; stands in for {found['substitute_for']}" if found.get("substitute_for") else ""
            text = f"{name:14s} ready        {found.get('source')}{checked}{stands}"
        if not args.quiet:
            print(text + (" " * 8 if sys.stderr.isatty() else ""))  # over the progress line
    return 1 if missing and args.names else 0


def cmd_list(args) -> int:
    if args.what == "tasks":
        from commbench.tasks import TASKS

        for t in TASKS.values():
            datasets = ", ".join(f"{d} (paper)" if d == t.paper_dataset else d for d in t.datasets)
            print(f"{t.name}: {t.summary}\n"
                  f"    model     {t.model_name}: {t.parameter_count():,} parameters ({t.classes} classes)\n"
                  f"    variants  {', '.join(t.variants)}\n"
                  f"    datasets  {datasets}\n"
                  f"    recipes   {', '.join(t.recipes)}")
        print("any task: --set model.timm=NAME trains timm's model NAME on the task's data and recipe in place of its "
              "own network (timm.list_models() names them; the paper tables never match such runs)")
    elif args.what == "methods":
        from commbench.methods import param_fields, registry
        from commbench.methods.catalog import CATALOG

        from commbench.config import method_param_types

        for name in registry.names():  # the built-ins, then a user's (entry points, COMMBENCH_METHODS)
            m = registry.get(name)
            defaults, types = m.Params(), method_param_types(name)
            print(f"{name:10s} {m.summary}")
            if name not in CATALOG or registry.source_of(name) != CATALOG[name].source:
                print(f"    from {registry.source_of(name)}")
            for n in param_fields(m.Params):  # name, type and default: what --set method.NAME=VALUE takes
                print(f"    method.{n:20s} {getattr(types[n], '__name__', str(types[n])):6s} default "
                      f"{getattr(defaults, n)!r}")
    else:
        from commbench.config.grid import shipped_grids

        for name, g in shipped_grids().items():  # the name runs from anywhere (commbench sweep NAME)
            print(f"{name:28s} {g.relative_to(GRIDS_DIR).as_posix()}")
    return 0


def cmd_compressors(args) -> int:
    from commbench.analysis.contract import render, report
    from commbench.analysis.contract.subjects import unchecked
    from commbench.tasks import TASKS, DataUnavailable

    if args.task not in TASKS:
        raise ConfigError(f"--task {args.task}: unknown (known: {', '.join(TASKS)})")
    if args.dataset not in TASKS[args.task].datasets:
        raise ConfigError(f"--dataset {args.dataset}: not one {args.task} takes "
                          f"({', '.join(TASKS[args.task].datasets)})")
    SETTING["data_root"].parse("--data-root", args.data_root)  # a folder, not a file or a system one
    try:
        rows, given = report(args.method, parse_set(args.set), args.task, args.dataset, args.data_root)
    except DataUnavailable as exc:
        raise ConfigError(f"--dataset {args.dataset}: {str(exc).splitlines()[0]}") from None
    sys.stdout.write(render(rows, given, args.format, None if args.method else unchecked()))
    return 1 if any(r.failures for r in rows) else 0  # a check in CI: a broken promise fails it


COMMANDS = {"run": cmd_run, "sweep": cmd_sweep, "status": status_command.run, "table": cmd_table,
            "compare": cmd_compare, "plot": cmd_plot, "report": cmd_report, "model": model_command.run,
            "data": cmd_data, "list": cmd_list, "compressors": cmd_compressors}


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return COMMANDS[args.command](args)
    except (ConfigError, UnsafePath) as exc:  # bad input, or a path commbench refuses to write through
        raise BadInput(str(exc)) from None
    except MethodRegistryError as exc:  # a user's method that does not load, or takes a name already taken
        raise BadInput(str(exc)) from None
    except BrokenPipeError:  # `commbench status | head`: the reader has what it wanted
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so that Python's exit flush does not fail again
        return 0
    except OSError as exc:  # a full disk, a read-only folder: one line, exit 1 (the command could not finish)
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"commbench: {where}{exc.strerror or exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:  # Ctrl-C; or SIGTERM while an emulated network existed (launch.netns)
        print(f"commbench: {getattr(exc, 'reason', 'interrupted')}", file=sys.stderr)
        return getattr(exc, "exit_code", 130)


if __name__ == "__main__":
    sys.exit(main())
