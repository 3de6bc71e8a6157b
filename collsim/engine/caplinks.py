"""Capped routes: where the cost model caps bandwidth (:func:`collsim.engine.costs.caps`), a
send from GPU g on lane k also crosses a virtual link (call, g, k) of
``weight_k x channel_cap`` and a virtual link (call, g) of ``gpu_cap``, created when first
used; a send whose route crosses the network also crosses a virtual link (call, g, k, network)
of ``weight_k x net_channel_cap`` where the model has one; a send that names its thread
group j also crosses a virtual link (call, g, k, j) of ``weight_k x group_cap`` where the
model caps groups (:func:`collsim.engine.costs.group_cap`). :class:`CapLinks` is that part of
:class:`collsim.engine.simulation.Call`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from collsim.engine.fabric import Fabric
from collsim.engine.maxmin import Channel
from collsim.engine.staging import route_crosses_network
from collsim.errors import SimulationError
from collsim.program import Job

if TYPE_CHECKING:
    from collsim.engine.simulation import Simulation

# A route as the fabric takes it: its channels, its latency, its bottleneck bandwidth.
Route = tuple[tuple[Channel, ...], float, float]


class CapLinks:
    """Routes with the caps' virtual links, cached per (source, target, lane) (a mixin of
    :class:`~collsim.engine.simulation.Call`, which holds the state named below)."""

    simulation: Simulation
    fabric: Fabric
    job: Job
    channel_cap: float | None
    gpu_cap: float | None
    net_channel_cap: float | None
    group_cap: float | None
    _routes: dict[tuple[int, int, int, int | None], Route]
    _virtual: dict[tuple[int, int, bool, int | None], Channel]

    def _capped_route(self, src: int, dst: int, lane: int, group: int | None = None) -> Route:
        """The fabric's route from ``src`` to ``dst`` plus, from a GPU, the virtual links of
        its lane's channel cap, of its total cap, across the network of its lane's network
        cap and, for a send of thread group ``group``, of that group's cap."""
        if self.group_cap is None:
            group = None
        key = (src, dst, lane, group)
        route = self._routes.get(key)
        if route is None:
            if lane < 0:
                raise SimulationError(f"lane {lane} is negative: lanes are numbered from 0")
            channels, latency, bottleneck = self.fabric.route(src, dst)
            extra: list[Channel] = []
            if src < self.simulation.topology.gpus:
                if self.channel_cap is not None:
                    extra.append(self._virtual_link(src, lane))
                if group is not None:
                    extra.append(self._virtual_link(src, lane, group=group))
                if self.gpu_cap is not None:
                    extra.append(self._virtual_link(src, -1))
                if self.net_channel_cap is not None and \
                        route_crosses_network(self.simulation.topology, src, dst):
                    extra.append(self._virtual_link(src, lane, network=True))
            for channel in extra:
                bottleneck = min(bottleneck, channel.bandwidth)
            route = self._routes[key] = (channels + tuple(extra), latency, bottleneck)
        return route

    def _virtual_link(self, gpu: int, lane: int, network: bool = False,
                      group: int | None = None) -> Channel:
        """GPU ``gpu``'s virtual link of lane ``lane`` (-1: of its total cap; ``network``: of
        the lane's cap across the network; ``group``: of that thread group's cap), made
        once."""
        key = (gpu, lane, network, group)
        link = self._virtual.get(key)
        if link is None:
            if network:
                bandwidth = self.job.lane_weight(lane) * self.net_channel_cap
            elif group is not None:
                bandwidth = self.job.lane_weight(lane) * self.group_cap
            elif lane < 0:
                bandwidth = self.gpu_cap
            else:
                bandwidth = self.job.lane_weight(lane) * self.channel_cap
            link = self._virtual[key] = Channel(bandwidth)
        return link
