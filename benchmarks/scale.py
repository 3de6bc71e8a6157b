"""Scale: one 1 GiB allreduce on DGX H100 clusters of 128 to 16,384 GPUs, and a contended
2:1 oversubscribed cluster, with wall time, peak memory and the engine's path.

Each case runs in a fresh process (its peak RSS is its own); wall time covers loading the
topology, placing the ranks, routing and simulating, as ``collsim estimate`` would. The
path is ``lockstep`` when the algorithm's whole steps were timed at once (no two ring
pairs share a link), ``lanes`` when each of several lanes sharing links was timed so on its
own (docs/engine.md), ``symmetric`` when one rank per orbit of a rank shift ran on the
events (docs/engine.md) and ``full`` when every rank's transfers were events.

    python benchmarks/scale.py                          # 16, 128, 1024, 2048 nodes + 2:1
    python benchmarks/scale.py --nodes 16 128 --no-oversubscribed
    python benchmarks/scale.py --symmetric              # 16 channels, D-mod-k, full vs symmetric
    python benchmarks/scale.py --auto                   # auto (NVLSTree) at 16 .. 2048 nodes
    python benchmarks/scale.py --racks 2 4 8 16         # NCCL's ring on GB200 NVL72 racks

``--racks`` times NCCL's ring (its channels, NVLS off as CoreWeave's runs set it) on every GPU
of that many GB200 NVL72 racks: 32 lanes sharing NVLink, on the shared-lanes path where
LL128's channel cap keeps NVLink from binding (docs/engine.md).

``--auto`` times NCCL's choice at every ``--nodes``: NVLSTree at 1 GiB, whose runs on more than
16 nodes take the pipeline path where the network lets them (docs/engine.md). A case collsim
refuses (a call above its limits) shows as ``refused``; ``--beyond-limits`` lifts, in the
cases' processes only, the depth of the trees the pipeline path times, to show what it would
cost beyond (its rows say ``limits=off``).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = ROOT / "topologies" / "h100-cluster.yaml"
OVERSUBSCRIBED = ROOT / "topologies" / "h100-cluster-2to1.yaml"
RACKS = ROOT / "topologies" / "gb200-nvl72-cluster.yaml"
NVLS_OFF = {"nccl.environment.NCCL_NVLS_ENABLE": 0}  # as CoreWeave's GB200 job files set it
# (file, nodes, algorithm, params, settings): the contended cases. The hierarchical
# allreduce runs eight rings across nodes at once (one per rail) over 2:1 leaves whose
# uplinks ECMP picks by hash, so flows collide on uplinks (with D-mod-k routing the eight
# go to eight NICs, so eight spines); the four-channel ring is four lanes sharing NVLink,
# every transfer an event under ECMP, one rank per orbit under D-mod-k (symmetric path).
ECMP = {"fabric.routing": "ecmp"}  # the presets route D-mod-k (InfiniBand): hash ECMP named
CONTENDED = [(OVERSUBSCRIBED, 128, "hierarchical", {}, ECMP),
             (OVERSUBSCRIBED, 128, "hierarchical", {}, {"fabric.routing": "dmodk"}),
             (OVERSUBSCRIBED, 128, "ring", {"channels": 4}, ECMP),
             (OVERSUBSCRIBED, 128, "ring", {"channels": 4}, {"fabric.routing": "dmodk"})]


# The symmetric path's cases: NCCL's ring with 16 channels (8 lanes of two, one per NIC,
# sharing NVLink: no lockstep path) on the 1:1 cluster with D-mod-k routing; auto there
# picks NVLS trees at 1 GiB, and without NVLS the ring on 16 nodes (NCCL's tree beyond).
SYMMETRIC = {"fabric.routing": "dmodk"}
NO_NVLS = {**SYMMETRIC, "nccl.nvls": False}
SIXTEEN = {"channels": 16}


def one(file: str, nodes: int, algorithm: str, params: dict, settings: dict,
        full: bool = False, beyond: bool = False) -> dict:
    """Load, place, route and simulate one case in this process (``full``: with the
    symmetric path off, as the engine without an algorithm's declaration; ``beyond``: with
    the pipeline path's checked depth lifted)."""
    from collsim.errors import InputError
    from collsim.hardware.loader import load_topology
    from collsim.simulate import simulate

    if beyond:
        import collsim.calls.pipeline

        collsim.calls.pipeline.CHECKED_DEPTH = 64
    wall, cpu = time.perf_counter(), time.process_time()
    topology = load_topology(file, {"nodes": nodes, **settings})
    if full:
        from dataclasses import replace

        from collsim.algorithms.registry import REGISTRY
        key = ("allreduce", algorithm)
        declared = REGISTRY[key]
        REGISTRY[key] = replace(declared, symmetric=None)  # this process only
    shown = {**params, **settings, **({"symmetric": "off"} if full else {}),
             **({"limits": "off"} if beyond else {})}
    try:
        result = simulate(topology, "allreduce", algorithm, topology.gpus, 1 << 30, params)
    except InputError as refused:
        return {"topology": topology.name, "gpus": topology.gpus, "algorithm": algorithm,
                "params": shown, "refused": str(refused)}
    name = result.selected if algorithm == "auto" else algorithm
    return {"topology": topology.name, "gpus": topology.gpus,
            "algorithm": f"{algorithm}->{name}" if name != algorithm else algorithm,
            "params": shown,
            "wall_s": time.perf_counter() - wall,
            "cpu_s": time.process_time() - cpu, "path": result.path,
            "time_s": result.time_s, "busbw": result.busbw_GBps,
            "transfers": result.transfers,
            "peak_MiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="*", default=[16, 128, 1024, 2048])
    parser.add_argument("--algorithm", default="ring")
    parser.add_argument("--channels", default="1",
                        help="channels of the flat cases (a number, or auto: NCCL's)")
    parser.add_argument("--auto-nodes", type=int, nargs="*", default=[16],
                        help="node counts at which NCCL's own choice (auto) is also timed")
    parser.add_argument("--no-oversubscribed", action="store_true")
    parser.add_argument("--symmetric", action="store_true",
                        help="the symmetric path's cases: ring with 16 channels and auto on "
                             "D-mod-k at --nodes, then full against symmetric at "
                             "--compare-nodes")
    parser.add_argument("--compare-nodes", type=int, nargs="*", default=[16, 32])
    parser.add_argument("--auto", action="store_true",
                        help="auto (NCCL's choice) at every --nodes instead of --algorithm")
    parser.add_argument("--routing", choices=("ecmp", "dmodk"),
                        help="the fat-tree's routing for --auto (default: the preset's, D-mod-k)")
    parser.add_argument("--beyond-limits", action="store_true",
                        help="--auto: lift the pipeline path's checked depth in the cases' "
                             "processes (what the path would cost)")
    parser.add_argument("--racks", type=int, nargs="*",
                        help="NCCL's ring on this many GB200 NVL72 racks each, NVLS off, "
                             "instead of the H100 cases")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(*json.loads(args.one))))
        return
    channels = {} if args.channels == "auto" else {"channels": int(args.channels)}
    if args.racks:
        cases = [(str(RACKS), n, "ring", {}, NVLS_OFF) for n in args.racks]
        args.no_oversubscribed = True
    elif args.auto:
        routing = {"fabric.routing": args.routing} if args.routing else {}
        cases = [(str(CLUSTER), n, "auto", {}, routing, False, args.beyond_limits)
                 for n in args.nodes]
    elif args.symmetric:
        cluster = str(CLUSTER)
        cases = [(cluster, n, "ring", SIXTEEN, SYMMETRIC) for n in args.nodes]
        cases += [(cluster, n, "auto", {}, NO_NVLS) for n in args.auto_nodes]
        for n in args.compare_nodes:
            cases += [(cluster, n, "ring", SIXTEEN, SYMMETRIC, True),
                      (cluster, n, "ring", SIXTEEN, SYMMETRIC)]
    else:
        cases = [(str(CLUSTER), n, args.algorithm, channels, ECMP) for n in args.nodes]
        cases += [(str(CLUSTER), n, "auto", {}, ECMP) for n in args.auto_nodes]
    if not args.no_oversubscribed:
        cases += [(str(f), n, a, p, s) for f, n, a, p, s in CONTENDED]
    print(f"{'topology':<20}{'GPUs':>7} {'algorithm':<50}{'path':>10}{'simulated':>13}"
          f"{'busbw GB/s':>11}{'transfers':>12}{'wall s':>8}{'cpu s':>8}{'peak MiB':>9}")
    for case in cases:
        out = subprocess.run([sys.executable, __file__, "--one", json.dumps(case)],
                             check=True, capture_output=True, text=True).stdout
        r = json.loads(out)
        name = r["algorithm"] + "".join(f" {k}={v}" for k, v in r["params"].items())
        if "refused" in r:
            print(f"{r['topology']:<20}{r['gpus']:>7} {name:<50}{'refused':>10}  {r['refused']}",
                  flush=True)
            continue
        print(f"{r['topology']:<20}{r['gpus']:>7} {name:<50}{r['path']:>10}"
              f"{r['time_s'] * 1e3:>10.3f} ms{r['busbw']:>11.1f}{r['transfers']:>12}"
              f"{r['wall_s']:>8.1f}{r['cpu_s']:>8.1f}{r['peak_MiB']:>9.0f}", flush=True)


if __name__ == "__main__":
    main()
