"""Arguments shared by sub-commands: topology files, --set overrides, --param values."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from collsim.errors import InputError
from collsim.hardware.loader import load_topology, parse_override
from collsim.hardware.shipped import resolve_topology, shipped_directory
from collsim.hardware.topology import Topology
from collsim.scenarios.axes import message_size
from collsim.units import UnitError

SHIPPED_TOPOLOGIES = shipped_directory()
SET_SOURCE = "--set on the command line"  # where an error in an overridden key points


def add_topology_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topology", "-t", required=True, metavar="FILE",
                        help="topology YAML file, or the name of a shipped one (dgx-h100)")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE",
                        help="override a topology key (dotted for nested: link.bandwidth=200GB/s)")


def add_param_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--param", dest="params", action="append", default=[],
                        metavar="NAME=VALUE",
                        help="algorithm parameter: chunk_size=1MiB, root=3, dtype=bfloat16, ...")


def resolve_topology_path(name: str) -> Path:
    """A path as given, or a shipped topology by name (``dgx-h100`` or ``dgx-h100.yaml``)."""
    return resolve_topology(name)


def topology_from_args(args: argparse.Namespace) -> Topology:
    overrides = dict(parse_override(text) for text in args.overrides)
    return load_topology(resolve_topology_path(args.topology), overrides, SET_SOURCE)


def overrides_from(texts: list[str], flag: str) -> dict[str, Any]:
    """NAME=VALUE arguments as a dict; a bad one is an InputError naming ``flag``."""
    values = {}
    for text in texts:
        try:
            name, value = parse_override(text)
        except InputError as exc:
            raise InputError(exc.message, key=flag) from None
        values[name] = value
    return values


def params_from_args(args: argparse.Namespace) -> dict[str, Any]:
    return overrides_from(args.params, "--param")


def size_argument(text: str) -> int:
    """A size from the command line (4MiB, 1GB, 512) or an InputError naming --size."""
    try:
        return message_size(text)
    except UnitError as exc:
        raise InputError(str(exc), key="--size") from None
