"""A measured run on a preset: the preset shaped like the run (its node count; on a PCIe box
its GPU count), the GPUs its ranks ran on, NCCL's pick for each size, and the measured times.
The picks are NCCL's, from NCCL's own constants, so they do not move when the fit changes the
machine's figures: each size keeps the algorithm and protocol the preset's ``auto`` gives."""

from __future__ import annotations

import dataclasses
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collsim.calibrate.predict import Pick, calibrated, pick, runnable, with_figures
from collsim.errors import InputError
from collsim.hardware.loader import load_topology
from collsim.hardware.nccl_names import algorithm_name, protocol_name
from collsim.hardware.topology import Topology
from collsim.nccltests import Run, results_rows


@dataclass
class Case:
    """One measured run, ready to simulate: ``label`` is ``file:line`` of the run."""

    label: str
    topology: Topology
    gpus: list[int]
    collective: str
    sizes: list[int]
    measured: list[float]  # s per call, out-of-place
    picks: list[Pick]
    nodes: int
    gpus_per_node: int
    algorithm: str = "auto"         # as the run forced it (NCCL_ALGO)
    protocol: str | None = None     # likewise (NCCL_PROTO)
    logged: frozenset[int] = frozenset()  # sizes whose pick the log's INFO lines name

    @property
    def ranks(self) -> int:
        return len(self.gpus)


def repicked(case: Case, scale: float, tree_rating: float = 1.0) -> Case:
    """The case with NCCL's choice made as for ``scale`` x each size (``nccl.pick_scale``) and
    with its tree rated ``tree_rating`` x the model's (``nccl.tree_rating``); the picks the
    log names stay."""
    if scale == 1.0 and tree_rating == 1.0:
        return case
    machine = case.topology.machine
    topology = with_figures(case.topology, dataclasses.replace(
        machine.nccl, pick_scale=scale, tree_rating=tree_rating))
    picks = [old if size in case.logged else
             pick(topology, case.collective, size, case.gpus, case.algorithm, case.protocol)
             for size, old in zip(case.sizes, case.picks, strict=True)]
    return dataclasses.replace(case, picks=picks)


def shape(preset: Path, nodes: int, gpus_per_node: int, overrides: dict[str, Any],
          label: str) -> tuple[Topology, list[int]]:
    """The preset loaded for ``nodes`` x ``gpus_per_node`` ranks, and the GPU of each rank
    (node-major, the first ``gpus_per_node`` GPUs of each node)."""
    base = load_topology(preset, overrides)
    changes: dict[str, Any] = {}
    if base.kind == "cluster":
        if nodes != base.nodes:
            changes["nodes"] = nodes
    elif nodes > 1:
        raise InputError(f"{label}: the log ran on {nodes} nodes, topology '{base.name}' is one "
                         "node; calibrate with its cluster preset (e.g. h100-cluster)",
                         key="--topology")
    per_node = getattr(base, "gpus_per_node", base.gpus)
    if gpus_per_node > per_node:
        if base.kind != "cluster" and "gpus" not in overrides:
            changes["gpus"] = gpus_per_node  # a PCIe box takes --set gpus=N
        else:
            raise InputError(f"{label}: the log has {gpus_per_node} GPUs per node, topology "
                             f"'{base.name}' {per_node}", key="--topology")
    topology = load_topology(preset, {**overrides, **changes}) if changes else base
    per_node = getattr(topology, "gpus_per_node", topology.gpus)
    gpus = [n * per_node + d for n in range(nodes) for d in range(gpus_per_node)]
    return topology, gpus


