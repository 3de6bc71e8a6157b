"""``collsim compare --measured LOG --topology FILE``: a measured nccl-tests log beside its
simulation, size by size (see :mod:`collsim.calibrate.compare`)."""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path
from typing import TextIO

from collsim.calibrate.cases import case_from_run
from collsim.calibrate.compare import COLUMNS, compare_case, plot, summary
from collsim.cli.common import resolve_topology_path
from collsim.errors import InputError
from collsim.hardware.loader import parse_override
from collsim.nccltests import read_logs
from collsim.output.files import check_figure_name, replace_text
from collsim.units import format_size, format_time

MIN_SIZE = 2**20  # the summary's second line: sizes of 1 MiB and more


def add_case_arguments(parser: argparse.ArgumentParser) -> None:
    """The options :func:`cases_from_args` reads besides the logs and the topology: what to
    override in the topology and what the logs forced NCCL to run."""
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="override a topology key (NIC count, ...)")
    parser.add_argument("--algorithm", "-a", default="auto",
                        help="auto (NCCL's pick, default) or the NCCL algorithm the logs forced")
    parser.add_argument("--protocol", help="LL, LL128 or Simple, if the logs forced one")
    parser.add_argument("--collective", help="the collective, where a log does not say")


def cases_from_args(args: argparse.Namespace) -> tuple[Path, list]:
    """The topology path and one Case per run of every ``--measured`` log."""
    if not args.topology:
        raise InputError("--measured needs --topology FILE (a shipped name or a file)",
                         key="--topology")
    preset = resolve_topology_path(args.topology)
    overrides = dict(parse_override(text) for text in args.overrides)
    cases = []
    for log in args.measured:
        for run in read_logs(log):
            cases.append(case_from_run(run, preset, overrides, algorithm=args.algorithm,
                                       protocol=args.protocol, collective=args.collective))
    if not cases:
        raise InputError("no nccl-tests table found in the log", file=args.measured[0])
    return preset, cases


def run_measured(args: argparse.Namespace) -> int:
    if args.plot:
        check_figure_name(args.plot, "--plot")
    preset, cases = cases_from_args(args)
    points = []
    for case in cases:
        mine = compare_case(case)
        points += mine
        print(f"{case.label}: {case.collective}, {case.nodes} x {case.gpus_per_node} GPUs on "
              f"{case.topology.name}")
        header = ["size", "measured", "simulated", "meas busbw", "sim busbw", "error",
                  "auto picked"]
        lines = [header]
        for p in mine:
            picked = f"{p.algorithm}/{p.protocol}" + (f"/{p.channels}ch" if p.channels else "")
            lines.append([format_size(p.size_bytes), format_time(p.measured_time_s),
                          format_time(p.simulated_time_s), f"{p.measured_busbw_GBps:.2f}",
                          f"{p.simulated_busbw_GBps:.2f}", f"{100 * p.error:+.1f}%", picked])
        widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
        for line in lines:
            print("  " + "  ".join(cell.rjust(w) if i else cell.ljust(w)
                                   for i, (cell, w) in enumerate(zip(line, widths, strict=True))))
    for label, low in (("all sizes", 0), ("sizes >= 1 MiB", MIN_SIZE)):
        count, median, p90 = summary(points, low)
        if count:
            print(f"busbw error, {label}: median {100 * median:.1f}%, "
                  f"p90 {100 * p90:.1f}% over {count} points")
    if args.csv:
        def write(file: TextIO) -> None:
            writer = csv.writer(file, lineterminator="\n")
            writer.writerow(COLUMNS)
            for p in points:
                writer.writerow([_cell(getattr(p, c)) for c in COLUMNS])
        replace_text(Path(args.csv), write)
    if args.plot:
        plot(points, Path(args.plot), f"measured vs simulated on {preset.stem}")
        print(f"  {args.plot}")
    sys.stdout.flush()
    return 0


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return str(value)
