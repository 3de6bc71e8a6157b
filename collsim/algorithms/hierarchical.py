"""Hierarchical (2D) algorithms: an intra-node phase over NVLink, an inter-node phase on
each GPU's rail, and another intra-node phase.

Ranks are grouped by node (``job.node_of``); nodes are visited in the order the ring visits
them and a rank's *local index* is its place among its node's ranks by rank number, so the
ranks with local index i of all nodes (a "rail") sit on the same GPU of every node and, on a
rail-optimized cluster, on the same network rail.

- allreduce: ring reduce-scatter inside each node (local index i ends with block i of L
  combined over its node), allreduce of block i along rail i (ring, or with
  ``inter=tree`` a binomial reduce then broadcast), ring allgather inside each node.
- allgather: ring allgather along each rail (every rank gets its rail's blocks), then ring
  allgather inside each node of whole rails' blocks.
- reducescatter: ring reduce-scatter inside each node of whole rails' blocks, then ring
  reduce-scatter along each rail.

When nodes hold different numbers of ranks these fall back to the flat ring. On one node
(the canonical ``switch``) they are the ring, and so is their closed form.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

from collsim.algorithms.binomial import binomial_broadcast_steps, binomial_reduce_steps
from collsim.algorithms.registry import Cost, register
from collsim.algorithms.ring import ring_allgather_steps, ring_allreduce, ring_reducescatter_steps
from collsim.errors import InputError
from collsim.program import Job, Op, Program, Recv, Send, Step, block
from collsim.tags import TAGS, Tags

Regions = list[tuple[int, int]]


@functools.lru_cache(maxsize=16)
def node_groups(ring: tuple[int, ...], nodes: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    """Each node's ranks sorted by rank, nodes in the order the ring first reaches them."""
    groups: dict[int, list[int]] = {}
    for rank in ring:
        groups.setdefault(nodes[rank] if nodes else 0, []).append(rank)
    return tuple(tuple(sorted(g)) for g in groups.values())


@functools.lru_cache(maxsize=16)
def _places(groups: tuple[tuple[int, ...], ...]) -> dict[int, tuple[int, int]]:
    """rank -> (node position, local index)."""
    return {rank: (k, i) for k, group in enumerate(groups) for i, rank in enumerate(group)}


def _layout(job: Job) -> tuple[tuple[int, ...], ...] | None:
    """The node groups, or None when they differ in size (no rails to pair up)."""
    groups = node_groups(job.ring_order(), job.nodes)
    return groups if len({len(g) for g in groups}) == 1 else None


def _where(groups: tuple[tuple[int, ...], ...], rank: int) -> tuple[int, int]:
    """(node position, local index) of ``rank``."""
    return _places(groups)[rank]


@functools.lru_cache(maxsize=16)
def _local_rings(ring: tuple[int, ...], groups: tuple[tuple[int, ...], ...]
                 ) -> tuple[tuple[int, ...], ...]:
    """Each node's ranks in the order the global ring passes them."""
    places = _places(groups)
    rings: list[list[int]] = [[] for _ in groups]
    for rank in ring:
        rings[places[rank][0]].append(rank)
    return tuple(map(tuple, rings))


def _local_ring(job: Job, groups: tuple[tuple[int, ...], ...], k: int) -> tuple[int, ...]:
    """Node ``k``'s ranks in ring order."""
    return _local_rings(job.ring_order(), groups)[k]


def _merge(regions: Regions) -> Regions:
    """Sorted regions with neighbours joined and empty ones dropped (one empty if none)."""
    out: Regions = []
    for offset, count in sorted(r for r in regions if r[1] > 0):
        if out and out[-1][0] + out[-1][1] == offset:
            out[-1] = (out[-1][0], out[-1][1] + count)
        else:
            out.append((offset, count))
    return out or [(0, 0)]


