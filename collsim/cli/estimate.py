"""``collsim estimate``: simulate one point and print it as a line or as JSON."""

from __future__ import annotations

import argparse
import json

from collsim.algorithms.registry import get_algorithm
from collsim.cli.common import (
    add_param_argument,
    add_topology_arguments,
    params_from_args,
    size_argument,
    topology_from_args,
)
from collsim.cli.watch import Watch
from collsim.errors import InputError
from collsim.hardware.topology import Topology
from collsim.simulate import analytic_time, check_params, simulate


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "estimate", help="time one collective call on a topology",
        description="Simulate one collective call: how long it takes, its algorithm and bus "
                    "bandwidth (GB/s = 1e9 B/s, as nccl-tests) and the closed-form time.")
    add_topology_arguments(parser)
    parser.add_argument("--collective", "-c", required=True, help="allreduce, broadcast, ...")
    parser.add_argument("--algorithm", "-a", required=True, help="ring, binomial, ...")
    parser.add_argument("--ranks", "-p", required=True, type=int, help="participating GPUs")
    parser.add_argument("--size", "-s", required=True,
                        help="message size: 4MiB, 1GB, 512 (DESIGN.md's size convention)")
    add_param_argument(parser)
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object with the results-table columns")
    parser.add_argument("--format", choices=("text", "json", "nccl-tests"), default=None,
                        help="text (default), json (as --json), or nccl-tests: the point as "
                             "a one-row table in nccl-tests' layout")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    size = size_argument(args.size)
    topology = topology_from_args(args)
    with Watch(_closed_form(topology, args, size)) as watch:
        result = simulate(topology, args.collective, args.algorithm, args.ranks, size,
                          params_from_args(args), observe=watch)
    if args.format == "nccl-tests":
        from collsim.cli.nccltests_format import tables
        print(tables([result.row()], {topology.name: topology}), end="")
    elif args.json or args.format == "json":
        row = result.row()
        row["analytic_time_s"] = result.analytic_time_s
        print(json.dumps(row))
    else:
        print(result)
    return 0


def _closed_form(topology: Topology, args: argparse.Namespace, size: int) -> float | None:
    """The closed-form time, for the progress line's "of about"; None if there is none."""
    try:
        algorithm = get_algorithm(args.collective, args.algorithm)
        params = check_params(algorithm, args.ranks, params_from_args(args))
        return analytic_time(topology, algorithm, args.ranks, size, params)
    except (InputError, ValueError, ArithmeticError):
        return None  # the simulation reports the bad input itself
