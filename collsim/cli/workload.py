"""``collsim workload``: one training step of a workload file on a topology."""

from __future__ import annotations

import argparse
import dataclasses
import json

from collsim.cli.common import add_topology_arguments, overrides_from, topology_from_args
from collsim.cli.recording import (
    add_recording_arguments,
    check_limit,
    recording_wanted,
    write_trace,
)
from collsim.errors import InputError
from collsim.units import format_time
from collsim.watch import Watch
from collsim.workloads.model import Noise


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "workload", help="time one training step of a workload on a topology",
        description="Plan one training step of a workload file (model, parallelism, "
                    "compute, formats) and simulate it: step time, compute, exposed "
                    "communication, bubble, MFU, and per kind of collective the calls, bytes "
                    "and time per GPU. Every call runs on one simulation of the topology, so "
                    "concurrent calls share links (--isolated: each call alone).")
    parser.add_argument("workload", metavar="WORKLOAD", help="workload YAML file")
    add_topology_arguments(parser)
    parser.add_argument("--with", dest="changes", action="append", default=[],
                        metavar="KEY=VALUE",
                        help="override a workload key (dotted: dtypes.gradients=fp8_e4m3)")
    parser.add_argument("--gpus", type=int, metavar="N",
                        help="GPUs to use (default: data x tensor x pipeline if the workload "
                             "names data, else every GPU of the topology)")
    parser.add_argument("--isolated", action="store_true",
                        help="time each call alone on the topology (no contention between "
                             "calls; faster)")
    parser.add_argument("--exact", action="store_true",
                        help="run every call on the shared simulation, even those that run "
                             "alone on their links (by default timed alone: the 'calls "
                             "timed' line says which path ran)")
    add_recording_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # workloads only when this command runs, not when the parser is built
    from collsim.workloads.loader import load_workload
    from collsim.workloads.results import format_result
    from collsim.workloads.step import run_workload

    changes = overrides_from(args.changes, "--with")
    if args.gpus is not None and args.gpus < 1:
        raise InputError(f"--gpus must be a positive whole number, got {args.gpus}",
                         key="--gpus")
    check_limit(args)
    if args.isolated and recording_wanted(args):
        raise InputError("--trace and --link-report record the shared simulation; drop "
                         "--isolated", key="--isolated")
    workload = load_workload(args.workload, changes)
    topology = topology_from_args(args)
    service = None
    if args.isolated and args.exact:
        raise InputError("--isolated times each call alone and --exact runs every call on "
                         "the shared simulation: give one", key="--exact")
    if args.isolated:
        # the isolated-call services only for --isolated
        from collsim.workloads.service import isolated, simulated
        service = isolated(simulated(topology))
    lines: list[str] = []
    noisy = workload.noise != Noise()
    if recording_wanted(args):
        result = _recorded(args, workload, topology, lines)
    else:
        with Watch(label="simulating the step") as watch:
            result = run_workload(workload, topology, args.gpus, service, exact=args.exact,
                                  observe=watch)
    if args.isolated:
        result = dataclasses.replace(result, path="isolated")
    extra = {}
    if noisy:
        with Watch(label="simulating the step without noise") as watch:
            quiet = run_workload(dataclasses.replace(workload, noise=Noise()), topology,
                                 args.gpus, service, exact=args.exact, observe=watch)
        extra = {"quiet_step_s": quiet.step_s, "stretch": result.step_s / quiet.step_s}
        lines.insert(0, f"noise (seed {workload.noise.seed}): the step without it takes "
                        f"{format_time(quiet.step_s)}, stretch {extra['stretch']:.3f}x")
    if args.json:
        print(json.dumps({"topology": topology.name, **result.to_dict(), **extra}))
    else:
        print(format_result(result, topology.name))
    for line in lines:
        print(line)
    return 0


def _recorded(args: argparse.Namespace, workload, topology, lines: list[str]):
    """The step on a recording simulation: its trace file and link report."""
    # the recording simulator only when recording is asked for
    from collsim.output.linkload import format_link_report
    from collsim.workloads.tracing import record_step, step_trace

    gpus = args.gpus
    if gpus is None and workload.parallelism.data is None:
        gpus = topology.gpus
    with Watch(label="simulating the step") as watch:
        recorded = record_step(workload, topology, gpus, watch)
    if recorded.plan.world > topology.gpus:
        raise InputError(f"the workload needs {recorded.plan.world} GPUs; topology "
                         f"'{topology.name}' has {topology.gpus}", key="parallelism")
    if args.trace:
        write_trace(step_trace(recorded), args,
                    {"workload": workload.name, "topology": topology.name,
                     "gpus": recorded.plan.world})
    if args.link_report or args.link_figure:
        loads = recorded.loads()
        if args.link_report:
            lines.append(format_link_report(loads, recorded.result.step_s, args.links))
        if args.link_figure:
            # matplotlib only when a figure is drawn
            from collsim.output.linkfigure import link_figure
            link_figure(loads, recorded.result.step_s, args.link_figure,
                        f"{workload.name}, {recorded.plan.world} GPUs on {topology.name}")
    return recorded.result