def ring_reducescatter_sets(rank: int, members: Sequence[int], owned: dict[int, Regions],
                            tags: Tags) -> Program:
    """Ring reduce-scatter among ``members`` (in ring order) after which each member holds
    its ``owned`` regions combined over all members."""
    m = len(members)
    pos = members.index(rank)
    right, left = members[(pos + 1) % m], members[(pos - 1) % m]
    for step, tag in enumerate(tags.range(m - 1)):
        out = owned[members[(pos - step - 1) % m]]
        into = owned[members[(pos - step - 2) % m]]
        yield (tuple(Send(right, tag, o, c) for o, c in out)
               + tuple(Recv(left, tag, o, c, reduce=True) for o, c in into))


def ring_allgather_sets(rank: int, members: Sequence[int], owned: dict[int, Regions],
                        tags: Tags) -> Program:
    """Ring allgather among ``members`` (in ring order) of each member's ``owned`` regions."""
    m = len(members)
    pos = members.index(rank)
    right, left = members[(pos + 1) % m], members[(pos - 1) % m]
    for step, tag in enumerate(tags.range(m - 1)):
        out = owned[members[(pos - step) % m]]
        into = owned[members[(pos - step - 1) % m]]
        yield (tuple(Send(right, tag, o, c) for o, c in out)
               + tuple(Recv(left, tag, o, c) for o, c in into))


def _relabel(steps: Iterator[Step], members: Sequence[int]) -> Program:
    """Steps written for ranks 0..len(members)-1 as steps of the real ranks ``members``."""
    def one(op: Op) -> Op:
        if isinstance(op, (Send, Recv)):
            return replace(op, peer=members[op.peer])
        return op

    for step in steps:
        yield tuple(map(one, step)) if isinstance(step, (tuple, list)) else one(step)


def _rail_allreduce(rank: int, rail: Sequence[int], offset: int, count: int, inter: str,
                    tags: Tags) -> Program:
    """Allreduce of ``buf[offset:offset+count]`` among the ranks of one rail."""
    n = len(rail)
    reduce_tags, spread_tags = tags.phases(2)
    if inter == "tree":
        sub = Job("allreduce", n, count)
        me = rail.index(rank)
        yield from _relabel(binomial_reduce_steps(me, sub, 0, reduce_tags, offset, count), rail)
        yield from _relabel(binomial_broadcast_steps(me, sub, 0, spread_tags, offset, count),
                            rail)
        return
    parts = {}
    for k, r in enumerate(rail):
        o, c = block(count, n, k)
        parts[r] = [(offset + o, c)]
    yield from ring_reducescatter_sets(rank, rail, parts, reduce_tags)
    yield from ring_allgather_sets(rank, rail, parts, spread_tags)


def _inter(job: Job) -> str:
    inter = job.params.get("inter", "ring")
    if inter not in ("ring", "tree"):
        raise InputError(f"inter must be ring or tree, got {inter!r}", key="param.inter")
    return inter


def _one_node_allreduce(c: Cost) -> float:
    """The closed form where every rank is on one node: the ring allreduce's."""
    return 2 * (c.p - 1) * c.alpha + 2 * (c.p - 1) / c.p * c.n * c.beta \
        + (c.p - 1) / c.p * c.n * c.gamma


def _formula(phases: str) -> str:
    return f"{phases}; on one node: the ring's"


@register(
    "allreduce", "hierarchical",
    formula=_formula("2(L-1)·α + 2(L-1)/L·n·β (NVLink) + 2(N-1)·α' + 2(N-1)/(NL)·n·β' "
                     "(network, per rail) + γ terms, L GPUs per node, N nodes"),
    cost=_one_node_allreduce,
    source="NCCL 2D/hierarchical allreduce; Jia et al. 2018 (hierarchical allreduce); "
           "Sergeev & Del Balso 2018 (Horovod)",
    summary="intra-node ring reduce-scatter, inter-node allreduce per rail (ring or tree), "
            "intra-node ring allgather",
    params=("inter",),
)
def hierarchical_allreduce(rank: int, job: Job) -> Program:
    """Reduce-scatter in the node, allreduce along the rail, allgather in the node."""
    inter = _inter(job)
    groups = _layout(job)
    if groups is None:
        return ring_allreduce(rank, job)
    return _allreduce(rank, job, groups, inter)


