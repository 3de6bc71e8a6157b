"""Cluster speed: wall time to simulate one 1 GiB allreduce on N DGX H100 nodes
(topologies/h100-cluster.yaml, 8 x 400 Gb/s rails on a non-blocking fat-tree), flat ring and
hierarchical, with the time spent loading the file, and routing the pairs they use from cold caches
(included in the wall time), reported apart. The ring runs on one channel (benchmarks/nccl.py
times NCCL's channel counts).

    python benchmarks/cluster.py                # 64 nodes x 8 GPUs = 512 ranks
    python benchmarks/cluster.py --nodes 16 --size 64MiB --file topologies/h100-cluster-2to1.yaml
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

from collsim.algorithms.registry import get_algorithm
from collsim.hardware.loader import load_topology
from collsim.simulate import simulate
from collsim.units import format_size, parse_size

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--size", default="1GiB")
    parser.add_argument("--file", default=str(ROOT / "topologies" / "h100-cluster.yaml"))
    parser.add_argument("--algorithms", default="ring,hierarchical")
    args = parser.parse_args()
    size = parse_size(args.size)

    start = time.perf_counter()
    topology = load_topology(args.file, {"nodes": args.nodes})
    load = time.perf_counter() - start
    print(f"{topology.name}: {topology.gpus} GPUs on {topology.nodes} nodes, "
          f"{len(topology.links)} directed links; loaded in {load:.3f} s")
    print(f"{'algorithm':<14}{'size':>6}{'simulated':>14}{'busbw GB/s':>12}"
          f"{'transfers':>11}{'wall s':>9}{'routing s':>11}")
    for name in args.algorithms.split(","):
        routing = _time_routing(load_topology(args.file, {"nodes": args.nodes}))
        topology = load_topology(args.file, {"nodes": args.nodes})   # cold route caches
        start = time.perf_counter()
        params = {"channels": 1} if "channels" in get_algorithm("allreduce", name).params else {}
        result = simulate(topology, "allreduce", name, topology.gpus, size, params)
        wall = time.perf_counter() - start
        print(f"{name:<14}{format_size(size):>6}{result.time_s * 1e3:>11.3f} ms"
              f"{result.busbw_GBps:>12.1f}{result.transfers:>11}{wall:>9.2f}{routing:>11.3f}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak memory {peak:.0f} MiB")


def _time_routing(topology) -> float:
    """Seconds to route, from cold caches, every pair the flat ring and the hierarchical
    algorithm use (ring neighbours, and the same GPU on the next node)."""
    start = time.perf_counter()
    gpn = topology.gpus // topology.nodes
    for g in range(topology.gpus):
        topology.route(g, (g + 1) % topology.gpus)
        topology.route(g, (g + gpn) % topology.gpus)
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
