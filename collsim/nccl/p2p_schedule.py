"""NCCL's schedule of a group of sends and receives (nccl-tests' alltoall): which peers a rank
meets in each round, which channels a round runs on, and which rounds a channel runs at once.

From NCCL 2.30's source (docs/nccl.md#algorithms-p2p):

- ``src/init.cc`` ``ncclP2pSchedule``: ranks form groups of ``NCCL_P2P_SCHEDULE_GROUP_SIZE``
  (8) across nodes, of the node's ranks on one node (the gcd with a node's ranks where they do
  not divide evenly). Round ``i·G + d`` pairs a rank with the groups Δ ahead and behind, Δ the
  i-th of the group deltas ``(x² + x) / 2 mod pow2Up(groups)`` below the group count, and with
  local rank ``l + d`` there (sending) and ``l - d`` (receiving), modulo G. Round 0 is the
  rank itself; every pair meets in the same round on both sides.
- ``src/include/channel.h`` ``ncclP2pChannelBaseForRound``: a round's first channel is, across
  nodes, ``(round / G)·⌈G / 8⌉ + (round mod G) / 8``, on one node the round itself, its bits
  reversed over log2 of the p2p channels; ``src/include/device.h`` ``ncclP2pChannelForPart``:
  part j of an operation runs on channel ``(base + j) mod channels``, and
  ``ncclP2pPartBounds`` cuts it into parts of ⌈bytes / parts⌉ rounded up to 4 KiB.
- ``src/enqueue.cc`` ``ncclAddWorkBatchToPlan``: each channel queues its operations in round
  order, in batches of at most ``NCCL_MAX_DEV_WORK_P2P_PER_BATCH`` (8) from one group of 8
  rounds (round / 8); the kernel's block for the channel runs a batch's operations at once
  (its warps split between them) and the batches one after another.

So on 2 nodes of 8 GPUs, 16 p2p channels of which each operation takes 4, rounds 0-7 (the own
node) run at once on channels 0-3 and rounds 8-15 (the other node) on channels 8-11: every
peer is in flight at once, not one after another. Channels that run the same batches are
merged into one lane (identical channels move in lockstep).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

SCHEDULE_GROUP = 8    # NCCL_P2P_SCHEDULE_GROUP_SIZE's default (src/init.cc)
PER_BATCH = 8         # NCCL_MAX_DEV_WORK_P2P_PER_BATCH (src/include/device.h)
PART_ALIGN = 4096     # ncclP2pPartBounds aligns parts up to 4 KiB (src/include/device.h)


def group_size(nodes: Sequence[int]) -> int:
    """NCCL's p2p schedule group: 8 across nodes, a node's ranks on one node, cut to the
    gcd with every node's rank count that it does not divide."""
    counts = list(_node_counts(nodes).values())
    size = SCHEDULE_GROUP if len(counts) > 1 else max(counts)
    for count in counts:
        if count % size or count < size:
            size = math.gcd(size, count)
    return size


def _node_counts(nodes: Sequence[int]) -> dict[int, int]:
    """Ranks per node, nodes in order of their first rank (as NCCL numbers them)."""
    counts: dict[int, int] = {}
    for node in nodes:
        counts[node] = counts.get(node, 0) + 1
    return counts


def _group_deltas(groups: int) -> list[int]:
    """The group deltas in NCCL's order: (x² + x) / 2 mod the next power of two, those below
    ``groups`` (the quadratic sequence visits every residue of a power of two once)."""
    size = 1 << max(0, groups - 1).bit_length()
    deltas, delta = [], 0
    for step in range(1, size + 1):
        if delta < groups:
            deltas.append(delta)
        delta = (delta + step) & (size - 1)
    return deltas


def round_peers(nodes: Sequence[int], rank: int) -> list[tuple[int, int]]:
    """(peer sent to, peer received from) of ``rank`` in each round of NCCL's p2p schedule on
    ranks placed on ``nodes`` (the node of each rank); round 0 is the rank itself."""
    p = len(nodes)
    size = group_size(nodes)
    members: dict[int, list[int]] = {}
    for r, node in enumerate(nodes):
        members.setdefault(node, []).append(r)
    groups = [ranks[i:i + size] for ranks in members.values()
              for i in range(0, len(ranks), size)]
    own = next(g for g, ranks in enumerate(groups) if rank in ranks)
    local = groups[own].index(rank)
    pairs = []
    for delta in _group_deltas(len(groups)):
        to, frm = groups[(own + delta) % len(groups)], groups[(own - delta) % len(groups)]
        for d in range(size):
            pairs.append((to[(local + d) % size], frm[(local - d) % size]))
    assert len(pairs) == p
    return pairs


