"""Least squares on log-error: the factors on a preset's figures (``figures.FIGURES``) that
make simulated times match measured ones, by damped Gauss-Newton (Levenberg-Marquardt) on
u = log(factor), bounded, with a finite-difference Jacobian of the simulation itself.

Identifiability is read off the Jacobian at the preset: a figure no measured time moves by
``SENSITIVITY`` per unit of u (one node says nothing about the network; a log without LL
sizes says nothing about LL's latency) is undetermined, and so is one whose column is almost
a combination of figures before it in the registry (``COLLINEAR``: on one rank count, the
launch cost and a protocol's latency add up to one figure, which is then the launch cost).
A log of few sizes frees fewer figures than it has sizes (``SPARE_SIZES``), those that
explain its errors best (``most_telling``): a fit with as many figures as sizes passes through
their scatter. Undetermined figures keep the preset's value. The read is repeated where the fit
ends (``LOOKS``), for a second fit with the figures that have become distinguishable there."""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from collsim.calibrate.cases import Case, repicked
from collsim.calibrate.figures import FIGURES, _launch, apply, calibrated, resolved
from collsim.calibrate.loops import Loops, carried, plan_loops
from collsim.calibrate.predict import Pick, pick_plan, simulate_pick, with_figures
from collsim.calibrate.workers import simulate_times
from collsim.errors import InputError
from collsim.hardware.machine import NcclFigures
from collsim.hardware.nccl_names import PROTOCOLS
from collsim.hardware.topology import Topology

SENSITIVITY = 0.05   # d log(time) / d log(factor) some point must reach
COLLINEAR = 0.3      # share of a column left after projecting out the figures before it
# Measured sizes beyond the freed figures (``figure_budget``): with as many figures as sizes
# the fit passes through every size, its scatter included, and a figure the sizes barely move
# is sent wherever the scatter points (3 sizes of a 2-node tree log, three figures free: the
# network's latency x0.31, a held-out size 21% fast where the preset is 17%). One size more
# than figures leaves a residual to average the scatter over; two sizes a figure cost the
# 10-node rings of 3 large sizes the NICs' reach beside the network's latency (held-out
# median 6-7% against 2-4%).
SPARE_SIZES = 1
UNSEEN = "no measured time depends on it"
ALIKE = "the logs cannot tell it apart from the figures before it"
FEW = "the logs have too few sizes to fit it beside the figures that explain them better"
STEP = 0.03          # finite-difference step in u, taken downwards (see ``jacobian``)
MAX_ITERATIONS = 12
LOOKS = 2  # reads of which figures are free: at the preset, then where that fit ended
PICK_SCALES = (0.25, 0.5, 2.0, 4.0)  # sizes in logs step by 2: one or two steps either way
PICK_GAIN = 0.7  # another switch size must lower the cost by 30% to be taken as measured
# NCCL's rating of its tree (``tree_rating``), 1/4 .. 4 by steps of 2^(1/32) (2.2%): between
# ring and tree the switch is where their model times cross, which a few percent moves far.
TREE_RATINGS = tuple(sorted((2 ** (j / 32) for j in range(-64, 65) if j),
                            key=lambda r: abs(math.log(r))))
# Moves of one figure at a time, in u = log(factor), tried when a Gauss-Newton step from a
# fresh Jacobian fails: the coarse ones first (x1.65, x0.61), the fine ones if none helps.
COORDINATE_MOVES = ((0.5, -0.5), (0.15, -0.15))
SMALLEST_MOVE = 1e-4  # in u: a step moving no figure further has converged (or failed)
# A step lowering the cost by less than this share ends the fit (the rms log error then moves
# by less than 0.005% of itself). On the 4-node walkthrough log 1e-5 took 1,487 more
# simulations (4,807 against 3,320, 90 CPU s) for a median error of 4.759% against 4.766%.
CONVERGED = 1e-4
DAMPINGS = 6  # damped steps tried before the Jacobian is computed afresh
CONTINUOUS = tuple(f.name for f in FIGURES if f.kind != "pick")
# What NCCL's algorithms exercise: every figure but the p2p path's reach of a NIC.
COLLECTIVE_FIGURES = tuple(name for name in CONTINUOUS if name != "reachable.p2p")
_UNKEYED = itertools.count()  # keys of points whose cost model does not say what it depends on
# What the calls of NCCL's p2p path (collsim's nccl_p2p, under Simple's costs) exercise, by
# (collective, across nodes): see ``exercised``.
_P2P_NETWORK = ("launch", "latency.network", "reachable.p2p")
_P2P_NODE = ("launch", "latency.Simple", "reachable.nvlink", "reachable.pcie")
P2P_FIGURES = {(c, across): _P2P_NETWORK if across else _P2P_NODE
               for c in ("sendrecv", "alltoall") for across in (False, True)}


