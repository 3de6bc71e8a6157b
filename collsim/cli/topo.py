"""``collsim topo show FILE``: a topology's figures (GPUs, nodes, links by kind, per-GPU
injection bandwidth, bisection bandwidth), for a machine with NCCL figures what NCCL reaches
and pays on it and NCCL's graphs, and, with ``--image``, a drawing of it."""

from __future__ import annotations

import argparse
from pathlib import Path

from collsim.cli.common import SET_SOURCE
from collsim.errors import InputError
from collsim.hardware.loader import load_topology, parse_override
from collsim.hardware.shipped import resolve_topology


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "topo", help="inspect a topology file",
        description="Inspect a topology file: its figures and a drawing.")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    show = actions.add_parser(
        "show", help="print a topology's figures; draw it with --image",
        description="Print a topology's GPUs, nodes, links by kind, per-GPU injection "
                    "bandwidth and bisection bandwidth (first half of the GPUs to the rest), "
                    "the NICs' network transport and its figures with where each came from; "
                    "for a machine with an 'nccl' section also line rate and reachable "
                    "bandwidth per link class, launch cost, each protocol's latencies, wire "
                    "ratio and caps, and NCCL's ring/tree/NVLS graphs; draw it to an image "
                    "file with --image.")
    show.add_argument("file", metavar="FILE",
                      help="topology YAML file, or the name of a shipped one (dgx-h100)")
    show.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                      help="override a topology key (dotted for nested keys), e.g. nodes=16")
    show.add_argument("--image", metavar="PATH",
                      help="draw the topology to PATH (.png, .svg or .pdf)")
    show.add_argument("--no-bisection", action="store_true",
                      help="skip the bisection max-flow (slow on thousands of GPUs)")
    show.set_defaults(func=show_topology)


def show_topology(args: argparse.Namespace) -> int:
    # the summary and NCCL's model only when this command runs
    from collsim.calls.report import format_nccl
    from collsim.hardware.summary import format_summary, summarize
    from collsim.hardware.transport_summary import environment_lines, transport_lines

    if args.image:
        _check_image_path(Path(args.image))
    overrides = dict(parse_override(text) for text in args.set)
    topology = load_topology(resolve_topology(args.file, key="FILE"), overrides, SET_SOURCE)
    print(format_summary(summarize(topology, with_bisection=not args.no_bisection)))
    for line in [*transport_lines(topology), *environment_lines(topology)]:
        print(line)
    nccl = format_nccl(topology)
    if nccl is not None:
        print(nccl)
    if args.image:
        # matplotlib only when a picture is asked for
        from collsim.output.machine_figure import draw

        print(f"drawing         {draw(topology, args.image)}")
    return 0


def _check_image_path(path: Path) -> None:
    """Fail before the work if matplotlib cannot write ``path``."""
    # matplotlib only when a picture is asked for
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    formats = FigureCanvasAgg.get_supported_filetypes()
    if path.suffix.lstrip(".").lower() not in formats:
        raise InputError(f"cannot draw to {path}: the name must end in one of "
                         f"{', '.join('.' + f for f in sorted(formats))}", key="--image")
    if not path.parent.is_dir():
        raise InputError(f"cannot draw to {path}: no directory {path.parent}", key="--image")
