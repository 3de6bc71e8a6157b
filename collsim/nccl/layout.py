"""NCCL's channels laid out on a machine: per channel the ring order of the ranks, where it
crosses between nodes, the chain inside each node and which double binary tree it uses
across nodes; and the grouping of identical channels into lanes (docs/nccl.md#topology-rings,
docs/nccl.md#topology-trees).

- **Rings** (``connect.cc``): every node's ranks are contiguous, in the node's local ring
  order (:func:`collsim.hardware.placement.local_ring`, the order the ``ring`` of every
  algorithm uses), nodes in the topology's visiting order. Channel c enters and leaves each
  node through NIC ``c mod nics`` (of the NICs its ranks use): the node's ring is cut
  between two neighbours on that NIC when it has two, else it starts at the rank on that
  NIC and leaves through its predecessor's. Every other node is walked backwards (a snake),
  so consecutive nodes meet on one rail, as ``ring_order`` does.
- **Trees** (``trees.cc``): inside a node, channel c is a chain in its ring order from the
  rank on its NIC (the node's head, which also talks to the other nodes: NCCL's TREE
  pattern); across nodes, an in-order binary tree over node positions rooted at node 0, and
  its mirror (even node counts) or its shift by one (odd). NCCL searches C/2 channels and
  duplicates them (``connect.cc``: channel c + C/2 copies channel c's ring and NIC and takes
  the second tree), so channel c uses the first tree when c < ⌈C/2⌉ and the second after:
  every NIC carries both trees, and the node inner in one is a leaf in the other.
- **Lanes**: channels whose rings (or chains and tree) are the same carry the same load over
  the same links, so they can run as one lane of weight = how many. Max-min rates are
  unique, so the merged lane moves at exactly the sum of the channels' rates.

On one node NCCL crosses no NIC: every channel is the node's ring, and they all merge into
one lane. A layout can also be made from a Job alone (:func:`job_layout`), without a
topology, so the data interpreter can check the programs on any rank count.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from functools import cached_property

from collsim.hardware.placement import node_rings
from collsim.hardware.topology import Topology
from collsim.program import Job


@dataclass(frozen=True)
class Tree:
    """A tree over node positions 0..n-1: each one's parent (None at the root) and
    children (in increasing order)."""

    root: int
    parent: tuple[int | None, ...]
    children: tuple[tuple[int, ...], ...]

    @classmethod
    def from_parents(cls, parent: Sequence[int | None]) -> Tree:
        children: list[list[int]] = [[] for _ in parent]
        for node, up in enumerate(parent):
            if up is not None:
                children[up].append(node)
        root = next(node for node, up in enumerate(parent) if up is None)
        return cls(root, tuple(parent), tuple(tuple(sorted(c)) for c in children))


def binary_tree(n: int) -> Tree:
    """NCCL's in-order binary tree over 0..n-1 (docs/nccl.md#topology-trees): node r > 0 with
    lowest set bit b hangs from ``(r xor b) or 2b``, or from ``r xor b`` when that is not a
    node; node 0 is the root and its one child is the largest power of two below n."""
    parent: list[int | None] = [None] * n
    for r in range(1, n):
        low = r & -r
        up = (r ^ low) | (low << 1)
        parent[r] = up if up < n else r ^ low
    return Tree.from_parents(parent)


def double_tree(n: int) -> tuple[Tree, Tree]:
    """NCCL's two complementary trees over 0..n-1: the binary tree, and its mirror (node r
    in the place of n-1-r) when n is even or its shift by one (r in the place of r-1) when
    n is odd, so that a node inner in one tree is a leaf in the other."""
    first = binary_tree(n)
    if n % 2 == 0:
        def where(r: int) -> int:
            return n - 1 - r
        back = where
    else:
        def where(r: int) -> int:
            return (r - 1) % n

        def back(r: int) -> int:
            return (r + 1) % n
    parent = [None if first.parent[where(r)] is None else back(first.parent[where(r)])
              for r in range(n)]
    return first, Tree.from_parents(parent)


@dataclass(frozen=True)
class Crossing:
    """Where a channel's ring goes from one node to the next: the rank that sends, the rank
    that receives, and the NIC (index within its node) each goes through."""

    sender: int
    receiver: int
    nic_out: int | None
    nic_in: int | None


@dataclass(frozen=True)
class ChannelLayout:
    """One NCCL channel: its ring over every rank, its node crossings (none on one node),
    each node's chain (layout node order; ``chains[k][0]`` is node k's head) and its tree
    (0 or 1)."""

    ring: tuple[int, ...]
    crossings: tuple[Crossing, ...]
    chains: tuple[tuple[int, ...], ...]
    tree: int


@dataclass(frozen=True)
class Lanes:
    """Channels grouped into lanes: each lane's channels (in channel order), lanes in the
    order of their first channel."""

    channels: tuple[tuple[int, ...], ...]

    @property
    def weights(self) -> tuple[int, ...]:
        """How many channels each lane stands for."""
        return tuple(len(members) for members in self.channels)

    def first_block(self, lane: int) -> int:
        """Index of the lane's first channel piece when the buffer is cut into one piece
        per channel and each lane takes its channels' pieces together, lane after lane."""
        return sum(self.weights[:lane])


