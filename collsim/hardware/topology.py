"""A machine as the engine sees it: directed links with latency and bandwidth, and the route
(a tuple of link indices) between every pair of GPUs."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collsim.hardware.machine import Machine


@dataclass(eq=False, slots=True)
class Link:
    """One direction of a physical link: ``latency`` seconds, ``bandwidth`` bytes/s."""

    src: str
    dst: str
    latency: float
    bandwidth: float
    kind: str = "link"

    @property
    def name(self) -> str:
        return f"{self.src}->{self.dst}"


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A point of the machine other than a GPU that a helper rank may sit on: ``index``
    (after the GPUs) in routes, ``kind`` (``nvswitch``, ``switch``, ``leaf``, ``spine``) and
    the node it belongs to (None for the network's switches)."""

    name: str
    index: int
    kind: str
    node: int | None = None


@dataclass(eq=False, repr=False)
class Topology:
    """Base of every machine: GPUs 0..gpus-1, directed links, and a route between GPUs.

    Subclasses override :meth:`route`. ``node_of`` gives each GPU's node (server) index,
    which hierarchical algorithms and rank placement use. ``machine`` holds what a real
    machine's file declares beside its links (its GPU, its ``nccl`` figures); None for the
    canonical kinds. ``bases`` are the files its file derives from (``base:``), nearest first.
    """

    name: str
    kind: str
    gpus: int
    links: list[Link]
    reduce_bandwidth: float = math.inf
    node_of: list[int] = field(default_factory=list)
    source: str = ""
    machine: Machine | None = None
    bases: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.node_of:
            self.node_of = [0] * self.gpus

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} {self.name!r}: {self.kind}, {self.gpus} GPUs on "
                f"{self.nodes} node{'s' if self.nodes != 1 else ''}, {len(self.links)} links>")

    @property
    def gamma(self) -> float:
        """Seconds per byte a GPU spends combining received data (0 if free)."""
        return 0.0 if math.isinf(self.reduce_bandwidth) else 1.0 / self.reduce_bandwidth

    @property
    def nodes(self) -> int:
        return max(self.node_of) + 1 if self.node_of else 1

    def route(self, src: int, dst: int) -> tuple[int, ...]:
        """Indices into :attr:`links` of the directed links from GPU ``src`` to GPU ``dst``;
        either may also be the index of an :meth:`endpoints` switch."""
        raise NotImplementedError

    def endpoints(self) -> tuple[Endpoint, ...]:
        """The switches helper ranks may sit on, indexed from ``gpus`` on (none here)."""
        return ()

    @property
    def endpoint_count(self) -> int:
        """GPUs and switch endpoints together: the size of the space routes are keyed in."""
        return self.gpus + len(self.endpoints())

    def endpoint(self, name: str) -> int:
        """The route index of the endpoint called ``name``; ValueError naming the others."""
        for endpoint in self.endpoints():
            if endpoint.name == name:
                return endpoint.index
        names = ", ".join(e.name for e in self.endpoints()) or "none"
        raise ValueError(f"topology '{self.name}' has no endpoint {name!r}; it has: {names}")

    def nvswitch(self, node: int) -> str | None:
        """The name of node ``node``'s NVSwitch endpoint, or None if it has none."""
        return next((e.name for e in self.endpoints()
                     if e.kind == "nvswitch" and e.node == node), None)

    def nic_of(self, gpu: int) -> int | None:
        """Which of its node's NICs GPU ``gpu`` reaches the network through (None: no NIC)."""
        return None

    def path_parameters(self) -> tuple[float, float] | None:
        """(alpha, beta) when every GPU pair sees the same latency and bandwidth, else None."""
        return None

    def path_latency(self, src: int, dst: int) -> float:
        return sum(self.links[i].latency for i in self.route(src, dst))

    def path_bandwidth(self, src: int, dst: int) -> float:
        return min(self.links[i].bandwidth for i in self.route(src, dst))


class SwitchTopology(Topology):
    """Every GPU has one full-duplex port to one non-blocking switch (``switch``,
    docs/design.md#kinds).

    Link 2g carries GPU g's traffic up to the switch, link 2g+1 the switch's traffic down.
    The switch itself is the endpoint ``switch`` (index ``gpus``).
    """

    def route(self, src: int, dst: int) -> tuple[int, ...]:
        gpus = self.gpus
        if src < gpus and dst < gpus:
            return (2 * src, 2 * dst + 1)
        if src < gpus:
            return (2 * src,)      # up to the switch
        return (2 * dst + 1,) if dst < gpus else ()

    def endpoints(self) -> tuple[Endpoint, ...]:
        return (Endpoint("switch", self.gpus, "switch"),)

    def path_parameters(self) -> tuple[float, float] | None:
        link = self.links[0]
        return 2 * link.latency, 1.0 / link.bandwidth


class FullyConnectedTopology(Topology):
    """A dedicated full-duplex link between every pair of GPUs (``fully_connected``,
    docs/design.md#kinds)."""

    def route(self, src: int, dst: int) -> tuple[int, ...]:
        return (src * (self.gpus - 1) + (dst if dst < src else dst - 1),)

    def path_parameters(self) -> tuple[float, float] | None:
        if not self.links:  # one GPU: no path at all
            return None
        link = self.links[0]
        return link.latency, 1.0 / link.bandwidth


def switch(name: str, gpus: int, latency: float, bandwidth: float,
           reduce_bandwidth: float = math.inf) -> SwitchTopology:
    """The canonical single-switch machine."""
    links = []
    for g in range(gpus):
        links.append(Link(f"gpu{g}", "switch", latency, bandwidth, "port"))
        links.append(Link("switch", f"gpu{g}", latency, bandwidth, "port"))
    return SwitchTopology(name, "switch", gpus, links, reduce_bandwidth)


def fully_connected(name: str, gpus: int, latency: float, bandwidth: float,
                    reduce_bandwidth: float = math.inf) -> FullyConnectedTopology:
    """The canonical full mesh: link index src*(gpus-1) + rank of dst among the others."""
    links = [Link(f"gpu{s}", f"gpu{d}", latency, bandwidth, "direct")
             for s in range(gpus) for d in range(gpus) if d != s]
    return FullyConnectedTopology(name, "fully_connected", gpus, links, reduce_bandwidth)
