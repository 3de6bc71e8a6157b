"""``collsim crossover``: the message size at which one algorithm starts to beat another, per
rank count and topology, found by bisection in simulation."""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path
from typing import Any

from collsim.cli.common import (
    SET_SOURCE,
    add_param_argument,
    params_from_args,
    resolve_topology_path,
)
from collsim.errors import InputError
from collsim.hardware.loader import load_topology, parse_override
from collsim.output.files import reported
from collsim.output.kinds import FIGURE_FORMATS
from collsim.scenarios.axes import message_size, parse_rank_count
from collsim.units import UnitError, format_size, format_time

COLUMNS = ("topology", "collective", "ranks", "below", "above", "crossover_bytes",
           "bracket_low_bytes", "time_s")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "crossover", help="the size where one algorithm starts to beat another",
        description="For two algorithms of one collective, find the message sizes where the "
                    "faster one changes, for each rank count and topology: the sizes are "
                    "bracketed on a doubling grid, then narrowed by bisection in simulation.")
    parser.add_argument("--topology", "-t", action="append", required=True, metavar="FILE",
                        help="topology file or shipped topology name (repeatable)")
    parser.add_argument("--collective", "-c", default="allreduce", help="default: allreduce")
    parser.add_argument("--algorithms", nargs=2, required=True, metavar=("A", "B"),
                        help="the two algorithms to compare")
    parser.add_argument("--ranks", "-p", action="append", metavar="P[,P...]",
                        help="rank counts (repeatable, comma-separated; default: every GPU)")
    parser.add_argument("--min-size", default="4B", metavar="SIZE", help="default: 4B")
    parser.add_argument("--max-size", default="1GiB", metavar="SIZE", help="default: 1GiB")
    parser.add_argument("--tolerance", type=float, default=0.01,
                        help="relative width of the final bracket (default 0.01)")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE",
                        help="override a topology key, e.g. link.bandwidth=200GB/s")
    add_param_argument(parser)
    parser.add_argument("--csv", action="store_true", help="print CSV instead of a table")
    parser.add_argument("--plot", metavar="FILE", help="draw crossover size against ranks "
                        "(.png, .svg or .pdf)")
    parser.set_defaults(func=run)


def _size(text: str, option: str) -> int:
    try:
        return message_size(text)
    except UnitError as exc:
        raise InputError(str(exc), key=option) from None


def _ranks(texts: list[str] | None) -> list[int] | None:
    if not texts:
        return None
    out: list[int] = []
    for text in texts:
        for part in text.split(","):
            try:
                out.append(parse_rank_count(part.strip()))
            except UnitError as exc:
                raise InputError(str(exc), key="--ranks") from None
    return list(dict.fromkeys(out))


def run(args: argparse.Namespace) -> int:
    # the simulator only when this command runs, not when the parser is built
    from collsim.scenarios.bisect import search

    low, high = _size(args.min_size, "--min-size"), _size(args.max_size, "--max-size")
    if low > high:
        raise InputError(f"--min-size {args.min_size} is more than --max-size {args.max_size}",
                         key="--min-size")
    if not 0 < args.tolerance < 1:
        raise InputError(f"expected a tolerance between 0 and 1, got {args.tolerance}",
                         key="--tolerance")
    overrides = dict(parse_override(text) for text in args.overrides)
    params = params_from_args(args)
    algorithms = tuple(args.algorithms)
    ranks = _ranks(args.ranks)
    topologies = [load_topology(resolve_topology_path(path), overrides, SET_SOURCE)
                  for path in args.topology]
    rows: list[dict[str, Any]] = []
    for topology in topologies:
        for p in ranks or [topology.gpus]:
            found = search(topology, args.collective, algorithms, p, low, high, params,
                           args.tolerance)
            base = {"topology": topology.name, "collective": args.collective, "ranks": p}
            for cross in found.crossings:
                rows.append({**base, "below": cross.below, "above": cross.above,
                             "crossover_bytes": cross.size, "bracket_low_bytes": cross.low,
                             "time_s": cross.time_s})
            if not found.crossings:
                rows.append({**base, "below": found.first, "above": found.last,
                             "crossover_bytes": None, "bracket_low_bytes": None,
                             "time_s": None})
    _print(rows, args.csv, (format_size(low), format_size(high)))
    if args.plot:
        sys.stdout.flush()
        _plot(rows, Path(args.plot), algorithms, args.collective)
        print(f"wrote {args.plot}", file=sys.stderr)
    return 0


def _print(rows: list[dict[str, Any]], as_csv: bool, span: tuple[str, str]) -> None:
    if as_csv:
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(COLUMNS)
        for row in rows:
            writer.writerow(["" if row[c] is None else row[c] for c in COLUMNS])
        return
    table = [("topology", "ranks", "crossover", "faster below", "faster above", "time there")]
    for row in rows:
        if row["crossover_bytes"] is None:
            table.append((row["topology"], str(row["ranks"]), f"none in {span[0]}..{span[1]}",
                          row["below"], "-", "-"))
        else:
            table.append((row["topology"], str(row["ranks"]),
                          f"{format_size(row['crossover_bytes'])} "
                          f"({row['crossover_bytes']} B)",
                          row["below"], row["above"], format_time(row["time_s"])))
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    for line in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True))
              .rstrip())


def _plot(rows: list[dict[str, Any]], path: Path, algorithms: tuple[str, ...],
          collective: str) -> None:
    # matplotlib only when a figure is drawn
    from collsim.output.style import (
        label_axes,
        legend_below,
        new_figure,
        ranks_axis,
        save,
        series_style,
        size_axis,
        styled,
    )

    suffix = path.suffix.lstrip(".").lower()
    if suffix not in FIGURE_FORMATS:
        raise InputError(f"cannot tell the format of {path}: use "
                         f"{', '.join('.' + f for f in FIGURE_FORMATS)}",
                         key="--plot")
    found = [r for r in rows if r["crossover_bytes"] is not None]
    if not found:
        raise InputError("no crossover in the size range, nothing to plot", key="--plot")
    with styled():
        figure, axes, columns = new_figure(1, width=5.2, height=3.4)
        ax = axes[0]
        handles, labels = [], []
        for index, topology in enumerate(dict.fromkeys(r["topology"] for r in found)):
            points = sorted((r["ranks"], r["crossover_bytes"]) for r in found
                            if r["topology"] == topology)
            (line,) = ax.plot(*zip(*points, strict=True), **series_style(index))
            handles.append(line)
            for ranks, size in points:
                ax.annotate(format_size(size, iec=True), (ranks, size), xytext=(-4, 5),
                            textcoords="offset points", ha="right", fontsize=7.5)
            labels.append(topology)
        ranks_axis(ax, [r["ranks"] for r in found])
        size_axis(ax, [r["crossover_bytes"] for r in found], axis="y")
        label_axes(axes, columns, "ranks (GPUs)", "crossover size (bytes)")
        a, b = algorithms
        figure.suptitle(f"{collective}: size where {a} and {b} swap places\n"
                        f"(bisection in simulation)", fontsize=10)
        legend_below(figure, handles, labels)
        with reported(path):
            path.parent.mkdir(parents=True, exist_ok=True)
        save(figure, path.parent, path.stem, [suffix])