def group_lanes(keys: Sequence[Hashable], merge: bool = True) -> Lanes:
    """Channels with equal ``keys`` in one lane (each channel its own with ``merge`` off)."""
    if not merge:
        return Lanes(tuple((c,) for c in range(len(keys))))
    lanes: dict[Hashable, list[int]] = {}
    for channel, key in enumerate(keys):
        lanes.setdefault(key, []).append(channel)
    return Lanes(tuple(tuple(members) for members in lanes.values()))


@dataclass(frozen=True)
class Layout:
    """NCCL's channels for one call: the ranks of each node (layout node order, the order
    trees number nodes), every channel, the two trees over nodes, and the lanes of the ring
    and tree algorithms."""

    nodes: tuple[tuple[int, ...], ...]
    channels: tuple[ChannelLayout, ...]
    trees: tuple[Tree, Tree]
    ring_lanes: Lanes
    tree_lanes: Lanes
    chain_lanes: Lanes
    """Channels grouped by their chains alone, for algorithms that use the chains but not
    the double binary tree (CollNet's chain climbs the network's own tree)."""

    @cached_property
    def node_position(self) -> dict[int, int]:
        """Each rank's node position (the index of its node in :attr:`nodes`)."""
        return {rank: k for k, ranks in enumerate(self.nodes) for rank in ranks}

    def tree_role(self, channel: int, rank: int) -> tuple[int | None, tuple[int, ...]]:
        """(parent, children) of ``rank`` in channel ``channel``'s tree of ranks: its
        node's chain, hung below the head of its node's parent in the channel's tree, and
        the heads of its node's children below its own head (NCCL's TREE pattern). The
        root (node's head of the tree's root) has no parent."""
        laid = self.channels[channel]
        k = self.node_position[rank]
        chain = laid.chains[k]
        j = chain.index(rank)
        tree = self.trees[laid.tree]
        children = chain[j + 1:j + 2]
        if j > 0:
            return chain[j - 1], children
        up = tree.parent[k]
        heads = tuple(laid.chains[child][0] for child in tree.children[k])
        return (None if up is None else laid.chains[up][0]), children + heads

    def tree_depth(self, channel: int) -> int:
        """Hops from the deepest rank of channel ``channel``'s tree up to its root."""
        laid = self.channels[channel]
        tree = self.trees[laid.tree]
        deepest = 0
        for k, chain in enumerate(laid.chains):
            hops, node = 0, k
            while tree.parent[node] is not None:
                node, hops = tree.parent[node], hops + 1
            deepest = max(deepest, hops + len(chain) - 1)
        return deepest


