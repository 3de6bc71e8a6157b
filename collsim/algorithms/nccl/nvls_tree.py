"""NCCL's NVLSTree: NVLS inside every node, a double binary tree between nodes (docs/nccl.md#nvls;
NCCL src/device/all_reduce.h ``runNvlsTree``, src/graph/trees.cc).

Each node's NVSwitch (a helper rank) combines every chunk of its GPUs, and sends slice h of
the node's sum to the slice's head (the node's GPU ``h mod size``; at most 32 slices,
:func:`~collsim.algorithms.nccl.nvls.tree_heads`, so a 72-GPU rack crosses through 32 NICs).
The heads of slice h form NCCL's double binary tree over node positions
(:func:`~collsim.nccl.layout.double_tree`): each head combines its children's slices into
its own and passes it up while the root sends the global sum down; every head hands the
global sum to its NVSwitch, which multicasts the chunk to the node's GPUs. NCCL's NVLS
channel c climbs tree ``c mod 2`` (``connect.cc``, ``connectNvls``) and loops over a region
of its own (``ncclCollCbdPart``), so every loop is cut in two: the even channels' share
climbs tree 0 while the odd ones' climbs tree 1 (with one channel, all of it tree 0), both
trees busy from the first loop on; each head's NIC carries both trees, and the node inner in
one is a leaf in the other. Chunks pipeline through the whole path (NVLS's 128 KiB per
channel by default; one lane of all channels). Under NCCL's costs every GPU also pays the
kernel's scatter and gather inside its node, which copy each loop's chunks one head after
another, as on one node (:func:`loop_serial`). On one node this is ``nvls``.

Not modelled: NCCL's split of the heads' threads between tree up and down by channel; the
tree's chunk size differing from NVLS's inside the node (``NCCL_NVLSTREE_MAX_CHUNKSIZE``);
fewer heads than GPUs on a node with fewer NICs than GPUs (NCCL takes one head per NIC with
a GPU of its own).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from collsim.algorithms.nccl.nvls import (
    DOWN,
    ONE_NODE_FORM,
    RESULT,
    TREE_DOWN,
    TREE_UP,
    UP,
    head,
    headed,
    lane_chunks,
    node_switch,
    nvls_protocol_params,
    one_node_allreduce,
    one_node_cost,
    others_partial,
    tree_heads,
)
from collsim.algorithms.nccl.switches import (
    channels_of,
    chunk_elements,
    node_groups,
    nvswitch_of,
    require,
    slices,
    with_helpers,
)
from collsim.algorithms.nccl.tree import WINDOW, relay_steps
from collsim.algorithms.registry import register
from collsim.nccl.layout import Tree, double_tree
from collsim.program import Job, Op, Parallel, Pause, Program, Recv, Send


def depth(tree: Tree) -> int:
    """Hops from the deepest node of ``tree`` up to its root."""
    deepest = 0
    for node in range(len(tree.parent)):
        hops, up = 0, tree.parent[node]
        while up is not None:
            hops, up = hops + 1, tree.parent[up]
        deepest = max(deepest, hops)
    return deepest


def tree_halves(job: Job, stages: int) -> tuple[list[tuple[int, int]], list[int]]:
    """NCCL's loops across nodes (:func:`lane_chunks`), each cut in two: the share of the
    even channels, which climbs tree 0, then that of the odd ones, which climbs tree 1 (none
    with one channel); and the tree each region climbs."""
    channels = channels_of(job)
    even = (channels + 1) // 2
    regions: list[tuple[int, int]] = []
    trees: list[int] = []
    for offset, count in lane_chunks(job, stages):
        first = count * even // channels
        for tree, region in enumerate(((offset, first), (offset + first, count - first))):
            if region[1] > 0 or tree == 0:
                regions.append(region)
                trees.append(tree)
    return regions, trees


def loop_serial(job: Job, regions: list[tuple[int, int]], heads: int
                ) -> tuple[float, list[float], list[float], float]:
    """The seconds a GPU spends on NCCL's scatter and gather across nodes, one head after
    another (``runNvlsTree`` in NCCL's src/device/all_reduce.h: every GPU's scatter and
    gather groups run ``ScatterGatherOp`` over the loop's ``heads`` chunks, as on one node,
    :func:`~collsim.algorithms.nccl.nvls.serial_steps`): (the first loop's scatter, before
    the first send up; the scatter beside each region's send; the gather beside each
    region's receive; the last loop's gather, after the last receive).

    A loop costs ``arity_us`` a head each way; NCCL's last loop too, since it cuts what is
    left into one piece per head (``lastChunkCount``). As on one node, loop l's scatter runs
    while loop l-1 moves and its gather while loop l+1 moves: a region (half a loop, or
    several loops where the pipeline's cap joins them) pays for the part of the call, by
    its bytes, that the loops before (scatter) or after (gather) it stand for."""
    none = [0.0] * len(regions)
    arity = float(job.params.get("arity_us", 0.0)) * 1e-6
    if arity <= 0 or job.count <= 0:
        return 0.0, none, list(none), 0.0
    loops = -(-job.count // (channels_of(job) * heads * chunk_elements(job)))  # NCCL's
    loop = arity * heads
    scatter, gather = list(none), list(none)
    start = 0
    for i, (_, count) in enumerate(regions):
        lo, hi = start / job.count, (start + count) / job.count
        start += count
        scatter[i] = loop * loops * max(0.0, min(hi, 1 - 1 / loops) - lo)
        gather[i] = loop * loops * max(0.0, hi - max(lo, 1 / loops))
    return loop, scatter, gather, loop


def gpu_threads(job: Job, switch: int, cs: list[tuple[int, int]], heads: int
                ) -> list[Program]:
    """A GPU's regions up to its switch and the results back, side by side, each beside its
    share of the scatter and gather (:func:`loop_serial`)."""
    lead, scatter, gather, tail = loop_serial(job, cs, heads)

    def beside(op: Op, seconds: float) -> tuple[Op, ...]:
        return (op, Pause(seconds)) if seconds > 0 else (op,)

    def up() -> Program:
        if lead:
            yield Pause(lead)
        for i, chunk in enumerate(cs):
            yield beside(Send(switch, UP[i], *chunk), scatter[i])

    def down() -> Program:
        for i, chunk in enumerate(cs):
            yield beside(Recv(switch, DOWN[i], *chunk), gather[i])
        if tail:
            yield Pause(tail)

    return [up(), down()]


def _program(rank: int, job: Job) -> Program:
    p = job.nranks
    if p == 1:
        return
    nodes = node_groups(job)
    if len(nodes) == 1:
        yield from one_node_allreduce(rank, job)
        return
    trees = double_tree(len(nodes))
    cs, climbs = tree_halves(job, 4 + 2 * max(depth(t) for t in trees))
    if rank >= p:
        yield from node_switch(job, nodes, rank - p, cs, tree_heads(nodes))
        return
    node = next(k for k, ranks in enumerate(nodes) if rank in ranks)
    switch = p + node
    m = tree_heads(nodes)
    threads = gpu_threads(job, switch, cs, m)
    for h in headed(rank, nodes[node], m):
        piece = [slices(c, m)[h] for c in cs]
        up, down = TREE_UP.part(h, m), TREE_DOWN.part(h, m)
        for t, tree in enumerate(trees):  # the even channels' share climbs tree 0
            chunks = [i for i, climb in enumerate(climbs) if climb == t]
            if not chunks:
                continue
            above = tree.parent[node]
            parent = None if above is None else head(nodes[above], h)
            children = [head(nodes[child], h) for child in tree.children[node]]
            receive = (others_partial(switch, nodes[node], h, m)
                       + [(child, up, True) for child in children])
            below = [(child, down) for child in children] + [(switch, RESULT.part(h, m))]
            if parent is None:  # the root turns each chunk around
                threads.append(relay_steps(piece, receive, below, 0, WINDOW, chunks))
                continue
            threads += [relay_steps(piece, receive, [(parent, up)], 0, WINDOW, chunks),
                        relay_steps(piece, [(parent, down, False)], below, 0, WINDOW, chunks)]
    yield Parallel(threads)


def nvls_tree_job(job: Job, switches: list[str] | None = None) -> Job:
    """``job`` with one NVSwitch helper rank per node (named ``n<k>.nvswitch`` unless
    ``switches`` names them) and one lane of all channels."""
    nodes = node_groups(job)
    names = switches or [f"n{k}.nvswitch" for k in range(len(nodes))]
    return replace(with_helpers(job, names, [len(ranks) * job.count for ranks in nodes]),
                   lanes=(channels_of(job),))


def _prepare(job: Job, topology: Any, gpus: list[int]) -> Job:
    require(topology, "nvls", "nvls_tree")
    nodes = node_groups(job)
    return nvls_tree_job(job, [nvswitch_of(topology, gpus[ranks[0]], "nvls_tree")
                               for ranks in nodes])


@register(
    "allreduce", "nvls_tree",
    formula=ONE_NODE_FORM.replace("one node", "one node (as nvls)", 1),
    cost=one_node_cost,
    source="NCCL src/device/all_reduce.h runNvlsTree, src/graph/trees.cc (docs/nccl.md#nvls)",
    summary="NVLS inside each node, each slice's heads in a double binary tree across "
            "nodes, pipelined in chunks",
    params=("channels", "chunk_size"),
    prepare=_prepare,
    protocol_params=nvls_protocol_params,
)
def nvls_tree_allreduce(rank: int, job: Job) -> Program:
    """GPUs and NVSwitches (helper ranks) as laid out above."""
    return _program(rank, job)
