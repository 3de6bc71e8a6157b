"""The GPU's copies of a slice on a network hop, and the slices a receiver passes on: what a
message that crosses the network waits for beyond its bytes and its latency, and how much of
that latency the ring's next step hides.

NCCL's network transport is store and forward by slices: the proxy posts a slice to the NIC
only once the GPU has written all of it into the connection's buffer, and (with the Simple
protocol) the receiving GPU reads a slice only once all of it has arrived
(docs/nccl.md#algorithms-staging). A cost model says how long that takes with three
optional fields: ``slice_bytes``, the payload bytes of the unit the proxy forwards whole (per
channel), and ``write_seconds`` and ``read_seconds``, the seconds per payload byte of one
channel's write of a slice into the connection's buffer and of its read out of it (0: the
protocol does not wait for it), and ``slices``, how many slices a message is cut into (1;
NCCL's ring cuts a Simple chunk into 2 of half its bytes, whatever its size). A message of
``size`` bytes on a lane of ``weight`` channels whose route crosses a network link is
delivered ``min(size / weight / slices, slice_bytes)`` times the seconds of the copies it
waits for later: one delay per message, its bytes still leaving at the rate the fabric
grants. A message that is one of a step's parts (:attr:`~collsim.program.Send.parts`)
waits for the copies of the whole step, as the proxy posts the step once all of it is
written. A send that passes on, in the same pass, what its rank's previous receive brought
(:attr:`~collsim.program.Send.forwarded`: NCCL's fused
receive-and-send steps) waits for no write, the previous slices' arrival pacing it; one whose
receiver passes it on so (:attr:`~collsim.program.Send.forwarding`) waits for no read.

The same fused step passes each slice on as soon as that slice has arrived, not once the
whole message has: a message its receiver passes on is delivered, for the step that follows,
its latency earlier by the time its bytes after the first slice take to leave at the route's
rate (at most its latency; :meth:`Staging.hidden`). So a ring of network hops pays a hop's
latency once a loop, where the slices of a message outlast it, not once a step. Its slot
across the network comes back only once the receiver has copied its last slice out
(:meth:`Staging.consumed`). A model without ``slice_bytes`` charges and hides nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from collsim.engine.costs import CostModel
from collsim.hardware.machine import CLASS_OF_KIND
from collsim.hardware.topology import Link, Topology
from collsim.program import Send

Route = tuple[tuple, float, float]  # (channels, latency, bottleneck), as Fabric.route


def crosses_network(links: Sequence[Link]) -> bool:
    """Whether a route of ``links`` crosses a network link (a NIC, a fabric, a torus)."""
    return any(CLASS_OF_KIND.get(link.kind) == "network" for link in links)


def route_crosses_network(topology: Topology, src: int, dst: int) -> bool:
    """Whether ``topology``'s route from endpoint ``src`` to ``dst`` crosses the network."""
    return crosses_network([topology.links[i] for i in topology.route(src, dst)])


class Staging:
    """The slice delay of one cost model on one topology (module docstring), with each
    GPU pair's answer to whether its route crosses the network kept."""

    __slots__ = ("slice_bytes", "write_seconds", "read_seconds", "topology", "_crosses",
                 "slices")

    def __init__(self, slice_bytes: float, write_seconds: float, read_seconds: float,
                 topology: Topology, slices: int = 1) -> None:
        self.slice_bytes = slice_bytes
        self.write_seconds = write_seconds
        self.read_seconds = read_seconds
        self.topology = topology
        self.slices = slices
        self._crosses: dict[tuple[int, int], bool] = {}

    @classmethod
    def of(cls, model: CostModel, topology: Topology) -> Staging | None:
        """The model's staging on ``topology``, or None when it has no slice."""
        slice_bytes = float(getattr(model, "slice_bytes", 0.0) or 0.0)
        write = float(getattr(model, "write_seconds", 0.0) or 0.0)
        read = float(getattr(model, "read_seconds", 0.0) or 0.0)
        if slice_bytes <= 0:
            return None
        return cls(slice_bytes, write, read, topology, int(getattr(model, "slices", 1) or 1))

    def crosses(self, src: int, dst: int) -> bool:
        """Whether the route from endpoint ``src`` to ``dst`` crosses the network."""
        key = (src, dst)
        answer = self._crosses.get(key)
        if answer is None:
            answer = self._crosses[key] = route_crosses_network(self.topology, src, dst)
        return answer

    def seconds(self, forwarded: bool, forwarding: bool) -> float:
        """Seconds per payload byte of the copies a message waits for: its first slice's
        write unless its send is ``forwarded``, its last slice's read unless its receiver
        is ``forwarding`` it."""
        return (0.0 if forwarded else self.write_seconds) + \
            (0.0 if forwarding else self.read_seconds)

    def piece(self, size: float, weight: float) -> float:
        """Payload bytes of one slice (per channel) of a message of ``size`` bytes on a lane
        of ``weight`` channels: its share of ``slices``, at most ``slice_bytes`` (NCCL cuts a
        chunk into ``SlicePerChunk`` slices of a step's ``StepPerSlice`` at most)."""
        return min(size / weight / self.slices, self.slice_bytes)

    def delay(self, size: float, weight: float, seconds: float) -> float:
        """Seconds a message of ``size`` payload bytes on a lane of ``weight`` channels waits
        for copies of ``seconds`` a byte of one slice (per channel)."""
        return self.piece(size, weight) * seconds

    def hidden(self, size: float, weight: float, latency: float, bottleneck: float) -> float:
        """Seconds of a route's ``latency`` that a message of ``size`` payload bytes on a
        lane of ``weight`` channels hides when its receiver passes it on slice by slice:
        its bytes after each channel's first slice, leaving at ``bottleneck`` B/s (the
        route's rate alone on it, so never more than a shared link grants), at most the
        latency (module docstring)."""
        return min(latency, max(0.0, (size - weight * self.piece(size, weight)) / bottleneck))

    def consumed(self, src: int, dst: int, size: float, weight: float, send: Send,
                 route: Route) -> float:
        """Seconds after its delivery until the receiving GPU has copied the last slice of a
        message it passes on out of the connection's slot (``route`` as the fabric gives it,
        before :meth:`route`): the latency its slices hid, then one slice's read. NCCL gives a
        slot back only then (the receive's ``postPeer`` follows the slice's copy in
        ``genericOp``, src/device/prims_simple.h). 0 for a message read before its delivery
        (its receiver does not pass it on), one that moves no bytes or stays off the
        network."""
        if not send.forwarding or size <= 0 or not self.crosses(src, dst):
            return 0.0
        _, latency, bottleneck = route
        return self.hidden(size, weight, latency, bottleneck) + \
            self.delay(size, weight, self.read_seconds)

    def route(self, src: int, dst: int, size: float, weight: float, send: Send,
              route: Route) -> Route:
        """``route`` with its latency lengthened by the slice delay of ``send`` and, when its
        receiver passes it on, shortened by what its slices hide, when it crosses the network
        and moves bytes; else ``route`` itself."""
        if size <= 0 or not self.crosses(src, dst):
            return route
        seconds = self.seconds(send.forwarded, send.forwarding)
        if seconds <= 0 and not send.forwarding:
            return route
        channels, latency, bottleneck = route
        if send.forwarding:
            latency = latency - self.hidden(size, weight, latency, bottleneck)
        return channels, latency + self.delay(size * send.parts, weight, seconds), bottleneck
