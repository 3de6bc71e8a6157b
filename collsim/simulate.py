"""One simulated point: a collective, an algorithm, a rank count and a size on a topology."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any

import collsim.algorithms  # noqa: F401  (every program registered before names resolve)
import collsim.hardware.limits as limits
from collsim.algorithms.registry import Algorithm, Cost, get_algorithm
from collsim.calls.pipelined import pipeline_for
from collsim.calls.plan import (
    SELECTORS,
    Plan,
    canonical_algorithm,
    check_protocol,
    is_nccl,
    plan_call,
)
from collsim.calls.select import simulate_selected
from collsim.callspec import CallSpec
from collsim.collectives import COLLECTIVES
from collsim.engine.costs import IDEAL, CostModel, path_costs
from collsim.engine.timing import FullRunRefused, TimingEngine
from collsim.errors import InputError
from collsim.hardware.placement import place_ranks, ring_order
from collsim.hardware.topology import Topology
from collsim.nccl.constants import MAX_CHANNELS
from collsim.params import COMMON_PARAMS, DTYPES, CallParams, dtype_name
from collsim.program import Job
from collsim.suggest import did_you_mean
from collsim.units import UnitError, format_size, format_time, parse_size

# The groups of the results table's columns, in order (docs/design.md#results-table).
# "input": the contract's columns that identify the point; "measured": what was measured.
# "choice": what the call ran with (docs/design.md#real-machines), after the contract's
# columns: the NCCL protocol whose costs it paid (empty under the ideal model), its channels
# (empty for an algorithm without), and the algorithm that ran (what auto or best
# selected). There they are outcomes, which never identify a point; a scenario that sweeps
# protocol or channels has that column among its swept keys instead, holding the value
# asked for. "engine": how the engine timed the point (its path), last of the outcomes.
COLUMN_GROUPS = ("input", "measured", "choice", "engine")


def column(group: str, **options: Any) -> Any:
    """A :class:`PointResult` field that is a column of the results table, in ``group``
    (one of COLUMN_GROUPS); columns follow the fields' order within their group."""
    return field(metadata={"column": group}, **options)


