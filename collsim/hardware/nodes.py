"""One server ("node") as a graph: its GPUs, the links that join them (the node kind's
*wiring*: an NVSwitch, direct NVLinks, or none), the PCIe tree under the host's CPU
sockets, and the NICs that take traffic to the network. The node kinds themselves are
in :mod:`collsim.hardware.kinds.nodes`.

The PCIe tree: ``pcie.switches`` switches spread evenly over ``pcie.sockets`` CPU sockets
(``uplink`` joins a switch to its CPU root port; ``inter_socket`` joins every pair of
sockets), GPUs spread evenly over the switches (``link``), so that every switch has a GPU
and every socket a switch. NIC k sits under switch ``k * switches // count`` and GPU g
uses NIC ``g * count // gpus``: ``count == gpus`` is one NIC per GPU (rails), fewer NICs
are shared. With ``gpudirect: true`` a GPU's traffic reaches its NIC by the shortest PCIe
path (through the shared switch, GPUDirect RDMA); with ``false`` it is staged in host
memory: GPU to its own socket, then socket to the NIC. Unless the file says, the NICs'
transport decides (``nics.transport``, collsim.hardware.transports: only TCP sockets stage).
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass, field
from typing import Protocol

from collsim.hardware.graph import LinkGraph, NoRoute, Router


@dataclass(frozen=True)
class LinkSpec:
    """One direction of a link: latency (s) and bandwidth (B/s)."""

    latency: float
    bandwidth: float


@dataclass(frozen=True)
class PcieSpec:
    """A node's PCIe tree and host (see the module docstring)."""

    switches: int
    sockets: int
    link: LinkSpec
    uplink: LinkSpec
    inter_socket: LinkSpec | None = None


@dataclass(frozen=True)
class NicSpec:
    """The node's NICs: how many, their port to the network, GPUDirect or through the host,
    and the network transport NCCL drives them with (collsim.hardware.transports).
    ``declared`` names the transport's figures the file sets itself (``gpudirect``)."""

    count: int
    link: LinkSpec
    gpudirect: bool = True
    transport: str = "ib"
    declared: frozenset[str] = frozenset()


class Wiring(Protocol):
    """How a node kind joins its GPUs to each other, besides the PCIe tree."""

    @property
    def links(self) -> int:
        """Directed links :meth:`wire` adds (two per full-duplex link)."""

    def wire(self, g: LinkGraph, gpus: list[str]) -> None:
        """Add the links (and any switch) between the GPU vertices ``gpus``."""

    def nvlink_per_gpu(self, gpus: int) -> float:
        """NVLink bandwidth (B/s, one direction) of the best-wired of ``gpus`` GPUs; 0 if none."""


@dataclass(frozen=True)
class Unwired:
    """No links between GPUs: they talk through the PCIe tree."""

    links: int = 0

    def wire(self, g: LinkGraph, gpus: list[str]) -> None:
        return None

    def nvlink_per_gpu(self, gpus: int) -> float:
        return 0.0


