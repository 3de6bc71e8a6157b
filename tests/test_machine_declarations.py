"""Real machines' declarations: ``gpu: {model, arch}`` and the ``nccl`` section (launch, CPU,
NVLS, SHARP, reachable bandwidth per link class, protocol overrides), read into
``topology.machine``, overridable with --set, refused with file, line and key when wrong; and
PCIe trees that follow the GPU count."""

from __future__ import annotations

import pytest

from collsim.cli import main
from collsim.hardware.loader import topology_from_text
from tests.test_hardware_hardening import LINK, line_of, refused

NCCL = """\
gpu: {model: H100-SXM5-80GB, arch: 90}
nccl:
  launch: 12us
  cpu: intel
  nvls: true
  reachable:
    nvlink: 370.8GB/s
    pcie: 48GB/s
    network: 96%
"""
NODE = f"""\
name: n
kind: nvswitch
gpus: 8
nvlink: {{latency: 0.5us, bandwidth: 450GB/s}}
pcie: {{switches: 8, sockets: 2, link: {{latency: 0.5us, bandwidth: 63GB/s}},
       uplink: {LINK}, inter_socket: {LINK}}}
nics: {{count: 8, link: {{latency: 1us, bandwidth: 400Gbps}}}}
""" + NCCL
CLUSTER = f"""\
name: c
kind: cluster
nodes: 2
node:
  kind: nvswitch
  gpus: 8
  nvlink: {{latency: 0.5us, bandwidth: 450GB/s}}
  pcie: {{switches: 8, link: {{latency: 0.5us, bandwidth: 63GB/s}}, uplink: {LINK}}}
  nics: {{count: 8, link: {{latency: 1us, bandwidth: 400Gbps}}}}
fabric: {{kind: rail, latency: 1us}}
""" + NCCL
PCIE = f"""\
name: p
kind: pcie
gpus: 8
pcie:
  gpus_per_switch: 4
  switches_per_socket: 1
  link: {{latency: 1us, bandwidth: 31GB/s}}
  uplink: {LINK}
  inter_socket: {LINK}
"""


def test_the_declarations_are_read_with_line_rates_per_class():
    machine = topology_from_text(NODE).machine
    assert (machine.gpu.model, machine.gpu.arch) == ("H100-SXM5-80GB", 90)
    nccl = machine.nccl
    assert nccl.launch == pytest.approx(12e-6)
    assert (nccl.cpu, nccl.nvls, nccl.sharp, nccl.nic_path) == ("intel", True, False, None)
    assert nccl.line == {"nvlink": 450e9, "pcie": 63e9, "network": 50e9}
    # 96% of the 400 Gb/s port; the others as given
    assert nccl.reachable == pytest.approx({"nvlink": 370.8e9, "pcie": 48e9, "network": 48e9})
    assert nccl.efficiency("nvlink") == pytest.approx(370.8 / 450)
    assert nccl.efficiency("network") == pytest.approx(0.96)


def test_a_class_without_a_reachable_figure_reaches_its_line_rate():
    machine = topology_from_text(NODE, {"nccl.reachable": {"nvlink": "300GB/s"}}).machine
    assert machine.nccl.reached("pcie") == 63e9 and machine.nccl.efficiency("pcie") == 1.0
    assert machine.nccl.reached("nvlink") == 300e9


def test_a_cluster_declares_for_the_whole_machine_at_the_top_level():
    cluster = topology_from_text(CLUSTER)
    assert cluster.machine.nccl.line["network"] == 50e9
    assert cluster.machine.nccl.reachable["network"] == pytest.approx(48e9)
    # a percentage follows the NIC's line rate
    faster = topology_from_text(CLUSTER, {"node.nics.link.bandwidth": "800Gbps"})
    assert faster.machine.nccl.reachable["network"] == pytest.approx(96e9)


def test_files_without_nccl_declare_nothing():
    node = topology_from_text(NODE.split("gpu:")[0])
    assert node.machine.nccl is None and node.machine.gpu.arch is None
    switch = topology_from_text(f"kind: switch\ngpus: 4\nlink: {LINK}\n"
                                "gpu: {model: X, arch: 80}\n")
    assert switch.machine is None  # canonical kinds carry no machine declarations