@dataclass(frozen=True)
class PointResult:
    """One row of the results table (docs/design.md#results-table: its columns, then what the
    call ran with) plus what the engine counted; ``speedup_vs_auto`` for ``best`` (auto's time
    / best's)."""

    scenario: str = column("input", default="", kw_only=True)
    topology: str = column("input")
    collective: str = column("input")
    algorithm: str = column("input")
    ranks: int = column("input")
    size_bytes: int = column("input")
    time_s: float = column("measured")
    algbw_GBps: float = column("measured")
    busbw_GBps: float = column("measured")
    analytic_time_s: float | None = column("measured")
    transfers: int
    protocol: str | None = column("choice", default=None)
    channels: int | None = column("choice", default=None)
    selected: str = column("choice", default="")
    # How the engine timed it: "lockstep" (whole steps), "lanes" (each lane's whole steps at
    # its share of the links lanes share), "symmetric" (one rank per orbit of a
    # rank shift), "pipeline" (a tree pipeline from two small runs, within the error
    # docs/engine.md states) or "full" (every rank's events).
    path: str = column("engine", default="full")
    speedup_vs_auto: float | None = None
    # Why an algorithm with a quicker path declared ran in full: prose for a reader (in
    # estimate --json), not a column, so rewording it never changes a table.
    fallback: str = ""

    def row(self) -> dict[str, Any]:
        """The table's columns in order; a missing closed form, protocol or channels is
        empty."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return {name: "" if values[name] is None else values[name] for name in COLUMNS}

    def __str__(self) -> str:
        """The line ``collsim estimate`` prints."""
        analytic = "" if self.analytic_time_s is None else \
            f", closed form {format_time(self.analytic_time_s)}"
        return (f"{self.collective} {self.algorithm}{self.choice_text()} on {self.topology}, "
                f"{self.ranks} ranks, {format_size(self.size_bytes)} ({self.size_bytes} B): "
                f"time {format_time(self.time_s)}, algbw {self.algbw_GBps:.4g} GB/s, "
                f"busbw {self.busbw_GBps:.4g} GB/s{analytic}")

    def choice_text(self) -> str:
        """What the call ran with, in parentheses ('' when there is nothing to say)."""
        parts = [] if self.selected in ("", self.algorithm) else [self.selected]
        if self.protocol is not None:  # channels too: under the ideal model they say nothing
            parts.append(self.protocol)
            if self.channels is not None:
                parts.append(f"{self.channels} channel{'' if self.channels == 1 else 's'}")
        if self.speedup_vs_auto is not None:
            parts.append(f"{self.speedup_vs_auto:.4g}x auto")
        return f" ({', '.join(parts)})" if parts else ""


def _columns(group: str) -> tuple[str, ...]:
    return tuple(f.name for f in fields(PointResult) if f.metadata.get("column") == group)


INPUT_COLUMNS, MEASURED_COLUMNS, CHOICE_COLUMNS, ENGINE_COLUMNS = (
    _columns(g) for g in COLUMN_GROUPS)
RESULT_COLUMNS = INPUT_COLUMNS + MEASURED_COLUMNS
TABLE_COLUMNS = RESULT_COLUMNS + CHOICE_COLUMNS + ENGINE_COLUMNS
COLUMNS = TABLE_COLUMNS  # the columns PointResult.row() fills


# Parameters that count something, 1 or more: what they count.
COUNT_PARAMS = {"window": "chunks in flight on a connection",
                "units": "units a chunk is forwarded in inside a node",
                "peer_channels": "channels one peer's data is cut over",
                "batch": "operations a channel runs at once"}


def accepted_params(algorithm: Algorithm) -> tuple[str, ...]:
    """The parameters ``algorithm`` takes: the common ones, its own, and ``protocol`` for
    NCCL's algorithms."""
    return COMMON_PARAMS + tuple(algorithm.params) + (
        ("protocol",) if is_nccl(algorithm.name) and "protocol" not in algorithm.params else ())


def check_params(algorithm: Algorithm, ranks: int, params: CallParams) -> CallParams:
    """Validated algorithm parameters: known names, root in range, chunk_size a size > 0."""
    accepted = accepted_params(algorithm)
    for name in params:
        if name not in accepted:
            raise InputError(f"{algorithm.collective}/{algorithm.name} takes no parameter "
                             f"{name!r}; it takes {', '.join(accepted)}"
                             f"{did_you_mean(name, accepted)}", key=f"param.{name}")
    checked = dict(params)
    if "root" in checked:
        root = checked["root"]
        if isinstance(root, bool) or not isinstance(root, int) or not 0 <= root < ranks:
            raise InputError(f"root must be a rank from 0 to {ranks - 1}, got {root!r}",
                             key="param.root")
    if "chunk_size" in checked:
        try:
            checked["chunk_size"] = parse_size(checked["chunk_size"])
        except UnitError as exc:
            raise InputError(str(exc), key="param.chunk_size") from None
        if checked["chunk_size"] <= 0:
            raise InputError("chunk_size must be positive", key="param.chunk_size")
    if "channels" in checked:
        channels = checked["channels"]
        if isinstance(channels, str) and channels.strip().lower() == "auto":
            checked["channels"] = "auto"
        elif isinstance(channels, bool) or not isinstance(channels, int) \
                or not 1 <= channels <= MAX_CHANNELS:
            raise InputError(f"channels must be a whole number from 1 to {MAX_CHANNELS} "
                             f"(NCCL's MAXCHANNELS) or auto, got {channels!r}",
                             key="param.channels")
    for name, meaning in COUNT_PARAMS.items():
        value = checked.get(name, 1)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"{name} must be a whole number of {meaning}, 1 or more, "
                             f"got {value!r}", key=f"param.{name}")
    if "protocol" in checked:
        checked["protocol"] = check_protocol(checked["protocol"])
    dtype = dtype_name(checked)
    if dtype not in DTYPES:
        raise InputError(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}",
                         key="param.dtype")
    if checked.get("chunk_size", 0) % DTYPES[dtype]:
        raise InputError(f"chunk_size {checked['chunk_size']} B is not a whole number of "
                         f"{dtype} elements ({DTYPES[dtype]} B each)", key="param.chunk_size")
    return checked


