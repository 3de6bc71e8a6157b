"""``collsim estimate``: simulate one point and print it as a line or as JSON."""

from __future__ import annotations

import argparse
import json

from collsim.cli.common import (
    add_param_argument,
    add_topology_arguments,
    params_from_args,
    size_argument,
    topology_from_args,
)
from collsim.cli.recording import (
    add_recording_arguments,
    add_straggler_arguments,
    check_limit,
    recording_wanted,
    straggler_arguments,
    write_trace,
)
from collsim.hardware.topology import Topology
from collsim.simulate import PointResult, expected_time, simulate
from collsim.watch import Watch


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "estimate", help="time one collective call on a topology",
        description="Simulate one collective call: how long it takes, its algorithm and bus "
                    "bandwidth (GB/s = 1e9 B/s, as nccl-tests) and the closed-form time.")
    add_topology_arguments(parser)
    parser.add_argument("--collective", "-c", required=True, help="allreduce, broadcast, ...")
    parser.add_argument("--algorithm", "-a", required=True,
                        help="ring, binomial, ...; auto: NCCL's choice; best: the fastest NCCL "
                             "algorithm and protocol, simulated")
    parser.add_argument("--ranks", "-p", required=True, type=int, help="participating GPUs")
    parser.add_argument("--size", "-s", required=True,
                        help="message size: 4MiB, 1GB, 512; the per-rank buffer, or the whole "
                             "gathered one for (all)gather, scatter, reducescatter "
                             "(docs/design.md#collectives)")
    add_param_argument(parser)
    add_recording_arguments(parser)
    add_straggler_arguments(parser)
    parser.add_argument("--exact", action="store_true",
                        help="the full simulation's times: no pipeline path, which times NCCL's "
                             "tree pipelines on many nodes from two small runs (measured within "
                             "1%% up to 2,048 GPUs, docs/engine.md)")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object with the results-table columns")
    parser.add_argument("--format", choices=("text", "json", "nccl-tests"), default=None,
                        help="text (default), json (as --json), or nccl-tests: the point as "
                             "a one-row table in nccl-tests' layout")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    size = size_argument(args.size)
    spread, late = straggler_arguments(args)
    check_limit(args)
    topology = topology_from_args(args)
    with Watch(expected_time(topology, args.collective, args.algorithm, args.ranks, size,
                             params_from_args(args))) as watch:
        result = simulate(topology, args.collective, args.algorithm, args.ranks, size,
                          params_from_args(args), observe=watch, exact=args.exact)
    extra: dict = {}
    lines: list[str] = []
    if spread > 0 or late or recording_wanted(args):
        extra, lines = _recorded(args, topology, size, result, spread, late)
    if args.format == "nccl-tests":
        # nccl-tests' table writer only for --format nccl-tests
        from collsim.cli.nccltests_format import tables
        print(tables([result.row()], {topology.name: topology}), end="")
    elif args.json or args.format == "json":
        row = result.row()
        for column in ("analytic_time_s", "protocol", "channels"):
            row[column] = getattr(result, column)  # null, not "", where not applicable
        if result.speedup_vs_auto is not None:
            row["speedup_vs_auto"] = result.speedup_vs_auto
        if result.fallback:  # why an algorithm declaring symmetry ran every rank
            row["fallback"] = result.fallback
        print(json.dumps({**row, **extra}))
    else:
        print(result)
    for line in lines:
        print(line)
    return 0


def _recorded(args: argparse.Namespace, topology: Topology, size: int, result: PointResult,
              spread: float, late: list[tuple[int, float]]) -> tuple[dict, list[str]]:
    """The call again (the algorithm, protocol and channels ``result`` ran with) with
    stragglers and/or recording: the stretch, the trace file, the link report."""
    # the recording simulator only when stragglers or recording are asked for
    from collsim.algorithms.registry import get_algorithm
    from collsim.output.linkload import format_link_report, link_loads
    from collsim.output.trace import call_trace
    from collsim.recorded import draw_offsets, record_call
    from collsim.simulate import accepted_params
    from collsim.units import format_time

    skewed = spread > 0 or bool(late)
    offsets = draw_offsets(args.ranks, spread, late, args.seed) if skewed else None
    together = result.time_s
    params = params_from_args(args)
    # What the call ran with, where the algorithm takes it (NCCL's point-to-point alltoall
    # reports its protocol but has no parameter to set it).
    accepted = accepted_params(get_algorithm(args.collective, result.selected))
    for name in ("protocol", "channels"):
        if getattr(result, name) is not None and name in accepted:
            params[name] = getattr(result, name)
    label = "recording" if recording_wanted(args) else "simulating with stragglers"
    with Watch(label=label) as watch:
        recorded = record_call(topology, args.collective, result.selected, args.ranks, size,
                               params, offsets, record=recording_wanted(args), observe=watch)
    extra: dict = {}
    lines: list[str] = []
    if skewed:
        stretch = recorded.time_s / together if together > 0 else 1.0
        extra = {"skewed_time_s": recorded.time_s, "last_start_s": max(recorded.offsets),
                 "stretch": stretch}
        lines.append(f"with stragglers (last start {format_time(max(recorded.offsets))}, "
                     f"seed {args.seed}): {format_time(recorded.time_s)} from the first "
                     f"start to the last finish, stretch {stretch:.3f}x")
    if args.trace:
        write_trace(call_trace(recorded), args,
                    {"collective": args.collective, "algorithm": result.selected,
                     "ranks": args.ranks, "size": size, "topology": topology.name})
    if args.link_report or args.link_figure:
        loads = link_loads(recorded.fabric)
        span = max(recorded.call.result.finish)
        if args.link_report:
            lines.append(format_link_report(loads, span, args.links))
        if args.link_figure:
            # matplotlib only when a figure is drawn
            from collsim.output.linkfigure import link_figure
            link_figure(loads, span, args.link_figure,
                        f"{args.collective}/{args.algorithm}, {args.ranks} ranks on "
                        f"{topology.name}")
    return extra, lines