@dataclass(frozen=True)
class Fitted:
    """One figure's outcome: the preset's value, the fitted one, and whether the logs
    determine it (if not, ``value`` is the preset's and ``why`` says what is missing)."""

    name: str
    preset: float | None
    value: float | None
    factor: float
    determined: bool
    why: str = ""
    bound: str = ""  # "lower" or "upper" when the fit ended at that bound of the figure


@dataclass(frozen=True)
class CaseError:
    """The fit's error on one log: median and 90th percentile of |simulated/measured - 1|."""

    label: str
    before_median: float
    before_p90: float
    after_median: float
    after_p90: float


@dataclass(frozen=True)
class Calibration:
    """The fit: each figure's outcome, the fitted NCCL figures of the preset, and the error
    per log before and after."""

    figures: tuple[Fitted, ...]
    nccl: NcclFigures
    errors: tuple[CaseError, ...]
    iterations: int
    # figure -> the labels of the logs whose times it moves (the Jacobian where the figure
    # was freed): where each fitted figure came from
    sources: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)

    @property
    def factors(self) -> dict[str, float]:
        return {f.name: f.factor for f in self.figures if f.determined}


@dataclass
class FitProgress:
    """How far a calibration has got, written as it runs, for a progress line to read: the
    fit (1, then one per switch size fitted), its iteration, the least-squares cost of the
    log times so far and at the preset, the points fitted and the simulations run."""

    fit: int = 0
    iteration: int = 0
    cost: float | None = None
    start_cost: float | None = None
    points: int = 0
    simulations: int = 0