def make_job(topology: Topology, algorithm: Algorithm, ranks: int, size_bytes: int,
             params: CallParams) -> tuple[Job, list[int]]:
    """The Job every rank's program sees, and the GPU each rank runs on."""
    call = CallSpec(topology, algorithm.collective, algorithm.name, ranks, size_bytes, params)
    job, gpus, _ = make_call(call, algorithm)
    return job, gpus


def make_call(call: CallSpec, algorithm: Algorithm | None = None
              ) -> tuple[Job, list[int], Plan]:
    """:func:`make_job` and the call's plan (cost model, protocol, channels; see
    :mod:`collsim.calls.plan`); ``call.costs``, if given, replaces the machine's model.
    ``algorithm`` is the registry record of ``call.algorithm`` (looked up if not given)."""
    topology, ranks, size_bytes = call.topology, call.ranks, call.size_bytes
    if algorithm is None:
        algorithm = get_algorithm(call.collective, call.algorithm)
    if isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 1:
        raise InputError(f"ranks must be a positive whole number, got {ranks!r}", key="ranks")
    if ranks > topology.gpus:
        raise InputError(f"{ranks} ranks do not fit on topology '{topology.name}', which has "
                         f"{topology.gpus} GPUs", key="ranks")
    algorithm.check_ranks(ranks)
    params = check_params(algorithm, ranks, dict(call.params))
    itemsize = DTYPES[dtype_name(params)]
    if size_bytes < 0 or size_bytes % itemsize:
        raise InputError(f"size {size_bytes} B is not a whole number of "
                         f"{dtype_name(params)} elements ({itemsize} B each)",
                         key="size")
    gpus = place_ranks(topology, ranks, params)
    planned = plan_call(replace(call, params=params), gpus)
    params = planned.params
    collective = COLLECTIVES[algorithm.collective]
    job = Job(algorithm.collective, ranks, size_bytes // itemsize, itemsize,
              root=params.get("root", 0) if collective.rooted else 0, params=params,
              ring=tuple(ring_order(topology, gpus)),
              nodes=tuple(topology.node_of[g] for g in gpus))
    if algorithm.prepare is not None:
        job = algorithm.prepare(job, topology, gpus)
    return job, gpus, planned


def analytic_time(topology: Topology, algorithm: Algorithm, ranks: int, size_bytes: int,
                  params: CallParams, costs: CostModel = IDEAL) -> float | None:
    """The algorithm's closed form on this machine under the cost model, where every route
    costs the same: the launch cost plus the form at the routes' alpha and beta, derived
    by the functions the fabric builds its routes with."""
    uniform = path_costs(topology, costs)
    if algorithm.cost is None or uniform is None:
        return None
    alpha, beta = uniform
    form = float(algorithm.cost(Cost(ranks, size_bytes, alpha, beta, topology.gamma, params)))
    return costs.launch + form


def expected_time(topology: Topology, collective: str, algorithm: str, ranks: int,
                  size_bytes: int, params: CallParams | None = None,
                  costs: CostModel | None = None) -> float | None:
    """:func:`expected_call_time` of the call given apart."""
    return expected_call_time(CallSpec(topology, collective, algorithm, ranks, size_bytes,
                                       dict(params or {}), costs))


