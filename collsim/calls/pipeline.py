"""The pipeline path: NCCL's chunked double-binary-tree allreduce (NVLSTree) on many nodes,
timed from full runs of the same call on the machine's first few nodes
(docs/engine.md#the-pipeline-path).

A double binary tree over N nodes is ``d(N)`` levels deep; every node plays one of a few
roles (a leaf or inner node in each tree, with one or two children), all present on 8
nodes. The chunks stream through the trees, so the call's time is the fill (the first chunk
up to a root and back down, two hops a level) plus the steady period of the rest. When no
link carries more of the trees' hops than the references' busiest link, the period is the
references' and only the fill grows with N: the time at depth ``d`` is the least squares
line through the full runs on the first 8 and 16 nodes (and 32, for a call on more), read
at ``d``. The path times calls of at least :data:`LEAST_CHUNKS` chunks, mostly steady
periods. The references do not run at the call's size: once their pipelines are steady each
chunk adds one period, so they run :data:`STEADY_CHUNKS` of its chunks, the 8 nodes twice
as many once more for the period, and
are carried on to the call's chunk count.

Where that does not hold, :class:`PipelineDecline` says why and the call runs in full. Its
error against the full simulation is measured by ``benchmarks/fastpath_error.py``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from collsim.algorithms.nccl.nvls_tree import depth
from collsim.engine.costs import CostModel, channel_bandwidth
from collsim.engine.timing import PipelineDecline
from collsim.hardware.topology import Topology
from collsim.nccl.layout import double_tree
from collsim.program import Job


@dataclass(frozen=True)
class Reference:
    """One full run of the call on the machine's first ``nodes`` nodes."""

    nodes: int
    depth: int
    time: float
    transfers: int


def tree_depth(nodes: int) -> int:
    """Levels of NCCL's double binary tree over ``nodes`` nodes (the deeper of the two)."""
    return max(depth(tree) for tree in double_tree(nodes))


# The references: trees 3 and 4 levels deep, each with every role a node can play, and for a
# call on more than 32 nodes a third, 5 levels deep. Powers of two, as the clusters they stand
# for mostly are: 6 and 12 nodes, as deep, were 1.6% off at 16 nodes (64 MiB, D-mod-k), and 4
# and 8 nodes give a smaller slope than deeper levels show: -1.3% at 24 nodes (1 GiB,
# D-mod-k). A level's cost varies by a few microseconds from one to the next (at 1 GiB on
# h100-cluster the 4th to 8th add 0.0955, 0.1023, 0.1002, 0.0927 and 0.1077 ms), so the line
# through the 4th alone is short by their mean difference for every level beyond; the least
# squares line through three depths averages two levels (benchmarks/README.md#the-pipeline-path).
REFERENCE_NODES = (8, 16, 32)
# Chunks of the call the references run when it has at least twice as many: on 8 and 16 nodes
# the 17th to 32nd chunks of a 1 GiB call each add the same period to the time as every later
# one (43.69 us on h100-cluster, both sizes, D-mod-k; the first 8 to 16 add more while the
# pipeline fills), so a reference's time at the call's chunks is its time at these plus one
# period a chunk (benchmarks/README.md#the-pipeline-path).
STEADY_CHUNKS = 16
# The fewest chunks of a call the path times. A deeper pipeline takes longer to fill than the
# references', which the line by depth does not show: about 0.01 ms of 1 GiB's 6.2 ms on 64
# and 128 nodes (h100-cluster, D-mod-k), 0.02 ms on 256 at 1 GiB and at 512 MiB (-0.58%, 64
# chunks), and more than the bound where the fill is most of the call (64 MiB, 8 chunks:
# +1.04% on 64 nodes, +1.61% on 24 of the 2:1 cluster).
LEAST_CHUNKS = 64
# The deepest trees whose call a full run has checked (benchmarks/fastpath_error.py --one,
# docs/engine.md#the-pipeline-path): 10 levels, 1,024 nodes of h100-cluster (8,192 GPUs).
# Each level beyond the references adds its own cost's difference from the line's slope (at
# most 8.8 us among the levels measured, 0.23% of 512 MiB on 2,048 nodes), so the path times
# trees up to one level deeper than that (2,048 nodes: 16,384 GPUs) within the bound; deeper
# calls run in full.
CHECKED_DEPTH = 10


def node_layout(job: Job, gpus: Sequence[int]) -> int:
    """Ranks per node when every node of the job holds as many, packed in rank order on
    the GPUs 0..p-1; else PipelineDecline."""
    p = job.nranks
    if list(gpus[:p]) != list(range(p)):
        raise PipelineDecline("ranks are not packed on the first GPUs")
    per_node = Counter(job.nodes)
    sizes = set(per_node.values())
    if len(sizes) != 1:
        raise PipelineDecline("nodes hold different numbers of ranks")
    return sizes.pop()


