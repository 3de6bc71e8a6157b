"""Options shared by ``estimate`` and ``workload``: a Chrome trace, a link report (table and
figure), and stragglers (``estimate``; a workload has its ``noise`` section)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from collsim.errors import InputError
from collsim.output.files import check_figure_name
from collsim.output.linkload import TOP
from collsim.units import UnitError, parse_time

if TYPE_CHECKING:
    from collsim.output.trace import Trace


def add_recording_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trace", metavar="FILE.json",
                        help="write a Chrome trace-event file (chrome://tracing, Perfetto)")
    parser.add_argument("--trace-limit", type=int, default=500_000, metavar="N",
                        help="keep at most N trace events, the earliest (default 500000)")
    add_link_report_arguments(parser, "")
    parser.add_argument("--link-figure", metavar="FILE.png",
                        help="draw the link report's busiest links to a figure")


def add_link_report_arguments(parser: argparse.ArgumentParser, during: str) -> None:
    """``--link-report`` (``during``: when the links are measured, for its help) and
    ``--links``, how many links of each kind it lists."""
    parser.add_argument("--link-report", action="store_true",
                        help="print each directed link's bytes moved, busy time, average and "
                             "peak utilisation and peak concurrent transfers, by link kind"
                             + during)
    parser.add_argument("--links", type=links_argument, default=TOP, metavar="N|all",
                        help=f"links of each kind the link report lists, busiest first "
                             f"(default {TOP}; all: every link)")


def links_argument(text: str) -> int | None:
    """``--links``: a positive count, or ``all`` (None: no limit)."""
    if text.strip().lower() == "all":
        return None
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number or 'all', got {text!r}")
    return count


def write_trace(trace: Trace, args: argparse.Namespace, info: dict[str, Any]) -> None:
    """Write ``--trace``'s file and say on stderr what was written and how to open it."""
    trace.write(args.trace, args.trace_limit, info)
    events = min(len(trace.events), args.trace_limit)
    print(f"collsim: wrote {args.trace}: a Chrome trace of {events:,} events (open it in "
          f"ui.perfetto.dev or chrome://tracing)", file=sys.stderr)


def add_straggler_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--skew", metavar="TIME", default="0",
                        help="rank start offsets drawn uniformly in [0, TIME] (seeded)")
    parser.add_argument("--late", action="append", default=[], metavar="RANK=TIME",
                        help="rank RANK starts TIME late (repeatable)")
    parser.add_argument("--seed", type=int, default=0, help="seed of --skew (default 0)")


def recording_wanted(args: argparse.Namespace) -> bool:
    return bool(args.trace or args.link_report or args.link_figure)


def check_limit(args: argparse.Namespace) -> None:
    """Refuse a bad --trace-limit or --link-figure name before anything is simulated."""
    if args.link_figure:
        check_figure_name(args.link_figure, "--link-figure")
    if args.trace_limit < 1:
        raise InputError(f"--trace-limit must be positive, got {args.trace_limit}",
                         key="--trace-limit")


def straggler_arguments(args: argparse.Namespace) -> tuple[float, list[tuple[int, float]]]:
    """(spread, [(rank, delay)]) from --skew and --late; bad values (and a negative
    --seed, which numpy's generator refuses with a ValueError) are InputErrors."""
    if args.seed < 0:
        raise InputError(f"must be 0 or more, got {args.seed}", key="--seed")
    try:
        spread = parse_time(args.skew)
    except UnitError as exc:
        raise InputError(str(exc), key="--skew") from None
    late = []
    for text in args.late:
        rank, sep, delay = text.partition("=")
        try:
            if not sep:
                raise ValueError
            late.append((int(rank), parse_time(delay)))
        except (ValueError, UnitError):
            shown = text if len(text) <= 60 else f"{text[:57]}..."
            raise InputError(f"expected RANK=TIME such as 3=2ms, got {shown!r}",
                             key="--late") from None
    return spread, late
