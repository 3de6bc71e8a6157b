"""A GPU's network proxy as a queue of posts: under a cost model with ``net_post``
(:func:`collsim.engine.costs.proxy_post`) a message that crosses the network is posted by one
GPU's proxy thread, which posts every channel's steps one after another (NCCL's
``ncclProxyProgress`` walks all its operations in one loop, src/proxy.cc), so the message is
delivered after the posts queued before it and its own. :class:`ProxyPosts` is that part of
:class:`collsim.engine.simulation.Call` (docs/misses.md#proxy)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import simpy

from collsim.engine.caplinks import Route
from collsim.engine.fabric import Fabric
from collsim.engine.loop import clock
from collsim.hardware.machine import CLASS_OF_KIND
from collsim.program import Job

if TYPE_CHECKING:
    from collsim.engine.simulation import Simulation


class ProxyPosts:
    """Each GPU's queue of network posts in one call (a mixin of
    :class:`~collsim.engine.simulation.Call`, which holds the state named below)."""

    simulation: Simulation
    env: simpy.Environment
    fabric: Fabric
    job: Job
    net_post: float
    _proxy_free: dict[int, float]          # GPU: when its proxy has posted all it was given
    _crossing: dict[tuple[int, int], bool]  # (source, target): does the route leave the node

    def _crosses_network(self, src: int, dst: int) -> bool:
        """Whether the route from endpoint ``src`` to ``dst`` crosses a network link."""
        key = (src, dst)
        crosses = self._crossing.get(key)
        if crosses is None:
            topology = self.simulation.topology
            links = topology.links
            crosses = self._crossing[key] = any(
                CLASS_OF_KIND.get(links[i].kind) == "network" for i in topology.route(src, dst))
        return crosses

    def _posted(self, src: int, dst: int, lane: int, route: Route | None) -> Route | None:
        """``route`` (None: the fabric's own) with the proxy's queue added to its latency
        when the message crosses the network: the proxy of the sending GPU (of the receiving
        one when a switch sends) posts the lane's channels, ``net_post`` each, after what it
        was already given. Messages inside a node go as they are."""
        if not self._crosses_network(src, dst):
            return route
        gpus = self.simulation.topology.gpus
        gpu = src if src < gpus else dst
        if gpu >= gpus:
            return route
        now = clock(self.env)
        start = max(now, self._proxy_free.get(gpu, now))
        done = self._proxy_free[gpu] = start + self.net_post * self.job.lane_weight(lane)
        channels, latency, bottleneck = route if route is not None else self.fabric.route(src, dst)
        return channels, latency + (done - now), bottleneck
