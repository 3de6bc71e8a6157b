"""``collsim workload``: one training step of a workload file on a topology."""

from __future__ import annotations

import argparse
import json

from collsim.cli.common import add_topology_arguments, topology_from_args
from collsim.errors import InputError
from collsim.hardware.loader import parse_override


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
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from collsim.workloads.loader import load_workload
    from collsim.workloads.results import format_result
    from collsim.workloads.step import run_workload

    changes = {}
    for text in args.changes:
        try:
            key, value = parse_override(text)
        except InputError as exc:
            raise InputError(exc.message, key="--with") from None
        changes[key] = value
    if args.gpus is not None and args.gpus < 1:
        raise InputError(f"--gpus must be a positive whole number, got {args.gpus}",
                         key="--gpus")
    workload = load_workload(args.workload, changes)
    topology = topology_from_args(args)
    service = None
    if args.isolated:
        from collsim.workloads.service import isolated, simulated
        service = isolated(simulated(topology))
    result = run_workload(workload, topology, args.gpus, service)
    if args.json:
        print(json.dumps({"topology": topology.name, **result.to_dict()}))
    else:
        print(format_result(result, topology.name))
    return 0
