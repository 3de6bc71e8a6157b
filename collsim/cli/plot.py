"""``collsim plot RESULTS.csv``: (re)draw figures from a results table."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from collsim.errors import InputError
from collsim.output.files import is_figure_file, reported
from collsim.output.kinds import DEFAULT_FIGURES, DEFAULT_FORMATS, FIGURE_FORMATS, FIGURE_KINDS
from collsim.output.runinfo import RUN_FILE, read_info
from collsim.output.table import read_table


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
    parser.add_argument("--format", action="append", choices=FIGURE_FORMATS, dest="formats",
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


def warn(notes: list[str]) -> None:
    """Print what reading a table left out, one line each, on stderr."""
    for note in notes:
        print(f"collsim: warning: {note}", file=sys.stderr)


def recorded_figures(folder: Path) -> dict[str, Any]:
    """The figures and formats the run.json beside a table asks for, checked: the names
    become file names, so each must be a plain name that stays inside the output folder."""
    hint = "pass --figure KIND and --format FORMAT to draw without it"
    info = read_info(folder, hint) or {}
    path = folder / RUN_FILE
    figures = info.get("figures")
    if figures is not None:
        if not isinstance(figures, list):
            raise InputError(f"expected a list of figures; {hint}", file=str(path),
                             key="figures")
        for index, spec in enumerate(figures):
            where = f"figures[{index}]"
            if not isinstance(spec, dict) or spec.get("kind") not in FIGURE_KINDS:
                raise InputError(f"expected a figure with a kind among "
                                 f"{', '.join(FIGURE_KINDS)}; {hint}", file=str(path),
                                 key=where)
            name = spec.get("name", spec["kind"])
            if not isinstance(name, str) or not is_figure_file(f"{name}.png"):
                raise InputError(f"figure name {name!r} is not a plain file name (letters, "
                                 f"digits, '.', '_', '-'; no folder); {hint}",
                                 file=str(path), key=f"{where}.name")
    formats = info.get("formats")
    if formats is not None and (not isinstance(formats, list)
                                or any(f not in FIGURE_FORMATS for f in formats)):
        raise InputError(f"expected formats among {', '.join(FIGURE_FORMATS)}, got {formats!r}; "
                         f"{hint}", file=str(path), key="formats")
    return info


def default_figures(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a table can show: time and busbw against size, and, when it has them, the
    crossover map (two algorithms or more) and scaling (two rank counts or more)."""
    specs = [{"kind": kind} for kind in DEFAULT_FIGURES]
    if len({r["algorithm"] for r in rows}) > 1:
        specs.append({"kind": "crossover_map"})
    if len({r["ranks"] for r in rows}) > 1:
        specs.append({"kind": "time_vs_ranks"})
    return specs


def run(args: argparse.Namespace) -> int:
    # matplotlib only when figures are drawn
    from collsim.output.figures import draw_figures

    if args.out is not None and not args.out.strip():
        raise InputError("expected a folder name, got nothing", key="--out")
    table = Path(args.table)
    notes: list[str] = []
    _, rows = read_table(table, notes)
    warn(notes)
    if not rows:
        raise InputError("the results table has no rows to plot", file=str(table))
    info = {} if args.figure and args.formats else recorded_figures(table.parent)
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
    with reported(out):
        out.mkdir(parents=True, exist_ok=True)
    formats = args.formats or info.get("formats") or list(DEFAULT_FORMATS)
    drawn = draw_figures(rows, specs, out, formats, title=str(info.get("scenario") or ""))
    for note in drawn.notes:
        print(f"note: {note}", file=sys.stderr)
    for path in drawn.files:
        print(path)
    return 0 if drawn.files else 2