class Model:
    """Simulated times of every case's sizes as a function of the factors, cached twice: by
    factor vector, and each point by what its simulation depends on (its pick and its cost
    model after the launch, :meth:`ProtocolCosts.after_launch`), so that a figure moves only
    the points whose cost model it changes (a protocol's latency its own sizes, NVLS's reach
    the NVLS sizes) and the launch terms (the machine's launch cost, NCCL's per-call
    latencies of NVLS and the trees) are added, not simulated. ``points``, if given, is the
    cache of points to share with other models of the same cases (its key leads with the
    case's position: give models of repicked cases the same one)."""

    def __init__(self, cases: Sequence[Case], names: Sequence[str],
                 progress: FitProgress | None = None, points: dict | None = None) -> None:
        self.cases, self.names = list(cases), list(names)
        self.progress = progress or FitProgress()
        self.figures = [resolved(c.topology.machine.nccl, c.topology.machine.gpu.arch)
                        for c in self.cases]
        self.cache: dict[tuple, np.ndarray] = {}
        self.points: dict[tuple, float] = {} if points is None else points
        self.loops: dict[tuple, Loops | None] = {}  # each call shape's short runs
        self.measured = np.log([t for c in cases for t in c.measured])

    def times(self, u: np.ndarray) -> np.ndarray:
        """Simulated seconds per point, in case order, at factors exp(u). The launch cost is
        paid before any rank starts, so it is added, not simulated."""
        factors = dict(zip(self.names, np.exp(u), strict=True))
        launch = factors.pop("launch", 1.0)
        key = tuple(sorted((n, round(float(f), 12)) for n, f in factors.items() if f != 1.0))
        if key not in self.cache:
            points = []
            for index, (case, figures) in enumerate(zip(self.cases, self.figures, strict=True)):
                topology = with_figures(case.topology, apply(figures, factors))
                points += [self._point(index, topology, case, size, p)
                           for size, p in zip(case.sizes, case.picks, strict=True)]
            self._simulate([p for p in points if p[1] not in self.points])
            self.cache[key] = np.array([self.points[k] + launch for _, k, launch, _ in points])
        extra = [(launch - 1.0) * launch_of(c) for c in self.cases for _ in c.sizes]
        return self.cache[key] + np.array(extra)

    def _point(self, index: int, topology: Topology, case: Case, size: int,
               chosen: Pick) -> tuple[tuple, tuple, float, dict]:
        """One point: its simulation's arguments, the key of its time after the launch (the
        same for every point of the same pick and parameters under the same cost model after
        the launch), its launch cost and its parameters as planned."""
        params, costs = pick_plan(topology, case.collective, size, case.gpus, chosen)
        after = getattr(costs, "after_launch", None)
        task = (topology, case.collective, size, case.gpus, chosen)
        planned = tuple(sorted((n, repr(v)) for n, v in params.items() if n != "placement"))
        key = (index, size, chosen.algorithm, chosen.protocol, chosen.channels, planned,
               after() if after is not None else ("unkeyed", next(_UNKEYED)))
        return task, key, costs.launch, params

    def _simulate(self, points: Sequence[tuple[tuple, tuple, float, dict]]) -> None:
        """Simulate the points not yet known, each key once, side by side where the machine
        has the cores (:mod:`collsim.calibrate.workers`). A call of many identical loops is
        timed from three short runs of them (:mod:`collsim.calibrate.loops`), kept as points
        of their own sizes (a log's smaller sizes are often those runs), and simulated in
        full only where their periods differ."""
        todo = {key: (task, launch, params) for task, key, launch, params in points}
        runs: dict[tuple, tuple[tuple, float]] = {}
        carry: dict[tuple, tuple[Loops, list[tuple]]] = {}
        for key, (task, launch, params) in todo.items():
            plan = self._loop_plan(key, task, params)
            if plan is None:
                runs.setdefault(key, (task, launch))
                continue
            keys = [(key[0], size, *key[2:]) for size in plan.sizes]
            carry[key] = (plan, keys)
            for short, size in zip(keys, plan.sizes, strict=True):
                if short not in self.points:
                    runs.setdefault(short, ((*task[:2], size, *task[3:], params), launch))
        self._run(runs)
        full = {}
        for key, (plan, keys) in carry.items():
            time = carried(plan, [self.points[k] for k in keys])
            if time is None:
                full[key] = todo[key][:2]
            else:
                self.points[key] = time
        self._run(full)

    def _loop_plan(self, key: tuple, task: tuple, params: dict) -> Loops | None:
        """The short runs of a point's call (None: it runs in full), once per call shape."""
        shape = (key[0], key[1], key[5])
        if shape not in self.loops:
            topology, collective, size, gpus, chosen = task
            self.loops[shape] = plan_loops(topology, collective, chosen.algorithm, gpus, size,
                                           params)
        return self.loops[shape]

    def _run(self, tasks: Mapping[tuple, tuple[tuple, float]]) -> None:
        """Simulate each task and keep its time after the launch under its key."""
        todo = list(tasks.items())
        times = simulate_times([task for _, (task, _) in todo], simulate_pick)
        self.progress.simulations += len(todo)
        for (key, (_, launch)), time in zip(todo, times, strict=True):
            self.points[key] = time - launch

    def residuals(self, u: np.ndarray) -> np.ndarray:
        times = self.times(u)
        if not np.all(times > 0):  # a log of 0 would make every later step NaN
            self._refuse(times)
        return np.log(times) - self.measured

    def _refuse(self, times: np.ndarray) -> None:
        """Name the first point whose simulated time has no logarithm (a call that moves
        nothing, as on one rank): the fit compares log times and cannot use it."""
        at = int(np.flatnonzero(~(times > 0))[0])
        for case in self.cases:
            if at < len(case.sizes):
                raise InputError(f"the {case.collective} of {case.sizes[at]} bytes on "
                                 f"{case.ranks} rank(s) simulates to {times[at]:g} s; "
                                 f"calibration fits the logarithm of each time and needs "
                                 f"calls that take time (two ranks or more)", file=case.label)
            at -= len(case.sizes)

    def jacobian(self, u: np.ndarray, low: np.ndarray, high: np.ndarray,
                 unseen: Sequence[int] = ()) -> np.ndarray:
        """d residual / d u by steps downwards (upwards at the lower bound): raising one
        class's bandwidth may change nothing while another class binds as tightly, lowering
        it shows that the time depends on it. Columns ``unseen`` are known to be zero."""
        base = self.residuals(u)
        columns = []
        for j in range(len(u)):
            if j in unseen or low[j] == high[j]:
                columns.append(np.zeros_like(base))
                continue
            step = -STEP if u[j] - STEP >= low[j] else STEP
            moved = u.copy()
            moved[j] += step
            columns.append((self.residuals(moved) - base) / step)
        return np.array(columns).T


