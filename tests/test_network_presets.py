"""The presets of cloud networks and GB300 (EFA on p4d and p5, GPUDirect-TCPXO on A3 Mega,
GPUDirect-TCPX on A3 High, GB300 NVL72): each loads with its vendors' NIC counts and speeds,
`topo show` prints what it declares, `nodes` is settable and checked, and NCCL's choice on each
agrees with NCCL's cost model worked by hand (one case per preset)."""

from __future__ import annotations

import pytest

from collsim.cli import main
from collsim.hardware.loader import load_topology
from collsim.hardware.shipped import find_topology, shipped_names
from collsim.nccl.adapter import nccl_system
from collsim.nccl.choice import choose
from collsim.nccl.protocols import cost_model

CLUSTERS = {  # name: (GPUs per node, NICs per node, Gb/s per NIC, reachable share, net latency)
    "p4d-efa-cluster": (8, 4, 100, 0.97, 75e-6),
    "p5-efa-cluster": (8, 8, 400, 0.97, 75e-6),
    "a3-mega-cluster": (8, 8, 200, 0.96, 0.0),
    "a3-high-cluster": (8, 4, 200, 0.96, 0.0),
    "gb300-nvl72-cluster": (72, 72, 800, 0.96, 0.0),
}
NEW = [*CLUSTERS, "gb300-nvl72"]


def preset(name, **overrides):
    return load_topology(find_topology(name), overrides)


def test_the_new_presets_are_shipped_and_listed(capsys):
    assert set(NEW) <= set(shipped_names())
    assert main(["list"]) == 0
    listed = capsys.readouterr().out
    for name in NEW:
        assert f"  {name} " in listed


@pytest.mark.parametrize("name", CLUSTERS)
def test_clusters_declare_their_vendors_nics(name):
    per_node, nics, gbps, share, latency = CLUSTERS[name]
    t = preset(name)
    spec = t.node.spec.nics
    assert (t.gpus_per_node, spec.count, spec.link.bandwidth) == (per_node, nics, gbps / 8e-9)
    figures = t.machine.nccl
    assert figures.reached("network") == pytest.approx(share * gbps / 8e-9)
    assert figures.net_latency == pytest.approx(latency)
    assert nccl_system(preset(name, nodes=2)).nic_latency_us == pytest.approx(latency * 1e6)


@pytest.mark.parametrize("name", CLUSTERS)
@pytest.mark.parametrize("nodes", [1, 3, 5])
def test_nodes_is_settable(name, nodes):
    t = preset(name, nodes=nodes)
    assert t.nodes == nodes and t.gpus == nodes * CLUSTERS[name][0]
    assert nccl_system(t).nodes == nodes


@pytest.mark.parametrize("name", CLUSTERS)
@pytest.mark.parametrize("bad", ["0", "-2", "two"])
def test_a_bad_node_count_exits_2_naming_the_key(name, bad, capsys):
    status = main(["topo", "show", name, "--set", f"nodes={bad}", "--no-bisection"])
    out, err = capsys.readouterr()
    assert status == 2 and "nodes" in err and "Traceback" not in err


@pytest.mark.parametrize("name", NEW)
def test_topo_show_prints_line_rate_and_reachable(name, capsys):
    assert main(["topo", "show", name, "--no-bisection"]) == 0
    out = capsys.readouterr().out
    figures = preset(name).machine.nccl
    for link_class in ("nvlink", "pcie", "network"):
        line, reached = figures.line[link_class], figures.reached(link_class)
        assert f"  {link_class:<10}{line / 1e9:g} GB/s" in out
        assert f"{reached / 1e9:g} GB/s ({100 * reached / line:.3g}%)" in out
    assert ("net plugin latency 75us" in out) == (figures.net_latency > 0)


