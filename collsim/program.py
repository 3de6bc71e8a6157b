"""The per-rank program model: what an algorithm is written in, and both interpreters run.

A program is a generator that yields *steps*. A step is one operation or a tuple of
operations posted together; the rank resumes when all of them have completed. Buffers are
named ("buf", "in", "out", "tmp") and regions are counted in elements, so chunk
boundaries always fall on element boundaries.

Sends and receives meet (rendezvous): a message's bytes start moving once both the send and
its matching receive (same source, destination and tag, in posting order) have been posted,
as NCCL's receiver-side buffers and MPI's large-message protocol require. A send completes
when its bytes have arrived; a receive completes then too, after combining the data into
the local buffer with the collective's operator when ``reduce=True``. A program that sends
in one step and receives in a later one, while its peer does the same, deadlocks: post the
send and the receive in the same step. (Under a cost model with send buffers, NCCL's, the
timing engine starts a send that fits in its connection's buffer when it is posted and
completes it when its bytes have left: :mod:`collsim.engine.simulation`. Programs are
written, and checked, for the rendezvous.)

Within a step, local operations (copies, reductions) apply first, in the order listed; then
each send takes its region as it stands; received data lands after that. So a step may
pack a region with copies and send it, and a step that sends a region and receives into
it exchanges the old contents. (The timing engine starts a step's sends at once: a send in
the same step as a timed ``Reduce`` does not wait for it, so programs keep those apart.)

A step may also be :class:`Parallel`: sub-programs that run independently (each posting its
own steps, as NCCL's channels each run on their own SM); the rank resumes once all have
finished. Sub-programs of one rank must use disjoint tags (:meth:`collsim.tags.Tags.part`).
A send's ``lane`` says which of the job's lanes (groups of identical NCCL channels) carries it,
which matters only where the cost model caps a channel's bandwidth.

A job may declare helper ranks (:class:`HelperRank`), numbered after its ``nranks`` GPU ranks
and placed on topology endpoints that are not GPUs (an NVSwitch, a network switch): they run
programs like any rank, on scratch buffers, and combine what they receive at the switch's
reduce bandwidth. Only the GPU ranks' results are checked against the collective.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from collsim.params import DEFAULT_CHUNK_BYTES, CallParams


@dataclass(slots=True)
class Send:
    """Send ``count`` elements of ``buf`` starting at ``offset`` to rank ``peer``. An
    ``ordered`` send queues behind the ordered sends before it on its connection (same
    sender, receiver and lane): its bytes move once theirs have left, while their latency
    tails overlap its bytes, as NCCL's buffer slots do on one connection. A ``forwarded``
    send passes on, slice by slice in the same pass, what its rank's previous receive brought
    (NCCL's fused receive-and-send steps); a ``forwarding`` one is passed on so by its
    receiver: across the network they wait for fewer of the GPU's slice copies
    (:mod:`collsim.engine.staging`). A send that is one of ``parts`` equal parts of one of
    NCCL's steps (its lines, sent in turn so that the receiver reads them as they land)
    holds a ``parts``-th of the step's slot across the network and waits for the copies of
    the whole step. ``group`` names the thread group of its channel that
    sends it where the channel's threads are split (NCCL's tree: 0 reduces up, 1 broadcasts
    down), each under its own cap where the cost model has one; None: the whole channel."""

    peer: int
    tag: int
    offset: int
    count: int
    buf: str = "buf"
    lane: int = 0
    ordered: bool = False
    forwarded: bool = False
    forwarding: bool = False
    parts: int = 1
    group: int | None = None


@dataclass(slots=True)
class Recv:
    """Receive ``count`` elements from ``peer`` into ``buf[offset:]``; combine if ``reduce``."""

    peer: int
    tag: int
    offset: int
    count: int
    buf: str = "buf"
    reduce: bool = False
    lane: int = 0


@dataclass(slots=True)
class Reduce:
    """Local ``dst[dst_offset:] = op(dst, src[src_offset:])`` over ``count`` elements (gamma)."""

    dst_buf: str
    dst_offset: int
    src_buf: str
    src_offset: int
    count: int


@dataclass(slots=True)
class Copy:
    """Local ``dst[dst_offset:] = src[src_offset:]`` over ``count`` elements (free).

    With ``runs`` > 1 it copies that many regions of ``count`` elements, the i-th from
    ``src_offset + i·src_stride`` to ``dst_offset + i·dst_stride`` (strides may be
    negative): the packing of a Bruck round is one operation, not one per block.
    """

    dst_buf: str
    dst_offset: int
    src_buf: str
    src_offset: int
    count: int
    runs: int = 1
    dst_stride: int = 0
    src_stride: int = 0


@dataclass(slots=True)
class Pause:
    """Keep the rank busy for ``seconds`` without moving data: work of a kernel whose cost
    is a fixed time rather than bytes (NCCL's scatter over its NVLS heads, one peer after
    another). The data interpreter ignores it; in a step it runs beside the step's
    messages, so the step takes the longer of the two."""

    seconds: float


@dataclass(slots=True)
class Parallel:
    """Sub-programs run side by side by one rank; the step completes when all have finished.

    Each is a program of its own (a generator of steps, possibly with further ``Parallel``
    steps) and posts independently of its siblings; a ``Parallel`` is a step by itself,
    never part of a tuple of operations.
    """

    programs: Sequence[Iterator]


Op = Send | Recv | Reduce | Copy | Pause
Step = Op | tuple[Op, ...] | list[Op] | Parallel
Program = Iterator[Step]


@dataclass(frozen=True)
class HelperRank:
    """A rank placed on a topology endpoint that is not a GPU (``endpoint``: a name the
    topology lists, e.g. ``n0.nvswitch`` or ``leaf0``), combining received data at
    ``reduce_bandwidth`` bytes/s (free by default) in ``scratch`` elements of each of its
    buffers ``buf`` and ``tmp`` (the job's count when 0)."""

    endpoint: str
    reduce_bandwidth: float = math.inf
    scratch: int = 0

    def __post_init__(self) -> None:
        if not self.reduce_bandwidth > 0 or self.scratch < 0:
            raise ValueError(f"helper rank on {self.endpoint!r}: reduce_bandwidth must be "
                             f"positive and scratch not negative, got "
                             f"{self.reduce_bandwidth!r} and {self.scratch!r}")


@dataclass(frozen=True)
class Job:
    """One collective call as every rank's program sees it.

    ``count`` is the size in elements (docs/design.md#collectives: the per-rank buffer for
    broadcast, reduce, allreduce, alltoall, scan; the full gathered buffer for gather,
    allgather, scatter, reducescatter). ``params`` carries algorithm parameters such as
    ``chunk_size`` (bytes) already validated. ``ring`` is the topology-aware ring order of
    the ranks and ``nodes`` the node index of each rank, both set by the simulator from the
    topology and placement (empty means 0..p-1 and one node).
    """

    collective: str
    nranks: int
    count: int
    itemsize: int = 4
    root: int = 0
    params: CallParams = field(default_factory=dict)
    ring: tuple[int, ...] = ()
    nodes: tuple[int, ...] = ()
    lanes: tuple[float, ...] = ()
    helpers: tuple[HelperRank, ...] = ()
    layout: Any = None

    @property
    def all_ranks(self) -> int:
        """GPU ranks and helper ranks together: the ranks a program may name as peers."""
        return self.nranks + len(self.helpers)

    def ring_order(self) -> tuple[int, ...]:
        """The ranks in ring order: topology-aware when the simulator set it, else 0..p-1."""
        return self.ring or tuple(range(self.nranks))

    @cached_property
    def ring_positions(self) -> dict[int, int]:
        """Each rank's index in :meth:`ring_order` (every rank's program asks for its own,
        so a scan of the order each time would cost p² at p ranks)."""
        return {rank: index for index, rank in enumerate(self.ring_order())}

    def lane_weight(self, lane: int) -> float:
        """How many identical channels lane ``lane`` stands for (1 for a job without lanes):
        its share of a GPU's reduce bandwidth and its channels' caps and buffers scale by it."""
        lanes = self.lanes
        return lanes[lane] if 0 <= lane < len(lanes) else 1.0

    def node_of(self, rank: int) -> int:
        """The node (server) that ``rank`` runs on; 0 for every rank when unknown."""
        return self.nodes[rank] if self.nodes else 0

    def chunk_elements(self, default_bytes: int = DEFAULT_CHUNK_BYTES) -> int:
        """The pipelining chunk in elements (at least one), from the ``chunk_size`` parameter."""
        chunk_bytes = int(self.params.get("chunk_size", default_bytes))
        return max(1, chunk_bytes // self.itemsize)


ProgramFactory = Callable[[int, Job], Program]


def block(count: int, parts: int, index: int) -> tuple[int, int]:
    """(offset, length) of block ``index`` when ``count`` elements are cut into ``parts`` blocks.

    Blocks differ by at most one element; the first ``count % parts`` blocks are the longer.
    """
    base, extra = divmod(count, parts)
    offset = index * base + min(index, extra)
    return offset, base + (1 if index < extra else 0)


def span(count: int, parts: int, first: int, number: int) -> tuple[int, int]:
    """(offset, length) of ``number`` consecutive blocks starting at block ``first``."""
    start, _ = block(count, parts, first)
    end = block(count, parts, first + number - 1)
    return start, end[0] + end[1] - start