def unseen(cases: Sequence[Case], names: Sequence[str]) -> list[int]:
    """The figures no simulated time can depend on, found from the picks alone (their
    Jacobian columns are zero; skipping them saves a simulation of every point each):
    a protocol's latency and efficiency where no size runs it, NVLS's reach where no size
    runs an NVLS algorithm, the network's figures on runs of one node."""
    protocols = {p.protocol for c in cases for p in c.picks}
    nvls = any(p.algorithm in ("nvls", "nvls_tree") for c in cases for p in c.picks)
    nodes = max(c.nodes for c in cases)
    out = []
    for j, name in enumerate(names):
        kind, _, what = name.partition(".")
        if (kind in ("latency", "efficiency") and what in PROTOCOLS and what not in protocols) \
                or (name == "reachable.nvls" and not nvls) \
                or (what in ("network", "p2p") and nodes == 1):
            out.append(j)
    return out


def exercised(cases: Sequence[Case]) -> list[str]:
    """The continuous figures the cases' calls exercise, in registry order: for the
    collectives NCCL's algorithms run every one but the p2p path's reach of a NIC; for its
    point-to-point calls (``P2P_FIGURES``) the launch and, across nodes, the network's
    per-message overhead and the p2p path's reach (not the rings'), on one node the links
    inside it. Where the p2p calls also cross NVLink across nodes (alltoall's peers on
    the same node) the logs tell its figures apart from the network's too poorly to fit them:
    a one-node log does."""
    wanted: set[str] = set()
    for case in cases:
        wanted.update(P2P_FIGURES.get((case.collective, case.nodes > 1), COLLECTIVE_FIGURES))
    return [name for name in CONTINUOUS if name in wanted]


def launch_of(case: Case) -> float:
    """The launch cost the case's preset declares (as the fit's factor 1 means it)."""
    return _launch(case.topology.machine.nccl)


def identifiable(jacobian: np.ndarray, names: Sequence[str],
                 residual: np.ndarray | None = None) -> dict[str, str]:
    """Why each undetermined figure is undetermined ({} if all are determined): unseen, a
    copy of figures before it, or beyond what the sizes can fit (``figure_budget``; those
    kept explain ``residual``, the log errors where the Jacobian was taken, best)."""
    why: dict[str, str] = {}
    sensitivity = np.abs(jacobian).max(axis=0) if jacobian.size else np.zeros(len(names))
    accepted: list[np.ndarray] = []
    kept: list[int] = []
    for j in range(len(names)):  # registry order: on a tie the physical cause goes first
        name = names[j]
        if sensitivity[j] < SENSITIVITY:
            why[name] = UNSEEN
            continue
        column = jacobian[:, j].copy()
        for basis in accepted:
            column -= basis * (basis @ column)
        if np.linalg.norm(column) < COLLINEAR * np.linalg.norm(jacobian[:, j]):
            why[name] = ALIKE
            continue
        accepted.append(column / np.linalg.norm(column))
        kept.append(j)
    if residual is None:
        residual = np.zeros(jacobian.shape[0])
    chosen = most_telling(jacobian, residual, kept, figure_budget(jacobian.shape[0]))
    why.update((names[j], FEW) for j in kept if j not in chosen)
    return why


def figure_budget(sizes: int) -> int:
    """How many figures ``sizes`` measured times can fit (``SPARE_SIZES``)."""
    return max(sizes - SPARE_SIZES, 0)


def most_telling(jacobian: np.ndarray, residual: np.ndarray, columns: Sequence[int],
                 budget: int) -> list[int]:
    """At most ``budget`` of ``columns`` (all if they fit), chosen one at a time: the figure
    whose column, after projecting out those chosen before it, explains most of what is left
    of ``residual`` (orthogonal matching pursuit; on a tie, the one that moves the times
    most): the figures the errors ask for, not those the sizes happen to move most."""
    if len(columns) <= budget:
        return list(columns)
    chosen: list[int] = []
    basis: list[np.ndarray] = []
    left = list(columns)
    rest_of_residual = residual.astype(float).copy()
    while left and len(chosen) < budget:
        rest = {}
        for j in left:
            column = jacobian[:, j].astype(float).copy()
            for b in basis:
                column -= b * (b @ column)
            rest[j] = column
        best = max(left, key=lambda j: (abs(rest[j] @ rest_of_residual)
                                        / max(np.linalg.norm(rest[j]), 1e-300),
                                        np.linalg.norm(rest[j]), -j))
        unit = rest[best] / np.linalg.norm(rest[best])
        chosen.append(best)
        basis.append(unit)
        rest_of_residual -= unit * (unit @ rest_of_residual)
        left.remove(best)
    return chosen