def test_the_plugins_latency_is_added_to_the_network_step_as_nccl_does():
    """NCCL adds the plugin's latency to its network figure, twice with Simple (the flush):
    p4d's ring LL step is 2.7 + 75 us, its Simple step 14 + 2 x 75 (NCCL's hwLat NET)."""
    t = preset("p4d-efa-cluster")
    nic = next(link for link in t.links if link.kind == "nic")
    assert cost_model(t, "ring", "LL").latency([nic]) == pytest.approx(77.7e-6)
    assert cost_model(t, "ring", "Simple").latency([nic]) == pytest.approx(164e-6)
    # p5 declares what a step costs on EFA per AWS's model: that replaces the sum
    p5 = preset("p5-efa-cluster")
    nic = next(link for link in p5.links if link.kind == "nic")
    assert cost_model(p5, "ring", "LL").latency([nic]) == pytest.approx(20e-6)
    assert cost_model(p5, "ring", "Simple").latency([nic]) == pytest.approx(23e-6)


def _candidate(choice, algorithm, protocol):
    return next(c for c in choice.candidates if (c.algorithm, c.protocol) == (algorithm,
                                                                              protocol))


# NCCL's model worked by hand (µs; docs/nccl.md#tuning-latencies; hwLat and baseLat of
# constants.py):
#   Tree LL  = 6.8 + 2 ((ppn-1) 0.6 + log2(nodes) (5.0 + plugin latency))
#   Ring LL  = 6.6 + (2(p-1) - 2(nodes-1)) max(0.6, netOverhead) + 2(nodes-1)(2.7 + plugin)
#   NVLS (one node) = 25; NVLSTree Simple = 25 + 2 log2(nodes) 20.9
HAND = [
    # p4d, 2 x 8, 4 KiB: Tree LL 6.8 + 2 (4.2 + 80) = 175.2 beats Ring LL 6.6 + 28 x 1.0
    # (Intel) + 2 x 77.7 = 190.0; LL128 and Simple pay more latency still
    ("p4d-efa-cluster", 2, 8, 4096, "nccl_tree", "LL", 175.2, ("ring", "LL", 190.0)),
    # p5, 2 x 8, 4 KiB: Tree LL 175.2 beats Ring LL 6.6 + 28 x 2.0 (AMD) + 155.4 = 218.0
    ("p5-efa-cluster", 2, 8, 4096, "nccl_tree", "LL", 175.2, ("ring", "LL", 218.0)),
    # A3 Mega, 2 x 8, 4 KiB (plugin latency 0): Tree LL 6.8 + 2 (4.2 + 5.0) = 25.2 beats
    # Ring LL 6.6 + 28 x 1.0 + 2 x 2.7 = 40.0
    ("a3-mega-cluster", 2, 8, 4096, "nccl_tree", "LL", 25.2, ("ring", "LL", 40.0)),
    # GB300 rack, 72 GPUs, 8 B: NVLS 25 beats Ring LL 6.6 + 142 x 0.6 = 91.8
    ("gb300-nvl72", 1, 72, 8, "nvls", "Simple", 25.0, ("ring", "LL", 91.8)),
    # 2 GB300 racks, 8 B: NVLSTree 25 + 2 x 20.9 = 66.8 beats Tree LL 6.8 + 2 (71 x 0.6 + 5.0)
    # = 102.0
    ("gb300-nvl72-cluster", 2, 72, 8, "nvls_tree", "Simple", 66.8, ("nccl_tree", "LL", 102.0)),
]


@pytest.mark.parametrize("name, nodes, per_node, size, algorithm, protocol, latency, other",
                         HAND)
def test_auto_picks_what_nccls_model_worked_by_hand_picks(name, nodes, per_node, size,
                                                          algorithm, protocol, latency, other):
    # NCCL's own model, without what a plugin or profile sets (p4d's NCCL_PROTO=simple, A3
    # Mega's Simple,LL128: tests/test_nccl_environment.py)
    t = preset(name, **({"nodes": nodes} if name.endswith("cluster") else {}),
               **{"nccl.environment": {}})
    gpus = [n * t.gpus_per_node + g for n in range(nodes) for g in range(per_node)]
    choice = choose(nccl_system(t, gpus), "allreduce", size)
    assert (choice.algorithm, choice.protocol) == (algorithm, protocol)
    assert _candidate(choice, algorithm, protocol).latency * 1e6 == pytest.approx(latency)
    assert _candidate(choice, *other[:2]).latency * 1e6 == pytest.approx(other[2])


