"""The tree pipelines relaying one chunk at a time (``WINDOW = 1``) against NCCL's window
of 8 chunks in flight per connection, run as slots side by side: simulated busbw and wall
seconds of one allreduce on N nodes of topologies/h100-cluster.yaml under NCCL's costs.

    python benchmarks/tree_window.py [--nodes 2 4] [--size 1GiB] [--windows 1 8]
"""

from __future__ import annotations

import argparse
import time

from collsim.algorithms.nccl import collnet, nvls_tree
from collsim.algorithms.nccl import tree as nccl_tree
from collsim.hardware.loader import load_topology
from collsim.simulate import simulate
from collsim.units import parse_size

ALGORITHMS = ("nccl_tree", "nvls_tree", "collnet_chain")


def set_window(window: int) -> None:
    """Every tree program relays with ``window`` chunks in flight per connection."""
    for module in (nccl_tree, nvls_tree, collnet):
        module.WINDOW = window


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--size", default="1GiB")
    parser.add_argument("--windows", type=int, nargs="+", default=[1, nccl_tree.NCCL_WINDOW])
    parser.add_argument("--algorithms", nargs="+", default=["nccl_tree", "nvls_tree"])
    args = parser.parse_args()
    size = parse_size(args.size)
    print(f"{'nodes':>5} {'algorithm':14} {'window':>6} {'busbw GB/s':>10} {'transfers':>10} "
          f"{'wall s':>7}")
    for nodes in args.nodes:
        topology = load_topology("topologies/h100-cluster.yaml", {"nodes": nodes})
        for name in args.algorithms:
            for window in args.windows:
                set_window(window)
                start = time.perf_counter()
                result = simulate(topology, "allreduce", name, 8 * nodes, size)
                wall = time.perf_counter() - start
                print(f"{nodes:5d} {name:14} {window:6d} {result.busbw_GBps:10.1f} "
                      f"{result.transfers:10d} {wall:7.2f}", flush=True)
    set_window(1)


if __name__ == "__main__":
    main()
