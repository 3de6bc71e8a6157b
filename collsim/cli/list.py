"""``collsim list``: the collectives, their algorithms (rank counts, parameters, closed forms)
and the topologies collsim knows; ``--markdown`` prints docs/algorithms.md, the closed-form
table with what it needs to be read."""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

from collsim.algorithms import algorithms_for
from collsim.algorithms.registry import EXACT_TEXT, Algorithm
from collsim.cli.common import SHIPPED_TOPOLOGIES
from collsim.collectives import COLLECTIVES
from collsim.errors import InputError
from collsim.hardware.loader import KINDS, load_topology
from collsim.params import COMMON_PARAMS, DEFAULT_CHUNK_BYTES, DEFAULT_DTYPE, DTYPES
from collsim.scenarios.shipped import scenario_directory
from collsim.yamlfile import load_yaml

# The contract's table of algorithm names (docs/design.md#algorithm-names), in its order; the
# listing follows it.
NAME_ORDER = ["ring", "nccl_tree", "binomial", "chain", "binary_tree", "double_binary_tree",
              "recursive_doubling", "halving_doubling", "recursive_halving", "scatter_allgather",
              "reducescatter_gather", "bruck", "direct", "pairwise", "linear", "parameter_server",
              "dissemination", "hierarchical"]
WIDTH = 92  # the page's prose lines
# What each of COMMON_PARAMS means, for the page (a new common parameter needs a line here).
COMMON_TEXT = {
    "root": "the root rank of a rooted collective, 0 by default; ignored by the others",
    "dtype": f"the element type: {', '.join(DTYPES)}; {DEFAULT_DTYPE} by default",
    "placement": "packed by default, rank r on GPU r; spread, round-robin over nodes; or a "
                 "list of GPUs",
}
PAGE_HEAD = """\
# Algorithms and their closed forms

<!-- Generated: collsim list --markdown > docs/algorithms.md (CI and tests/test_docs.py
check that this file is what the command prints). -->

Every collective collsim simulates, its algorithms and each one's closed-form cost.
`collsim list` prints the same with the rank counts and parameters of each algorithm.
Registry names are stable: users type them ([design.md](design.md#algorithm-names)).

- **Any rank count.** Every algorithm serves any p: where a recursive algorithm needs a
  power of two, the extra ranks fold in first and are handed the result at the end, as
  MPICH does.
- **Parameters** (`--param NAME=VALUE`, a scenario's `sweep: param:`).
{parameters}
- **One closed form each**, written in the algorithm's registration; `collsim estimate` and
  the results table's `analytic_time_s` use it wherever a machine's routes all cost the
  same. On `switch` the simulated time equals every form marked "any p" to a relative
  error below 1e-9 for p from 2 to 64, powers of two or not (`tests/test_closed_forms.py`).
  The double binary tree feeds two children at once through one port, so the fabric shares
  that port; its formula is a model, an upper bound within about 20% of the simulation.
"""
PAGE_TAIL = """
The seed texts' cost table (minimum spanning tree and ring) is in it row for row: MST
reduce-scatter `2⌈log p⌉α + ⌈log p⌉n(β+γ) + (p-1)/p·nβ`, MST allgather `2⌈log p⌉α +
⌈log p⌉nβ + (p-1)/p·nβ`, MST allreduce `2⌈log p⌉α + ⌈log p⌉n(2β+γ)`, ring reduce-scatter
`(p-1)α + (p-1)/p·n(β+γ)`, ring allgather `(p-1)α + (p-1)/p·nβ`. Two rows differ from the
course notes on purpose, and their summaries say so: linear gather and scatter post every
transfer at once (`α + (p-1)/p·nβ`, where the notes send one after another), and the
parameter server is one of the p ranks, so its port carries 2(p-1) messages of size n (the
notes count p workers plus a separate server: `2pnβ`).

## Crossovers

Where ring allreduce starts to beat the trees on `switch` with 5 µs links of 25 GB/s: the
first size on a 2× grid at which ring is faster, from simulation and from the closed forms
(`tests/test_contention.py` holds the simulation within one grid step of the forms):

| ranks | vs binomial: simulated / closed form | vs double binary tree: simulated / closed form |
| --- | --- | --- |
| 8 | 512 KiB / 512 KiB | 1 MiB / 1 MiB |
| 64 | 4 MiB / 4 MiB | 128 MiB / 128 MiB |
| 512 | 16 MiB / 16 MiB | 1 GiB / 1 GiB |

The 512-rank double-binary-tree case simulates the tree at 512 MiB and 1 GiB, minutes of
work, so it runs only with `COLLSIM_SLOW_TESTS=1 pytest`."""
NOTATION = ("p ranks, n bytes (as docs/design.md#collectives defines a size), "
            "α latency per message (s), "
            "β time per byte (s/B), γ time per byte combined (s/B), ⌈log p⌉ base 2")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "list", help="collectives, algorithms, shipped topologies and scenarios",
        description="List every collective with its algorithms (the rank counts each accepts, "
                    "its parameters and closed-form cost) and the topologies and scenarios "
                    "collsim ships.")
    parser.add_argument("--markdown", action="store_true",
                        help="print the closed-form table (collective, algorithm, formula, "
                             "exact for, source) as a Markdown page: docs/algorithms.md")
    parser.set_defaults(func=run)


