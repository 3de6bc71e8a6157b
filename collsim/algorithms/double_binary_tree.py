"""Double binary tree allreduce (NCCL's tree algorithm): two complementary binary trees, each
reducing then broadcasting half of the buffer, pipelined in chunks.

Tree 0 is the heap-ordered tree over ring positions, tree 1 the same tree over mirrored
positions (p-1-v), so a rank is an inner node in at most one of them and every port carries
about the same load. Both trees run in lock-step ticks, and the two ends of every transfer
post it at the same tick (they must meet): a node of height h combines chunk i from its
children at tick i+h-1 (a child passes it up then); the root turns it around and a node of
depth d receives it back at tick i+H+d-1 and forwards it at tick i+H+d (H = ⌊log p⌋). Ports
carry up to four transfers per tick, so the algorithm contends by design and its closed form
is a model.
"""

from __future__ import annotations

from collsim.algorithms.chunks import chunk_count, chunk_region, cost_chunks
from collsim.algorithms.heap_tree import HeapTree
from collsim.algorithms.order import ring_position
from collsim.algorithms.registry import Cost, register
from collsim.program import Job, Op, Program, Recv, Send, block
from collsim.tags import TAGS

# Each tree's way up and way down in its own tag space; a message is tagged by its chunk.
UP = TAGS.phase(0), TAGS.phase(1)      # tree 0, tree 1
DOWN = TAGS.phase(2), TAGS.phase(3)


class _Role:
    """One rank's place in one of the two trees, and the chunks of its half of the buffer."""

    def __init__(self, job: Job, rank: int, tree: int) -> None:
        p, order = job.nranks, job.ring_order()
        heap = HeapTree(p)
        v = ring_position(job, rank)
        v = v if tree == 0 else p - 1 - v

        def rank_of(u: int) -> int:
            return order[u] if tree == 0 else order[p - 1 - u]

        self.tree = tree
        parent = heap.parent(v)
        self.parent = None if parent is None else rank_of(parent)
        # A child passes chunk i up at the tick its parent combines it (the two must meet).
        self.send_up = 0 if parent is None else heap.height(parent) - 1
        self.children = [rank_of(c) for c in heap.children(v)]
        self.height, self.depth, self.top = heap.height(v), heap.depth(v), heap.depth_of_tree
        self.offset, self.count = block(job.count, 2, tree)
        self.chunks = chunk_count(job, self.count)
        self.regions = [chunk_region(self.offset, self.count, self.chunks, i)
                        for i in range(self.chunks)]

    def kinds(self) -> list[tuple[int, list[list[Op]]]]:
        """The transfers this role posts, as (first tick, the ops of each chunk) per kind, in
        the order posted within a tick: receives from the children and the send to the
        parent on the way up, then the receive from the parent and the sends to the
        children on the way down.

        A kind moves chunk ``tick - first`` at a tick, so a tick holds at most one chunk of
        each kind.
        """
        parent, children = self.parent, self.children
        up, down = UP[self.tree], DOWN[self.tree]
        chunks = list(enumerate(self.regions))
        turn = self.top + self.depth  # the tick at which chunk 0 goes back down from here
        kinds = []
        if children:
            kinds.append((self.height - 1, [
                [Recv(child, up[i], *region, reduce=True) for child in children]
                for i, region in chunks]))
        if parent is not None:
            kinds.append((self.send_up, [[Send(parent, up[i], *region)]
                                         for i, region in chunks]))
            kinds.append((turn - 1, [[Recv(parent, down[i], *region)]
                                     for i, region in chunks]))
        if children:
            kinds.append((turn, [[Send(child, down[i], *region) for child in children]
                                 for i, region in chunks]))
        return kinds


def _double_tree_cost(c: Cost) -> float:
    """A model of the ticks (H = ⌊log p⌋, k chunks of c = n/(2k) per tree): a chunk needs 2H
    ticks up and down a tree, each hop sharing a port with its sibling's (2c·β, 2c·γ for the
    combine), one less for the lone deepest leaf when p = 2^H; each of the k-1 further chunks
    adds a tick in which a port carries four chunks, two up and two down (p = 3 and 4 carry
    only three, and run up to a quarter faster). For p = 2 each tree is one hop: k+1 ticks
    moving 2k chunks per port."""
    if c.p == 1:
        return 0.0
    k = cost_chunks(c.n / 2, c.params)
    per_chunk = c.n / (2 * k) * (2 * c.beta + c.gamma)
    if c.p == 2:
        return (k + 1) * c.alpha + k * per_chunk
    top = c.p.bit_length() - 1
    lone_leaf = 1 if c.p == 1 << top else 0
    return (2 * top + k - 1) * c.alpha + (2 * top - lone_leaf + 2 * (k - 1)) * per_chunk


@register(
    "allreduce", "double_binary_tree",
    formula="k = ⌈n/(2·chunk)⌉, c = n/(2k), H = ⌊log p⌋: (2H + k - 1)·α + "
            "(2H - [p = 2^H] + 2(k-1))·c·(2β + γ); p = 2: (k+1)·α + k·c·(2β + γ) "
            "(a model: an upper bound on switch, up to ~20% above the simulation for p ≥ 5, "
            "~30% for p = 3, 4)",
    cost=_double_tree_cost,
    source="Sanders, Speck & Träff 2009 (two-tree); NCCL 2.4 tree allreduce",
    summary="two complementary binary trees (heap order and its mirror; NCCL uses in-order "
            "trees), each reducing then broadcasting half the data in pipelined chunks",
    exact="contention",
    params=("chunk_size",),
)
def double_binary_tree_allreduce(rank: int, job: Job) -> Program:
    """Both trees' up and down transfers for the same tick are posted as one step (tree 0's
    before tree 1's); ticks with nothing to post are skipped."""
    if job.nranks == 1:
        return
    kinds = [kind for tree in (0, 1) for kind in _Role(job, rank, tree).kinds()]
    first = min(start for start, _ in kinds)
    last = max(start + len(ops) for start, ops in kinds)
    for tick in range(first, last):
        step: list[Op] = []
        for start, ops in kinds:
            if 0 <= tick - start < len(ops):
                step += ops[tick - start]
        if step:
            yield tuple(step)
