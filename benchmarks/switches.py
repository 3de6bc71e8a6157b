"""NCCL's in-switch algorithms (NVLS, NVLSTree, CollNet) on an H100 cluster with SHARP: busbw
under the ideal cost model, transfers and wall seconds of one 1 GiB allreduce per algorithm,
against NCCL's ring and tree at the same channel count.

    python benchmarks/switches.py [--nodes 2 4] [--size 1GiB] [--channels 16]
"""

from __future__ import annotations

import argparse
import time

from collsim.hardware.loader import load_topology
from collsim.simulate import simulate
from collsim.units import parse_size

ALGORITHMS = ("nvls", "nvls_tree", "collnet_direct", "collnet_chain", "nccl_tree", "ring")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--size", default="1GiB")
    parser.add_argument("--channels", type=int, default=16)
    parser.add_argument("--algorithms", nargs="+", default=list(ALGORITHMS))
    args = parser.parse_args()
    size = parse_size(args.size)
    print(f"{'nodes':>5} {'algorithm':15} {'busbw GB/s':>10} {'transfers':>10} {'wall s':>7}")
    for nodes in args.nodes:
        topology = load_topology("topologies/h100-cluster.yaml",
                                 {"nodes": nodes, "nccl.sharp": True})
        for name in args.algorithms:
            start = time.perf_counter()
            result = simulate(topology, "allreduce", name, 8 * nodes, size,
                              {"channels": args.channels})
            wall = time.perf_counter() - start
            print(f"{nodes:5d} {name:15} {result.busbw_GBps:10.1f} {result.transfers:10d} "
                  f"{wall:7.2f}", flush=True)


if __name__ == "__main__":
    main()
