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
from collsim.cli.watch import Watch
from collsim.simulate import expected_time, simulate


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
                        help="message size: 4MiB, 1GB, 512 (DESIGN.md's size convention)")
    add_param_argument(parser)
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object with the results-table columns")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    size = size_argument(args.size)
    topology = topology_from_args(args)
    with Watch(expected_time(topology, args.collective, args.algorithm, args.ranks, size,
                             params_from_args(args))) as watch:
        result = simulate(topology, args.collective, args.algorithm, args.ranks, size,
                          params_from_args(args), observe=watch)
    if args.json:
        row = result.row()
        for column in ("analytic_time_s", "protocol", "channels"):
            row[column] = getattr(result, column)  # null, not "", where not applicable
        if result.speedup_vs_auto is not None:
            row["speedup_vs_auto"] = result.speedup_vs_auto
        print(json.dumps(row))
    else:
        print(result)
    return 0
