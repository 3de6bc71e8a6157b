"""Network transports (collsim.hardware.transports): every figure of every record has a source
or says it is an assumption and lies in range; a machine with each transport loads with the
transport's figures, and `topo show` prints them and where each came from; a file's own keys
override the transport's; an unknown transport is a clean input error naming the key."""

from __future__ import annotations

import re

import pytest

from collsim.cli import main
from collsim.hardware.loader import load_topology
from collsim.hardware.shipped import find_topology
from collsim.hardware.transports import DEFAULT, MODELLED, TRANSPORTS, transport
from collsim.nccl import constants as C
from collsim.nccl.adapter import nccl_system
from tests.exits import fails_cleanly

# A source names a repository at a commit, a file of NCCL at its version, an issue, an RFC or a
# dated web page (a benchmark of another kind, published at an address, in a year).
SOURCE = re.compile(r"github\.com/[\w.-]+/[\w.-]+@[0-9a-f]{7,}|nccl-tests#\d+|nccl#\d+|RFC \d+"
                    r"|\((?:[\w-]+\.)+[a-z]{2,}/\S+, (?:19|20)\d\d\)")
CLOUD = {"p4d-efa-cluster": "efa", "p5-efa-cluster": "efa", "a3-mega-cluster": "tcpxo",
         "a3-high-cluster": "tcpx",
         "h100-cluster": "ib", "a100-cluster": "ib", "b200-cluster": "ib",
         "gb200-nvl72-cluster": "ib", "gb300-nvl72-cluster": "roce"}


def preset(name, **overrides):
    return load_topology(find_topology(name), overrides)


def test_the_registry_holds_the_six_transports_the_files_may_name():
    assert list(TRANSPORTS) == ["ib", "roce", "efa", "tcpx", "tcpxo", "socket"]
    assert DEFAULT == "ib"
    assert all(record.name == name for name, record in TRANSPORTS.items())


@pytest.mark.parametrize("name", TRANSPORTS)
def test_every_figure_has_a_source_or_says_it_is_an_assumption(name):
    for figure_name, figure in TRANSPORTS[name].figures().items():
        assert figure.assumed or SOURCE.search(figure.source), (name, figure_name)
        if figure_name in MODELLED:
            assert figure.value is not None, (name, figure_name)


@pytest.mark.parametrize("name", TRANSPORTS)
def test_every_figure_is_in_range(name):
    record = TRANSPORTS[name]
    assert 0 <= record.net_latency.value <= 1e-3           # at most a millisecond a step
    assert isinstance(record.gpudirect.value, bool)
    assert 0.5 <= record.reachable.value <= 1.0
    assert record.steps.value == C.NCCL_STEPS               # NCCL's, whatever the plugin
    assert 1 << 20 <= record.buffsize.value <= 64 << 20
    for optional in (record.streams.value, record.min_channels.value):
        assert optional is None or 1 <= optional <= 64
    assert record.routing.value in ("ecmp", "dmodk")
    assert isinstance(record.unpack.value, bool)
    assert 0 <= record.flush.value <= 10e-6                 # one local read, a few us at most


def test_a_flush_is_a_local_read_not_another_network_latency():
    """The flush is the receiving NIC's read of a few bytes of GPU memory: on EFA AWS's own
    3 us for an operation in the device and its completion, 25 times below the 75 us the
    plugin reports; on the verbs transports an assumption of the same order; nothing where
    the plugin's iflush does nothing (TCPX) or NCCL never flushes (host-staged sockets)."""
    efa = TRANSPORTS["efa"]
    assert efa.flush.value == pytest.approx(3e-6)
    assert efa.flush.value * 25 == pytest.approx(efa.net_latency.value)
    assert "TUNER_NET_COMP_OVERHEAD" in efa.flush.source
    for verbs in ("ib", "roce"):
        flush = TRANSPORTS[verbs].flush
        assert flush.assumed and "ncclIbIflush" in flush.source
        assert 0 < flush.value <= efa.flush.value
    assert TRANSPORTS["tcpx"].flush.value == 0 and "Iflush" in TRANSPORTS["tcpx"].flush.source
    for name, record in TRANSPORTS.items():
        if not record.gpudirect.value:
            assert record.flush.value == 0, name
    assert "flush" not in MODELLED  # shown: the cost model keeps NCCL's stand-in (misses.md)


