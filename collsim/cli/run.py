"""``collsim run SCENARIO.yaml``: every point of a scenario into a results table and figures."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from collsim.cli import interrupted_status
from collsim.errors import InputError, OutputError, WorkerLost
from collsim.scenarios.loader import load_scenario
from collsim.scenarios.runner import TABLE_FILE, RunOptions, run_scenario
from collsim.scenarios.shipped import resolve_scenario

MAX_JOBS = 1024  # more local processes than any machine has cores: a typo


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "run", help="run every point of a scenario; write results.csv, run.json and figures",
        description="Run every point of a scenario file and write DIR/results.csv (one row per "
                    "point, written as points finish), DIR/run.json and the scenario's figures. "
                    "An interrupted run keeps a valid table; --resume completes it.")
    parser.add_argument("scenario", metavar="SCENARIO.yaml",
                        help="scenario file, or the name of a shipped one (ring-vs-tree; "
                             "collsim list names them)")
    parser.add_argument("--out", metavar="DIR", help="output directory, made with its parents "
                        "if missing; one run at a time may write it (default: results/NAME "
                        "under the current folder, or results/NAME-quick with --quick)")
    parser.add_argument("--jobs", "-j", type=int, default=1, metavar="N",
                        help="local worker processes (default 1; 0 = one per CPU)")
    parser.add_argument("--resume", action="store_true",
                        help="run only the points DIR/results.csv does not hold yet")
    parser.add_argument("--force", action="store_true",
                        help="replace the results already in DIR")
    parser.add_argument("--quick", action="store_true",
                        help="use the scenario's reduced 'quick:' sweep (tests, demos)")
    parser.add_argument("--executor", choices=("local", "dask"), default="local",
                        help="where points run: local processes (default) or a Dask cluster")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="Dask scheduler address, e.g. tcp://10.0.0.5:8786")
    parser.add_argument("--no-figures", action="store_true", help="write the table only")
    parser.add_argument("--exact", action="store_true",
                        help="every point on the full simulation's times, as the scenario's "
                             "'exact: true': no pipeline path (docs/engine.md); each row's "
                             "path column says which path timed it")
    parser.add_argument("--format", choices=("csv", "nccl-tests"), default="csv",
                        help="nccl-tests: also write DIR/results.nccl-tests.txt, the results "
                             "as nccl-tests tables (one per topology, algorithm, collective, "
                             "rank count and swept key)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not 0 <= args.jobs <= MAX_JOBS:
        raise InputError(f"expected 0 (one per CPU) to {MAX_JOBS} worker processes, got "
                         f"{args.jobs}", key="--jobs")
    if args.scheduler and args.executor != "dask":
        raise InputError("--scheduler needs --executor dask", key="--scheduler")
    if args.out is not None and not args.out.strip():
        raise InputError("expected a folder name, got nothing", key="--out")
    scenario = load_scenario(resolve_scenario(args.scenario), quick=args.quick)
    out = Path(args.out) if args.out else \
        Path("results") / (scenario.name + ("-quick" if args.quick else ""))
    if not args.out:
        print(f"note: writing to {Path.cwd() / out} (no --out given)", file=sys.stderr)
    options = RunOptions(out=out, jobs=args.jobs or os.cpu_count() or 1, resume=args.resume,
                         force=args.force, executor=args.executor, scheduler=args.scheduler,
                         figures=not args.no_figures, exact=args.exact)
    try:
        report = run_scenario(scenario, options)
    except KeyboardInterrupt as exc:
        print(f"collsim: interrupted{_kept(args, out) or ' before any point finished'}",
              file=sys.stderr)
        return interrupted_status(exc)
    except (WorkerLost, OutputError) as exc:
        print(f"collsim: {'error: ' if isinstance(exc, OutputError) else ''}{exc}"
              f"{_kept(args, out)}", file=sys.stderr)
        return 2 if isinstance(exc, OutputError) else 1
    for note in report.notes:
        print(f"note: {note}", file=sys.stderr)
    done = f"ran {report.ran} points" + (f" ({report.already} were already done)"
                                         if report.already else "")
    print(f"{scenario.name}: {done} in {report.seconds:.1f} s -> {out / TABLE_FILE}")
    for path in report.figures:
        print(f"  {path}")
    if args.format == "nccl-tests":
        print(f"  {_nccl_tests(scenario, out)}")
    return 0


def _nccl_tests(scenario, out: Path) -> Path:  # noqa: ANN001 (a Scenario)
    """Write the results as nccl-tests tables beside results.csv."""
    # nccl-tests' table writer only for --format nccl-tests
    from collsim.cli.nccltests_format import write_run_tables
    from collsim.output.table import read_table

    _, rows = read_table(out / TABLE_FILE)
    topologies = {}
    for source in scenario.topologies:
        try:
            topologies[source.label] = source.build()
        except InputError:  # a topology only valid with the scenario's swept keys
            topologies[source.label] = None
    return write_run_tables(rows, topologies, out)


def _kept(args: argparse.Namespace, out: Path) -> str:
    """What an unfinished run left and the command that completes it ('' if nothing)."""
    table = out / TABLE_FILE
    if not table.is_file():
        return ""
    again = shlex.join(["collsim", "run", args.scenario, "--out", str(out), "--resume",
                        *(["--quick"] if args.quick else []),
                        *(["--jobs", str(args.jobs)] if args.jobs != 1 else [])])
    return f"; {table} holds the points done so far. Complete it with:\n  {again}"
