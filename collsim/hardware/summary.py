"""What a machine offers, in figures: GPUs, nodes, links by kind, per-GPU injection
bandwidth inside the node and into the network, and bisection bandwidth."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx

from collsim.hardware.graph import LinkGraph, head, tail
from collsim.hardware.shipped import shipped_directory
from collsim.hardware.topology import Topology


@dataclass
class Summary:
    """The figures ``collsim topo show`` prints; bandwidths in bytes/s, one direction."""

    name: str
    kind: str
    gpus: int
    nodes: int
    gpus_per_node: int
    links: dict[str, tuple[int, list[float]]] = field(default_factory=dict)
    intra_injection: float = 0.0
    network_injection: float | None = None
    gpus_per_nic: int | None = None
    bisection: float | None = None
    path_parameters: tuple[float, float] | None = None
    bases: tuple[str, ...] = ()


def machine_graph(topology: Topology) -> LinkGraph:
    """The topology's LinkGraph: its own if it has one, else built from its links (GPU
    vertices, the sources of their routes' first links, are endpoints)."""
    if hasattr(topology, "link_graph"):
        return topology.link_graph()
    graph = LinkGraph()
    gpu_names = {gpu_vertex(topology, g) for g in range(topology.gpus)}
    for link in topology.links:
        for name in (link.src, link.dst):
            graph.vertex(name, "gpu" if name in gpu_names else "switch",
                         transit=name not in gpu_names, layer=1 if name in gpu_names else 5)
    graph.links.extend(topology.links)
    return graph


def gpu_vertex(topology: Topology, gpu: int) -> str:
    """The vertex name of GPU ``gpu``: where its routes start."""
    if hasattr(topology, "gpu_vertices"):
        return topology.gpu_vertices[gpu]
    if hasattr(topology, "node") and hasattr(topology, "gpus_per_node"):
        node, local = divmod(gpu, topology.gpus_per_node)
        return f"n{node}.{topology.node.gpus[local]}"
    other = 1 if gpu == 0 else 0
    return topology.links[topology.route(gpu, other)[0]].src


def links_by_kind(topology: Topology) -> dict[str, tuple[int, list[float]]]:
    """Kind -> (physical links, i.e. directed links / 2; distinct bandwidths per direction)."""
    count: Counter[str] = Counter()
    speeds: dict[str, set[float]] = defaultdict(set)
    for link in topology.links:
        count[link.kind] += 1
        speeds[link.kind].add(link.bandwidth)
    return {k: (count[k] // 2 if count[k] % 2 == 0 else count[k], sorted(speeds[k]))
            for k in count}


def intra_injection(topology: Topology, gpu: int = 0) -> float:
    """Bandwidth GPU ``gpu`` can send at into its own node: the links its routes to the
    node's other GPUs leave by, added up."""
    node = topology.node_of[gpu]
    first = {topology.route(gpu, d)[0] for d in range(topology.gpus)
             if d != gpu and topology.node_of[d] == node}
    return sum(topology.links[i].bandwidth for i in first)


def network_injection(topology: Topology, gpu: int = 0) -> tuple[float, int] | None:
    """(bandwidth per GPU into the network, GPUs sharing its NIC), None on one node."""
    node = topology.node_of[gpu]
    other = next((d for d in range(topology.gpus) if topology.node_of[d] != node), None)
    if other is None:
        return None
    route = topology.route(gpu, other)
    nic_port = next((i for i in route if topology.links[i].kind == "nic"), None)
    if nic_port is None:
        return min(topology.links[i].bandwidth for i in route), 1
    sharing = sum(1 for g in range(topology.gpus) if topology.node_of[g] == node
                  and nic_port in topology.route(g, other))
    bandwidth = min(topology.links[i].bandwidth for i in route)
    return min(bandwidth, topology.links[nic_port].bandwidth / sharing), sharing


def bisection(topology: Topology) -> float | None:
    """Max flow (bytes/s) from the first half of the GPUs to the second half, one
    direction; None for a single GPU. Flow may not pass through endpoints (GPUs, NICs)."""
    if topology.gpus < 2:
        return None
    graph = machine_graph(topology)
    net = nx.DiGraph()
    for link in graph.links:
        u, v = tail(graph.vertices[link.src]), head(graph.vertices[link.dst])
        if net.has_edge(u, v):
            net[u][v]["capacity"] += link.bandwidth
        else:
            net.add_edge(u, v, capacity=link.bandwidth)
    half = topology.gpus // 2
    for g in range(topology.gpus):
        vertex = graph.vertices[gpu_vertex(topology, g)]
        if g < half:
            net.add_edge("<source>", tail(vertex))
        else:
            net.add_edge(head(vertex), "<sink>")
    return float(nx.maximum_flow_value(net, "<source>", "<sink>"))


def summarize(topology: Topology, with_bisection: bool = True) -> Summary:
    """Every figure of :class:`Summary` for ``topology``."""
    per_node = Counter(topology.node_of)
    net = network_injection(topology)
    return Summary(
        topology.name, topology.kind, topology.gpus, topology.nodes, max(per_node.values()),
        links_by_kind(topology),
        intra_injection(topology) if topology.gpus > 1 and per_node[0] > 1 else 0.0,
        net[0] if net else None, net[1] if net else None,
        bisection(topology) if with_bisection else None, topology.path_parameters(),
        tuple(base_label(file) for file in topology.bases))


def base_label(file: str) -> str:
    """A base file as ``topo show`` names it: a shipped one by its name, another by its path."""
    path = Path(file)
    return path.stem if path.resolve().parent == shipped_directory().resolve() else file


def _gbps(bandwidth: float) -> str:
    return f"{bandwidth / 1e9:g} GB/s"


def format_summary(s: Summary) -> str:
    """The summary as aligned text lines."""
    lines = [f"topology        {s.name} (kind {s.kind})",
             *([f"base            {' <- '.join(s.bases)}"] if s.bases else []),
             f"GPUs            {s.gpus} on {s.nodes} node{'s' if s.nodes != 1 else ''}"
             f" ({s.gpus_per_node} per node)",
             "links (full duplex, bandwidth per direction):"]
    for kind, (count, speeds) in sorted(s.links.items()):
        lines.append(f"  {kind:<14}{count:>7} x {', '.join(_gbps(b) for b in speeds)}")
    lines.append(f"injection/GPU   {_gbps(s.intra_injection)} to its node's GPUs")
    if s.network_injection is not None:
        shared = f", NIC shared by {s.gpus_per_nic} GPUs" if s.gpus_per_nic != 1 else ""
        lines.append(f"                {_gbps(s.network_injection)} into the network{shared}")
    if s.bisection is not None:
        lines.append(f"bisection       {_gbps(s.bisection)} (GPUs 0..{s.gpus // 2 - 1} to the "
                     "rest, one direction)")
    if s.path_parameters is not None:
        alpha, beta = s.path_parameters
        lines.append(f"uniform paths   alpha = {alpha * 1e6:g} us, 1/beta = {_gbps(1 / beta)}")
    return "\n".join(lines)
