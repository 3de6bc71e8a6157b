"""``--format nccl-tests``: simulated results printed as nccl-tests prints a measured run, so
``diff`` (or ``collsim compare --measured``) can set one beside the other.

``estimate`` prints the one point as a one-row table. ``run`` writes
``DIR/results.nccl-tests.txt`` beside ``results.csv``: one table per topology, algorithm,
collective, rank count, dtype and swept key, in the order the table first has them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from collsim.hardware.topology import Topology
from collsim.nccltests import format_runs, run_from_results
from collsim.output.files import replace_text

NCCL_TESTS_FILE = "results.nccl-tests.txt"
_MEASURES = ("time_s", "algbw_GBps", "busbw_GBps", "analytic_time_s", "size_bytes",
             "protocol", "channels", "selected", "path")


def machine(topology: Topology | None) -> dict[str, Any]:
    """The GPU name and GPUs per node the rank lines show."""
    gpu = topology.machine.gpu.model if topology is not None and topology.machine else None
    per_node = getattr(topology, "gpus_per_node", None) or (topology.gpus if topology else 1)
    return {"gpu_name": gpu or "collsim simulated GPU", "gpus_per_node": per_node}


def tables(rows: Iterable[Mapping[str, Any]], topologies: Mapping[str, Topology | None]
           ) -> str:
    """Every group of ``rows`` as an nccl-tests table (see the module docstring)."""
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for row in rows:
        key = tuple((k, str(v)) for k, v in row.items() if k not in _MEASURES)
        groups.setdefault(key, []).append(row)
    runs = []
    for group in groups.values():
        name = str(group[0]["topology"])
        shape = machine(topologies.get(name))
        shape["gpus_per_node"] = min(shape["gpus_per_node"], int(group[0]["ranks"]))
        runs.append(run_from_results(group, topology=name, **shape))
    return format_runs(runs)


def write_run_tables(rows: list[Mapping[str, Any]], topologies: Mapping[str, Topology | None],
                     out: Path) -> Path:
    """``out/results.nccl-tests.txt`` from a results table's rows."""
    path = out / NCCL_TESTS_FILE
    text = tables(rows, topologies)
    replace_text(path, lambda file: file.write(text))
    return path