def test_only_gpudirect_tcpx_is_an_unpack_device():
    """TCPX reports NCCL_NET_DEVICE_UNPACK (the GPU copies payload out of bounce pages);
    TCPXO's offload engine and every other plugin report a host device."""
    assert {name for name, record in TRANSPORTS.items() if record.unpack.value} == {"tcpx"}
    assert "DEV_UNPACK" in TRANSPORTS["tcpx"].unpack.source
    assert "NCCL_NET_DEVICE_HOST" in TRANSPORTS["tcpxo"].unpack.source
    assert nccl_system(preset("a3-high-cluster")).net_unpack  # NCCL's search doubles for it
    assert not nccl_system(preset("a3-mega-cluster")).net_unpack


@pytest.mark.parametrize(("name", "changes", "routing", "declared"), [
    ("h100-cluster", {}, "dmodk", False),                     # InfiniBand: its subnet manager
    ("h100-cluster-2to1", {}, "dmodk", False),
    ("h100-cluster", {"node.nics.transport": "roce"}, "ecmp", False),  # Ethernet: a hash
    ("h100-cluster", {"fabric.routing": "ecmp"}, "ecmp", True),  # the file's key wins
    ("h100-cluster", {"node.nics.transport": "roce", "fabric.routing": "dmodk"}, "dmodk", True),
])
def test_a_fat_tree_routes_as_its_transport_unless_the_file_names_a_routing(
        name, changes, routing, declared):
    machine = preset(name, **changes)
    assert (machine.routing, machine.routing_declared) == (routing, declared)
    assert machine.fabric.routing == routing  # what the router reads


