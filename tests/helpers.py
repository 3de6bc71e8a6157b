"""Small machines for engine tests: explicit links and explicit routes."""

from __future__ import annotations

import simpy

from collsim.engine.fabric import Fabric
from collsim.hardware.topology import Link, Topology


class ExplicitTopology(Topology):
    """A topology whose routes are given as a table {(src, dst): (link indices...)}."""

    def __init__(self, links: list[tuple[float, float]], routes: dict, gpus: int = 8) -> None:
        super().__init__("explicit", "explicit", gpus,
                         [Link(f"a{i}", f"b{i}", lat, bw) for i, (lat, bw) in enumerate(links)])
        self.routes = routes

    def route(self, src: int, dst: int) -> tuple[int, ...]:
        return self.routes[src, dst]


def run_transfers(topology: Topology, transfers: list[tuple[float, int, int, float]]
                  ) -> list[float]:
    """Start (time, src, dst, bytes) transfers; return each one's delivery time."""
    env = simpy.Environment()
    fabric = Fabric(env, topology)
    done = [None] * len(transfers)

    def starter(index, start, src, dst, size):
        yield env.timeout(start)
        fabric.transfer(src, dst, size, lambda i: done.__setitem__(i, env.now), index)

    for index, (start, src, dst, size) in enumerate(transfers):
        env.process(starter(index, start, src, dst, size))
    env.run()
    return done