def hop_period(topology: Topology, costs: CostModel, gpus_per_node: int, nodes: int) -> float:
    """Seconds per byte of a slice that the busiest link of the trees' hops needs for one
    chunk of each tree: every hop (the GPU of each slice on a node to the same GPU on a tree
    neighbour, up and down) moves one slice per chunk of its tree, and a link carries the sum
    of the hops routed over it."""
    hops: list[tuple[int, int]] = []
    for tree in double_tree(nodes):
        for node, parent in enumerate(tree.parent):
            if parent is None:
                continue
            for g in range(gpus_per_node):
                a, b = node * gpus_per_node + g, parent * gpus_per_node + g
                hops += [(a, b), (b, a)]
    # Routed by source, so that a router keeping its recent sources' searches reuses them
    # (on 2,048 nodes a tree's order meets sources far apart); the counts are the same.
    hops.sort()
    use: Counter[int] = Counter()
    for a, b in hops:
        use.update(topology.route(a, b))
    links = topology.links
    return max((count / channel_bandwidth(costs, links[link]) for link, count in use.items()),
               default=0.0)


def at_chunks(short: Reference, longer: Reference, reference: Reference, loops: int,
              chunks: int) -> Reference:
    """``reference``, run on ``loops`` chunks, carried on to ``chunks``: one period a chunk,
    read off ``short`` and ``longer`` (one machine's runs on ``loops`` and ``2 × loops``
    chunks), and its transfers in proportion (every chunk moves the same)."""
    period = (longer.time - short.time) / loops
    return Reference(reference.nodes, reference.depth,
                     reference.time + period * (chunks - loops),
                     round(reference.transfers * chunks / loops))


def extrapolate(references: Sequence[Reference], depth: int, nodes: int) -> tuple[float, int]:
    """The time at ``depth`` on the least squares line through the references by depth
    (through both when there are two), and the transfers at ``nodes`` on the line through
    the last two by nodes (each node adds the same transfers)."""
    depths = [ref.depth for ref in references]
    times = [ref.time for ref in references]
    mean_depth, mean_time = sum(depths) / len(depths), sum(times) / len(times)
    slope = sum((d - mean_depth) * (t - mean_time) for d, t in zip(depths, times, strict=True)) \
        / sum((d - mean_depth) ** 2 for d in depths)
    a, b = references[-2:]
    per_node = (b.transfers - a.transfers) / (b.nodes - a.nodes)
    transfers = round(b.transfers + per_node * (nodes - b.nodes))
    return mean_time + slope * (depth - mean_depth), transfers


def references_for(nodes: int) -> tuple[int, ...]:
    """The node counts of the references for a call on ``nodes`` nodes: 8 and 16, and 32 for
    a call on more than 32."""
    return REFERENCE_NODES if nodes > REFERENCE_NODES[-1] else REFERENCE_NODES[:2]


def pipeline_time(topology: Topology, costs: CostModel, job: Job, gpus: Sequence[int],
                  chunks: Callable[[Job], int], reference: Callable[[int, int], Job],
                  run: Callable[[Job], tuple[float, int]]) -> tuple[float, int]:
    """The call's time and transfers from two references, or PipelineDecline.

    ``chunks(job)`` is the pipeline's chunk count; ``reference(ranks, count)`` is the call's
    job on the first ``ranks`` GPUs with ``count`` elements (its chunks as the call's), and
    ``run(job)`` runs such a job in full: its time and transfers."""
    per_node = node_layout(job, gpus)
    nodes = job.nranks // per_node
    counts = references_for(nodes)
    small, largest = counts[0], counts[-1]
    if tree_depth(nodes) > CHECKED_DEPTH + 1:
        raise PipelineDecline(f"{nodes:,} nodes: trees {tree_depth(nodes)} levels deep; the "
                              f"path's error is checked to {CHECKED_DEPTH} and it times one "
                              f"level more")
    if nodes <= REFERENCE_NODES[1]:
        raise PipelineDecline(f"{nodes} nodes: no more than the references "
                              f"({REFERENCE_NODES[1]})")
    if topology.gpus < largest * per_node:
        raise PipelineDecline("the machine has too few GPUs for the references")
    periods = [hop_period(topology, costs, per_node, count) for count in counts]
    period = periods[-1]
    if any(abs(other - period) > period * 1e-9 for other in periods):
        raise PipelineDecline("the references' busiest links differ")
    if hop_period(topology, costs, per_node, nodes) > period * (1 + 1e-9):
        raise PipelineDecline("links carry more of the trees' hops than the busiest on the "
                              "references (routes share them)")
    k = chunks(job)
    if k < LEAST_CHUNKS:
        raise PipelineDecline(f"{k} chunk{'s' * (k != 1)}: the fill is too much of the call "
                              f"(the path times {LEAST_CHUNKS} or more)")
    loops = STEADY_CHUNKS if k >= 2 * STEADY_CHUNKS else k
    # (nodes, chunks) of each run: the references, and the 8 nodes on twice the chunks
    plan = [(count, loops) for count in counts] + ([(small, 2 * loops)] if loops < k else [])
    jobs = [reference(count * per_node, job.count * want // k) for count, want in plan]
    for (count, want), ref_job in zip(plan, jobs, strict=True):
        if chunks(ref_job) != want:
            whose = "the call" if want == k else "not"
            raise PipelineDecline(f"the reference on {count} nodes runs {chunks(ref_job)} "
                                  f"chunks, {whose} {want}")
    runs = [Reference(count, tree_depth(count), *run(ref_job))
            for (count, _), ref_job in zip(plan, jobs, strict=True)]
    if loops < k:
        runs = [at_chunks(runs[0], runs[-1], ref, loops, k) for ref in runs[:len(counts)]]
    return extrapolate(runs, tree_depth(nodes), nodes)