def test_every_nccl_key_takes_a_set_override():
    node = topology_from_text(NODE, {"nccl.launch": "20us", "nccl.cpu": "amd",
                                     "nccl.nvls": False, "nccl.sharp": True,
                                     "nccl.nic_path": "pxb", "nccl.reachable.network": "50%",
                                     "gpu.arch": 100})
    nccl = node.machine.nccl
    assert (nccl.launch, nccl.cpu, nccl.nvls, nccl.sharp, nccl.nic_path) == \
        (pytest.approx(20e-6), "amd", False, True, "pxb")
    assert nccl.reachable["network"] == pytest.approx(25e9)
    assert node.machine.gpu.arch == 100


def test_protocol_overrides_per_protocol_and_per_family():
    node = topology_from_text(NODE, {
        "nccl.protocols.LL128.latency.nvlink": "2us",
        "nccl.protocols.LL128.base": "10us",
        "nccl.protocols.LL128.ring.base": "12us",
        "nccl.protocols.LL.gpu_cap": "100GB/s",
        "nccl.protocols.Simple.nvls.latency.network": "7us"})
    overrides = node.machine.nccl.overrides
    assert overrides[("LL128", None)].latency == {"nvlink": pytest.approx(2e-6)}
    assert overrides[("LL128", None)].base == pytest.approx(10e-6)
    assert overrides[("LL128", "ring")].base == pytest.approx(12e-6)
    assert overrides[("LL", None)].gpu_cap == 100e9
    assert overrides[("Simple", "nvls")].latency == {"network": pytest.approx(7e-6)}


def test_nvls_reach_and_a_protocol_efficiency_scale_what_the_cost_model_gives():
    from collsim.nccl.protocols import cost_model

    def bandwidths(overrides):
        node = topology_from_text(NODE, overrides)
        nvlink = next(link for link in node.links if link.kind == "nvlink")
        nvls = cost_model(node, "nvls", "Simple")
        ring = cost_model(node, "ring", "LL128")
        return nvls.bandwidth(nvlink), ring.bandwidth(nvlink), ring.channel_cap, nvlink

    nvls, ring, cap, link = bandwidths({})
    assert nvls == pytest.approx(370.8e9 * 0.85 * link.bandwidth / 450e9)  # NCCL's Hopper 0.85
    assert ring == pytest.approx(370.8e9 * link.bandwidth / 450e9)
    declared = bandwidths({"nccl.reachable.nvls": "400GB/s",
                           "nccl.protocols.LL128.efficiency": "80%"})
    assert declared[0] == pytest.approx(400e9 * link.bandwidth / 450e9)
    assert declared[1] == pytest.approx(0.8 * ring) and declared[2] == pytest.approx(0.8 * cap)
    assert bandwidths({"nccl.reachable.nvlink": "300GB/s"})[0] == pytest.approx(
        300e9 * 0.85 * link.bandwidth / 450e9)  # undeclared, NVLS follows the NVLink reach
    nccl = topology_from_text(NODE, {"nccl.protocols.LL.ring.efficiency": 0.5}).machine.nccl
    assert nccl.overrides[("LL", "ring")].efficiency == 0.5
    above = bandwidths({"nccl.protocols.LL128.efficiency": "150%"})
    assert above[1] == pytest.approx(ring) and above[2] == pytest.approx(1.5 * cap)
    cluster = topology_from_text(CLUSTER, {"nccl.protocols.LL.efficiency": "150%"})
    across = cost_model(cluster, "ring", "LL")  # 2 nodes: NCCL's CPU row, not raised
    alone = cost_model(cluster, "ring", "LL", gpus=range(8))  # one node: raised
    plain = topology_from_text(CLUSTER)
    assert across.gpu_cap == pytest.approx(cost_model(plain, "ring", "LL").gpu_cap)
    assert alone.gpu_cap == pytest.approx(
        1.5 * cost_model(plain, "ring", "LL", gpus=range(8)).gpu_cap)


def test_the_p2p_paths_reach_of_a_nic_is_its_own_and_else_the_rings():
    nccl = topology_from_text(CLUSTER, {"nccl.reachable.p2p": "80%"}).machine.nccl
    assert nccl.p2p_reached() == pytest.approx(40e9)  # 80% of the 400 Gb/s port
    assert nccl.reached("network") == pytest.approx(48e9)  # the rings' as declared
    plain = topology_from_text(CLUSTER).machine.nccl
    assert plain.p2p_reachable is None and plain.p2p_reached() == plain.reached("network")
    assert topology_from_text(NODE.split("nics:")[0] + NCCL).machine.nccl.p2p_reached() is None