def calibrate(cases: Sequence[Case], names: Sequence[str] | None = None, *,
              max_iterations: int | None = None,
              pick_scales: Sequence[float] = PICK_SCALES,
              tree_ratings: Sequence[float] = (),
              progress: FitProgress | None = None) -> Calibration:
    """Fit the figures ``names`` (default: every continuous one of ``FIGURES``) to ``cases``,
    in at most ``max_iterations`` Levenberg-Marquardt steps (default ``MAX_ITERATIONS``), and
    ``pick_scale`` among ``pick_scales`` (each whose picks lower the cost at the first fit's
    figures a fit of its own; () leaves it at 1), then ``tree_rating`` among ``tree_ratings``
    (default none: the cheapest of the picks they make at the preset's figures a fit of its
    own; on a 4-node log the search takes longer than the rest of the fit).
    ``progress``, if given, is kept up to date as the fit runs."""
    names = exercised(cases) if names is None else list(names)
    progress = progress or FitProgress()
    points: dict = {}  # simulated points, shared by the fits of every switch size
    original, cost = _fit(cases, names, max_iterations or MAX_ITERATIONS, progress, points)
    best, best_cost, chosen, moved_any = original, cost, 1.0, False
    # Another switch size moves a few sizes' picks: its fit starts where this one ended, with
    # the figures this one found the logs determine.
    start = {n: math.log(f) for n, f in original.factors.items()}
    kept = {f.name: f.why for f in original.figures if not f.determined}
    for scale in pick_scales:
        moved = [repicked(case, scale) for case in cases]
        if all(m.picks == c.picks for m, c in zip(moved, cases, strict=True)):
            continue
        moved_any = True
        at_start = Model(moved, list(start), progress, points).residuals(
            np.array(list(start.values())))
        if float(at_start @ at_start) >= cost:
            continue  # its picks explain the logs no better at the fitted figures: not fitted
        trial, trial_cost = _fit(moved, names, max_iterations or MAX_ITERATIONS, progress,
                                 points, start, kept)
        if trial_cost < PICK_GAIN * cost and trial_cost < best_cost:
            best, best_cost, chosen = trial, trial_cost, scale
    if chosen != 1.0:
        why = ""
    elif moved_any:
        why = "no other switch size explains the logs clearly better than the model's"
    else:
        why = "no size of the logs is near a switch of NCCL's choice"
    rating, rated, rating_why = _tree_rating(cases, names, chosen, best, best_cost,
                                             tree_ratings, max_iterations, progress, points)
    if rated is not None:
        best = rated
    errors = tuple(dataclasses.replace(e, before_median=o.before_median, before_p90=o.before_p90)
                   for e, o in zip(best.errors, original.errors, strict=True))
    sources = {**original.sources, **best.sources}
    nccl = dataclasses.replace(best.nccl, pick_scale=chosen if chosen != 1.0 else None,
                               tree_rating=rating if rating != 1.0 else None)
    pick = Fitted("pick_scale", 1.0, chosen, chosen, chosen != 1.0, why)
    tree = Fitted("tree_rating", 1.0, rating, rating, rating != 1.0, rating_why)
    if chosen != 1.0:  # the logs some of whose picks the switch size moved
        sources["pick_scale"] = tuple(case.label for case in cases
                                      if repicked(case, chosen).picks != case.picks)
    if rating != 1.0:
        sources["tree_rating"] = tuple(
            case.label for case in cases
            if repicked(case, chosen, rating).picks != repicked(case, chosen).picks)
    return dataclasses.replace(best, figures=(*best.figures, pick, tree), nccl=nccl,
                               errors=errors, sources=sources)