def layout_from_nodes(nodes: Sequence[Sequence[int]], nics: dict[int, int | None],
                      channels: int, snake: bool = True, merge: bool = True) -> Layout:
    """The layout of ``channels`` channels over ``nodes`` (each node's ranks in its local
    ring order, nodes in visiting order), ``nics`` giving each rank's NIC (None: none).
    With ``snake`` every other node is walked backwards."""
    if channels < 1:
        raise ValueError(f"channels must be at least 1, got {channels}")
    many = len(nodes) > 1
    trees = double_tree(len(nodes))
    half = (channels + 1) // 2  # channels NCCL searched; the rest are their copies
    laid = []
    for c in range(channels):
        chains = tuple(tuple(_cut(list(ranks), nics, c) if many else ranks) for ranks in nodes)
        walked = [tuple(reversed(chain)) if snake and k % 2 else chain
                  for k, chain in enumerate(chains)]
        ring = tuple(rank for segment in walked for rank in segment)
        crossings = tuple(
            Crossing(walked[k][-1], walked[(k + 1) % len(walked)][0],
                     nics.get(walked[k][-1]), nics.get(walked[(k + 1) % len(walked)][0]))
            for k in range(len(walked))) if many else ()
        laid.append(ChannelLayout(ring, crossings, chains, int(c >= half)))
    ring_lanes = group_lanes([channel.ring for channel in laid], merge)
    tree_lanes = group_lanes([(channel.chains, channel.tree if many else 0)
                              for channel in laid], merge)
    chain_lanes = group_lanes([channel.chains for channel in laid], merge)
    return Layout(tuple(tuple(ranks) for ranks in nodes), tuple(laid), trees, ring_lanes,
                  tree_lanes, chain_lanes)


def _cut(ranks: list[int], nics: dict[int, int | None], channel: int) -> list[int]:
    """A node's local ring as channel ``channel`` walks it: entering and leaving through
    NIC ``channel mod nics`` (see the module docstring)."""
    own = [nics.get(r) for r in ranks]
    present = sorted({nic for nic in own if nic is not None})
    if not present:
        return ranks
    nic = present[channel % len(present)]
    size = len(ranks)
    for i in range(size if size > 1 else 0):
        if own[i] == nic and own[(i + 1) % size] == nic:
            start = (i + 1) % size   # both ends on the NIC: enter at i+1, leave at i
            return ranks[start:] + ranks[:start]
    start = own.index(nic)
    return ranks[start:] + ranks[:start]


def machine_layout(topology: Topology, gpus: Sequence[int], channels: int,
                   merge: bool = True) -> Layout:
    """The layout of a call with rank r on GPU ``gpus[r]`` of ``topology``."""
    nodes = node_rings(topology, gpus)
    nics = {rank: topology.nic_of(gpu) for rank, gpu in enumerate(gpus)}
    return layout_from_nodes(nodes, nics, channels, snake=True, merge=merge)


def job_layout(job: Job, channels: int, merge: bool = True) -> Layout:
    """A layout from the job alone: nodes as ``job.nodes`` groups them, in the order the
    job's ring reaches them, each node's ranks in ring order, every rank on a NIC of its
    own. Channel 0's ring is the job's ring. A ring that leaves a node and comes back to it
    is taken as one node, every channel on that ring."""
    ring = job.ring_order()
    groups: dict[int, list[int]] = {}
    for rank in ring:
        groups.setdefault(job.node_of(rank), []).append(rank)
    nodes = list(groups.values())
    if tuple(rank for ranks in nodes for rank in ranks) != tuple(ring):
        nodes = [list(ring)]
    nics = {rank: index for ranks in nodes for index, rank in enumerate(ranks)}
    return layout_from_nodes(nodes, nics, channels, snake=False, merge=merge)


def layout_of(job: Job, channels: int) -> Layout:
    """The layout the simulator prepared for ``job`` (if it has ``channels`` channels),
    else one made from the job alone."""
    layout = job.layout
    if isinstance(layout, Layout) and len(layout.channels) == channels:
        return layout
    return job_layout(job, channels)