def test_the_sockets_option_sends_through_host_memory_on_one_nic():
    """NCCL over TCP sockets (NCCL_IB_DISABLE=1) on one interface: h100-cluster with one NIC
    and the socket transport (no GPUDirect). A ring allreduce then reaches less than the one
    NIC's 48 GB/s and less than the 8-rail cluster, and NCCL's GPU-NIC path is no longer one
    PCIe switch."""
    from collsim.api import estimate

    sockets = preset("h100-cluster", nodes=2, **{"node.nics.count": 1,
                                                "node.nics.transport": "socket"})
    rails = preset("h100-cluster", nodes=2)
    assert nccl_system(sockets).nic_path != "pix" and nccl_system(rails).nic_path == "pix"
    one = estimate(sockets, "allreduce", "ring", 16, 2**28)
    eight = estimate(rails, "allreduce", "ring", 16, 2**28)
    assert one.busbw_GBps < 48 and one.busbw_GBps < eight.busbw_GBps / 4


@pytest.mark.parametrize("value, expected", [("-1us", "negative"), ("fast", "net_latency")])
def test_a_bad_net_latency_names_its_key(tmp_path, value, expected):
    from collsim.errors import InputError

    text = find_topology("p4d-efa-cluster").read_text().replace(
        "  launch: 14.8us", f"  launch: 14.8us\n  net_latency: {value}")
    path = tmp_path / "m.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as error:
        load_topology(path)
    assert "net_latency" in str(error.value) and expected in str(error.value)


def _fidelity_and_runs():
    """benchmarks/fidelity.py as a module, and validation/runs.csv by run id."""
    import csv
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root / "benchmarks"))
    try:
        import fidelity
    finally:
        sys.path.remove(str(root / "benchmarks"))
    with (root / "validation" / "runs.csv").open() as f:
        return fidelity, {row["run_id"]: row for row in csv.DictReader(f)}


def test_fidelitys_run_table_names_published_runs_and_shipped_presets():
    """benchmarks/fidelity.py's RUN_PRESETS: every run is in validation/runs.csv, on a network
    its preset or its transport override describes (EFA, TCPXO, HDR, RoCE, sockets), with the
    NIC count the source lists where it overrides the preset's, and the preset loads with the
    overrides."""
    fidelity, runs = _fidelity_and_runs()
    for run, (name, overrides, why) in fidelity.RUN_PRESETS.items():
        row = runs[run]
        t = preset(name, nodes=int(row["nodes"]), **overrides)
        assert t.gpus_per_node == int(row["gpus_per_node"]) and why
        network = f"{row['fabric']} {row['notes']}"
        by_transport = {"roce": "RoCE", "socket": "TCP sockets"}
        expected = by_transport.get(overrides.get("node.nics.transport")) or {
            "p4d-efa-cluster": "EFA", "p5-efa-cluster": "EFA", "a3-mega-cluster": "TCPXO",
            "a100-cluster": "IB HDR"}[name]
        assert expected in network
        if "node.nics.count" in overrides:  # as many NICs as the source lists
            assert row["nics"].startswith(f"{overrides['node.nics.count']}x")
        assert fidelity.undescribed_network(row) == ""


def test_runs_whose_source_turns_nvls_off_are_simulated_without_it():
    """fidelity.py's RUN_ENVIRONMENT: each run is recorded with the variables it applies
    (validation/runs.csv algo_proto), keeps its GPU's default preset, and with NVLS off NCCL
    picks neither NVLS nor NVLSTree for it, where the same preset alone picks one
    (docs/misses.md#provenance)."""
    fidelity, runs = _fidelity_and_runs()
    assert fidelity.RUN_ENVIRONMENT
    for run, (overrides, why) in fidelity.RUN_ENVIRONMENT.items():
        row = runs[run]
        assert why and run not in fidelity.RUN_PRESETS
        for key, value in overrides.items():
            assert f"{key.rsplit('.', 1)[-1]}={value}" in row["algo_proto"]
        name, applied = fidelity.preset_of(row)
        assert overrides.items() <= applied.items()
        nodes = int(row["nodes"])
        extra = {"nodes": nodes} if nodes > 1 else {}
        size = 1 << 30
        off = nccl_system(preset(name, **extra, **applied))
        on = nccl_system(preset(name, **extra))
        assert choose(off, "allreduce", size).algorithm not in ("nvls", "nvls_tree")
        assert choose(on, "allreduce", size).algorithm in ("nvls", "nvls_tree")


