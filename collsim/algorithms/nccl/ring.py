"""NCCL's ring (``Ring``): ``channels`` rings side by side, each over its own piece of the
buffer and in its own ring order (:mod:`collsim.nccl.layout`: on a cluster each crosses
nodes through its own NIC), identical channels merged into lanes.

The buffer is cut into one contiguous piece per channel (on element boundaries; a piece may
be empty); allgather and reduce-scatter cut every rank's block that way instead, as NCCL
does. Each channel runs the textbook ring over its piece in loops, as NCCL's ``runRing``
does: a loop takes ``chunk_size`` per rank of the channel's piece (of each block's piece for
allgather and reduce-scatter) and is a whole ring of 2(p-1) steps (allreduce) or p-1, so a
call pays its step latency once per loop and ring step (but on a network hop whose receiver
passes the chunk on, where its slices after the first hide it: docs/nccl.md#algorithms-staging).
``chunk_size`` is the protocol's ring chunk under NCCL's cost models
(:func:`~collsim.algorithms.nccl.channels.ring_chunk_bytes`, set by
:func:`collsim.calls.plan.plan`); without it the ring runs one loop (the canonical kinds).
Broadcast and reduce are NCCL's ring pipelines from and to the root
(``PipelineFrom``/``PipelineTo``): chunks of ``chunk_size`` per channel along the ring from
the root, or along it to the root; under NCCL's cost models the protocol's step (LL 32 KiB,
LL128 576,000 B, Simple 512 KiB), else 512 KiB. With LL and LL128 (a ``window``) each step
moves in ``units`` that a rank passes on as they land, across nodes too once the sender
has gathered the whole step (docs/nccl.md#algorithms-ring, "The chain's granularity").

With one channel, or on one node where every channel is the same ring and all merge into
one lane, one loop is exactly the textbook ring on ``job.ring_order()`` (same transfers, same
times), so the closed forms below hold on the canonical kinds for any channel count (and
with L loops: L times the latency terms).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import partial
from itertools import chain

import numpy as np

from collsim.algorithms.chain import CHAIN_TEXT, chain_steps, window_pipeline_time
from collsim.algorithms.chunks import chunk_region
from collsim.algorithms.nccl.channels import (
    PIPELINED,
    SIMPLE_STEP_BYTES,
    lane_region,
    lane_tags,
    lanes_and_layout,
    pipeline_units,
    prepare,
    ring_chunk_bytes,
    ring_loops,
    side_by_side,
    simple_buffer,
)
from collsim.algorithms.nccl.switches import chunk_cap
from collsim.algorithms.nccl.tree import relay_steps
from collsim.algorithms.registry import Cost, register
from collsim.algorithms.ring import (
    RING_SOURCE,
    block_lengths,
    ring_allgather_cost,
    ring_allgather_steps,
    ring_allreduce_cost,
    ring_exchanges,
    ring_reducescatter_cost,
    ring_reducescatter_steps,
    shift_invariant,
)
from collsim.callspec import CallSpec
from collsim.engine.lockstep import Exchange
from collsim.nccl.constants import NCCL_STEPS
from collsim.nccl.layout import Lanes, Layout
from collsim.params import CallParams
from collsim.program import Job, Program, block, span
from collsim.tags import Tags

NCCL_SOURCE = ("NCCL src/device/all_reduce.h runRing, src/graph/connect.cc "
               "(docs/nccl.md#algorithms-ring)")
PARAMS = ("channels", "chunk_size")


def _ring_lanes(layout: Layout) -> Lanes:
    return layout.ring_lanes


PREPARE = prepare(_ring_lanes)


def _chunk(job: Job) -> int | None:
    """The loop chunk in elements per channel and rank (``chunk_size``), or None: one loop."""
    return job.chunk_elements() if "chunk_size" in job.params else None


def _loop_tags(tags: Tags, loop: int, loops: int) -> Tags:
    return tags if loops == 1 else tags.part(loop, loops)


def _allreduce_lane(rank: int, job: Job, layout: Layout, lanes: Lanes, channels: int,
                    lane: int) -> Program:
    ring = layout.channels[lanes.channels[lane][0]].ring
    offset, count = lane_region(job, channels, lanes, lane)
    p, weight = job.nranks, lanes.weights[lane]
    loops = ring_loops(count, weight, p, _chunk(job))
    per_loop = -(-count // loops) if loops == 1 else weight * p * _chunk(job)
    for loop in range(loops):
        start = offset + loop * per_loop
        length = min(per_loop, offset + count - start)
        if start == 0 and length == job.count:
            blocks = None  # the whole buffer: the textbook ring's own blocks
        else:
            def blocks(b: int, start: int = start, length: int = length) -> tuple[int, int]:
                inner, piece = block(length, p, b)
                return start + inner, piece
        tags = _loop_tags(lane_tags(lanes, lane), loop, loops)
        yield from ring_reducescatter_steps(rank, job, tags.phase(0), ring, blocks, lane,
                                            closes=False)
        yield from ring_allgather_steps(rank, job, tags.phase(1), ring, blocks, lane,
                                        opens=False)


def _one_lane(job: Job) -> tuple[tuple[int, ...], int, Lanes] | None:
    """(ring, channels, lanes) when every channel merged into one lane, else None: the
    lockstep forms below cover one lane (several lanes share links)."""
    channels, layout, lanes = _lanes(job)
    if len(lanes.channels) != 1:
        return None
    return layout.channels[lanes.channels[0][0]].ring, channels, lanes


def _allreduce_exchanges(job: Job) -> Iterator[Exchange] | None:
    """The one-lane ring allreduce as whole steps (:mod:`collsim.engine.lockstep`), loop
    after loop."""
    one = _one_lane(job)
    if one is None:
        return None
    ring, channels, lanes = one
    return _lane_exchanges(job, ring, channels, lanes, 0)


def _lane_exchanges(job: Job, ring: Sequence[int], channels: int, lanes: Lanes,
                    lane: int) -> Iterator[Exchange]:
    """Lane ``lane``'s ring allreduce as whole steps of its ring, loop after loop."""
    p, weight = job.nranks, lanes.weights[lane]
    _, count = lane_region(job, channels, lanes, lane)
    loops = ring_loops(count, weight, p, _chunk(job))
    if loops == 1:
        return ring_exchanges(ring, block_lengths(count, p), p - 1, p - 1, lane)
    per_loop = weight * p * _chunk(job)
    return chain.from_iterable(
        ring_exchanges(ring, block_lengths(min(per_loop, count - loop * per_loop), p),
                       p - 1, p - 1, lane) for loop in range(loops))


