"""The ``collsim`` command: one entry point, one module per sub-command."""

from __future__ import annotations

import argparse
import importlib
import sys

from collsim import __version__
from collsim.errors import InputError, SimulationError

# Each module has add_parser(subparsers) and sets ``func`` on its parser.
COMMANDS = ["estimate", "run", "plot", "crossover", "compare", "topo", "list"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="collsim",
        description="Simulate collective communication (allreduce, allgather, ...) on GPU "
                    "clusters.")
    parser.add_argument("--version", action="version", version=f"collsim {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"collsim.cli.{name}").add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except InputError as exc:
        print(f"collsim: error: {exc}", file=sys.stderr)
        return 2
    except SimulationError as exc:
        print(f"collsim: simulation failed: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("collsim: interrupted", file=sys.stderr)
        return 130
