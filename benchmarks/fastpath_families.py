"""Every NCCL family's engine path against every rank's events: which path timed the call by
default (lockstep, symmetric, pipeline or full) and its error against the same call with the
engine's shortcuts off (``FabricPolicy(shortcuts=False)``: every rank's transfers are events,
no pipeline path), on the H100 cluster under hash ECMP and D-mod-k routing.

The families run the collective NCCL runs them for: ``pat`` allgather on one GPU per node (as
NCCL enables it), the others allreduce on whole nodes; NVLS and CollNet on the cluster with
its SHARP plugin set on (``nccl.sharp=true``), which the machine file leaves off. An error
of 0 is measured, not assumed: both runs happen. Each case runs in a fresh process; CPU
seconds of each. Where a family cannot run on a machine, the row says why.

    python benchmarks/fastpath_families.py       # 16, 64, 256 GPUs; 1 MiB, 64 MiB, 1 GiB
    python benchmarks/fastpath_families.py --gpus 16 64 --sizes 1MiB 64MiB --families ring pat
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from fresh_process import run_fresh

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = ROOT / "topologies" / "h100-cluster.yaml"
ROUTINGS = {"ecmp": {"fabric.routing": "ecmp"}, "dmodk": {"fabric.routing": "dmodk"}}
SHARP = {"nccl.sharp": True}
# family -> (collective, topology settings it needs, GPUs a node gives it)
FAMILIES = {"ring": ("allreduce", {}, 8), "nccl_tree": ("allreduce", {}, 8),
            "nvls": ("allreduce", SHARP, 8), "nvls_tree": ("allreduce", {}, 8),
            "collnet_direct": ("allreduce", SHARP, 8), "collnet_chain": ("allreduce", SHARP, 8),
            "pat": ("allgather", {}, 1)}
BOUND = 0.01  # the error a fast path may have, relative (docs/engine.md)


def one(family: str, routing: str, gpus: int, size: str, events: bool) -> dict:
    """One run in this process: the family with NCCL's protocol and channels for it; with
    ``events``, every rank's events (the engine's shortcuts off)."""
    import collsim.simulate as simulator
    from collsim.engine.policy import FabricPolicy
    from collsim.engine.timing import TimingEngine
    from collsim.errors import InputError
    from collsim.hardware.loader import load_topology
    from collsim.units import parse_size

    class EveryEvent(TimingEngine):
        """The engine with its shortcuts off (lockstep, symmetric and pipeline paths)."""

        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **{**kwargs, "policy": FabricPolicy(shortcuts=False)})

    collective, settings, per_node = FAMILIES[family]
    nodes = max(1, gpus // per_node)
    params = {"placement": "spread"} if per_node == 1 else {}
    engine = simulator.TimingEngine
    cpu = time.process_time()
    try:
        simulator.TimingEngine = EveryEvent if events else engine
        topology = load_topology(CLUSTER, {"nodes": nodes, **settings, **ROUTINGS[routing]})
        result = simulator.simulate(topology, collective, family, gpus, parse_size(size),
                                     params)
    except InputError as exc:
        return {"error": str(exc)}
    finally:
        simulator.TimingEngine = engine
    return {"time_s": result.time_s, "path": result.path, "fallback": result.fallback,
            "cpu_s": time.process_time() - cpu}


def run(case: list) -> dict:
    """``case`` in a fresh process."""
    return run_fresh(__file__, case)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="*", default=list(FAMILIES), choices=list(FAMILIES))
    parser.add_argument("--gpus", type=int, nargs="*", default=[16, 64, 256])
    parser.add_argument("--sizes", nargs="*", default=["1MiB", "64MiB", "1GiB"])
    parser.add_argument("--max-work", default="16GiB",
                        help="skip cases whose GPUs x size exceeds this (default 16GiB: 1 GiB "
                             "on 16 GPUs, 64 MiB on 256), whose full runs take minutes each; "
                             "0: no limit")
    parser.add_argument("--routings", nargs="*", default=list(ROUTINGS), choices=list(ROUTINGS))
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(*json.loads(args.one))))
        return
    print(f"{'family':<15}{'routing':<8}{'GPUs':>6}{'size':>7}{'events ms':>12}{'path ms':>12}"
          f"{'error':>9}{'events cpu':>11}{'path cpu':>10}  path", flush=True)
    from collsim.units import parse_size

    limit = parse_size(args.max_work)
    worst = 0.0
    for family in args.families:
        for routing in args.routings:
            for gpus in args.gpus:
                for size in args.sizes:
                    if limit and gpus * parse_size(size) > limit:
                        continue
                    fast = run([family, routing, gpus, size, False])
                    if "error" in fast:
                        print(f"{family:<15}{routing:<8}{gpus:>6}{size:>7}  does not run: "
                              f"{fast['error']}", flush=True)
                        continue
                    full = run([family, routing, gpus, size, True])
                    error = fast["time_s"] / full["time_s"] - 1
                    worst = max(worst, abs(error))
                    note = fast["path"] + (f" ({fast['fallback']})" if fast["fallback"] else "")
                    print(f"{family:<15}{routing:<8}{gpus:>6}{size:>7}"
                          f"{full['time_s'] * 1e3:>12.4f}{fast['time_s'] * 1e3:>12.4f}"
                          f"{error:>+9.2%}{full['cpu_s']:>11.1f}{fast['cpu_s']:>10.1f}  {note}",
                          flush=True)
    print(f"largest error of any path: {worst:.2%} (bound {BOUND:.0%})")


if __name__ == "__main__":
    main()
