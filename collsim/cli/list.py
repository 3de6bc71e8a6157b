"""``collsim list``: the collectives, their algorithms (rank counts, parameters, closed forms)
and the topologies collsim knows; ``--markdown`` prints the README's closed-form table."""

from __future__ import annotations

import argparse
from pathlib import Path

from collsim.algorithms import algorithms_for
from collsim.algorithms.registry import EXACT_TEXT, Algorithm
from collsim.cli.common import SHIPPED_TOPOLOGIES
from collsim.collectives import COLLECTIVES
from collsim.errors import InputError
from collsim.hardware.loader import KINDS, load_topology
from collsim.yamlfile import load_yaml

# DESIGN.md's table of algorithm names, in its order; the listing follows it.
NAME_ORDER = ["ring", "nccl_tree", "binomial", "chain", "binary_tree", "double_binary_tree",
              "recursive_doubling", "halving_doubling", "recursive_halving", "scatter_allgather",
              "reducescatter_gather", "bruck", "direct", "pairwise", "linear", "parameter_server",
              "dissemination", "hierarchical"]
NOTATION = ("p ranks, n bytes (DESIGN.md's size convention), α latency per message (s), "
            "β time per byte (s/B), γ time per byte combined (s/B), ⌈log p⌉ base 2")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "list", help="collectives, algorithms and shipped topologies",
        description="List every collective with its algorithms (the rank counts each accepts, "
                    "its parameters and closed-form cost) and the topologies collsim ships.")
    parser.add_argument("--markdown", action="store_true",
                        help="print the closed-form table (collective, algorithm, formula, "
                             "exact for, source) as Markdown")
    parser.set_defaults(func=run)


def markdown_table() -> str:
    """The README table of closed forms, one row per algorithm."""
    lines = [f"Notation: {NOTATION}.", "",
             "| collective | algorithm | closed form | exact for | source |",
             "| --- | --- | --- | --- | --- |"]
    for collective in COLLECTIVES:
        for algorithm in ordered(collective):
            cells = (collective, f"`{algorithm.name}`", algorithm.formula,
                     _exact(algorithm), algorithm.source)
            lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines)


def ordered(collective: str) -> list[Algorithm]:
    """The collective's algorithms in DESIGN.md's order of names (others last)."""
    rank = {name: i for i, name in enumerate(NAME_ORDER)}
    return sorted(algorithms_for(collective), key=lambda a: rank.get(a.name, len(rank)))


def _exact(algorithm: Algorithm) -> str:
    return EXACT_TEXT.get(algorithm.exact, algorithm.exact)


def _algorithms_text() -> list[str]:
    lines = [f"Collectives and algorithms ({NOTATION}):"]
    for name, collective in COLLECTIVES.items():
        lines += ["", f"{name}: {collective.description}"]
        algorithms = ordered(name)
        if not algorithms:
            lines.append("  (no algorithm yet)")
        for algorithm in algorithms:
            params = f"; parameters: {', '.join(algorithm.params)}" if algorithm.params else ""
            lines.append(f"  {algorithm.name:<22} ranks: {algorithm.ranks_text}{params}")
            if algorithm.summary:
                lines.append(f"  {'':<22} {algorithm.summary}")
            lines.append(f"  {'':<22} time ≈ {algorithm.formula}  "
                         f"[simulation on switch equals it for: {_exact(algorithm)}]")
    return lines


def _topologies_text(directory: Path) -> list[str]:
    lines = ["", "Topology kinds (the 'kind' key of a topology file):"]
    lines += [f"  {kind.name:<22} {kind.summary}" for kind in KINDS.values()]
    files = sorted(directory.glob("*.yaml")) if directory.is_dir() else []
    lines += ["", f"Shipped topologies ({directory}):" if files else "Shipped topologies: none"]
    for path in files:
        try:
            topology = load_topology(path)
        except InputError as exc:
            lines.append(f"  {path.stem:<22} cannot be loaded: {exc}")
            continue
        data = load_yaml(path).data
        description = data.get("description", "") if isinstance(data, dict) else ""
        lines.append(f"  {path.stem:<22} {topology.kind}, {topology.gpus} GPUs"
                     + (f": {description}" if description else ""))
    return lines


def run(args: argparse.Namespace) -> int:
    if args.markdown:
        print(markdown_table())
        return 0
    print("\n".join(_algorithms_text() + _topologies_text(SHIPPED_TOPOLOGIES)))
    return 0