def test_the_p5_runs_run_nvlstree_from_their_own_nccls_simple_step():
    """Both published p5 runs ran NVLS (docs/misses.md#efa-nvls): their overrides keep it on,
    NCCL picks NVLSTree from 64 MiB, and its chunk starts at the run's Simple step
    (NCCL_BUFFSIZE / 8, NCCL 2.18.5 and 2.20.3), at most the plugin's NVLSTree cap."""
    from collsim.algorithms.nccl.switches import nvls_chunk_bytes

    fidelity, runs = _fidelity_and_runs()
    for run in ("aws-p5-2n-ar", "aws-p5-2n-eks-nccl2185-ar"):
        name, overrides, _ = fidelity.RUN_PRESETS[run]
        environment = overrides["nccl.environment"]
        assert environment.get("NCCL_NVLS_ENABLE", 1) == 1
        step = environment.get("NCCL_BUFFSIZE", 4 << 20) // 8
        cap = environment.get("NCCL_NVLSTREE_MAX_CHUNKSIZE", step)
        assert environment["NCCL_NVLS_CHUNKSIZE"] == min(step, cap) == 512 << 10
        system = nccl_system(preset(name, nodes=int(runs[run]["nodes"]), **overrides))
        assert system.nvls_capable
        for size in (64 << 20, 1 << 30):
            assert choose(system, "allreduce", size).algorithm == "nvls_tree"
    # 16 channels x 8 heads: the call must reach 32 chunks of 512 KiB each (2 GiB) to keep
    # them; at 1 GiB 256 KiB, at 128 MiB 128 KiB, as from NCCL 2.21's 128 KiB start.
    def chunk(size: int, start: int) -> int:
        return nvls_chunk_bytes("nvls_tree", size, 16, 8, 2, nvls_chunk=start,
                                tree_max=512 << 10)

    assert [chunk(s, 512 << 10) for s in (128 << 20, 1 << 30, 2 << 30)] == [
        128 << 10, 256 << 10, 512 << 10]
    assert [chunk(s, 128 << 10) for s in (128 << 20, 1 << 30, 2 << 30)] == [128 << 10] * 3


def test_each_scale_up_pair_is_one_machine_measured_by_one_source_at_two_scales():
    """fidelity.py's SCALE_UP: the run calibrated on and the run predicted share the GPU model
    and the source (repository or issue), and the predicted one has more GPUs."""
    fidelity, runs = _fidelity_and_runs()
    assert len(fidelity.SCALE_UP) >= 10
    for small, large in fidelity.SCALE_UP:
        fit_on, target = runs[small], runs[large]
        assert fit_on["gpu_model"] == target["gpu_model"]
        assert fit_on["source"].split("@")[0] == target["source"].split("@")[0]
        assert int(target["gpus"]) > int(fit_on["gpus"])


def test_each_from_p2p_pair_fits_a_p2p_run_across_nodes_and_predicts_its_machines_collective():
    """fidelity.py's FROM_P2P: a sendrecv or alltoall run across nodes is calibrated on, and a
    collective NCCL runs with its algorithms, measured by the same source on the same GPUs at
    as many nodes or more, is predicted."""
    fidelity, runs = _fidelity_and_runs()
    assert fidelity.FROM_P2P
    for p2p, collective in fidelity.FROM_P2P:
        fit_on, target = runs[p2p], runs[collective]
        assert fit_on["collective"] in ("sendrecv", "alltoall") and int(fit_on["nodes"]) >= 2
        assert target["collective"] in ("allreduce", "allgather", "reducescatter")
        assert fit_on["gpu_model"] == target["gpu_model"]
        assert fit_on["source"].split("@")[0] == target["source"].split("@")[0]
        assert int(target["nodes"]) >= int(fit_on["nodes"])


