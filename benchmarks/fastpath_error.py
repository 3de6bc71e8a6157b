"""The pipeline path's error: NVLSTree allreduce timed by the pipeline path (two small full
runs, docs/engine.md#the-pipeline-path) against the full simulation (``exact``), on the 1:1
and 2:1 H100 clusters under hash ECMP and D-mod-k routing, over node counts and sizes.

Each case runs in a fresh process, the pipeline path first; CPU seconds of each. A case whose
pipeline path declined ran in full: it says why, counts no error, and is not run again.

    python benchmarks/fastpath_error.py                       # 16, 24, 32 nodes; 1 MiB .. 4 GiB
    python benchmarks/fastpath_error.py --nodes 16 --sizes 1GiB --fabrics 1:1
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from fresh_process import run_fresh

ROOT = Path(__file__).resolve().parent.parent
FABRICS = {"1:1": ROOT / "topologies" / "h100-cluster.yaml",
           "2:1": ROOT / "topologies" / "h100-cluster-2to1.yaml"}
ROUTINGS = {"ecmp": {"fabric.routing": "ecmp"}, "dmodk": {"fabric.routing": "dmodk"}}
BOUND = 0.01  # the error the pipeline path may have, relative (issue 30's condition)


def one(fabric: str, routing: str, nodes: int, size: str, exact: bool) -> dict:
    """One run in this process: NVLSTree with NCCL's protocol and channels for it."""
    from collsim.hardware.loader import load_topology
    from collsim.simulate import simulate
    from collsim.units import parse_size

    cpu = time.process_time()
    topology = load_topology(FABRICS[fabric], {"nodes": nodes, **ROUTINGS[routing]})
    result = simulate(topology, "allreduce", "nvls_tree", topology.gpus, parse_size(size),
                      exact=exact)
    return {"time_s": result.time_s, "path": result.path, "fallback": result.fallback,
            "transfers": result.transfers, "cpu_s": time.process_time() - cpu}


def run(case: list) -> dict:
    """``case`` in a fresh process."""
    return run_fresh(__file__, case)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="*", default=[16, 24, 32])
    parser.add_argument("--sizes", nargs="*", default=["1MiB", "64MiB", "1GiB", "4GiB"])
    parser.add_argument("--fabrics", nargs="*", default=list(FABRICS), choices=list(FABRICS))
    parser.add_argument("--routings", nargs="*", default=list(ROUTINGS), choices=list(ROUTINGS))
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(*json.loads(args.one))))
        return
    print(f"{'fabric':<7}{'routing':<8}{'GPUs':>6}{'size':>7}{'full ms':>11}{'fast ms':>11}"
          f"{'error':>9}{'full cpu':>10}{'fast cpu':>10}  path", flush=True)
    worst = 0.0
    for fabric in args.fabrics:
        for routing in args.routings:
            for nodes in args.nodes:
                for size in args.sizes:
                    fast = run([fabric, routing, nodes, size, False])
                    full = run([fabric, routing, nodes, size, True]) \
                        if fast["path"] == "pipeline" else fast
                    error = fast["time_s"] / full["time_s"] - 1
                    if fast["path"] == "pipeline":
                        worst = max(worst, abs(error))
                    note = fast["path"] if fast["path"] == "pipeline" else \
                        f"{fast['path']} ({fast['fallback']})"
                    print(f"{fabric:<7}{routing:<8}{nodes * 8:>6}{size:>7}"
                          f"{full['time_s'] * 1e3:>11.4f}{fast['time_s'] * 1e3:>11.4f}"
                          f"{error:>+9.2%}{full['cpu_s']:>10.1f}{fast['cpu_s']:>10.1f}  {note}",
                          flush=True)
    print(f"largest error on the pipeline path: {worst:.2%} (bound {BOUND:.0%})")


if __name__ == "__main__":
    main()
