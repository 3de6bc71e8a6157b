"""The ``collsim`` command: one entry point, one module per sub-command."""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import re
import signal
import sys
import threading
from typing import NoReturn

from collsim import __version__
from collsim.errors import InputError, SimulationError, WorkerLost
from collsim.output.files import FULL

# Each module has add_parser(subparsers) and sets ``func`` on its parser.
COMMANDS = ["estimate", "run", "plot", "crossover", "compare", "calibrate", "topo", "list",
            "workload", "jobs", "replay"]


class Parser(argparse.ArgumentParser):
    """argparse's parser, its error messages kept to a paragraph: a value it quotes (an
    integer of thousands of digits given as --ranks) is shortened."""

    def error(self, message: str) -> NoReturn:
        super().error(re.sub(r"'([^']{60})[^']{4,}'", r"'\1...'", message))


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="collsim",
        description="Simulate collective communication (allreduce, allgather, ...) on GPU "
                    "clusters.")
    parser.add_argument("--version", action="version", version=f"collsim {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"collsim.cli.{name}").add_parser(subparsers)
    return parser


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled as Ctrl-C is: state written, workers ended, then exit 143."""


def _terminate(signum: int, frame: object) -> None:
    raise Terminated()


def main(argv: list[str] | None = None) -> int:
    """Run one command; bad input exits 2 with a message, never a traceback."""
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        status = _dispatch(argv)
        sys.stdout.flush()
        return status
    except BrokenPipeError:
        # The reader of our output went away (collsim list | head): stop quietly, as a tool
        # killed by SIGPIPE would; point stdout at /dev/null so the flush at exit is silent.
        _silence_stdout()
        return 128 + signal.SIGPIPE
    except KeyboardInterrupt as exc:  # while the parser imports the commands, before _dispatch
        print("collsim: interrupted", file=sys.stderr)
        return interrupted_status(exc)
    except OSError as exc:
        # Every file collsim writes goes through collsim.output.files (an OutputError, exit
        # 2); a write that fails out here is standard output's (> /dev/full, a full disk).
        if exc.errno not in FULL + (errno.EIO,):
            raise
        where = _stdout_name()
        _silence_stdout()
        print(f"collsim: error: cannot write standard output{where}: "
              f"{exc.strerror or exc}; what it shows is cut short (files collsim wrote are "
              f"whole)", file=sys.stderr)
        return 2
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _dispatch(argv: list[str] | None) -> int:
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
    except WorkerLost as exc:
        print(f"collsim: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        print("collsim: interrupted", file=sys.stderr)
        return interrupted_status(exc)


def interrupted_status(exc: KeyboardInterrupt) -> int:
    """128 + the signal's number, as a shell reports a process a signal ended."""
    return 128 + (signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT)


def _stdout_name() -> str:
    """' (/dev/full)': the file standard output goes to, where Linux's /proc says."""
    try:
        return f" ({os.readlink(f'/proc/self/fd/{sys.stdout.fileno()}')})"
    except (OSError, ValueError, AttributeError):
        return ""


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # stdout without a descriptor (tests)
        pass
