"""The Python interface, for notebooks and scripts: what ``import collsim`` offers.

One point is :func:`estimate`; a sweep is :func:`load_scenario` then :func:`run_scenario`;
a new algorithm is a per-rank program registered with :func:`register` and checked against
numpy with :func:`check_algorithm`. Bad input raises :class:`~collsim.errors.InputError`
with the message the command line would print.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

import collsim.algorithms  # noqa: F401  (the built-in algorithms registered first)
from collsim.algorithms.registry import REGISTRY, Algorithm, Cost, get_algorithm
from collsim.collectives import COLLECTIVES, REDUCE_OPS
from collsim.engine.costs import CostModel
from collsim.engine.data import check_algorithm as check_program
from collsim.errors import InputError
from collsim.hardware.loader import load_topology as _load_file
from collsim.hardware.shipped import resolve_topology, shipped_names
from collsim.hardware.topology import Topology
from collsim.output.rows import Rows
from collsim.output.table import read_table
from collsim.program import Job, ProgramFactory
from collsim.scenarios.axes import message_size
from collsim.scenarios.loader import load_scenario as _load_scenario_file
from collsim.scenarios.loader import scenario_from_text
from collsim.scenarios.model import Scenario
from collsim.scenarios.runner import TABLE_FILE, RunOptions
from collsim.scenarios.runner import run_scenario as _run
from collsim.simulate import PointResult, check_params, expected_time, simulate
from collsim.units import UnitError
from collsim.watch import Watch

# Algorithms registered through this interface: they may be replaced; built-in ones not.
_REGISTERED_HERE: set[tuple[str, str]] = set()


def load_topology(topology: str | Path | Topology,
                  set: Mapping[str, Any] | None = None) -> Topology:
    """A machine: a shipped one by name (``"dgx-h100"``), a topology file by path, or a
    :class:`Topology` as it is. ``set`` overrides dotted keys as ``--set`` does
    (``{"nodes": 4, "link.bandwidth": "200GB/s"}``); it needs a name or a file."""
    if isinstance(topology, Topology):
        if set:
            raise ValueError(f"overrides need a topology name or file; {topology.name!r} is "
                             f"already built")
        return topology
    return _load_file(resolve_topology(topology, key="topology"), dict(set or {}), "set=")


def estimate(topology: str | Path | Topology, collective: str, algorithm: str, ranks: int,
             size: int | str, params: Mapping[str, Any] | None = None, *,
             set: Mapping[str, Any] | None = None,
             costs: CostModel | None = None, progress: bool = False,
             exact: bool = False) -> PointResult:
    """Simulate one collective call and return its row of the results table.

    ``size`` is bytes or text (``"64MiB"``), with nccl-tests' convention; ``params`` are the
    algorithm parameters of ``--param`` (``{"chunk_size": "1MiB", "root": 3}``); ``set``
    overrides topology keys; ``costs`` replaces the machine's cost model (the ideal model on
    the canonical kinds, NCCL's protocols on machines with ``nccl:`` figures).
    ``algorithm`` may be ``"auto"`` (NCCL's choice) or ``"best"`` (the fastest NCCL
    algorithm and protocol, simulated). ``progress`` draws a line on stderr while a long
    simulation runs. ``exact`` keeps to the full simulation's times (no pipeline path,
    docs/engine.md#the-pipeline-path).
    """
    machine = load_topology(topology, set)
    try:
        size_bytes = message_size(size)
    except UnitError as exc:
        raise InputError(str(exc), key="size") from None
    model = costs
    point = dict(params or {})
    if not progress:
        return simulate(machine, collective, algorithm, ranks, size_bytes, point, model,
                        exact=exact)
    with Watch(expected_time(machine, collective, algorithm, ranks, size_bytes, point, model),
               enabled=True) as watch:
        return simulate(machine, collective, algorithm, ranks, size_bytes, point, model,
                        observe=watch, exact=exact)


def load_scenario(path: str | Path | None = None, *, text: str | None = None,
                  quick: bool = False) -> Scenario:
    """A scenario from its file, or from YAML ``text`` (topology paths in it are relative to
    the current folder), checked as ``collsim run`` checks it. ``quick`` applies its
    ``quick:`` section."""
    if (path is None) == (text is None):
        raise ValueError("give a scenario file or text=..., not both or neither")
    if text is not None:
        return scenario_from_text(text, str(Path.cwd() / "<scenario>"), quick)
    return _load_scenario_file(path, quick)


def run_scenario(scenario: Scenario | str | Path, out: str | Path | None = None, *,
                 jobs: int = 1, resume: bool = False, force: bool = False,
                 figures: bool = True, progress: bool = False) -> Rows:
    """Run every point of a scenario (a :class:`Scenario` or a file) and return its rows in
    sweep order.

    With ``out`` the folder gets what ``collsim run --out`` writes (``results.csv``,
    ``run.json`` and, with ``figures``, the figures), and ``resume`` / ``force`` act as
    ``--resume`` / ``--force``; without it nothing is written. ``jobs`` > 1 runs points in
    worker processes (0: one per CPU), which know only the algorithms registered when they
    start.
    """
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 0:
        raise ValueError(f"jobs must be a whole number, 0 for one per CPU, got {jobs!r}")
    jobs = jobs or os.cpu_count() or 1
    loaded = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)
    if out is None:
        with tempfile.TemporaryDirectory(prefix="collsim-") as folder:
            return _run_into(loaded, Path(folder) / "run", jobs, False, False, False,
                             progress, keep=False)
    return _run_into(loaded, Path(out), jobs, resume, force, figures, progress, keep=True)


def _run_into(scenario: Scenario, out: Path, jobs: int, resume: bool, force: bool,
              figures: bool, progress: bool, keep: bool) -> Rows:
    options = RunOptions(out=out, jobs=jobs, resume=resume, force=force, figures=figures,
                         progress=progress)
    _run(scenario, options)
    columns, rows = read_table(out / TABLE_FILE)
    return Rows(rows, columns, out if keep else None)


def register(collective: str, name: str, *, cost: Callable[[Cost], float] | None = None,
             formula: str = "", source: str = "", summary: str = "",
             params: Iterable[str] = (), accepts: Callable[[int], str | None] | None = None,
             scratch: Callable[[Job], int] | None = None,
             replace: bool = False) -> Callable[[ProgramFactory], ProgramFactory]:
    """Decorator: register a per-rank program as ``collective``/``name``, so that
    :func:`estimate`, scenarios and :func:`check_algorithm` find it by name.

    The program is ``program(rank, job)``, a generator of steps (:class:`Send`,
    :class:`Recv`, :class:`Reduce`, :class:`Copy`, or a tuple of them posted together).
    ``cost`` is its closed form, a function of a :class:`Cost` (p, n, alpha, beta, gamma),
    and ``formula`` its text; ``params`` the parameters it takes beyond root, dtype and
    placement; ``accepts(p)`` returns why it cannot serve ``p`` ranks, or None; ``scratch``
    the elements of a ``"tmp"`` buffer it needs. ``replace`` lets a notebook cell that
    registers the same name run again; built-in algorithms cannot be replaced.
    """
    if collective not in COLLECTIVES:
        raise ValueError(f"unknown collective {collective!r}; choose one of "
                         f"{', '.join(COLLECTIVES)}")
    key = (collective, name)
    if key in REGISTRY and not (replace and key in _REGISTERED_HERE):
        kind = "an algorithm registered here (pass replace=True)" \
            if key in _REGISTERED_HERE else "a built-in algorithm"
        raise ValueError(f"{collective}/{name} is already {kind}")
    fields: dict[str, Any] = {"params": tuple(params)}
    if accepts is not None:
        fields["accepts"] = accepts
        fields["ranks_text"] = (accepts.__doc__ or accepts.__name__).strip().splitlines()[0]
    if scratch is not None:
        fields["scratch"] = scratch

    def decorate(program: ProgramFactory) -> ProgramFactory:
        REGISTRY[key] = Algorithm(collective, name, program, formula=formula, cost=cost,
                                  source=source, summary=summary, **fields)
        _REGISTERED_HERE.add(key)
        return program

    return decorate


def unregister(collective: str, name: str) -> None:
    """Remove an algorithm that :func:`register` added (built-in ones stay)."""
    if (collective, name) not in _REGISTERED_HERE:
        raise ValueError(f"{collective}/{name} was not registered with collsim.register")
    _REGISTERED_HERE.discard((collective, name))
    REGISTRY.pop((collective, name), None)


def check_algorithm(collective: str, algorithm: str | ProgramFactory,
                    ranks: int | Iterable[int] = range(1, 17),
                    counts: Iterable[int] | None = None, *, dtype: str = "float64",
                    params: Mapping[str, Any] | None = None, seed: int = 0) -> int:
    """Run an algorithm's programs with the data interpreter on random inputs and compare
    every rank's result with the collective's numpy definition; return the cases checked.

    ``algorithm`` is a registered name or a program. Every rank count in ``ranks`` is
    checked with each element count in ``counts`` (default: none, fewer than ranks,
    uneven and even blocks), in rank order and along a shuffled ring, with every
    operator (sum, prod, max, min) for a reducing collective and roots 0 and p-1 for a
    rooted one. ``dtype`` is a numpy type. An algorithm that takes ``chunk_size`` is
    pipelined in chunks of 3 elements unless ``params`` says otherwise. A wrong result
    raises AssertionError naming the rank and elements; a deadlock raises SimulationError.
    """
    if collective not in COLLECTIVES:
        raise ValueError(f"unknown collective {collective!r}")
    registered = get_algorithm(collective, algorithm) if isinstance(algorithm, str) else None
    program = registered.program if registered else algorithm
    element = np.dtype(dtype).itemsize
    base = dict(params or {})
    if registered and "chunk_size" in registered.params:
        base.setdefault("chunk_size", 3 * element)
    meaning = COLLECTIVES[collective]
    ops = list(REDUCE_OPS) if meaning.reduces else ["sum"]
    rank_counts = [ranks] if isinstance(ranks, int) else list(ranks)
    cases = 0
    for p in rank_counts:
        if registered:
            registered.check_ranks(p)
        job_params = check_params(registered, p, base) if registered else base
        shuffled = tuple(int(r) for r in np.random.default_rng(seed + p).permutation(p))
        roots = sorted({0, p - 1}) if meaning.rooted else [0]
        sizes = [0, max(1, p // 2), 3 * p + 1, 4 * p] if counts is None else list(counts)
        for index, (count, ring, root) in enumerate(
                (c, r, q) for c in sizes for r in ((), shuffled) for q in roots):
            job = Job(collective, p, count, itemsize=element, root=root, params=job_params,
                      ring=ring)
            space = registered.scratch(job) if registered else 0
            check_program(program, job, ops[index % len(ops)], dtype, seed=seed + index,
                          scratch=space)
            cases += 1
    return cases


def list_algorithms(collective: str | None = None) -> dict[str, list[str]]:
    """The registered algorithms' names by collective (one collective's if named)."""
    names: dict[str, list[str]] = {c: [] for c in COLLECTIVES}
    for c, name in REGISTRY:
        names[c].append(name)
    if collective is None:
        return names
    if collective not in names:
        raise ValueError(f"unknown collective {collective!r}")
    return {collective: names[collective]}


def list_topologies() -> list[str]:
    """The names of the shipped topologies, for :func:`load_topology` and :func:`estimate`."""
    return shipped_names()


__all__ = ["check_algorithm", "estimate", "load_scenario", "load_topology",
           "list_algorithms", "list_topologies", "register", "run_scenario",
           "unregister"]