def _tree_rating(cases: Sequence[Case], names: Sequence[str], scale: float, best: Calibration,
                 best_cost: float, ratings: Sequence[float], max_iterations: int | None,
                 progress: FitProgress, points: dict
                 ) -> tuple[float, Calibration | None, str]:
    """NCCL's rating of its tree that the logs measure (1 if none), the fit under it (None if
    none), and why it stays 1. Each distinct set of picks the ``ratings`` make (the rating
    nearest 1 that makes it) is costed at the preset's figures, not at ``best``'s: figures
    fitted to the model's picks can hide a pick's worth (a network reach raised to carry a
    ring the machine ran as a tree). Only the cheapest is fitted, and only if it is
    ``PICK_GAIN`` below the kept picks' cost there (each fit of a multi-node log costs
    minutes); it is taken if it lowers the fitted cost as much as another switch size must."""
    if not ratings:
        return 1.0, None, "not searched (collsim calibrate --tree-rating)"
    base = [repicked(case, scale) for case in cases]
    names_at = [n for n in names if n != "launch"]  # the preset: every factor 1

    def shown(moved: Sequence[Case]) -> tuple:  # what runs, apart from NCCL's model times
        return tuple((p.algorithm, p.protocol, p.channels) for c in moved for p in c.picks)

    def cost(moved: Sequence[Case]) -> float:
        r = Model(moved, names_at, progress, points).residuals(np.zeros(len(names_at)))
        return float(r @ r)

    seen = {shown(base)}
    bar = PICK_GAIN * cost(base)
    cheapest: tuple[float, float, list[Case]] | None = None
    for rating in ratings:
        moved = [repicked(case, scale, rating) for case in cases]
        key = shown(moved)
        if key in seen:
            continue
        seen.add(key)
        trial_cost = cost(moved)
        if trial_cost < (bar if cheapest is None else cheapest[0]):
            cheapest = (trial_cost, rating, moved)
    if len(seen) == 1:
        return 1.0, None, "no rating of NCCL's tree changes a pick of the logs"
    if cheapest is None:
        return 1.0, None, "no rating of NCCL's tree explains the logs clearly better"
    trial, trial_cost = _fit(cheapest[2], names, max_iterations or MAX_ITERATIONS, progress,
                             points)
    if trial_cost >= PICK_GAIN * best_cost:
        return 1.0, None, "no rating of NCCL's tree explains the logs clearly better"
    return cheapest[1], trial, ""


