"""Small machines for engine tests: explicit links and explicit routes."""

from __future__ import annotations

import numpy as np
import simpy

from collsim.engine.costs import IDEAL, CostModel
from collsim.engine.fabric import Fabric
from collsim.engine.policy import DEFAULT_POLICY, FabricPolicy
from collsim.hardware.topology import Link, Topology

# Two nodes of 4 GPUs, one node per leaf, one spine: every byte between the nodes crosses
# leaf0's single uplink of 4 x 25 GB/s (divided by fabric.oversubscription if set).
SMALL_FAT_TREE = """
kind: cluster
nodes: 2
node:
  kind: nvswitch
  gpus: 4
  nvlink: {latency: 0us, bandwidth: 400GB/s}
  pcie: {switches: 1, link: {latency: 0us, bandwidth: 100GB/s},
         uplink: {latency: 0us, bandwidth: 100GB/s}}
  nics: {count: 4, link: {latency: 0us, bandwidth: 25GB/s}}
fabric: {kind: fat_tree, leaf_ports: 4, spines: 1, latency: 0us}
"""


# Three nodes of 4 GPUs on one network switch, 4 NICs each.
THREE_NODES = """
kind: cluster
nodes: 3
node:
  kind: nvswitch
  gpus: 4
  nvlink: {latency: 1us, bandwidth: 100GB/s}
  pcie: {switches: 1, link: {latency: 1us, bandwidth: 30GB/s},
         uplink: {latency: 1us, bandwidth: 30GB/s}}
  nics: {count: 4, link: {latency: 1us, bandwidth: 25GB/s}}
fabric: {kind: switch}
"""


def uneven_nodes(p: int, seed: int) -> tuple[int, ...]:
    """The node of each of ``p`` ranks, nodes holding runs of 1 to 5 ranks (seeded)."""
    rng = np.random.default_rng(seed)
    nodes, node = [], 0
    while len(nodes) < p:
        nodes += [node] * int(rng.integers(1, 6))
        node += 1
    return tuple(nodes[:p])


class ExplicitTopology(Topology):
    """A topology whose routes are given as a table {(src, dst): (link indices...)}."""

    def __init__(self, links: list[tuple[float, float]], routes: dict, gpus: int = 8) -> None:
        super().__init__("explicit", "explicit", gpus,
                         [Link(f"a{i}", f"b{i}", lat, bw) for i, (lat, bw) in enumerate(links)])
        self.routes = routes

    def route(self, src: int, dst: int) -> tuple[int, ...]:
        return self.routes[src, dst]


def run_transfers(topology: Topology, transfers: list[tuple[float, int, int, float]],
                  policy: FabricPolicy = DEFAULT_POLICY, costs: CostModel = IDEAL
                  ) -> list[float]:
    """Start (time, src, dst, bytes) transfers; return each one's delivery time."""
    env = simpy.Environment()
    fabric = Fabric(env, topology, costs, policy)
    done = [None] * len(transfers)

    def starter(index, start, src, dst, size):
        yield env.timeout(start)
        fabric.transfer(src, dst, size, lambda i: done.__setitem__(i, env.now), index)

    for index, (start, src, dst, size) in enumerate(transfers):
        env.process(starter(index, start, src, dst, size))
    env.run()
    return done


def fluid_max_min(links: list[tuple[float, float]], routes: dict,
                  transfers: list[tuple[float, int, int, float]]) -> list[float]:
    """An independent oracle for the fabric: a fluid simulation that recomputes max-min
    fair rates of every moving transfer from scratch at every start and every last byte
    out, by plain progressive filling. Returns each transfer's delivery time (last byte
    out plus its route's latency)."""
    left = [size for _, _, _, size in transfers]
    hops = [tuple(routes[s, d]) for _, s, d, _ in transfers]
    drained: list[float | None] = [None] * len(transfers)
    now = 0.0
    while any(t is None for t in drained):
        moving = [i for i, transfer in enumerate(transfers)
                  if drained[i] is None and transfer[0] <= now]
        rates = progressive_filling([bw for _, bw in links], hops, moving)
        finish = {i: now + left[i] / rates[i] for i in moving}
        upcoming = [transfer[0] for transfer in transfers if transfer[0] > now]
        later = min(upcoming + list(finish.values()))
        for i in moving:
            if finish[i] <= later:
                drained[i] = finish[i]
            else:
                left[i] = max(0.0, left[i] - rates[i] * (later - now))
        now = later
    return [drained[i] + sum(links[h][0] for h in hops[i]) for i in range(len(transfers))]


def progressive_filling(bandwidths: list[float], hops: list[tuple[int, ...]],
                        moving: list[int]) -> dict[int, float]:
    """The oracle's max-min fair rates of the transfers ``moving`` (indices into ``hops``,
    their links): raise every unfrozen rate together until a link is full, freeze the
    transfers on it, repeat."""
    rates: dict[int, float] = {}
    capacity = {h: bandwidths[h] for i in moving for h in hops[i]}
    while len(rates) < len(moving):
        users = {h: [i for i in moving if i not in rates and h in hops[i]] for h in capacity}
        share, link = min((capacity[h] / len(u), h) for h, u in users.items() if u)
        for i in users[link]:
            rates[i] = share
            for h in hops[i]:
                capacity[h] -= share
    return rates
