"""``collsim plot RESULTS.csv``: (re)draw figures from a results table."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from collsim.errors import InputError
from collsim.output.runinfo import read_info
from collsim.output.table import read_table
from collsim.scenarios.schema import FIGURE_KINDS, FORMATS


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "plot", help="draw figures from a results table",
        description="Draw figures from a results table. Without --figure, draws the figures "
                    "of the scenario that made the table (from run.json beside it), or time and "
                    "bus bandwidth against size plus whatever else the table can show.")
    parser.add_argument("table", metavar="RESULTS.csv", help="results table of collsim run")
    parser.add_argument("--out", metavar="DIR", help="where to write (default: beside the table)")
    parser.add_argument("--figure", action="append", choices=FIGURE_KINDS, metavar="KIND",
                        help=f"a figure to draw (repeatable): {', '.join(FIGURE_KINDS)}")
    parser.add_argument("--baseline", metavar="ALGORITHM",
                        help="speedup: the algorithm the others are compared with")
    parser.add_argument("--select", action="append", default=[], metavar="COLUMN=VALUE",
                        help="keep only rows with this value (repeatable; VALUE may be a "
                             "comma-separated list)")
    parser.add_argument("--format", action="append", choices=FORMATS, dest="formats",
                        help="file format (repeatable; default png and svg)")
    parser.set_defaults(func=run)


def _selection(texts: list[str]) -> dict[str, Any]:
    chosen: dict[str, Any] = {}
    for text in texts:
        column, sep, value = text.partition("=")
        if not sep or not column:
            raise InputError(f"expected COLUMN=VALUE, got {text!r}", key="--select")
        chosen[column.strip()] = [v.strip() for v in value.split(",")]
    return chosen


def default_figures(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a table can show: time and busbw against size, and, when it has them, the
    crossover map (two algorithms or more) and scaling (two rank counts or more)."""
    specs = [{"kind": "time_vs_size"}, {"kind": "busbw_vs_size"}]
    if len({r["algorithm"] for r in rows}) > 1:
        specs.append({"kind": "crossover_map"})
    if len({r["ranks"] for r in rows}) > 1:
        specs.append({"kind": "time_vs_ranks"})
    return specs


def run(args: argparse.Namespace) -> int:
    from collsim.output.figures import draw_figures

    table = Path(args.table)
    _, rows = read_table(table)
    if not rows:
        raise InputError("the results table has no rows to plot", file=str(table))
    info = read_info(table.parent) or {}
    if args.figure:
        if "speedup" in args.figure and not args.baseline:
            raise InputError("a speedup figure needs --baseline ALGORITHM", key="--baseline")
        specs = [{"kind": kind} for kind in args.figure]
    else:
        specs = [dict(s) for s in info.get("figures") or default_figures(rows)]
    selection = _selection(args.select)
    for index, spec in enumerate(specs):
        if args.baseline:
            spec["baseline"] = args.baseline
        if selection:
            spec["select"] = {**(spec.get("select") or {}), **selection}
        name = spec.get("name") or spec["kind"]
        spec["name"] = name if [s.get("name") or s["kind"] for s in specs].count(name) == 1 \
            else f"{name}-{index + 1}"
        if spec["kind"] == "speedup" and not spec.get("baseline"):
            raise InputError("a speedup figure needs --baseline ALGORITHM", key="--baseline")
    out = Path(args.out) if args.out else table.parent
    out.mkdir(parents=True, exist_ok=True)
    formats = args.formats or info.get("formats") or ["png", "svg"]
    drawn = draw_figures(rows, specs, out, formats, title=info.get("scenario", ""))
    for note in drawn.notes:
        print(f"note: {note}", file=sys.stderr)
    for path in drawn.files:
        print(path)
    return 0 if drawn.files else 2
