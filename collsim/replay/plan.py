"""A trace turned into the plan the workload executor runs: per rank, its compute spans at
their measured durations and its calls, in measured order, on their streams.

Streams: on GPU traces a task runs on the stream its kernel ran on; on CPU traces compute
runs on one ``cpu`` stream and each process group's calls on their own (gloo runs a group's
work in order, beside the caller). Dependencies between streams are the ones the measurement
shows: a task waits for the last task of each other stream of its rank that had ended when
it started. So a call starts when its rank reaches it and its stream is free, and the rank's
work after it waits for it only if it waited in the measured run. On a CPU trace a stretch
where the rank ran nothing the trace records is its own host work, kept as compute.

Each rank starts when its first event did on the trace's clock, so a call waits for a late
rank as it did when measured. Calls are matched between ranks by their group and their
position among the group's calls on each rank (the order torch.distributed requires); sends
and receives by their two ends and their position among that pair's messages.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field

from collsim.algorithms.registry import get_algorithm
from collsim.errors import InputError
from collsim.params import DTYPES
from collsim.replay.model import ComputeSpan, Trace, TracedCall
from collsim.workloads.plan import Task, distinct_calls, unserved_call
from collsim.workloads.service import Call

# Algorithms a replay uses unless --param names others: NCCL's ring where NCCL has one (its
# choice for large buffers), pairwise exchange for all-to-all, as `collsim workload` does.
DEFAULT_ALGORITHMS = {
    "allreduce": "ring", "allgather": "ring", "reducescatter": "ring", "alltoall": "pairwise",
    "broadcast": "ring", "reduce": "ring", "gather": "linear", "scatter": "linear",
    "barrier": "dissemination",
}
ROOTED = ("broadcast", "reduce", "gather", "scatter")
# A send/recv pair is one transfer: a broadcast from the sender to the receiver.
P2P = ("broadcast", "binomial")
# Measured events this close (microseconds) count as one after the other, not overlapping:
# the reader's compute spans end exactly where calls start, up to the clock's rounding.
TOUCH_US = 0.5
HOST = "host"  # a CPU trace's untraced stretches between its events (see _host_spans)


@dataclass(frozen=True)
class ReplayCall(Call):
    """A call as the executor runs it, reported as the collective the trace called (a
    send/recv runs as a two-rank broadcast but counts as ``send``)."""

    traced: str = ""

    @property
    def kind(self) -> str:
        return f"{self.label} {self.traced or self.collective}"


@dataclass(frozen=True)
class Source:
    """Where a task came from: the traced call (None for compute) and its measured span."""

    call: TracedCall | None
    start_us: float
    duration_us: float
    name: str


@dataclass
class ReplayPlan:
    """Every rank's tasks (the executor's :class:`~collsim.workloads.plan.Task`), what each
    task was in the trace, and the trace it came from."""

    trace: Trace
    tasks: list[list[Task]]
    sources: list[list[Source]]
    algorithms: Mapping[str, str] = field(default_factory=dict)
    origin_us: float = 0.0  # the trace's first event, any rank: time 0 of the replay

    def offset(self, rank: int) -> float:
        """Seconds from time 0 to the rank's first event in the trace: it starts then."""
        first = self.sources[rank]
        return (first[0].start_us - self.origin_us) * 1e-6 if first else 0.0

    @property
    def world(self) -> int:
        return len(self.tasks)

    def measured_s(self) -> float:
        """Seconds from the trace's first event to its last, any rank."""
        ends = [s.start_us + s.duration_us for row in self.sources for s in row]
        return (max(ends, default=self.origin_us) - self.origin_us) * 1e-6

    def calls(self) -> dict[Hashable, Call]:
        """Every distinct call, by key, in the order ranks first meet them."""
        return distinct_calls(self.tasks)


def group_label(trace: Trace, name: str) -> str:
    """How reports name a process group: its description where the trace gives one."""
    group = trace.groups[name]
    described = group.description and group.description not in ("undefined", "")
    return f"{group.description} ({name})" if described else f"group {name}"


def build_plan(trace: Trace, algorithms: Mapping[str, str] | None = None) -> ReplayPlan:
    """The replay plan of ``trace``; ``algorithms`` maps collectives to the algorithm to
    run them with (the rest: :data:`DEFAULT_ALGORITHMS`)."""
    chosen = {**DEFAULT_ALGORITHMS, **(algorithms or {})}
    for collective, name in sorted(chosen.items()):
        try:
            get_algorithm(collective, name)
        except InputError as exc:  # it names the known collectives or algorithms
            raise InputError(exc.message, key=f"--param {collective}") from None
    calls = _match_calls(trace, chosen)
    tasks: list[list[Task]] = []
    sources: list[list[Source]] = []
    for rank in range(trace.world_size):
        rank_tasks, rank_sources = _rank_plan(trace, rank, calls)
        tasks.append(rank_tasks)
        sources.append(rank_sources)
    firsts = [rank_sources[0].start_us for rank_sources in sources if rank_sources]
    plan = ReplayPlan(trace, tasks, sources, chosen, min(firsts, default=0.0))
    _check_sizes(plan)
    return plan


