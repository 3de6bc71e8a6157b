"""``collsim compare A.csv B.csv``: the per-point ratio of two results tables."""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path
from typing import TextIO

from collsim.cli.measured import add_case_arguments
from collsim.cli.plot import warn
from collsim.errors import InputError
from collsim.output.compare import compare
from collsim.output.files import replace_text
from collsim.output.table import format_value, read_table
from collsim.units import format_size, format_time


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "compare", help="per-point ratio of two results tables, or a measured nccl-tests log "
                        "against a topology",
        description="Match the points of two results tables and print B/A of a metric for "
                    "each (default: time_s, so 0.5 means B takes half the time). Rows match on "
                    "the columns both tables share, except those whose values never meet "
                    "(two topologies' names, say). With --measured LOG --topology FILE: every "
                    "size of the log beside its simulation on the topology (what NCCL's auto "
                    "picks), the relative error of busbw, and its median and 90th percentile.")
    parser.add_argument("a", metavar="A.csv", nargs="?")
    parser.add_argument("b", metavar="B.csv", nargs="?")
    add_measured_arguments(parser)
    parser.add_argument("--metric", default="time_s",
                        help="column to compare: time_s (default), busbw_GBps, algbw_GBps")
    parser.add_argument("--on", metavar="COL[,COL...]",
                        help="match on exactly these columns")
    parser.add_argument("--ignore", metavar="COL[,COL...]", default="",
                        help="do not match on these columns")
    parser.add_argument("--csv", metavar="FILE", help="also write the comparison as CSV")
    parser.set_defaults(func=run)


def _split(text: str | None) -> list[str]:
    return [c.strip() for c in (text or "").split(",") if c.strip()]


def add_measured_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of the measured mode (``--measured LOG --topology FILE``)."""
    parser.add_argument("--measured", action="append", default=[], metavar="LOG",
                        help="an nccl-tests log (repeatable; several runs per file are fine)")
    parser.add_argument("--topology", "-t", metavar="FILE",
                        help="topology (file or shipped name) to simulate the log's calls on")
    add_case_arguments(parser)
    parser.add_argument("--plot", metavar="FILE.png",
                        help="draw measured and simulated busbw against size")


def run(args: argparse.Namespace) -> int:
    if args.measured:
        # calibration's cases only for --measured
        from collsim.cli.measured import run_measured
        return run_measured(args)
    if args.a is None or args.b is None:
        raise InputError("expected two results tables (A.csv B.csv), or --measured LOG "
                         "--topology FILE", key="compare")
    notes: list[str] = []
    columns_a, rows_a = read_table(args.a, notes)
    columns_b, rows_b = read_table(args.b, notes)
    warn(notes)
    for path, rows in ((args.a, rows_a), (args.b, rows_b)):
        if not rows:
            raise InputError("the results table has no rows to compare", file=str(path))
    result = compare(columns_a, rows_a, columns_b, rows_b, args.metric,
                     _split(args.on) or None, _split(args.ignore))
    header = [*result.on, f"{args.metric}_a", f"{args.metric}_b", "ratio"]
    if args.csv:
        def write(file: TextIO) -> None:
            writer = csv.writer(file, lineterminator="\n")
            writer.writerow(header)
            writer.writerows([format_value(r[c]) for c in header] for r in result.rows)

        replace_text(Path(args.csv), write)
    shown = [["B/A" if c == "ratio" else c for c in header]]
    for row in result.rows:
        shown.append([_cell(c, row[c], args.metric) for c in header])
    widths = [max(len(line[i]) for line in shown) for i in range(len(header))]
    for line in shown:
        print("  ".join(cell.rjust(w) if i >= len(result.on) else cell.ljust(w)
                        for i, (cell, w) in enumerate(zip(line, widths, strict=True))).rstrip())
    sys.stdout.flush()
    if result.ignored:
        print(f"note: not matching on {', '.join(result.ignored)} (the tables share no value "
              f"of it)", file=sys.stderr)
    print(result.summary(), file=sys.stderr)
    return 0


def _cell(column: str, value: object, metric: str) -> str:
    if value is None or value == "":
        return "-"
    if column == "size_bytes" and isinstance(value, int):
        return format_size(value)
    if column == "ratio" and isinstance(value, float):
        return f"{value:.4f}"
    if column.startswith(metric) and metric == "time_s" and isinstance(value, float):
        return format_time(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