def markdown_page() -> str:
    """docs/algorithms.md: the closed-form table, the parameters from their one table, and
    how the forms are checked."""
    return "\n".join([PAGE_HEAD.format(parameters=_parameters_text()), markdown_table(),
                      PAGE_TAIL])


def _parameters_text() -> str:
    """Which parameters every algorithm and which only some take, with their defaults."""
    declared: dict[str, list[str]] = {}
    for collective in COLLECTIVES:
        for algorithm in ordered(collective):
            for name in algorithm.params:
                if name not in COMMON_PARAMS:
                    declared.setdefault(name, []).append(f"{collective} `{algorithm.name}`")
    common = "; ".join(f"`{name}` ({COMMON_TEXT[name]})" for name in COMMON_PARAMS)
    own = "; ".join(f"`{name}` only {', '.join(users)}" for name, users in declared.items())
    text = (f"Every algorithm takes {common}. Some take more: {own}. `chunk_size` defaults "
            f"to {DEFAULT_CHUNK_BYTES // 1024} KiB. NCCL's algorithms (`ring`, `nccl_tree`, "
            f"...) also take `protocol` (LL, LL128, Simple or auto), and `channels` may be "
            f"auto; both default to auto, NCCL's pick on a machine with `nccl:` figures "
            f"(1 channel and no protocol elsewhere). The algorithm names `auto` (NCCL's "
            f"choice) and `best` (the fastest, simulated) pick among them (nccl.md).")
    return textwrap.fill(text, width=WIDTH, initial_indent="  ", subsequent_indent="  ")


def markdown_table() -> str:
    """The table of closed forms, one row per algorithm."""
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
    """The collective's algorithms in the contract's order of names (others last)."""
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


def _scenarios_text(directory: Path) -> list[str]:
    """The shipped scenarios, each with its description: ``collsim run NAME`` runs one."""
    files = sorted(directory.glob("*.yaml")) if directory.is_dir() else []
    if not files:
        return ["", "Shipped scenarios: none"]
    lines = ["", f"Shipped scenarios (collsim run NAME; {directory}):"]
    width = max(22, *(len(path.stem) for path in files))
    for path in files:
        try:
            data = load_yaml(path).data
        except InputError as exc:
            lines.append(f"  {path.stem:<{width}} cannot be read: {exc}")
            continue
        description = data.get("description", "") if isinstance(data, dict) else ""
        lines.append(f"  {path.stem:<{width}} {description}".rstrip())
    return lines


def run(args: argparse.Namespace) -> int:
    if args.markdown:
        print(markdown_page())
        return 0
    print("\n".join(_algorithms_text() + _topologies_text(SHIPPED_TOPOLOGIES)
                    + _scenarios_text(scenario_directory())))
    return 0