def engine_dtype(traced: TracedCall) -> str:
    """The dtype the engine moves a call's buffer as: the traced one where collsim knows it
    and the size is whole elements of it, else bytes (only the element size matters)."""
    size = DTYPES.get(traced.dtype)
    return traced.dtype if size and traced.size_bytes % size == 0 else "uint8"


def _where(trace: Trace, call: TracedCall) -> str:
    return trace.files.get(call.rank, f"rank {call.rank}")


def _match_calls(trace: Trace, algorithms: Mapping[str, str]
                 ) -> dict[tuple[int, int], Call]:
    """The step's call of every traced call, by (rank, index); checks that the members of
    each call agree on what it is."""
    out: dict[tuple[int, int], Call] = {}
    first: dict[Hashable, TracedCall] = {}
    seen: dict[Hashable, int] = {}
    for rank in range(trace.world_size):
        counters: dict[Hashable, int] = {}
        for traced in trace.calls.get(rank, ()):
            if traced.group not in trace.groups:
                raise InputError(f"call {traced.index} ({traced.collective}) names process "
                                 f"group {traced.group!r}, which the trace does not list",
                                 file=_where(trace, traced), key="group")
            members = trace.groups[traced.group].ranks
            if traced.collective in ("send", "recv"):
                call = _p2p(trace, traced, counters)
            else:
                position = counters.get(traced.group, 0)
                counters[traced.group] = position + 1
                key = ("call", traced.group, position)
                call = ReplayCall(key, group_label(trace, traced.group), traced.collective,
                                  members, traced.size_bytes, algorithms[traced.collective],
                                  engine_dtype(traced), _root(trace, traced, members),
                                  traced=traced.collective)
            if call.key in first:
                _check_agree(trace, first[call.key], traced)
            else:
                first[call.key] = traced
            seen[call.key] = seen.get(call.key, 0) + 1
            out[(rank, traced.index)] = call
    calls_by_key = {call.key: call for call in out.values()}
    for key, count in seen.items():
        if count != len(calls_by_key[key].group):
            _missing_member(trace, first[key], calls_by_key[key])
    # An all-to-all with uneven splits gives each member its own buffer: the engine's is
    # even, so the call moves the largest member's buffer (it ends when that one has).
    largest: dict[Hashable, int] = {}
    for call in out.values():
        if call.collective == "alltoall":
            largest[call.key] = max(largest.get(call.key, 0), call.size)
    return {where: dataclasses.replace(call, size=largest[call.key])
            if call.key in largest else call for where, call in out.items()}


def _root(trace: Trace, traced: TracedCall, members: tuple[int, ...]) -> int:
    """A rooted call's root as an index into its group (0 where the trace gives none)."""
    if traced.root is None or traced.collective not in ROOTED:
        return 0
    if traced.root not in members:
        raise InputError(f"call {traced.index} ({traced.collective}) has root rank "
                         f"{traced.root}, which is not in its group {traced.group!r} "
                         f"{list(members)}", file=_where(trace, traced), key="root")
    return members.index(traced.root)


def _p2p(trace: Trace, traced: TracedCall, counters: dict[Hashable, int]) -> Call:
    """A send or receive as a two-rank call from sender to receiver."""
    if traced.peer is None:
        raise InputError(f"call {traced.index} ({traced.collective}) does not say its peer",
                         file=_where(trace, traced), key="peer")
    src, dst = ((traced.rank, traced.peer) if traced.collective == "send"
                else (traced.peer, traced.rank))
    position = counters.get(("p2p", src, dst), 0)
    counters[("p2p", src, dst)] = position + 1
    return ReplayCall(("p2p", src, dst, position), group_label(trace, traced.group), P2P[0],
                      (src, dst), traced.size_bytes, P2P[1], engine_dtype(traced),
                      traced="send")


def _check_agree(trace: Trace, one: TracedCall, other: TracedCall) -> None:
    """Two ranks' parts of one call must be the same collective of the same size."""
    if one.collective in ("send", "recv"):
        if one.size_bytes != other.size_bytes:
            raise InputError(
                f"rank {one.rank}'s call {one.index} and rank {other.rank}'s call "
                f"{other.index} are one message of {one.size_bytes} B and "
                f"{other.size_bytes} B", file=_where(trace, other), key="size")
        return
    uneven = one.collective == "alltoall"  # all-to-all(v): each member its own splits
    if one.collective != other.collective or (
            not uneven and one.size_bytes != other.size_bytes):
        raise InputError(
            f"call {other.index} is rank {other.rank}'s part of a call in group "
            f"{other.group!r} that rank {one.rank} issued as {one.collective} of "
            f"{one.size_bytes} B, but rank {other.rank} issued {other.collective} of "
            f"{other.size_bytes} B: the ranks' calls in this group do not match",
            file=_where(trace, other), key="collective")