def _allreduce_lanes(job: Job) -> tuple[list[tuple[int, ...]], list[Iterator[Exchange]]] | None:
    """Every lane's ring and its allreduce as whole steps of that ring, for the shared-lanes
    path (:mod:`collsim.engine.lanes`); None with one lane (the lockstep path's)."""
    channels, layout, lanes = _lanes(job)
    if len(lanes.channels) < 2:
        return None
    rings = [layout.channels[members[0]].ring for members in lanes.channels]
    return rings, [_lane_exchanges(job, ring, channels, lanes, lane)
                   for lane, ring in enumerate(rings)]


def _rings_shift(job: Job, shift: int) -> str | None:
    """Why some lane's ring is not the same ring after the shift (None: all are)."""
    _, layout, lanes = _lanes(job)
    for members in lanes.channels:
        if not shift_invariant(layout.channels[members[0]].ring, shift):
            return "a channel's ring does not map onto itself (snaked nodes need an even " \
                   "shift of nodes)"
    return None


def _allreduce_symmetric(job: Job, shift: int) -> str | None:
    """The registry's ``symmetric``: every lane's ring maps onto itself and every loop of
    every lane cuts into p equal blocks (a loop but the last takes a multiple of p)."""
    channels, _, lanes = _lanes(job)
    for lane in range(len(lanes.channels)):
        if lane_region(job, channels, lanes, lane)[1] % job.nranks:
            return "a channel's piece does not cut into p equal blocks"
    return _rings_shift(job, shift)


def _blockwise_symmetric(job: Job, shift: int) -> str | None:
    """The registry's ``symmetric`` for allgather and reduce-scatter: every lane's ring
    maps onto itself and the buffer cuts into p equal blocks (each then cut alike)."""
    if job.count % job.nranks:
        return "blocks of uneven length"
    return _rings_shift(job, shift)