def test_topo_show_prints_the_routing_and_where_it_came_from(capsys):
    assert main(["topo", "show", "h100-cluster", "--no-bisection"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("  routing"))
    assert "dmodk" in line and "transport: OpenSM" in line
    assert main(["topo", "show", "h100-cluster", "--no-bisection",
                 "--set", "fabric.routing=ecmp"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("  routing"))
    assert "ecmp" in line and "preset override (fabric.routing)" in line and "dmodk" in line
    assert main(["topo", "show", "p5-efa-cluster", "--no-bisection"]) == 0  # one switch
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("  routing"))
    assert "unused" in line


def test_only_tcp_sockets_stage_through_host_memory():
    staged = {name for name, record in TRANSPORTS.items() if not record.gpudirect.value}
    assert staged == {"socket"}


def test_an_unknown_name_is_an_input_error_listing_the_choices():
    from collsim.errors import InputError

    with pytest.raises(InputError) as error:
        transport("rdma")
    assert "rdma" in str(error.value) and "tcpxo" in str(error.value)


@pytest.mark.parametrize("name, expected", CLOUD.items())
def test_each_cluster_preset_runs_its_transport_with_its_figures(name, expected):
    topology = preset(name)
    record = TRANSPORTS[expected]
    nics = topology.node.spec.nics
    figures = topology.machine.nccl
    assert nics.transport == figures.transport == expected
    assert nics.gpudirect == record.gpudirect.value
    assert figures.net_latency == pytest.approx(record.net_latency.value)
    assert figures.efficiency("network") == pytest.approx(record.reachable.value)
    assert figures.declared == frozenset() and nics.declared == frozenset()


@pytest.mark.parametrize("name", TRANSPORTS)
def test_a_cluster_loads_with_each_transport(name):
    topology = preset("h100-cluster", nodes=2, **{"node.nics.transport": name})
    record = TRANSPORTS[name]
    figures = topology.machine.nccl
    assert topology.node.spec.nics.transport == name
    assert topology.node.spec.nics.gpudirect == record.gpudirect.value
    assert figures.reached("network") == pytest.approx(50e9 * record.reachable.value)
    assert nccl_system(topology).nic_latency_us == pytest.approx(record.net_latency.value * 1e6)


def test_a_file_naming_no_transport_keeps_the_figures_it_had(tmp_path):
    """No transport and no network keys: InfiniBand's figures, the same a file declaring them
    has."""
    base = find_topology("dgx-h100").read_text()
    assert "transport: ib" in base
    path = tmp_path / "plain.yaml"
    path.write_text(base.replace("transport: ib", ""))
    plain, shipped = load_topology(path), preset("dgx-h100")
    assert plain.node.spec.nics == shipped.node.spec.nics
    assert plain.machine.nccl.reached("network") == shipped.machine.nccl.reached("network")


def test_preset_keys_override_the_transports_figures():
    topology = preset("p4d-efa-cluster", **{"nccl.net_latency": "35us",
                                            "nccl.reachable.network": "80%",
                                            "node.nics.gpudirect": False})
    figures = topology.machine.nccl
    assert figures.net_latency == pytest.approx(35e-6)
    assert figures.reached("network") == pytest.approx(0.8 * 12.5e9)
    assert not topology.node.spec.nics.gpudirect
    assert figures.declared == {"net_latency", "reachable.network"}
    assert topology.node.spec.nics.declared == {"gpudirect"}
    # and an override equal to the other transport's default still wins over the transport
    sockets = preset("h100-cluster", nodes=2, **{"node.nics.transport": "socket",
                                                "node.nics.gpudirect": True})
    assert sockets.node.spec.nics.gpudirect


def test_the_sockets_transport_routes_through_the_host_as_gpudirect_false_does():
    by_transport = preset("h100-cluster", nodes=2, **{"node.nics.transport": "socket"})
    by_key = preset("h100-cluster", nodes=2, **{"node.nics.gpudirect": False})
    assert by_transport.node.to_nic(0) == by_key.node.to_nic(0)
    assert by_transport.node.to_nic(0) != preset("h100-cluster", nodes=2).node.to_nic(0)
    assert nccl_system(by_transport) == nccl_system(by_key)


def test_a_bad_transport_in_a_file_exits_2_naming_file_key_and_choices(tmp_path, capsys):
    text = find_topology("a3-mega-cluster").read_text().replace("transport: tcpxo",
                                                                "transport: tcpxx")
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    err = fails_cleanly(capsys, "topo", "show", path)
    assert "bad.yaml" in err and "node.nics.transport" in err
    assert all(name in err for name in TRANSPORTS)


def test_a_bad_transport_from_the_command_line_exits_2(capsys):
    err = fails_cleanly(capsys, "topo", "show", "h100-cluster", "--set",
                        "node.nics.transport=infiniband")
    assert "node.nics.transport" in err and "infiniband" in err


def test_topo_show_prints_the_transport_and_where_each_figure_came_from(capsys):
    assert main(["topo", "show", "p4d-efa-cluster", "--no-bisection",
                 "--set", "nccl.net_latency=35us"]) == 0
    out = capsys.readouterr().out
    assert "transport       efa: AWS Elastic Fabric Adapter" in out
    latency = next(line for line in out.splitlines() if line.startswith("  net latency"))
    assert "35 us" in latency and "preset override (nccl.net_latency)" in latency
    assert "the transport's: 75 us" in latency
    reach = next(line for line in out.splitlines() if line.startswith("  reachable "))
    assert "97%" in reach and "transport: L. Chen" in reach


def test_topo_show_prints_the_flush_as_a_figure_the_cost_model_does_not_charge(capsys):
    assert main(["topo", "show", "p4d-efa-cluster", "--no-bisection"]) == 0
    out = capsys.readouterr().out
    flush = out[out.index("\n  flush "):]
    assert flush.split()[1:3] == ["3", "us"]
    assert "shown; the cost model charges NCCL's stand-in" in " ".join(flush.split())


def test_topo_show_of_a_machine_without_nics_prints_no_transport(capsys):
    assert main(["topo", "show", "l40s-pcie", "--no-bisection"]) == 0
    assert "transport " not in capsys.readouterr().out


def test_efa_reaches_the_share_a_gpudirect_libfabric_program_measured_on_p5():
    """EFA's reachable share is the 97 % of 3,200 Gb/s a GPUDirect RDMA program reached over a
    p5's 32 devices: a p5 GPU's 4-rail NIC (50 GB/s) reaches 48.5 GB/s, a p4d NIC 12.125."""
    assert TRANSPORTS["efa"].reachable.value == pytest.approx(0.97)
    assert "3,200 Gb/s" in TRANSPORTS["efa"].reachable.source
    assert preset("p5-efa-cluster").machine.nccl.reached("network") == pytest.approx(48.5e9)
    assert preset("p4d-efa-cluster").machine.nccl.reached("network") == pytest.approx(12.125e9)


def test_on_p4d_the_pcie_path_binds_before_efas_share():
    """A large Ring allreduce across two p4d nodes moves its network bytes through the GPU's
    PCIe path (12 GB/s reached, Gen3 x16) and a NIC (12.125 GB/s at EFA's share): the slower
    binds, so the call is as fast at the full line rate and slows by 11.25/12 only when the
    NIC's share falls below PCIe's (90 %: 11.25 GB/s)."""
    from collsim.api import estimate

    def busbw(**changes):  # NCCL_PROTO=simple on p4d: Ring Simple
        return estimate("p4d-efa-cluster", "allreduce", "ring", 16, 1 << 30,
                        set=changes).busbw_GBps

    at_efa = busbw()
    assert busbw(**{"nccl.reachable.network": "100%"}) == pytest.approx(at_efa, rel=1e-6)
    slower = busbw(**{"nccl.reachable.network": "90%"})
    assert slower / at_efa == pytest.approx(11.25 / 12, rel=0.01)


def test_through_one_nic_a_node_a_ring_stays_under_the_line_rate_and_a_tree_does_not():
    """Two nodes of 8 GPUs, one 400 Gb/s RoCE NIC each, reached at 96 % (48 GB/s): a ring
    sends 2 x 15/16 of the buffer out of each node, so its busbw stays under 48 GB/s; NCCL's
    tree sends it once each way, so its busbw may reach 2 x 15/16 x 48 = 90 GB/s. The
    OpenShift H200 run's 92 GB/s is therefore no ring (docs/misses.md#ocp-h200)."""
    from collsim.api import estimate

    one_nic = {"nodes": 2, "node.nics.count": 1, "node.nics.transport": "roce"}
    reached = 50 * TRANSPORTS["roce"].reachable.value
    ring = estimate("h100-cluster", "allreduce", "ring", 16, 1 << 30, set=one_nic).busbw_GBps
    tree = estimate("h100-cluster", "allreduce", "nccl_tree", 16, 1 << 30,
                    set=one_nic).busbw_GBps
    assert 0.9 * reached < ring <= reached * 1.001
    assert 0.9 * 2 * 15 / 16 * reached < tree <= 2 * 15 / 16 * reached * 1.001


def test_issue_527s_runs_step_under_the_latency_their_plugin_reported():
    """Issue 527's p4dn runs used aws-ofi-nccl 1.4.0-aws, which reports 150 us to NCCL 2.12 and
    later (the per-platform 75 us came with v1.7.0-aws): benchmarks/fidelity.py runs them with
    it, and a Simple ring step across the network pays NCCL's 14 us, the 150 and, A100
    flushing every Simple receive, 150 more (the preset as shipped: 14 + 75 + 75)."""
    import sys
    from pathlib import Path

    from collsim.nccl.protocols import protocol_costs

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    from fidelity import RUN_PRESETS

    def network_step_us(**overrides):
        figures = preset("p4d-efa-cluster", nodes=3, **overrides).machine.nccl
        return protocol_costs(figures, 80, 3, "ring", "Simple").step_latency[-1] / 1e-6

    for run in ("aws-p4dn-2n-ar-issue527", "aws-p4dn-3n-ar-issue527",
                "aws-p4dn-4n-ar-issue527"):
        name, overrides, _ = RUN_PRESETS[run]
        assert name == "p4d-efa-cluster"
        assert network_step_us(**overrides) == pytest.approx(14 + 150 + 150)
    assert network_step_us() == pytest.approx(14 + 75 + 75)