@pytest.mark.parametrize("text, overrides, key, expected", [
    (CLUSTER, {"nccl.reachable.p2p": "51GB/s"}, "nccl.reachable.p2p",
     "more than the line rate of 50 GB/s (node.nics.link.bandwidth)"),
    (NODE, {"nccl.reachable.nvls": "500GB/s"}, "nccl.reachable.nvls",
     "more than the line rate of 450 GB/s (nvlink.bandwidth)"),
    (NODE, {"nccl.protocols.LL.efficiency": "250%"}, "nccl.protocols.LL.efficiency",
     "above 0 and at most 200%"),
    (NODE, {"nccl.protocols.LL.efficiency": 0}, "nccl.protocols.LL.efficiency",
     "above 0 and at most 200%"),
    (NODE, {"nccl.protocols.LL.efficiency": "most"}, "nccl.protocols.LL.efficiency",
     "got 'most'"),
    (NODE.replace(", arch: 90", ""), {}, "gpu.arch", "required with an 'nccl' section"),
    (NODE, {"gpu.arch": 50}, "gpu.arch", "out of range"),
    (NODE, {"gpu.arch": 90.0}, "gpu.arch", "expected a whole number such as 8, got 90.0"),
    (NODE.replace("  launch: 12us\n", ""), {}, "nccl.launch", "required key is missing"),
    (NODE, {"nccl.launch": "2s"}, "nccl.launch", "between 1 ps (1e-12 s) and 1 s"),
    (NODE, {"nccl.launch": "-1us"}, "nccl.launch", "cannot be negative"),
    (NODE, {"nccl.cpu": "power"}, "nccl.cpu", "'power' is not one of intel, amd, arm"),
    (NODE, {"nccl.nvls": "yes"}, "nccl.nvls", "expected boolean"),
    (NODE, {"nccl.nic_path": "nvl"}, "nccl.nic_path", "is not one of pix, pxb, phb, sys"),
    (NODE, {"nccl.lanch": "1us"}, "nccl.lanch", "did you mean 'launch'"),
    (NODE, {"nccl.reachable.nvlink": "500GB/s"}, "nccl.reachable.nvlink",
     "500 GB/s is more than the line rate of 450 GB/s (nvlink.bandwidth)"),
    (CLUSTER, {"nccl.reachable.network": "60GB/s"}, "nccl.reachable.network",
     "more than the line rate of 50 GB/s (node.nics.link.bandwidth)"),
    (NODE, {"nccl.reachable.pcie": "0%"}, "nccl.reachable.pcie", "above 0% and at most 100%"),
    (NODE, {"nccl.reachable.pcie": "101%"}, "nccl.reachable.pcie", "at most 100%"),
    (NODE, {"nccl.reachable.pcie": "many%"}, "nccl.reachable.pcie", "got 'many%'"),
    (NODE, {"nccl.reachable.pcie": "0GB/s"}, "nccl.reachable.pcie", "must be positive"),
    (NODE, {"nccl.reachable.infiniband": "1GB/s"}, "nccl.reachable.infiniband",
     "unknown key"),
    (NODE, {"nccl.protocols.LL256.base": "1us"}, "nccl.protocols.LL256", "unknown key"),
    (NODE, {"nccl.protocols.LL.nvls.base": "1us"}, "nccl.protocols.LL.nvls",
     "NCCL runs nvls with the Simple protocol only"),
    (NODE, {"nccl.protocols.LL.latency.nvlink": "2s"}, "nccl.protocols.LL.latency.nvlink",
     "between 1 ps"),
    (NODE, {"nccl.protocols.LL128.channel_cap": "1e20GB/s"},
     "nccl.protocols.LL128.channel_cap", "between 1 KB/s and 1000 TB/s"),
    (CLUSTER, {"node.nccl": {"launch": "1us", "cpu": "intel"}}, "node.nccl", "unknown key"),
    (NODE, {"nccl.version": 2.27}, "nccl.version", "expected MAJOR.MINOR.PATCH"),
    (NODE, {"nccl.version": "2.27.x"}, "nccl.version", "quoted in YAML"),
    (NODE, {"nccl.version": "3.0.1"}, "nccl.version", "NCCL 2.x releases"),
])
def test_bad_declarations_are_refused_at_their_key(text, overrides, key, expected):
    error = refused(text, overrides)
    assert error.key == key and expected in error.message, str(error)