def test_a_pairs_calibrated_error_is_the_target_simulated_on_the_fitted_figures():
    """pair_errors predicts the target run on the figures fitted on the other run of the pair
    (read from the cache, so nothing is fitted here): halving the network's reach takes the
    busbw of a 1 GiB ring across two nodes toward half the preset's (not all the way: the
    per-step latencies and the GPU's copies of each network slice stay), and the line says
    which run it fitted."""
    fidelity, _ = _fidelity_and_runs()
    runs, _ = fidelity.load_runs()
    by_id = {r.run_id: r for r in runs}
    p2p, target = "azure-ndmv4-2x1-a2a", "azure-ndmv4-2x1-ag"
    cache = {f"scale/{p2p}/{by_id[target].preset}/auto": {"reachable.network": 0.5}}
    (line,) = fidelity.pair_errors(runs, cache, ((p2p, target),), "the p2p run")
    row = by_id[target].rows[-1]
    measured = int(row["bytes"]) / row["time_s"] / 1e9 * 0.5   # allgather on 2 ranks: (p-1)/p
    preset = fidelity.busbw(fidelity.case_of(by_id[target], [row]), 0)
    assert line.startswith(f"{p2p} -> {target} (a100-cluster): preset ")
    error = float(line.split("calibrated on the p2p run")[1].split()[1].rstrip("%")) / 100
    ratio = measured * (1 - error) / preset   # halved, below the measured busbw
    assert 0.5 <= ratio <= 0.65               # the wire time doubles, the copies stay


@pytest.mark.parametrize("name, taken_from", [
    ("p4d-efa-cluster", "a100-cluster"), ("p5-efa-cluster", "h100-cluster"),
    ("a3-mega-cluster", "h100-cluster"), ("gb300-nvl72", "gb200-nvl72"),
    ("gb300-nvl72-cluster", "gb200-nvl72")])
def test_the_launch_cost_is_the_one_the_file_says_it_takes(name, taken_from):
    """No small-size time of these machines over a plain network is published: each file
    takes the launch of the preset with the same GPU and host software, and says so."""
    assert preset(name).machine.nccl.launch == preset(taken_from).machine.nccl.launch
    assert f"taken as {taken_from}'s" in find_topology(name).read_text()


def test_a_run_that_forced_an_algorithm_is_simulated_under_its_nccl_algo():
    """fidelity.py's `auto` picks under the run's own environment: a run whose source set
    NCCL_ALGO (the GB200 runs of nccl#1801 force Ring and Tree, where NCCL's default on the
    same machine is NVLSTree) gets that NCCL_ALGO, and its pick is that algorithm."""
    fidelity, _ = _fidelity_and_runs()
    runs, _ = fidelity.load_runs()
    forced = {spec.run_id: spec for spec in runs if spec.algorithm != "auto"}
    assert {"gb200-3xnvl8-ring-issue1801", "gb200-3xnvl8-tree-issue1801"} <= set(forced)
    for spec in forced.values():
        assert spec.overrides["nccl.environment.NCCL_ALGO"] == fidelity.NCCL_ALGO_OF[
            spec.algorithm]
    for run, algorithm in (("gb200-3xnvl8-ring-issue1801", "ring"),
                           ("gb200-3xnvl8-tree-issue1801", "nccl_tree")):
        case = fidelity.case_of(forced[run], forced[run].rows)
        assert {p.algorithm for p in case.picks} == {algorithm}
    free = next(spec for spec in runs if spec.run_id == "gb200-3xnvl8-ring-issue1801")
    default = fidelity.case_of(fidelity.RunSpec(**{**free.__dict__, "overrides": {}}),
                               free.rows)
    assert {p.algorithm for p in default.picks} == {"nvls_tree"}