def _loop_lengths(lengths: np.ndarray, per_block: int, loop: int) -> np.ndarray:
    """Each block's part in loop ``loop`` when a loop takes ``per_block`` of every block."""
    return np.clip(lengths - loop * per_block, 0, per_block)


def _blockwise_exchanges(job: Job, reduce: bool) -> Iterator[Exchange] | None:
    """The one-lane ring allgather or reduce-scatter as whole steps, loop after loop."""
    one = _one_lane(job)
    if one is None:
        return None
    ring, channels, lanes = one
    if lanes.weights[0] != channels:
        return None
    p = job.nranks
    steps = (p - 1, 0) if reduce else (0, p - 1)
    lengths = block_lengths(job.count, p)
    chunk = _chunk(job)
    loops = ring_loops(int(lengths.max(initial=0)) * p, channels, p, chunk)
    if loops == 1:
        return ring_exchanges(ring, lengths, *steps)
    per_block = channels * chunk
    return chain.from_iterable(
        ring_exchanges(ring, _loop_lengths(lengths, per_block, loop), *steps)
        for loop in range(loops))


def _blockwise_lane(rank: int, job: Job, layout: Layout, lanes: Lanes, channels: int,
                    lane: int, reduce: bool) -> Program:
    """The lane's piece of every rank's block, for allgather and reduce-scatter, loop after
    loop: a loop takes ``chunk_size`` per channel of every block's piece."""
    ring = layout.channels[lanes.channels[lane][0]].ring
    p, first, weight = job.nranks, lanes.first_block(lane), lanes.weights[lane]
    chunk = _chunk(job)
    widest = span(block(job.count, p, 0)[1], channels, first, weight)[1]
    loops = ring_loops(widest * p, weight, p, chunk)
    steps = ring_reducescatter_steps if reduce else ring_allgather_steps
    for loop in range(loops):
        if weight == channels and loops == 1:
            blocks = None
        else:
            def blocks(b: int, loop: int = loop) -> tuple[int, int]:
                start, length = block(job.count, p, b)
                inner, piece = span(length, channels, first, weight)
                if loops == 1:
                    return start + inner, piece
                taken = loop * weight * chunk
                return start + inner + min(taken, piece), \
                    max(0, min(weight * chunk, piece - taken))
        yield from steps(rank, job, _loop_tags(lane_tags(lanes, lane), loop, loops), ring,
                         blocks, lane)