def _missing_member(trace: Trace, traced: TracedCall, call: Call) -> None:
    """A call some member never issued: name who and which call."""
    if call.key[0] == "p2p":
        src, dst, position = call.key[1:]
        raise InputError(f"message {position} from rank {src} to rank {dst} has only one "
                         f"end in the trace", file=_where(trace, traced),
                         key=traced.collective)
    group, position = call.key[1], call.key[2]
    issued = {rank for rank in call.group
              if sum(c.group == group for c in trace.calls.get(rank, ())) > position}
    missing = [rank for rank in call.group if rank not in issued]
    raise InputError(f"call {position} of group {group!r} ({traced.collective}, "
                     f"{traced.size_bytes} B) is missing on rank(s) "
                     f"{', '.join(map(str, missing))}: every member must issue it",
                     file=_where(trace, traced), key="group")


def _stream_of(trace: Trace, item: TracedCall | ComputeSpan) -> str:
    if item.stream is not None:
        return f"stream {item.stream}"
    if isinstance(item, ComputeSpan):
        return "cpu"
    return f"{group_label(trace, item.group)} calls"


def _merged(spans: tuple[ComputeSpan, ...]) -> list[ComputeSpan]:
    """Compute spans with overlapping ones on the same stream merged (nested CPU ops)."""
    out: list[ComputeSpan] = []
    last: dict[int | None, int] = {}
    for span in sorted(spans, key=lambda s: (s.start_us, -s.duration_us)):
        index = last.get(span.stream)
        if index is not None:
            prev = out[index]
            prev_end = prev.start_us + prev.duration_us
            if span.start_us < prev_end:
                end = max(prev_end, span.start_us + span.duration_us)
                out[index] = ComputeSpan(prev.rank, prev.start_us, end - prev.start_us,
                                         prev.stream, prev.name)
                continue
        last[span.stream] = len(out)
        out.append(span)
    return out


def _host_spans(rank: int, compute: list[ComputeSpan], calls: tuple[TracedCall, ...]
                ) -> list[ComputeSpan]:
    """A CPU trace's stretches where the rank ran nothing the trace records (Python between
    ops, the data loader): its own work all the same, replayed as compute named ``host``."""
    spans = sorted((item.start_us, item.start_us + item.duration_us)
                   for item in (*compute, *calls))
    out = []
    busy_until = spans[0][1] if spans else 0.0
    for start, end in spans[1:]:
        if start > busy_until + TOUCH_US:
            out.append(ComputeSpan(rank, busy_until, start - busy_until, None, HOST))
        busy_until = max(busy_until, end)
    return out


def _rank_plan(trace: Trace, rank: int, calls: dict[tuple[int, int], Call]
               ) -> tuple[list[Task], list[Source]]:
    """One rank's tasks in measured order, each waiting for what it waited for."""
    items: list[tuple[float, float, int, TracedCall | ComputeSpan]] = []
    compute = _merged(trace.compute.get(rank, ()))
    traced_calls = trace.calls.get(rank, ())
    if all(item.stream is None for item in (*compute, *traced_calls)):
        compute += _host_spans(rank, compute, traced_calls)
    for span in compute:
        items.append((span.start_us, span.duration_us, 1, span))
    for traced in traced_calls:
        items.append((traced.start_us, traced.duration_us, 0, traced))
    # Measured order; a call before compute that starts with it (the rank reached it first).
    items.sort(key=lambda item: (item[0], item[2], item[1]))
    tasks: list[Task] = []
    sources: list[Source] = []
    ends: dict[str, list[float]] = {}    # per stream: measured ends of its tasks so far
    ids: dict[str, list[int]] = {}       # per stream: their task indices
    for start, duration, _, item in items:
        stream = _stream_of(trace, item)
        deps = []
        for other, other_ends in ends.items():
            if other == stream:
                continue
            # Streams run in order, so their ends are sorted: the last one done by `start`.
            done = bisect.bisect_right(other_ends, start + TOUCH_US)
            if done:
                deps.append(ids[other][done - 1])
        if isinstance(item, TracedCall):
            call = calls[(rank, item.index)]
            task = Task(f"{item.collective} {item.size_bytes} B", stream, tuple(deps),
                        call=call)
            name = task.name
        else:
            task = Task(item.name, stream, tuple(deps), duration * 1e-6, category="compute")
            name = item.name
        tasks.append(task)
        sources.append(Source(item if isinstance(item, TracedCall) else None, start,
                              duration, name))
        end = start + duration
        stream_ends = ends.setdefault(stream, [])
        # Keep the list sorted even if the trace overlaps two tasks of one stream.
        stream_ends.append(max(end, stream_ends[-1]) if stream_ends else end)
        ids.setdefault(stream, []).append(len(tasks) - 1)
    return tasks, sources


def _check_sizes(plan: ReplayPlan) -> None:
    """Every call's algorithm can serve its group's size (an InputError says which)."""
    unserved = unserved_call(plan.calls().values())
    if unserved is not None:
        call, exc = unserved
        raise InputError(f"{exc.message} (the {call.label} calls have "
                         f"{len(call.group)} ranks)", key=f"--param {call.collective}")