@dataclass(frozen=True)
class NodeSpec:
    """Everything a node is built from; ``kind`` names the node kind that read it."""

    kind: str
    gpus: int
    wiring: Wiring = Unwired()
    pcie: PcieSpec | None = None
    nics: NicSpec | None = None

    @property
    def links(self) -> int:
        """Directed links :func:`build_node` makes of this spec."""
        pcie = self.pcie
        duplex = 0 if pcie is None else (self.gpus + pcie.switches
                                          + pcie.sockets * (pcie.sockets - 1) // 2)
        return self.wiring.links + 2 * (duplex + (self.nics.count if self.nics else 0))


@dataclass(eq=False)
class NodeGraph:
    """A built node: its graph, GPU and NIC vertices, and cached routes between them.

    Routes are link indices into ``graph.links``; a cluster shifts them per node.
    """

    spec: NodeSpec
    graph: LinkGraph
    gpus: list[str]
    nics: list[str]
    nic_of_gpu: list[int]
    socket_of_gpu: list[str]
    uniform: tuple[float, float] | None = None
    router: Router = field(init=False)

    def __post_init__(self) -> None:
        self.router = Router(self.graph)

    @functools.cache  # noqa: B019  (nodes live as long as their topology)
    def gpu_route(self, a: int, b: int) -> tuple[int, ...]:
        """From local GPU a to local GPU b."""
        return self.router.path(self.gpus[a], self.gpus[b])

    @functools.cache  # noqa: B019
    def to_nic(self, gpu: int) -> tuple[int, ...]:
        """From local GPU ``gpu`` out through its NIC's port (port link excluded)."""
        nic = self.nics[self.nic_of_gpu[gpu]]
        if self.spec.nics is not None and not self.spec.nics.gpudirect:
            host = self.socket_of_gpu[gpu]
            return self.router.path(self.gpus[gpu], host) + self.router.path(host, nic)
        return self.router.path(self.gpus[gpu], nic)

    @functools.cache  # noqa: B019
    def from_nic(self, gpu: int) -> tuple[int, ...]:
        """From the NIC of local GPU ``gpu`` to that GPU."""
        nic = self.nics[self.nic_of_gpu[gpu]]
        if self.spec.nics is not None and not self.spec.nics.gpudirect:
            host = self.socket_of_gpu[gpu]
            return self.router.path(nic, host) + self.router.path(host, self.gpus[gpu])
        return self.router.path(nic, self.gpus[gpu])


# Drawing rows, bottom to top (the fabric's rows continue above).
LAYER_NVSWITCH, LAYER_GPU, LAYER_PCIE, LAYER_CPU, LAYER_NIC = 0, 1, 2, 3, 4


def build_node(spec: NodeSpec) -> NodeGraph:
    """The graph of one node; raises NoRoute (with the GPUs named) if two GPUs cannot talk."""
    g = LinkGraph()
    gpus = [g.vertex(f"gpu{i}", "gpu", transit=False, layer=LAYER_GPU) for i in range(spec.gpus)]
    spec.wiring.wire(g, gpus)
    sockets = _pcie_tree(g, spec, gpus)
    nics = _nics(g, spec)
    count = len(nics)
    nic_of_gpu = [i * count // spec.gpus for i in range(spec.gpus)] if count else []
    node = NodeGraph(spec, g, gpus, nics, nic_of_gpu, sockets)
    paths = set()
    for a, b in itertools.permutations(range(spec.gpus), 2):
        try:
            route = node.gpu_route(a, b)
        except NoRoute:
            raise NoRoute(f"GPUs {a} and {b} have no path: wire them with NVLink or add a "
                          "'pcie' section") from None
        paths.add((sum(g.links[i].latency for i in route),
                   min(g.links[i].bandwidth for i in route)))
    if len(paths) == 1:
        (latency, bandwidth), = paths
        node.uniform = (latency, 1.0 / bandwidth)
    return node


def _pcie_tree(g: LinkGraph, spec: NodeSpec, gpus: list[str]) -> list[str]:
    """Switches, sockets and their links; returns the socket vertex of each GPU."""
    pcie = spec.pcie
    if pcie is None:
        return ["" for _ in gpus]
    cpus = [g.vertex(f"cpu{s}", "cpu", layer=LAYER_CPU) for s in range(pcie.sockets)]
    for a, b in itertools.combinations(cpus, 2):
        g.connect(a, b, pcie.inter_socket.latency, pcie.inter_socket.bandwidth, "inter_socket")
    switches = []
    for w in range(pcie.switches):
        switch = g.vertex(f"pcie{w}", "pcie_switch", layer=LAYER_PCIE)
        g.connect(switch, cpus[w * pcie.sockets // pcie.switches], pcie.uplink.latency,
                  pcie.uplink.bandwidth, "pcie_uplink")
        switches.append(switch)
    sockets = []
    for i, gpu in enumerate(gpus):
        w = i * pcie.switches // len(gpus)
        g.connect(gpu, switches[w], pcie.link.latency, pcie.link.bandwidth, "pcie")
        sockets.append(cpus[w * pcie.sockets // pcie.switches])
    return sockets


def _nics(g: LinkGraph, spec: NodeSpec) -> list[str]:
    """NIC vertices, each under its PCIe switch (the NIC's network port is the fabric's)."""
    if spec.nics is None:
        return []
    pcie = spec.pcie
    nics = []
    for k in range(spec.nics.count):
        nic = g.vertex(f"nic{k}", "nic", transit=False, layer=LAYER_NIC)
        w = k * pcie.switches // spec.nics.count
        g.connect(nic, f"pcie{w}", pcie.link.latency, pcie.link.bandwidth, "pcie")
        nics.append(nic)
    return nics