def _loops(c: Cost) -> int:
    """NCCL's ring loops for the closed forms: ⌈n / (channels·p·chunk_size)⌉, 1 without
    ``chunk_size``."""
    if "chunk_size" not in c.params or c.p < 2:
        return 1
    chunk = int(c.params["chunk_size"]) * int(c.params.get("channels", 1)) * c.p
    return max(1, -(-int(c.n) // chunk))


def _looped(form, steps: int):  # noqa: ANN001, ANN202
    """``form`` with its ``steps``·(p-1) latencies charged once per loop."""
    def cost(c: Cost) -> float:
        return form(c) + (_loops(c) - 1) * steps * (c.p - 1) * c.alpha
    cost.__doc__ = form.__doc__
    return cost


LOOP_TEXT = "L = ⌈n/(channels·p·chunk)⌉ loops (NCCL's ring loop; L = 1 without chunk_size): "


def _lanes(job: Job) -> tuple[int, Layout, Lanes]:
    return lanes_and_layout(job, _ring_lanes)


def _protocol_params(call: CallSpec, gpus: Sequence[int], protocol: str,
                     channels: int | str) -> CallParams:
    """NCCL's ring runs loops of one chunk per rank and channel, the chunk set by the
    protocol (ring_chunk_bytes: LL's is 32 KiB); a caller's cost model has no protocol: one
    loop. Its broadcast and reduce pipeline the protocol's step. Simple synchronises each
    step (its latency paid in series, as in the ring's loops); LL and LL128 flag every line,
    so NCCL_STEPS steps are in flight on each connection, each forwarded in units
    (pipeline_units), across nodes once the sender has all of the step. A caller's cost
    model has no protocol: 512 KiB chunks, one at a time."""
    implied: CallParams = {"chunk_size": ring_chunk_bytes(call.collective, protocol,
                                                          simple_buffer(call.topology))}
    if call.collective in PIPELINED and pipeline_units(protocol) > 1:
        implied["window"] = NCCL_STEPS
        implied["units"] = pipeline_units(protocol)
    return implied


@register(
    "allreduce", "ring",
    formula=LOOP_TEXT + "2(p-1)·L·α + 2(p-1)/p·n·β + (p-1)/p·n·γ (any number of channels)",
    cost=_looped(ring_allreduce_cost, 2),
    source=f"{RING_SOURCE}; {NCCL_SOURCE}",
    summary="NCCL's ring: per channel, ring reduce-scatter then ring allgather of its piece",
    params=PARAMS,
    prepare=PREPARE,
    protocol_params=_protocol_params,
    lockstep=_allreduce_exchanges,
    lanes=_allreduce_lanes,
    symmetric=_allreduce_symmetric,
)
def nccl_ring_allreduce(rank: int, job: Job) -> Program:
    """Each lane reduce-scatters, then allgathers, its piece around its ring."""
    channels, layout, lanes = _lanes(job)
    return side_by_side([_allreduce_lane(rank, job, layout, lanes, channels, lane)
                         for lane in range(len(lanes.channels))])


@register(
    "allgather", "ring",
    formula=LOOP_TEXT + "(p-1)·L·α + (p-1)/p·n·β (any number of channels)",
    cost=_looped(ring_allgather_cost, 1),
    source=f"{RING_SOURCE}; {NCCL_SOURCE}",
    summary="NCCL's ring: per channel, its piece of every block travels p-1 hops",
    params=PARAMS,
    prepare=PREPARE,
    protocol_params=_protocol_params,
    lockstep=partial(_blockwise_exchanges, reduce=False),
    symmetric=_blockwise_symmetric,
)
def nccl_ring_allgather(rank: int, job: Job) -> Program:
    """Each lane passes its piece of every block around its ring."""
    channels, layout, lanes = _lanes(job)
    return side_by_side([_blockwise_lane(rank, job, layout, lanes, channels, lane, False)
                         for lane in range(len(lanes.channels))])


@register(
    "reducescatter", "ring",
    formula=LOOP_TEXT + "(p-1)·L·α + (p-1)/p·n·(β + γ) (any number of channels)",
    cost=_looped(ring_reducescatter_cost, 1),
    source=f"{RING_SOURCE}; {NCCL_SOURCE}",
    summary="NCCL's ring: per channel, its piece of every block is combined p-1 hops",
    params=PARAMS,
    prepare=PREPARE,
    protocol_params=_protocol_params,
    lockstep=partial(_blockwise_exchanges, reduce=True),
    symmetric=_blockwise_symmetric,
)
def nccl_ring_reducescatter(rank: int, job: Job) -> Program:
    """Each lane combines its piece of every block around its ring."""
    channels, layout, lanes = _lanes(job)
    return side_by_side([_blockwise_lane(rank, job, layout, lanes, channels, lane, True)
                         for lane in range(len(lanes.channels))])


def _pipeline_lane(rank: int, job: Job, layout: Layout, lanes: Lanes, channels: int,
                   lane: int, to_root: bool) -> Program:
    """The lane's piece pipelined along its ring from the root (or to it), in chunks of
    ``chunk_size`` per channel; with a window, in units a rank passes on as they land, a
    rank that sends across nodes gathering each chunk first (``stream``)."""
    ring = layout.channels[lanes.channels[lane][0]].ring
    start = ring.index(job.root)
    order = ring[start:] + ring[:start]
    if to_root:
        order = order[1:] + order[:1]
    offset, count = lane_region(job, channels, lanes, lane)
    per_chunk = lanes.weights[lane] * job.chunk_elements(SIMPLE_STEP_BYTES)
    chunks = max(1, -(-count // per_chunk))
    window = int(job.params.get("window", 1))
    if window <= 1:
        yield from chain_steps(rank, job, order, to_root, lane_tags(lanes, lane),
                               (offset, count), chunks, lane)
        return
    # At most chunk_cap(p) chunks: the fill of p-1 hops grows by at most 1/64 of streaming.
    chunks = min(chunks, chunk_cap(len(order)))
    regions = [chunk_region(offset, count, chunks, i) for i in range(chunks)]
    pos, tags, node = order.index(rank), lane_tags(lanes, lane), job.node_of(rank)
    receive = [(order[pos - 1], tags, to_root)] if pos > 0 else []
    send = [(order[pos + 1], tags, pos + 2 < len(order))] if pos + 1 < len(order) else []
    yield from relay_steps(regions, receive, send, lane, window,
                           units=int(job.params.get("units", 1)),
                           whole=lambda peer: job.node_of(peer) != node, stream=True)


def _pipeline_cost(c: Cost, combine: bool) -> float:
    """(p-2+k)·(α + n/k·(β + γ)) with k = ⌈n / (channels · chunk)⌉ (NCCL's Simple step
    of 512 KiB by default), γ only if ``combine``; with a window of w > 1 chunks in flight
    per hop, k capped (:func:`~collsim.algorithms.nccl.switches.chunk_cap`) and the chunks
    timed by
    :func:`~collsim.algorithms.chain.window_pipeline_time`."""
    if c.p == 1:
        return 0.0
    channels = int(c.params.get("channels", 1))
    chunk = float(c.params.get("chunk_size", SIMPLE_STEP_BYTES))
    k = max(1, -(-int(c.n) // int(channels * chunk)))
    window = int(c.params.get("window", 1))
    if window > 1:  # on one node every hop moves units
        k = min(k, chunk_cap(c.p)) * int(c.params.get("units", 1))
        return window_pipeline_time(c.p - 1, k, c.alpha, c.n / k * c.beta,
                                    c.n / k * c.gamma * combine, window)
    return (c.p - 2 + k) * (c.alpha + c.n / k * (c.beta + c.gamma * combine))


PIPELINE_TEXT = CHAIN_TEXT.replace("⌈n/chunk⌉", "⌈n/(channels·chunk)⌉")
WINDOW_TEXT = ("; window w > 1: (p-1)·h + (k-1)·max(n/k·β, h/w), h = α + n/k·β, "
               "k ≤ 64(p-1)")


@register(
    "broadcast", "ring",
    formula=PIPELINE_TEXT + "(p-2+k)·(α + n/k·β)" + WINDOW_TEXT,
    cost=lambda c: _pipeline_cost(c, False),
    source="NCCL src/device/broadcast.h (ring pipeline from the root, "
           f"docs/nccl.md#algorithms-ring); {RING_SOURCE}",
    summary="NCCL's ring: per channel, its piece pipelined in chunks along the ring from the "
            "root",
    params=("root", "channels", "chunk_size", "window", "units"),
    prepare=PREPARE,
    protocol_params=_protocol_params,
)
def nccl_ring_broadcast(rank: int, job: Job) -> Program:
    """Each lane pipelines its piece from the root around its ring."""
    channels, layout, lanes = _lanes(job)
    return side_by_side([_pipeline_lane(rank, job, layout, lanes, channels, lane, False)
                         for lane in range(len(lanes.channels))])


@register(
    "reduce", "ring",
    formula=PIPELINE_TEXT + "(p-2+k)·(α + n/k·(β + γ))" + WINDOW_TEXT.replace(
        "max(n/k·β, h/w), h = α + n/k·β", "max(n/k·β, n/k·γ, h/w), h = α + n/k·(β + γ)"),
    cost=lambda c: _pipeline_cost(c, True),
    source="NCCL src/device/reduce.h (ring pipeline to the root, "
           f"docs/nccl.md#algorithms-ring); {RING_SOURCE}",
    summary="NCCL's ring: per channel, its piece combined chunk by chunk along the ring to "
            "the root",
    params=("root", "channels", "chunk_size", "window", "units"),
    prepare=PREPARE,
    protocol_params=_protocol_params,
)
def nccl_ring_reduce(rank: int, job: Job) -> Program:
    """Each lane pipelines its piece around its ring, combining, to the root."""
    channels, layout, lanes = _lanes(job)
    return side_by_side([_pipeline_lane(rank, job, layout, lanes, channels, lane, True)
                         for lane in range(len(lanes.channels))])