def expected_call_time(call: CallSpec) -> float | None:
    """The closed-form time of a call under the cost model it would run with, for a progress
    line's "of about"; None where there is none (``auto``, ``best``) or the input is bad (the
    simulation reports that itself)."""
    algorithm = canonical_algorithm(call.collective, call.algorithm)
    if algorithm in SELECTORS:
        return None
    try:
        chosen = get_algorithm(call.collective, algorithm)
        job, _, planned = make_call(replace(call, algorithm=algorithm), chosen)
        return analytic_time(call.topology, chosen, call.ranks, call.size_bytes, job.params,
                             planned.costs)
    except (InputError, ValueError, ArithmeticError):
        return None


def simulate(topology: Topology, collective: str, algorithm: str, ranks: int, size_bytes: int,
             params: CallParams | None = None, costs: CostModel | None = None,
             observe: Callable[[TimingEngine], Any] | None = None,
             exact: bool = False) -> PointResult:
    """Simulate one collective call and return its row of the results table. ``algorithm``
    is a registered name, ``auto`` (NCCL's choice) or ``best`` (the fastest NCCL algorithm
    and protocol, simulated); ``costs`` replaces the machine's cost model (ideal on the
    canonical kinds, NCCL's protocols where the machine declares them: :mod:`collsim.calls.plan`).
    ``observe``, if given, is called with the engine before it runs (a progress display).
    ``exact`` keeps to the paths that give the full simulation's times (no pipeline path)."""
    return simulate_call(CallSpec(topology, collective, algorithm, ranks, size_bytes,
                                  dict(params or {}), costs), observe, exact)


def simulate_call(call: CallSpec, observe: Callable[[TimingEngine], Any] | None = None,
                  exact: bool = False, largest_full: int | None = None) -> PointResult:
    """:func:`simulate` of one :class:`~collsim.callspec.CallSpec`. ``largest_full``: the
    most ranks the call may run in full (every rank's events) when no quicker path takes it;
    ``auto`` above ``MAX_SELECTED_RANKS`` ranks (:mod:`collsim.hardware.limits`) sets it."""
    call = replace(call, algorithm=canonical_algorithm(call.collective, call.algorithm))
    if isinstance(call.ranks, int) and call.ranks <= call.topology.gpus:  # else make_call says
        limits.check_call_ranks(call.ranks, call.algorithm)  # before anything is built
    if call.algorithm in SELECTORS:
        most = limits.MAX_SELECTED_RANKS
        beyond = isinstance(call.ranks, int) and call.ranks > most
        return simulate_selected(call, observe, functools.partial(
            simulate_call, exact=exact, largest_full=most if beyond else None))
    chosen = get_algorithm(call.collective, call.algorithm)
    job, gpus, planned = make_call(call, chosen)
    pipeline = None if exact else pipeline_for(call.topology, chosen, job, gpus,
                                               call.size_bytes, planned.costs, make_call)
    engine = TimingEngine(call.topology, gpus, job, chosen.program, planned.costs,
                          symmetric=chosen.symmetric, steps=chosen.lockstep, lanes=chosen.lanes,
                          pipeline=pipeline, exact=exact, largest_full=largest_full)
    if observe is not None:
        observe(engine)
    try:
        run = engine.run()
    except FullRunRefused as exc:
        raise limits.full_run_refused(call.ranks, call.algorithm, str(exc),
                                      largest_full or 0) from None
    time = float(run.time)
    # A call that takes no time (one rank has nobody to talk to) moved nothing over a link:
    # it reports algbw and busbw 0, as nccl-tests reports busbw 0 for one rank, instead of
    # an infinite algbw and a busbw of inf * 0 = NaN that would poison tables and figures.
    algbw = call.size_bytes / time / 1e9 if time > 0 else 0.0
    busbw = algbw * COLLECTIVES[call.collective].busbw_factor(call.ranks)
    return PointResult(call.topology.name, call.collective, call.algorithm, call.ranks,
                       call.size_bytes, time, algbw, busbw,
                       analytic_time(call.topology, chosen, call.ranks, call.size_bytes,
                                     job.params, planned.costs),
                       run.transfers, protocol=planned.protocol, channels=planned.channels,
                       selected=call.algorithm, path=run.path, fallback=run.fallback)