def case_from_run(run: Run, preset: Path, overrides: dict[str, Any] | None = None, *,
                  algorithm: str = "auto", protocol: str | None = None,
                  collective: str | None = None, ranks: int | None = None) -> Case:
    """The run as a Case on ``preset`` (``algorithm``/``protocol`` as the run forced them)."""
    label = f"{run.file}:{run.line}"
    rows = [r for r in results_rows(run, collective=collective, ranks=ranks)
            if r["time_s"] > 0]
    if not rows:
        raise InputError("the run has no timed rows of more than 0 bytes", file=run.file,
                         line=run.line)
    count = int(rows[0]["ranks"])
    nodes = run.nodes or 1
    per_node = run.gpus_per_node or (count // nodes if count % nodes == 0 else None)
    if per_node is None or per_node * nodes != count:
        raise InputError(f"cannot tell how {count} ranks sit on nodes (the log's '#  Rank' "
                         "lines are incomplete)", file=run.file, line=run.line)
    topology, gpus = shape(preset, nodes, per_node, dict(overrides or {}), label)
    _check_gpu(run, topology, label)
    seen: dict[int, float] = {}
    for r in rows:
        seen.setdefault(int(r["size_bytes"]), float(r["time_s"]))
    sizes = sorted(seen)
    coll = str(rows[0]["collective"])
    if coll not in calibrated():
        raise InputError(f"the run is of {coll}, for which collsim has no program NCCL would "
                         f"run; measured logs may be of {', '.join(calibrated())}",
                         file=run.file, line=run.line)
    algorithm, protocol = _environment(run, coll, algorithm, protocol)
    logged = [_logged(run, topology, coll, s, gpus) for s in sizes]
    picks = [chosen or pick(topology, coll, s, gpus, algorithm, protocol)
             for s, chosen in zip(sizes, logged, strict=True)]
    return Case(label, topology, gpus, coll, sizes, [seen[s] for s in sizes], picks, nodes,
                per_node, algorithm, protocol,
                frozenset(s for s, chosen in zip(sizes, logged, strict=True) if chosen))


def _environment(run: Run, collective: str, algorithm: str, protocol: str | None
                 ) -> tuple[str, str | None]:
    """NCCL_ALGO / NCCL_PROTO of the log's command line or INFO lines, where they name one
    algorithm (one collsim can run) or one protocol and the caller forced neither."""
    env = run.hints.env
    if algorithm == "auto" and "NCCL_ALGO" in env:
        named = _one(env["NCCL_ALGO"], algorithm_name)
        if named in runnable(collective):
            algorithm = named
    if protocol is None and "NCCL_PROTO" in env:
        protocol = _one(env["NCCL_PROTO"], protocol_name)
    return algorithm, protocol


def _one(text: str, parse) -> str | None:  # noqa: ANN001
    if "," in text or text.startswith("^"):
        return None
    try:
        return parse(text)
    except InputError:
        return None


def _logged(run: Run, topology: Topology, collective: str, size: int, gpus: list[int]
            ) -> Pick | None:
    """The algorithm and protocol NCCL logged for calls of ``size`` (NCCL_DEBUG=INFO), with
    NCCL's channels for them; None where the log says nothing or names an algorithm collsim
    has no program for."""
    logged = run.hints.choice_for(size)
    if logged is None:
        return None
    named = _one(logged[0], algorithm_name)
    if named not in runnable(collective):
        return None
    return pick(topology, collective, size, gpus, named, logged[1])


def gpu_family(name: str) -> str | None:
    """The GPU family a model name names (``H100``, ``GB200``, ``L40S`` ...), or None."""
    found = re.search(r"\b(GB\d{3}|[ABHL]\d{2,3}S?)\b", name.upper().replace("-", " "))
    return found.group(1) if found else None


def _check_gpu(run: Run, topology: Topology, label: str) -> None:
    """Warn when the log ran on another GPU family than the preset describes: the fit would
    then bend another machine's figures to it."""
    machine = topology.machine
    logged = run.gpu_name
    if machine is None or machine.gpu.model is None or not logged:
        return
    theirs, ours = gpu_family(logged), gpu_family(machine.gpu.model)
    if theirs and ours and theirs != ours:
        print(f"collsim: warning: {label}: the log ran on {logged}, topology "
              f"'{topology.name}' describes {machine.gpu.model}", file=sys.stderr)