def reverse_bits(value: int, bits: int) -> int:
    """The low ``bits`` bits of ``value`` in reverse order (NCCL's reverseBits)."""
    out = 0
    for _ in range(bits):
        out = (out << 1) | (value & 1)
        value >>= 1
    return out


def channel_base(round_: int, channels: int, group: int, multi_node: bool) -> int:
    """The first channel of ``round_`` (ncclP2pChannelBaseForRound). A channel count that is
    not a power of two (none NCCL runs) deals the rounds round-robin instead."""
    if multi_node:
        base = (round_ // group) * -(-group // PER_BATCH) + (round_ % group) // PER_BATCH
    else:
        base = round_
    if channels & (channels - 1):
        return base % channels
    return reverse_bits(base, channels.bit_length() - 1)


@dataclass(frozen=True)
class Lane:
    """Channels that run the same rounds in the same batches: ``batches`` lists, in order,
    the rounds each batch runs at once (the own round left out)."""

    channels: tuple[int, ...]
    batches: tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class P2pPlan:
    """A grouped alltoall laid out as NCCL lays it out: the lanes, and for each round its
    parts (``parts`` per operation) as runs ``(lane, first part, end part)`` of consecutive
    parts on one lane."""

    lanes: tuple[Lane, ...]
    runs: tuple[tuple[tuple[int, int, int], ...], ...]
    parts: int

    @property
    def weights(self) -> tuple[int, ...]:
        """Channels per lane (the job's lane weights)."""
        return tuple(len(lane.channels) for lane in self.lanes)

    @property
    def waves(self) -> int:
        """Batches one after another on the busiest lane."""
        return max((len(lane.batches) for lane in self.lanes), default=0)


def p2p_plan(nodes: Sequence[int], channels: int, parts: int = 1,
             per_batch: int = PER_BATCH) -> P2pPlan:
    """NCCL's layout of an alltoall on ranks placed on ``nodes``, over ``channels`` p2p
    channels, each operation cut into ``parts`` (at most ``channels``), a channel running at
    most ``per_batch`` operations of one group of ``per_batch`` rounds at once."""
    p = len(nodes)
    parts = max(1, min(parts, channels))
    group = group_size(nodes)
    multi = len(_node_counts(nodes)) > 1
    on_channel: dict[int, list[list[int]]] = {}   # channel -> batches of rounds
    where: list[list[int]] = []                   # round -> channel of each part
    for round_ in range(p):
        base = channel_base(round_, channels, group, multi)
        used = [(base + j) % channels for j in range(parts)]
        where.append(used)
        for channel in used:
            batches = on_channel.setdefault(channel, [])
            last = batches[-1] if batches else None
            if last is None or len(last) == per_batch or \
                    last[0] // per_batch != round_ // per_batch:
                batches.append([round_])
            else:
                last.append(round_)
    signature: dict[tuple, list[int]] = {}
    for channel in sorted(on_channel):
        batches = tuple(t for t in (tuple(r for r in b if r) for b in on_channel[channel]) if t)
        if batches:
            signature.setdefault(batches, []).append(channel)
    lanes = tuple(Lane(tuple(chs), batches) for batches, chs in signature.items())
    lane_of = {ch: i for i, lane in enumerate(lanes) for ch in lane.channels}
    runs: list[tuple[tuple[int, int, int], ...]] = []
    for round_, used in enumerate(where):
        mine: list[tuple[int, int, int]] = []
        for j, channel in enumerate(used):
            lane = lane_of.get(channel, -1)
            if mine and mine[-1][0] == lane and mine[-1][2] == j:
                mine[-1] = (lane, mine[-1][1], j + 1)
            else:
                mine.append((lane, j, j + 1))
        runs.append(tuple(mine) if round_ else ())
    return P2pPlan(lanes, tuple(runs), parts)


def part_bounds(count: int, parts: int, itemsize: int) -> list[int]:
    """Element offsets where an operation of ``count`` elements is cut into ``parts`` parts
    (ncclP2pPartBounds: ⌈bytes / parts⌉ rounded up to 4 KiB, the last part the rest):
    ``parts + 1`` offsets, the later ones equal where the parts run out."""
    nbytes = count * itemsize
    size = _up(_up(nbytes, parts), PART_ALIGN) * PART_ALIGN
    return [min(j * size, nbytes) // itemsize for j in range(parts + 1)]


def _up(a: int, b: int) -> int:
    """⌈a / b⌉ of whole numbers."""
    return -(-a // b)