def test_the_nccl_release_is_read_in_nccls_and_its_tags_form():
    assert topology_from_text(NODE).machine.nccl.version is None  # the modelled release
    for text in ("2.27.3", "2.27.3-1"):
        node = topology_from_text(NODE, {"nccl.version": text})
        assert node.machine.nccl.version == (2, 27, 3)


def test_a_bad_nccl_release_on_the_command_line_exits_2_naming_the_key(capsys, tmp_path):
    (tmp_path / "n.yaml").write_text(NODE)
    status = main(["topo", "show", str(tmp_path / "n.yaml"), "--set", "nccl.version=2.27",
                   "--no-bisection"])
    err = capsys.readouterr().err
    assert status == 2 and "nccl.version" in err and "MAJOR.MINOR.PATCH" in err
    assert "Traceback" not in err


def test_a_bad_declaration_in_the_file_is_reported_at_its_line():
    text = NODE.replace("cpu: intel", "cpu: ibm")
    error = refused(text)
    assert error.key == "nccl.cpu" and error.line == line_of(text, "nccl.cpu")


def test_nccl_on_a_canonical_kind_is_an_unknown_key():
    error = refused(f"kind: switch\ngpus: 4\nlink: {LINK}\n" + NCCL.split("nccl:")[0]
                    + "nccl: {launch: 1us, cpu: intel}\n")
    assert error.key == "nccl" and "unknown key" in error.message


def test_the_command_line_refuses_a_bad_nccl_override(capsys, tmp_path):
    (tmp_path / "n.yaml").write_text(NODE)
    status = main(["topo", "show", str(tmp_path / "n.yaml"), "--set", "nccl.launch=3s",
                   "--no-bisection"])
    err = capsys.readouterr().err
    assert status == 2 and "nccl.launch" in err and "Traceback" not in err


@pytest.mark.parametrize("gpus", range(1, 10))
def test_a_pcie_tree_given_per_gpu_follows_the_gpu_count(gpus):
    node = topology_from_text(PCIE, {"gpus": gpus}).node
    switches = -(-gpus // 4)
    assert (node.spec.pcie.switches, node.spec.pcie.sockets) == (switches, switches)
    assert [w for w in range(switches)] == sorted({i * switches // gpus
                                                   for i in range(gpus)})


def test_sockets_per_switch_count_and_fixed_counts_mix():
    node = topology_from_text(PCIE, {"gpus": 16, "pcie.switches_per_socket": 2}).node
    assert (node.spec.pcie.switches, node.spec.pcie.sockets) == (4, 2)
    node = topology_from_text(PCIE.replace("switches_per_socket: 1", "sockets: 2")).node
    assert (node.spec.pcie.switches, node.spec.pcie.sockets) == (2, 2)


@pytest.mark.parametrize("text, overrides, key, expected", [
    (PCIE, {"pcie.switches": 2}, "pcie.gpus_per_switch", "give 'switches' or 'gpus_per_switch'"),
    (PCIE, {"pcie.sockets": 2}, "pcie.switches_per_socket", "give 'sockets' or"),
    (PCIE.replace("  gpus_per_switch: 4\n", ""), {}, "pcie.switches",
     "required key is missing (or give 'gpus_per_switch'"),
    (PCIE, {"pcie.gpus_per_switch": 0}, "pcie.gpus_per_switch", "out of range"),
])
def test_pcie_counts_are_given_one_way(text, overrides, key, expected):
    error = refused(text, overrides)
    assert error.key == key and expected in error.message, str(error)


def test_an_nvswitch_node_may_say_how_many_nvlinks_make_its_bandwidth():
    node = topology_from_text(NODE, {"nvlink.links": 18}).node
    assert node.spec.wiring.nvlinks == 18
    assert topology_from_text(NODE).node.spec.wiring.nvlinks is None
    assert refused(NODE, {"nvlink.links": 0}).key == "nvlink.links"
