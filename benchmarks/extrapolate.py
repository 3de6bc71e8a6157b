"""The README's "Calibrate to your machine" figure: an h100-cluster calibrated on one measured
node (Voltage Park, validation/logs/vp-h100-1n-ar.txt -> plots/calibrate/vp-h100.yaml) predicts
4 nodes, where a measured run exists (vp-h100-4n-ar.txt), and is extrapolated to 64 nodes.

Left: busbw against size on 4 nodes, measured, the preset as shipped and the calibrated file.
Right: busbw of a 1 GiB allreduce against nodes (the preset to 16 nodes: a 64-node point takes
minutes to simulate). Points are kept in plots/calibrate/extrapolate.csv and not simulated
again (delete it after changing the model).

    python benchmarks/extrapolate.py
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

from collsim.calibrate.cases import case_from_run
from collsim.calibrate.predict import predict
from collsim.hardware.loader import load_topology
from collsim.hardware.shipped import find_topology
from collsim.nccltests import read_logs

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "plots" / "calibrate"
CALIBRATED = OUT / "vp-h100.yaml"
MEASURED = {1: ROOT / "validation" / "logs" / "vp-h100-1n-ar.txt",
            4: ROOT / "validation" / "logs" / "vp-h100-4n-ar.txt"}
TABLE = OUT / "extrapolate.csv"
GIB = 2**30
NODES = {"calibrated": (1, 2, 4, 8, 16, 32, 64), "preset": (1, 2, 4, 8, 16)}
FILES = {"calibrated": CALIBRATED, "preset": find_topology("h100-cluster")}


def point(done: dict, kind: str, nodes: int, size: int) -> float:
    key = (kind, nodes, size)
    if key not in done:
        topology = load_topology(FILES[kind], {"nodes": nodes})
        done[key] = predict(topology, "allreduce", 8 * nodes, size).busbw_GBps
        with TABLE.open("a", newline="") as f:
            csv.writer(f, lineterminator="\n").writerow([kind, nodes, size, f"{done[key]:.6g}"])
        print(f"{kind} {nodes} nodes {size} B: {done[key]:.1f} GB/s", file=sys.stderr)
    return done[key]


def measured(nodes: int) -> dict[int, float]:
    (run,) = read_logs(MEASURED[nodes])
    case = case_from_run(run, FILES["preset"])
    factor = 2 * (case.ranks - 1) / case.ranks
    return {s: s / t / 1e9 * factor for s, t in zip(case.sizes, case.measured, strict=True)}


def main() -> int:
    done: dict = {}
    if TABLE.is_file():
        with TABLE.open() as f:
            for kind, nodes, size, value in csv.reader(f):
                done[(kind, int(nodes), int(size))] = float(value)
    four = measured(4)
    sizes = [s for s in four if s >= 2**20]
    curves = {kind: [point(done, kind, 4, s) for s in sizes] for kind in FILES}
    sweep = {kind: [point(done, kind, n, GIB) for n in NODES[kind]] for kind in FILES}
    draw(sizes, four, curves, sweep, measured(1))
    return 0


def draw(sizes, four, curves, sweep, one) -> None:  # noqa: ANN001
    import matplotlib.pyplot as plt

    from collsim.output.style import save, size_axis, styled

    with styled():
        fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8), layout="constrained")
        left.plot(sizes, [four[s] for s in sizes], "ko", ms=4, label="measured, 4 nodes")
        left.plot(sizes, curves["preset"], "-", label="h100-cluster as shipped")
        left.plot(sizes, curves["calibrated"], "--", label="calibrated on 1 node")
        size_axis(left, sizes)
        left.set_xlabel("message size (bytes)")
        left.set_ylabel("allreduce busbw (GB/s)")
        left.set_title("4 nodes x 8 H100: predicted from 1 node", fontsize=9)
        left.legend(fontsize=7)
        for kind, style in (("preset", "-o"), ("calibrated", "--s")):
            right.plot(NODES[kind], sweep[kind], style, ms=4,
                       label="h100-cluster as shipped" if kind == "preset"
                       else "calibrated on 1 node")
        right.plot([1, 4], [one[GIB], four[GIB]], "ko", ms=5, label="measured")
        right.set_xscale("log", base=2)
        right.set_xticks(NODES["calibrated"], [str(n) for n in NODES["calibrated"]])
        right.set_xlabel("nodes (8 GPUs each)")
        right.set_ylabel("busbw at 1 GiB (GB/s)")
        right.set_title("allreduce of 1 GiB, extrapolated to 64 nodes", fontsize=9)
        right.legend(fontsize=7)
        save(fig, OUT, "extrapolate", ["png"])


if __name__ == "__main__":
    sys.exit(main())
