"""Rank placement (which GPU runs each rank) and the topology-aware ring order of the ranks.

Placement ``packed`` (default) fills nodes in order: rank r on GPU r. ``spread`` deals ranks
round-robin across nodes (rank 0 on node 0, rank 1 on node 1, ...). A list gives each rank's
GPU explicitly.

The ring is built like NCCL's: every node's ranks are contiguous so that the ring crosses
each node boundary once (nodes in the topology's ``node_order()`` if it has one, else
by index), and inside a node the ranks follow the order with the fastest
slowest hop (the NVLink ring or mesh, or PCIe locality). Every other node is walked
backwards ("snake"), so the ring leaves node k and enters node k+1 on GPUs with the same
local index, i.e. on the same rail of a rail-optimized fabric.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from collsim.errors import InputError
from collsim.hardware.topology import Topology

MAX_SEARCH = 16  # larger nodes without a ring_hint keep GPU order


def place_ranks(topology: Topology, ranks: int, params: dict[str, Any] | None = None
                ) -> list[int]:
    """The GPU of each rank under ``params["placement"]`` (packed, spread or a list)."""
    if ranks > topology.gpus:
        raise InputError(f"{ranks} ranks do not fit on topology '{topology.name}', which has "
                         f"{topology.gpus} GPUs", key="ranks")
    choice = (params or {}).get("placement", "packed")
    if isinstance(choice, (list, tuple)):
        return _explicit(topology, ranks, list(choice))
    if choice == "packed":
        return list(range(ranks))
    if choice == "spread":
        return _spread(topology, ranks)
    raise InputError(f"unknown placement {choice!r}; choose packed, spread or a list of GPUs",
                     key="param.placement")


def _explicit(topology: Topology, ranks: int, gpus: list[Any]) -> list[int]:
    if len(gpus) != ranks:
        raise InputError(f"placement lists {len(gpus)} GPUs for {ranks} ranks",
                         key="param.placement")
    for gpu in gpus:
        if isinstance(gpu, bool) or not isinstance(gpu, int) or not 0 <= gpu < topology.gpus:
            raise InputError(f"placement: {gpu!r} is not a GPU from 0 to {topology.gpus - 1}",
                             key="param.placement")
    if len(set(gpus)) != len(gpus):
        raise InputError("placement puts two ranks on the same GPU", key="param.placement")
    return [int(g) for g in gpus]


def gpus_by_node(topology: Topology) -> list[list[int]]:
    """The GPUs of each node, in GPU order."""
    nodes: list[list[int]] = [[] for _ in range(topology.nodes)]
    for gpu in range(topology.gpus):
        nodes[topology.node_of[gpu]].append(gpu)
    return nodes


def _spread(topology: Topology, ranks: int) -> list[int]:
    """Round-robin over nodes: the i-th rank of a node takes that node's i-th free GPU."""
    queues = [list(reversed(g)) for g in gpus_by_node(topology) if g]
    out: list[int] = []
    while len(out) < ranks:
        for queue in queues:
            if queue and len(out) < ranks:
                out.append(queue.pop())
    return out


def ring_order(topology: Topology, gpus_of_ranks: Sequence[int]) -> tuple[int, ...]:
    """The ranks in a topology-aware ring order (see the module docstring)."""
    order: list[int] = []
    for index, path in enumerate(node_rings(topology, gpus_of_ranks)):
        order.extend(reversed(path) if index % 2 else path)
    return tuple(order)


def node_rings(topology: Topology, gpus_of_ranks: Sequence[int]) -> list[list[int]]:
    """Each node's ranks in its local ring order (:func:`local_ring`), nodes in the order a
    ring visits them; nodes without ranks are left out."""
    by_node: dict[int, list[int]] = {}
    for rank, gpu in enumerate(gpus_of_ranks):
        by_node.setdefault(topology.node_of[gpu], []).append(rank)
    visit = getattr(topology, "node_order", None)
    nodes = [n for n in visit() if n in by_node] if visit is not None else sorted(by_node)
    rings = []
    for node in nodes:
        ranks = by_node[node]
        local = local_ring(topology, [gpus_of_ranks[r] for r in ranks])
        rank_of = {gpus_of_ranks[r]: r for r in ranks}
        rings.append([rank_of[g] for g in local])
    return rings


def local_ring(topology: Topology, gpus: Sequence[int], budget: int = 20000) -> list[int]:
    """``gpus`` (one node's) in the ring order whose slowest hop is fastest.

    A topology may answer itself with a ``ring_hint(gpus)`` method (tori do). Uniform
    machines and nodes of more than ``MAX_SEARCH`` GPUs keep GPU order. Otherwise this
    searches Hamiltonian cycles over hops of at least a bandwidth threshold, highest
    threshold first; neighbours are tried fastest, then nearest, then lowest GPU first, so
    regular nodes keep GPU order. A threshold is abandoned after ``budget`` expansions.
    """
    gpus = sorted(gpus)
    hint = getattr(topology, "ring_hint", None)
    if hint is not None:
        hinted = hint(gpus)
        if hinted is not None:
            return list(hinted)
    if len(gpus) <= 2 or len(gpus) > MAX_SEARCH or topology.path_parameters() is not None:
        return gpus
    bw = {(a, b): topology.path_bandwidth(a, b) for a in gpus for b in gpus if a != b}
    lat = {(a, b): topology.path_latency(a, b) for a, b in bw}
    pair = {k: min(bw[k], bw[k[1], k[0]]) for k in bw}
    for threshold in sorted(set(pair.values()), reverse=True):
        found = _cycle(gpus, pair, lat, threshold, budget)
        if found:
            return found
    return gpus


def _cycle(gpus: list[int], pair: dict, lat: dict, threshold: float, budget: int
           ) -> list[int] | None:
    """A Hamiltonian cycle (as a path from gpus[0]) over pairs with bandwidth >= threshold."""
    start = gpus[0]
    neighbours = {a: sorted((b for b in gpus if b != a and pair[a, b] >= threshold),
                            key=lambda b, a=a: (-pair[a, b], lat[a, b], b)) for a in gpus}
    path, seen = [start], {start}
    stack = [iter(neighbours[start])]
    while stack and budget > 0:
        budget -= 1
        nxt = next(stack[-1], None)
        if nxt is None:
            stack.pop()
            seen.discard(path.pop())
            continue
        if nxt in seen:
            continue
        path.append(nxt)
        seen.add(nxt)
        if len(path) == len(gpus):
            if pair[nxt, start] >= threshold:
                return path
            seen.discard(path.pop())
            continue
        stack.append(iter(neighbours[nxt]))
    return None
