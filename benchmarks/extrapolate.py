"""The README's "Calibrate to your machine" figure: an h100-cluster calibrated on one measured
node (Voltage Park, validation/logs/vp-h100-1n-ar.txt -> plots/calibrate/vp-h100.yaml) predicts
4 nodes, where a measured run exists (vp-h100-4n-ar.txt), and is extrapolated to 64 nodes.

Left: the node the fit saw, every size of its log, measured, as shipped and calibrated (the fit
weighs every size, so at any one it may land further off than the preset). Middle: busbw
against size on 4 nodes. Right: busbw of a 1 GiB allreduce against nodes (the preset to 16
nodes: a 64-node point takes minutes to simulate). Points are kept in
plots/calibrate/extrapolate.csv and not simulated again, so a second run only redraws (delete
it after changing the model).

    python benchmarks/extrapolate.py
"""

from __future__ import annotations

import csv
import statistics
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
    measured_runs = {nodes: measured(nodes) for nodes in MEASURED}
    fitted = {kind: {s: point(done, kind, 1, s) for s in measured_runs[1]} for kind in FILES}
    sizes = [s for s in measured_runs[4] if s >= 2**20]
    curves = {kind: [point(done, kind, 4, s) for s in sizes] for kind in FILES}
    sweep = {kind: [point(done, kind, n, GIB) for n in NODES[kind]] for kind in FILES}
    draw(measured_runs, fitted, sizes, curves, sweep)
    return 0


LABELS = {"preset": "h100-cluster as shipped", "calibrated": "calibrated on 1 node"}
STYLES = {"preset": {"linestyle": "-", "marker": "o", "color": "#0072B2"},
          "calibrated": {"linestyle": "--", "marker": "s", "color": "#D55E00"}}
NOTE = {"va": "bottom", "ha": "right", "fontsize": 7.5,
        "bbox": {"facecolor": "white", "edgecolor": "#cccccc", "alpha": 0.9}}


def median_error(simulated: dict[int, float], measured: dict[int, float]) -> float:
    """Median |simulated / measured busbw - 1| over the measured sizes, in percent."""
    return 100 * statistics.median(abs(simulated[s] / measured[s] - 1) for s in measured)


def draw(measured_runs, fitted, sizes, curves, sweep, out: Path = OUT) -> Path:  # noqa: ANN001
    """Write ``out``/extrapolate.png."""
    from collsim.output.style import save, styled

    with styled():
        (path,) = save(figure(measured_runs, fitted, sizes, curves, sweep), out, "extrapolate",
                       ["png"])
    return path


def figure(measured_runs, fitted, sizes, curves, sweep):  # noqa: ANN001, ANN201
    """Three panels: the node the fit saw (every size), 4 nodes predicted, 1 GiB to 64 nodes."""
    import matplotlib.pyplot as plt

    from collsim.output.style import SIZE_LABEL, bandwidth_axis, legend_below, size_axis, title

    one, four = measured_runs[1], measured_runs[4]
    fig, (seen, left, right) = plt.subplots(1, 3, figsize=(13.5, 4.4), layout="constrained")
    all_sizes = sorted(one)
    seen.plot(all_sizes, [one[s] for s in all_sizes], "ko", ms=3.5, zorder=3)
    for kind in LABELS:
        seen.plot(all_sizes, [fitted[kind][s] for s in all_sizes], ms=2.5, **STYLES[kind])
    size_axis(seen, all_sizes)
    bandwidth_axis(seen, list(one.values()))
    seen.set_xlabel(SIZE_LABEL)
    seen.set_ylabel("allreduce busbw (GB/s)")
    seen.set_title("1 node x 8 H100: the run calibrated on", fontsize=9)
    errors = {kind: median_error(fitted[kind], one) for kind in FILES}
    off = {kind: 100 * (fitted[kind][GIB] / one[GIB] - 1) for kind in FILES}
    seen.text(0.97, 0.04, f"median |busbw error| over its {len(one)} sizes:\n"
              f"as shipped {errors['preset']:.1f}%, calibrated {errors['calibrated']:.1f}%"
              f"\nat 1 GiB: as shipped {off['preset']:+.1f}%, calibrated "
              f"{off['calibrated']:+.1f}%:\nthe fit weighs every size, not one",
              transform=seen.transAxes, **NOTE)
    left.plot(sizes, [four[s] for s in sizes], "ko", ms=3.5, zorder=3)
    for kind in LABELS:
        left.plot(sizes, curves[kind], ms=2.5, **STYLES[kind])
    size_axis(left, sizes)
    bandwidth_axis(left, [four[s] for s in sizes] + curves["preset"])
    left.set_xlabel(SIZE_LABEL)
    left.set_title("4 nodes x 8 H100: predicted from 1 node", fontsize=9)
    left.text(0.97, 0.04, "the network is not in a 1-node log:\nboth keep the preset's "
              "network figures", transform=left.transAxes, **NOTE)
    for kind in LABELS:
        right.plot(NODES[kind], sweep[kind], ms=4, **STYLES[kind])
    right.plot([1, 4], [one[GIB], four[GIB]], "ko", ms=4.5, zorder=3)
    right.set_xscale("log", base=2)
    right.set_xticks(NODES["calibrated"], [str(n) for n in NODES["calibrated"]])
    right.xaxis.set_minor_locator(plt.NullLocator())
    right.set_ylim(0, 1.08 * max(*sweep["preset"], *sweep["calibrated"], one[GIB]))
    right.set_xlabel("nodes (8 GPUs each)")
    right.set_ylabel("busbw at 1 GiB (GB/s)")
    right.set_title("allreduce of 1 GiB, extrapolated to 64 nodes", fontsize=9)
    handles = [plt.Line2D([], [], color="black", marker="o", linestyle="none")]
    handles += [plt.Line2D([], [], **STYLES[kind]) for kind in LABELS]
    legend_below(fig, handles, ["measured (nccl-tests, Voltage Park)", *LABELS.values()])
    title(fig, "Calibrated on one measured H100 node (plots/calibrate/vp-h100.yaml), "
          "then used where no one measured")
    return fig


if __name__ == "__main__":
    sys.exit(main())