def _allreduce(rank: int, job: Job, groups: tuple[tuple[int, ...], ...], inter: str
               ) -> Program:
    k, i = _where(groups, rank)
    local = _local_ring(job, groups, k)
    size = len(groups[k])
    owned = {r: [block(job.count, size, j)] for j, r in enumerate(groups[k])}
    node_reduce, across, node_spread = TAGS.phases(3)
    yield from ring_reducescatter_sets(rank, local, owned, node_reduce)
    rail = [g[i] for g in groups]
    offset, count = block(job.count, size, i)
    yield from _rail_allreduce(rank, rail, offset, count, inter, across)
    yield from ring_allgather_sets(rank, local, owned, node_spread)


def _rail_blocks(job: Job, groups: Sequence[Sequence[int]], index: int) -> Regions:
    """The buffer regions of every rank with local index ``index`` (one rail's blocks)."""
    return _merge([block(job.count, job.nranks, g[index]) for g in groups])


def _two_d(rank: int, job: Job, flat: Callable[[int, Job], Program],
           phases: Callable[[int, Job, tuple[tuple[int, ...], ...]], Program]) -> Program:
    groups = _layout(job)
    return flat(rank, job) if groups is None else phases(rank, job, groups)


@register(
    "allgather", "hierarchical",
    formula=_formula("(N-1)·α' + (N-1)/p·n·β' (per rail) + (L-1)·α + (L-1)N/p·n·β (NVLink)"),
    cost=lambda c: (c.p - 1) * c.alpha + (c.p - 1) / c.p * c.n * c.beta,
    source="2D allgather (rail ring, then node ring), e.g. NCCL PXN/hierarchical designs",
    summary="ring allgather along each rail, then ring allgather of whole rails in the node",
)
def hierarchical_allgather(rank: int, job: Job) -> Program:
    """Allgather along the rail, then in the node."""
    return _two_d(rank, job, ring_allgather_steps, _allgather)


def _allgather(rank: int, job: Job, groups: tuple[tuple[int, ...], ...]) -> Program:
    k, i = _where(groups, rank)
    rail = [g[i] for g in groups]
    across, within = TAGS.phases(2)
    yield from ring_allgather_sets(
        rank, rail, {r: [block(job.count, job.nranks, r)] for r in rail}, across)
    local = _local_ring(job, groups, k)
    owned = {r: _rail_blocks(job, groups, j) for j, r in enumerate(groups[k])}
    yield from ring_allgather_sets(rank, local, owned, within)


@register(
    "reducescatter", "hierarchical",
    formula=_formula("(L-1)·α + (L-1)N/p·n·(β+γ) (NVLink) + (N-1)·α' + (N-1)/p·n·(β'+γ) "
                     "(per rail)"),
    cost=lambda c: (c.p - 1) * c.alpha + (c.p - 1) / c.p * c.n * (c.beta + c.gamma),
    source="2D reduce-scatter (node ring, then rail ring)",
    summary="ring reduce-scatter of whole rails in the node, then ring reduce-scatter "
            "along each rail",
)
def hierarchical_reducescatter(rank: int, job: Job) -> Program:
    """Reduce-scatter in the node, then along the rail."""
    return _two_d(rank, job, ring_reducescatter_steps, _reducescatter)


def _reducescatter(rank: int, job: Job, groups: tuple[tuple[int, ...], ...]) -> Program:
    k, i = _where(groups, rank)
    local = _local_ring(job, groups, k)
    owned = {r: _rail_blocks(job, groups, j) for j, r in enumerate(groups[k])}
    within, across = TAGS.phases(2)
    yield from ring_reducescatter_sets(rank, local, owned, within)
    rail = [g[i] for g in groups]
    yield from ring_reducescatter_sets(
        rank, rail, {r: [block(job.count, job.nranks, r)] for r in rail}, across)