def _fit(cases: Sequence[Case], names: Sequence[str], max_iterations: int,
         progress: FitProgress, points: dict | None = None,
         start: Mapping[str, float] | None = None,
         kept: Mapping[str, str] | None = None) -> tuple[Calibration, float]:
    """The continuous fit of ``names`` with the cases' picks as they are, and its cost; it
    starts from the preset, or from ``start`` (u by name) for the figures it frees.
    ``kept``, if given, is the figures to keep at the preset and why (another fit's reading),
    instead of the reading of the Jacobian at the preset.

    Which figures are free is read off the Jacobian at the preset, then again at the fitted
    point (``LOOKS``): a cap that does not bind at the preset (a protocol's efficiency under
    a link that binds as tightly) looks like a copy of the figure that does, and becomes
    distinguishable only once the fit has moved that one. Only such copies are reconsidered:
    a figure no size depended on at the preset would be read off where another one ended,
    often at its bound."""
    machine = cases[0].topology.machine
    figures = resolved(machine.nccl, machine.gpu.arch)
    by_name = {f.name: f for f in FIGURES}
    bounds = [by_name[n].bounds(figures) for n in names]
    low = np.log([max(b[0], 1e-12) for b in bounds])
    high = np.log([b[1] for b in bounds])
    model = Model(cases, names, progress, points)
    progress.fit += 1
    progress.iteration, progress.points = 0, len(model.measured)
    u0 = np.zeros(len(names))
    never = unseen(cases, names)
    sources: dict[str, tuple[str, ...]] = {}
    if kept is None:
        jacobian = model.jacobian(u0, low, high, never)
        why = identifiable(jacobian, names, model.residuals(u0))
        sources = seen_by(cases, jacobian, names)
    else:
        jacobian, why = np.zeros((len(model.measured), len(names))), dict(kept)
    u = np.clip([(start or {}).get(n, 0.0) for n in names], low, high)
    iterations = 0
    for look in range(LOOKS):
        if look:  # the Jacobian where the last look's fit ended
            if ALIKE not in why.values() or FEW in why.values():
                break  # only copies are reconsidered: none is left, or no size to spare
            kept = [j for j, n in enumerate(names) if why.get(n) == UNSEEN]  # stay unseen
            jacobian = model.jacobian(u, low, high, [*never, *kept])
            more = {n: w for n, w in identifiable(jacobian, names, model.residuals(u)).items()
                    if n in why}
            more.update((n, w) for n, w in why.items() if w == UNSEEN)
            room = figure_budget(len(model.measured)) - (len(names) - len(why))  # to spare
            freed = [n for n in names if n in why and n not in more]
            more.update((n, FEW) for n in freed[max(room, 0):])
            if len(more) == len(why):
                break
            sources.update((n, labels) for n, labels in seen_by(cases, jacobian, names).items()
                           if n in why and n not in more)
            why = more
        index = [j for j, n in enumerate(names) if n not in why]
        free = Model(cases, [names[j] for j in index], progress, model.points)
        free.cache = model.cache  # the same simulations, keyed by the factors that are not 1
        warm = look == 0 and (kept is not None or bool(np.any(u[index])))  # Jacobian elsewhere
        fitted_u, steps = _levenberg_marquardt(free if index else None, low[index],
                                               high[index], None if warm else jacobian[:, index],
                                               max_iterations, start=u[index],
                                               progress=progress)
        u = u0.copy()
        u[index] = fitted_u
        iterations += steps
    factors = {n: float(math.exp(u[j])) for j, n in enumerate(names) if n not in why}
    nccl = calibrated(machine, factors)
    outcome = []
    for j, n in enumerate(names):
        figure = by_name[n]
        before, after = figure.value(figures), figure.value(nccl)
        if n not in why and n.startswith(("latency.", "efficiency.")):
            before, after = 1.0, factors[n]
        at = ""
        if n in factors:
            at = "lower" if u[j] <= low[j] + 1e-6 else "upper" if u[j] >= high[j] - 1e-6 else ""
        outcome.append(Fitted(n, before, after, factors.get(n, 1.0), n not in why,
                              why.get(n, ""), at))
    final = model.times(u)
    residual = np.log(final) - model.measured
    sources = {n: labels for n, labels in sources.items() if n in factors}
    return (Calibration(tuple(outcome), nccl, _errors(cases, model.times(u0), final),
                        iterations, sources), float(residual @ residual))


def seen_by(cases: Sequence[Case], jacobian: np.ndarray, names: Sequence[str]
            ) -> dict[str, tuple[str, ...]]:
    """For each figure, the cases (labels) some of whose times it moves by ``SENSITIVITY``
    per unit of u: the logs that can tell its value."""
    out: dict[str, tuple[str, ...]] = {}
    at = 0
    rows = []
    for case in cases:
        rows.append((case.label, slice(at, at + len(case.sizes))))
        at += len(case.sizes)
    for j, name in enumerate(names):
        out[name] = tuple(label for label, span in rows
                          if jacobian[span, j].size
                          and float(np.abs(jacobian[span, j]).max()) >= SENSITIVITY)
    return out


