"""NCCL's tree allreduce (``Tree``): per channel, a chain inside each node and a double
binary tree across nodes (:mod:`collsim.nccl.layout`), reducing up and broadcasting down
at the same time, pipelined in chunks (docs/nccl.md#algorithms-tree,
``runTreeSplit``).

Every rank but the root runs two sub-programs side by side, as NCCL's two thread groups:
*up* receives chunk i from its children (combining) while it passes chunk i-1 to its
parent, and *down* receives chunk i from its parent while it passes chunk i-1 to its
children. The root combines chunk i from its children while it sends chunk i-1 back down.
The two groups' sends name their group (``Send.group``), so a cost model that caps a
thread group charges each its own cap (docs/nccl.md#tree-split).
Chunks are ``chunk_size`` bytes per channel: NCCL's Tree chunk with the Simple protocol,
512 KiB, by default (docs/nccl.md#algorithms-chunks). Given ``units`` (and ``window``, chunks
in flight per connection), sends are ordered and a chunk is forwarded in units inside a node
and whole across nodes (:func:`_relay_units`); under LL and LL128 a ``window`` makes the plan
set NCCL's chunk for the call and one unit per warp.

**Chunk cap.** A lane runs at most ``K = ⌈(D-1)·16⌉`` chunks, D = 2 × the depth of its
tree in hops (a chunk goes up and back down); beyond that the chunks are made larger. For a
pipeline whose chunk time is set by its slowest hop, K chunks instead of k > K take
``(D-1)·s·(1/K - 1/k)`` longer to fill (s: the streaming time of the lane's bytes), at most
``(D-1)/K ≤ 1/16`` of the streaming time, and pay ``(k-K)`` fewer per-chunk latencies.
So the capped time is at most 1/16 (6.25%) above the uncapped simulation, minus the
latencies of the chunks merged.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from collsim.algorithms.chunks import chunk_region
from collsim.algorithms.nccl.channels import (
    SIMPLE_STEP_BYTES,
    lane_region,
    lane_tags,
    lanes_and_layout,
    pipeline_units,
    prepare,
    side_by_side,
    simple_buffer,
    tree_chunk_bytes,
)
from collsim.algorithms.registry import Cost, register
from collsim.callspec import CallSpec, gpus_per_node
from collsim.nccl.constants import BUFFER_BYTES, NCCL_STEPS
from collsim.nccl.layout import Lanes, Layout
from collsim.params import CallParams
from collsim.program import Job, Op, Parallel, Program, Recv, Send

MAX_FILL_ERROR = 1 / 16  # the chunk cap keeps the pipeline's extra fill under this share
# Relay slots run side by side. NCCL keeps NCCL_STEPS (8) per peer, but slots side by side
# share a link max-min fairly instead of sending in order, so the first chunk of a window
# arrives only after the whole window's bytes: the fill grows to (D-1)·WINDOW chunk times,
# and the shared links multiply the fabric's settles. One relay suffices: under NCCL's
# costs sends are buffered, so a relay passes a chunk on while it receives the next and a
# hop's latency is paid once (docs/nccl.md, "Buffer slots per connection").
WINDOW = 1
NCCL_WINDOW = NCCL_STEPS  # the window NCCL itself keeps, for tests and benchmarks
# The thread groups of a channel that runTreeSplit gives the reduce up and the broadcast down
# (``Send.group``); where the cost model caps a group (``ProtocolCosts.group_cap``), each
# moves at most that, even while the other is idle.
UP_GROUP, DOWN_GROUP = 0, 1


def _tree_lanes(layout: Layout) -> Lanes:
    return layout.tree_lanes


def chunk_cap(depth: int) -> int:
    """Chunks a lane whose tree is ``depth`` hops deep runs at most (see the module
    docstring)."""
    return max(1, math.ceil((2 * depth - 1) / MAX_FILL_ERROR))


def lane_chunks(count: int, weight: int, chunk_elements: int, depth: int) -> int:
    """Chunks of a lane of ``weight`` channels moving ``count`` elements: one per
    ``chunk_elements`` of each channel's piece, at least one, at most the cap."""
    return min(max(1, -(-count // (weight * chunk_elements))), chunk_cap(depth))


def _lane(rank: int, job: Job, layout: Layout, lanes: Lanes, channels: int, lane: int
          ) -> Program:
    channel = lanes.channels[lane][0]
    parent, children = layout.tree_role(channel, rank)
    offset, count = lane_region(job, channels, lanes, lane)
    chunks = lane_chunks(count, lanes.weights[lane], job.chunk_elements(SIMPLE_STEP_BYTES),
                         layout.tree_depth(channel))
    regions = [chunk_region(offset, count, chunks, i) for i in range(chunks)]
    tags = lane_tags(lanes, lane)
    up, down = tags.phase(0), tags.phase(1)
    window, units = int(job.params.get("window", WINDOW)), job.params.get("units")
    node = job.node_of(rank)
    pipelining = {"window": window, "units": int(units),
                  "whole": lambda peer: job.node_of(peer) != node} if units is not None \
        else {"window": window}
    if parent is None:  # the root turns each chunk around
        yield from relay_steps(regions, [(child, up, True) for child in children],
                               [(child, down) for child in children], lane, **pipelining)
        return
    # NCCL's runTreeSplit: the reduce up and the broadcast down run on thread groups of
    # their own (0 and 1); the root turns chunks around with all the channel's threads.
    yield Parallel([
        relay_steps(regions, [(child, up, True) for child in children], [(parent, up)], lane,
                    group=UP_GROUP, **pipelining),
        relay_steps(regions, [(parent, down, False)], [(child, down) for child in children], lane,
                    group=DOWN_GROUP, **pipelining),
    ])


def relay_steps(regions: list[tuple[int, int]], receive: list, send: list, lane: int,
                window: int = 1, chunks: range | None = None, units: int = 1,
                whole: Callable[[int], bool] | None = None, stream: bool = False,
                group: int | None = None) -> Program:
    """Step i receives chunk i from each of ``receive`` ((peer, tags, combine)) while it
    sends chunk i-1 to each of ``send`` ((peer, tags), or (peer, tags, whether the peer
    passes the chunk on) for the sends' ``forwarding`` flag); empty steps are skipped. A
    relay that receives passes its chunks on (its sends are ``forwarded``). ``chunks``
    names the chunks this relay carries (default: all of ``regions``), for a pipeline whose
    chunks are dealt between several trees.

    With ``window`` > 1 the chunks are dealt to that many slots run side by side (chunk i
    to slot i mod ``window``), each relaying its own chunks as above: up to ``window``
    chunks are in flight on each connection, as NCCL's ``NCCL_STEPS`` buffers per peer,
    so a hop's latency is paid once per window rather than once per chunk; but the slots'
    sends share links fairly rather than going in order (see :data:`WINDOW`).

    With ``whole`` given (NCCL's LL and LL128), sends are ordered on their connection, a
    chunk goes to a peer in ``units`` messages unless ``whole(peer)`` (the network's whole
    steps), and the slots deal units, or chunks where any of the relay's hops is whole
    (:func:`_relay_units`). With ``stream`` as well, a whole step is whole only where it is
    sent: a relay gathers a chunk before it sends it to a ``whole`` peer, but every chunk
    travels as ``units`` parts of its step, in turn, so its receiver passes each on as it
    lands (NCCL's proxy posts a step once the GPU has written all of it; the receiving GPU
    reads each line as its flag lands). ``group``: the thread group of the channel that
    sends (``Send.group``; None: the whole channel)."""
    mine = range(len(regions)) if chunks is None else chunks
    if whole is not None:
        yield from _relay_units(mine, regions, receive, send, lane, window, units, whole,
                                stream, group)
        return
    if window <= 1 or len(mine) <= 1:
        yield from _relay(mine, regions, receive, send, lane, group)
        return
    yield Parallel([_relay(mine[slot::window], regions, receive, send, lane, group)
                    for slot in range(min(window, len(mine)))])


def _fused(receive: list, send: list) -> tuple[bool, list[tuple]]:
    """Whether a relay's sends pass on what it receives (NCCL's fused receive-and-send: no
    copy of their own across the network, :mod:`collsim.engine.staging`), and its sends as
    (peer, tags, whether that peer passes the chunk on: a third element of ``send``'s
    entries, False when absent)."""
    return bool(receive), [(entry[0], entry[1], bool(entry[2]) if len(entry) > 2 else False)
                           for entry in send]


def _relay(chunks: range, regions: list[tuple[int, int]], receive: list, send: list,
           lane: int, group: int | None = None) -> Program:
    """:func:`relay_steps` over the chunks numbered ``chunks``, one after another."""
    order = list(chunks)
    fused, targets = _fused(receive, send)
    for j in range(len(order) + 1):
        ops: list[Op] = []
        if j < len(order):
            i = order[j]
            ops += [Recv(peer, tags[i], *regions[i], reduce=combine, lane=lane)
                    for peer, tags, combine in receive]
        if j >= 1:
            i = order[j - 1]
            ops += [Send(peer, tags[i], *regions[i], lane=lane, forwarded=fused,
                         forwarding=passes_on, group=group) for peer, tags, passes_on in targets]
        if ops:
            yield tuple(ops)


def _relay_units(chunks: range, regions: list[tuple[int, int]], receive: list, send: list,
                 lane: int, window: int, units: int, whole: Callable[[int], bool],
                 stream: bool = False, group: int | None = None) -> Program:
    """Relay ``chunks`` in ordered messages: unit u of chunk i is tag index ``i·units + u``,
    a whole chunk has its first unit's; the pieces (units, or chunks where a hop is whole:
    with ``stream``, a hop it sends on) are dealt to ``window`` slots, each relaying its
    pieces in turn. With ``stream`` every message is a unit, one of its step's ``units``
    parts."""
    peers = [peer for peer, *_ in send] if stream else \
        [peer for peer, *_ in receive] + [peer for peer, *_ in send]
    fused, targets = _fused(receive, send)
    coarse = any(whole(peer) for peer in peers)
    parts = {i: [chunk_region(*regions[i], units, u) for u in range(units)] for i in chunks}
    pieces = [(i, None) for i in chunks] if coarse else \
        [(i, u) for i in chunks for u in range(units)]

    def messages(piece: tuple[int, int | None], peer: int) -> list[tuple[int, int, int]]:
        """(tag index, offset, count) of the messages carrying ``piece`` to or from ``peer``."""
        i, u = piece
        if u is not None:
            return [(i * units + u, *parts[i][u])]
        if whole(peer) and not stream:
            return [(i * units, *regions[i])]
        return [(i * units + v, *parts[i][v]) for v in range(units)]

    def step_parts(piece: tuple[int, int | None], peer: int) -> int:
        """How many parts of its step each message carrying ``piece`` to ``peer`` is."""
        return 1 if piece[1] is None and whole(peer) and not stream else units

    def slot(mine: list[tuple[int, int | None]]) -> Program:
        for j in range(len(mine) + 1):
            ops: list[Op] = []
            if j < len(mine):
                ops += [Recv(peer, tags[t], offset, count, reduce=combine, lane=lane)
                        for peer, tags, combine in receive
                        for t, offset, count in messages(mine[j], peer)]
            if j >= 1:
                ops += [Send(peer, tags[t], offset, count, lane=lane, ordered=True,
                             forwarded=fused, forwarding=passes_on,
                             parts=step_parts(mine[j - 1], peer), group=group)
                        for peer, tags, passes_on in targets
                        for t, offset, count in messages(mine[j - 1], peer)]
            if ops:
                yield tuple(ops)

    slots = [slot(pieces[k::window]) for k in range(min(max(1, window), len(pieces)))]
    if len(slots) == 1:
        yield from slots[0]
    elif slots:
        yield Parallel(slots)


def _cost(c: Cost) -> float:
    """A model on one node (a chain of p ranks, every channel in one lane), k chunks of
    c = n/k: the first chunk goes 2(p-1) hops, combined on the p-1 up, and each further
    chunk adds a hop time; a rank's port carries a chunk up and one down in most of them,
    so the bytes cost (p + k - 2)·c·(2β + γ). For p = 2 the up and down transfers use
    different ports. An upper bound on the simulation, within 20% of it on ``switch``."""
    if c.p == 1:
        return 0.0
    channels = int(c.params.get("channels", 1))
    chunk = float(c.params.get("chunk_size", SIMPLE_STEP_BYTES))
    k = min(max(1, math.ceil(c.n / (channels * chunk))), chunk_cap(c.p - 1))
    size = c.n / k
    if c.p == 2:
        return (k + 1) * (c.alpha + size * c.beta) + k * size * c.gamma
    return (2 * (c.p - 1) + k - 1) * c.alpha + (c.p + k - 2) * size * (2 * c.beta + c.gamma)


def _protocol_params(call: CallSpec, gpus: Sequence[int], protocol: str,
                     channels: int | str) -> CallParams:
    """An LL or LL128 tree given a window runs as NCCL's: NCCL's Tree chunk for the call,
    forwarded in units inside a node and whole across nodes. Not the default: on the
    published runs it brings InfiniBand clusters closer and AWS EFA and GCP TCPXO further
    (docs/nccl.md, "LL and LL128")."""
    if protocol == "Simple":  # one step of the connection's buffer (NCCL_BUFFSIZE / 8)
        buffer = simple_buffer(call.topology)
        return {} if buffer == BUFFER_BYTES[2] else {"chunk_size": buffer // NCCL_STEPS}
    if pipeline_units(protocol) <= 1 or int(call.params.get("window", 1)) <= 1:
        return {}
    nodes = len(gpus_per_node(call.topology, gpus))
    return {"chunk_size": tree_chunk_bytes(protocol, call.size_bytes, int(channels), nodes,
                                           len(gpus)),
            "units": pipeline_units(protocol)}


@register(
    "allreduce", "nccl_tree",
    formula="k = min(⌈n/(channels·chunk)⌉, 16(2(p-1)-1)), c = n/k: (2(p-1) + k - 1)·α + "
            "(p + k - 2)·c·(2β + γ); p = 2: (k+1)·(α + c·β) + k·c·γ (a model of one node's "
            "chain: an upper bound, up to ~20% above the simulation on switch)",
    cost=_cost,
    source="NCCL src/graph/trees.cc, src/device/all_reduce.h runTreeSplit "
           "(docs/nccl.md#algorithms-tree)",
    summary="NCCL's tree: per channel a chain inside each node and a double binary tree "
            "across nodes, reduce-up and broadcast-down pipelined in chunks",
    exact="contention",
    params=("channels", "chunk_size", "window", "units"),
    prepare=prepare(_tree_lanes),
    protocol_params=_protocol_params,
)
def nccl_tree_allreduce(rank: int, job: Job) -> Program:
    """Every lane reduces up and broadcasts down its tree."""
    if job.nranks == 1:
        return iter(())
    channels, layout, lanes = lanes_and_layout(job, _tree_lanes)
    return side_by_side([_lane(rank, job, layout, lanes, channels, lane)
                         for lane in range(len(lanes.channels))])
