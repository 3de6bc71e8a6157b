"""``collsim replay``: a PyTorch profiler trace's calls and compute replayed on a machine."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from collsim.cli.common import overrides_from
from collsim.errors import InputError

if TYPE_CHECKING:
    from collsim.hardware.topology import Topology
    from collsim.replay.model import Trace


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "replay", help="replay a PyTorch profiler trace's collectives and compute",
        description="Replay the collectives and compute of a job's PyTorch profiler traces "
                    "(one Kineto JSON per rank) on a simulated machine: compute at its "
                    "measured durations, each call when its rank reaches it and its stream "
                    "is free, every call on one simulation. Reports the step measured and "
                    "simulated (compute, exposed communication), per process group and kind "
                    "of call, and call by call. Without -t a gloo (CPU) trace is replayed on "
                    "its own machine, a switch with assumed loopback-TCP figures "
                    "(docs/replay.md).")
    parser.add_argument("trace", metavar="TRACE",
                        help="folder of per-rank trace files, one file, or a glob")
    parser.add_argument("--topology", "-t", metavar="FILE",
                        help="machine to replay on: a shipped name (dgx-h100) or a topology "
                             "file (default: the trace's own, for gloo traces)")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE",
                        help="override a topology key (--set nodes=64, "
                             "--set link.bandwidth=5GB/s)")
    parser.add_argument("--param", dest="params", action="append", default=[],
                        metavar="COLLECTIVE=ALGORITHM",
                        help="run a collective with another algorithm (allreduce=nccl_tree); "
                             "default: ring, pairwise all-to-all (collsim list)")
    parser.add_argument("--format", metavar="FORMAT",
                        help="carry every floating-point call in this number format (bf16, "
                             "fp8_e4m3, ...): the same elements, their bytes at its width")
    parser.add_argument("--scale-out", type=int, metavar="N",
                        help="grow data parallelism to N ranks: the data-parallel groups "
                             "(named dp, or the partition of the ranks; the world if alone) "
                             "repeated, each call keeping its size")
    parser.add_argument("--isolated", action="store_true",
                        help="time each call alone on the machine (no contention between "
                             "calls; each distinct call simulated once: faster at scale)")
    parser.add_argument("--calls", type=int, default=40, metavar="N",
                        help="rows of the per-call table (default 40; 0: none)")
    parser.add_argument("--trace", dest="out_trace", metavar="OUT.json",
                        help="write measured and simulated tracks side by side (Perfetto)")
    parser.add_argument("--figure", metavar="OUT.png",
                        help="draw the first ranks' timelines, measured above simulated, and "
                             "every call's simulated time against its measured one")
    parser.add_argument("--json", action="store_true",
                        help="print the summary and one record per call as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # the replay machinery only when this command runs (the CLI loads every sub-command)
    from collsim.replay.plan import build_plan
    from collsim.replay.reader import read_trace
    from collsim.replay.report import build_result, format_result
    from collsim.replay.run import replay
    from collsim.replay.whatif import scale_out, with_format
    from collsim.watch import Watch

    if args.calls < 0:
        raise InputError(f"--calls must be 0 or more, got {args.calls}", key="--calls")
    if args.scale_out is not None and args.scale_out < 1:
        raise InputError(f"--scale-out must be a positive whole number, got "
                         f"{args.scale_out}", key="--scale-out")
    algorithms = {name: str(value) for name, value
                  in overrides_from(args.params, "--param").items()}
    overrides = overrides_from(args.overrides, "--set")
    trace = read_trace(args.trace)
    traced_ranks = trace.world_size
    if args.format:
        trace = with_format(trace, args.format)
    if args.scale_out is not None:
        trace = scale_out(trace, args.scale_out)
    topology = _machine(args, trace, overrides)
    plan = build_plan(trace, algorithms)
    # The measured step is where the simulated clock is heading, roughly: the line's %.
    with Watch(plan.measured_s()) as watch:
        replayed = replay(plan, topology, args.isolated, observe=watch)
    result = build_result(replayed, args.trace, traced_ranks)
    if args.out_trace:
        # the trace writer only for --trace
        from collsim.replay.tracing import replay_trace
        replay_trace(replayed).write(args.out_trace, info={
            "trace": args.trace, "topology": topology.name, "ranks": plan.world})
    if args.figure:
        # matplotlib only when a figure is drawn
        from collsim.replay.figure import replay_figure
        replay_figure(replayed, result, args.figure)
    if args.json:
        print(json.dumps(result.to_dict()))
    else:
        print(format_result(result, args.calls))
    return 0


def _machine(args: argparse.Namespace, trace: Trace, overrides: dict[str, Any]) -> Topology:
    """The topology to replay on: -t's, or the trace's own machine."""
    # loaded only when this command runs, as above
    from collsim.cli.common import resolve_topology_path
    from collsim.hardware.loader import load_topology
    from collsim.replay.machine import traced_machine

    if args.topology:
        return load_topology(resolve_topology_path(args.topology), overrides)
    return traced_machine(trace, overrides)