def _levenberg_marquardt(model: Model | None, low: np.ndarray, high: np.ndarray,
                         jacobian: np.ndarray | None = None,
                         max_iterations: int = MAX_ITERATIONS,
                         start: np.ndarray | None = None,
                         progress: FitProgress | None = None) -> tuple[np.ndarray, int]:
    """Damped Gauss-Newton within bounds. The Jacobian is computed once by differences and
    then kept up to date by Broyden's rank-one updates (each simulation of every point costs
    the same as one column); it is recomputed only when a step fails to lower the cost, and
    when a step from a fresh one fails too, one figure at a time is moved instead
    (:func:`_coordinate_step`) before giving up."""
    if model is None:
        return np.zeros(0), 0
    u = np.zeros(len(low)) if start is None else start.copy()
    r = model.residuals(u)
    cost, damping, iterations = float(r @ r), 1e-3, 0
    progress = progress or FitProgress()
    if progress.start_cost is None:
        progress.start_cost = cost
    progress.cost = cost if progress.cost is None else min(progress.cost, cost)
    fresh = jacobian is None
    if jacobian is None:
        jacobian = model.jacobian(u, low, high)
    for iterations in range(1, max_iterations + 1):  # noqa: B007 (returned)
        progress.iteration += 1
        gradient = jacobian.T @ r
        normal = jacobian.T @ jacobian
        gradient, normal = _held_at_bounds(u, low, high, gradient, normal)
        improved = False
        for attempt in range(DAMPINGS):
            lhs = normal + damping * np.diag(np.diag(normal) + 1e-9)
            step = np.linalg.lstsq(lhs, -gradient, rcond=None)[0]
            trial = np.clip(u + step, low, high)
            if attempt and np.abs(trial - u).max() < SMALLEST_MOVE:
                break  # damped this far the step moves nothing: the Jacobian is wrong
            r_trial = model.residuals(trial)
            cost_trial = float(r_trial @ r_trial)
            if cost_trial < cost:
                improved = True
                break
            damping *= 5
        if not improved:
            if fresh:
                moved_to = _coordinate_step(model, u, low, high, cost)
                if moved_to is None:
                    break
                u, r, cost = moved_to
            jacobian, fresh, damping = model.jacobian(u, low, high), True, 1e-3
            continue
        moved = trial - u
        if moved @ moved > 0:
            jacobian = jacobian + np.outer(r_trial - r - jacobian @ moved, moved) / (moved @ moved)
        gain = cost - cost_trial
        u, r, cost, fresh = trial, r_trial, cost_trial, False
        progress.cost = min(progress.cost, cost)
        damping = max(damping / 5, 1e-7)
        if gain < CONVERGED * max(cost, 1e-12) or np.abs(moved).max() < SMALLEST_MOVE:
            break
    return u, iterations


def _held_at_bounds(u: np.ndarray, low: np.ndarray, high: np.ndarray, gradient: np.ndarray,
                    normal: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The gradient and normal matrix with the figures held that sit at a bound the descent
    pushes them past: their step is then 0 and the others' is solved without them. Left
    free, the step would count on their move, which the bound then clips away (a cap fitted
    to its bound made every later step fail)."""
    held = ((u <= low + 1e-9) & (gradient > 0)) | ((u >= high - 1e-9) & (gradient < 0))
    if not held.any():
        return gradient, normal
    free = ~held
    return np.where(free, gradient, 0.0), normal * np.outer(free, free) + np.diag(held * 1.0)


def _coordinate_step(model: Model, u: np.ndarray, low: np.ndarray, high: np.ndarray,
                     cost: float) -> tuple[np.ndarray, np.ndarray, float] | None:
    """The best move of one figure by ``COORDINATE_MOVES`` that lowers ``cost`` (the point,
    its residuals and cost), or None. Gauss-Newton needs times that change smoothly with the
    figures; where a figure moves them by jumps (one that changes NCCL's channel count, say)
    its difference quotient swamps the step, which then fails however damped."""
    for moves in COORDINATE_MOVES:
        best: tuple[np.ndarray, np.ndarray, float] | None = None
        for j in range(len(u)):
            for move in moves:
                trial = u.copy()
                trial[j] = min(max(u[j] + move, low[j]), high[j])
                if trial[j] == u[j]:
                    continue
                r = model.residuals(trial)
                trial_cost = float(r @ r)
                if trial_cost < (cost if best is None else best[2]):
                    best = (trial, r, trial_cost)
        if best is not None:
            return _extended(model, u, best, low, high)
    return None


def _extended(model: Model, start: np.ndarray, best: tuple[np.ndarray, np.ndarray, float],
              low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """``best``, a move from ``start``, repeated while it keeps lowering the cost."""
    move = best[0] - start
    while True:
        trial = np.clip(best[0] + move, low, high)
        if np.array_equal(trial, best[0]):
            return best
        r = model.residuals(trial)
        trial_cost = float(r @ r)
        if trial_cost >= best[2]:
            return best
        best = (trial, r, trial_cost)


def _errors(cases: Sequence[Case], before: np.ndarray, after: np.ndarray) -> tuple[CaseError, ...]:
    out, at = [], 0
    for case in cases:
        n = len(case.sizes)
        measured = np.array(case.measured)
        b = np.abs(before[at:at + n] / measured - 1)
        a = np.abs(after[at:at + n] / measured - 1)
        out.append(CaseError(case.label, float(np.median(b)), _p90(b), float(np.median(a)),
                             _p90(a)))
        at += n
    return tuple(out)


def _p90(values: np.ndarray) -> float:
    return float(np.percentile(values, 90)) if len(values) else math.nan
