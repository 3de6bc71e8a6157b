"""Kinds are registry records: each is listed, a new one is one record away from being
loadable, the registry does not need the loader, and every builder's predicted link count
(what the size limits are checked on) is the count it builds."""

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collsim.cli import main
from collsim.hardware import kinds as kinds_package
from collsim.hardware.fabrics import LAYER_LEAF, LAYER_SPINE, nic_endpoints, plug
from collsim.hardware.grid import torus_link_count, torus_neighbours
from collsim.hardware.kinds import FABRIC_KINDS, KINDS, NODE_KINDS
from collsim.hardware.kinds.keys import COUNT, LINK_SCHEMA, count, link
from collsim.hardware.kinds.registry import (
    Cabling,
    FabricKind,
    Kind,
    register_fabric_kind,
    register_kind,
)
from collsim.hardware.loader import load_topology, topology_from_text
from collsim.hardware.shipped import find_topology, shipped_names
from collsim.hardware.summary import summarize
from collsim.hardware.topology import switch
from collsim.yamlfile import Document

LINK = "{latency: 1us, bandwidth: 50GB/s}"


def test_every_kind_is_registered_once_in_the_listed_order():
    assert list(KINDS) == ["switch", "fully_connected", "nvswitch", "nvlink", "pcie",
                           "cluster", "torus"]
    assert list(NODE_KINDS) == ["nvswitch", "nvlink", "pcie"]
    assert list(FABRIC_KINDS) == ["switch", "fat_tree", "rail", "torus"]
    assert all(kind.summary for kind in [*KINDS.values(), *NODE_KINDS.values(),
                                         *FABRIC_KINDS.values()])
    with pytest.raises(ValueError, match="registered twice"):
        register_kind(KINDS["switch"])


def test_collsim_list_shows_every_kind_with_its_summary(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for kind in KINDS.values():
        assert f"  {kind.name:<22} {kind.summary}" in out


@pytest.fixture
def restore_registries():
    saved = dict(KINDS), dict(FABRIC_KINDS)
    yield
    for registry, before in zip((KINDS, FABRIC_KINDS), saved, strict=True):
        registry.clear()
        registry.update(before)


def test_a_new_kind_is_one_record(restore_registries):
    def build(doc):
        spec = link(doc, ("link",))
        return switch("pair", 2 * count(doc, ("pairs",)), spec.latency, spec.bandwidth)

    register_kind(Kind("pairs_on_a_switch", {"pairs": COUNT, "link": LINK_SCHEMA},
                       ("pairs", "link"), build, "two GPUs per pair on one switch"))
    topology = topology_from_text(f"kind: pairs_on_a_switch\npairs: 3\nlink: {LINK}\n")
    assert topology.gpus == 6
    with pytest.raises(Exception, match="unknown key 'gpus'"):
        topology_from_text(f"kind: pairs_on_a_switch\npairs: 3\ngpus: 1\nlink: {LINK}\n")


@dataclass(frozen=True)
class Star:
    """Every NIC on a leaf of its own, the leaves on one spine (a fabric kind for tests)."""

    nodes: int
    nics: int
    dims: tuple[int, ...] = ()

    @property
    def links(self):
        return 4 * self.nodes * self.nics

    def build(self, port):
        g = nic_endpoints(self.nodes, self.nics)
        g.vertex("spine", "spine", layer=LAYER_SPINE)
        for n in range(self.nodes):
            for k in range(self.nics):
                leaf = g.vertex(f"leaf{n}.{k}", "leaf", layer=LAYER_LEAF)
                plug(g, n, k, leaf, port)
                g.connect(leaf, "spine", 2e-6, port.bandwidth, "fabric")
        return g


def test_a_new_fabric_kind_is_one_record(restore_registries):
    register_fabric_kind(FabricKind("star", {}, (), lambda doc, prefix, cabling:
                                    Star(cabling.nodes, cabling.nics), "a leaf per NIC"))
    text = find_topology("h100-cluster").read_text()
    cluster = topology_from_text(text, {"nodes": 2, "fabric": {"kind": "star"}})
    assert len(cluster.fabric.links) == Star(2, 8).links == 64
    route = [cluster.links[i] for i in cluster.route(0, 8)]
    assert [link.kind for link in route].count("fabric") == 2
    assert sum(link.latency for link in route if link.kind == "fabric") == pytest.approx(4e-6)


def test_no_kind_module_imports_the_loader():
    """The loader imports the kinds (to look them up); the kinds never import the loader."""
    for path in Path(kinds_package.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text())
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                     for alias in node.names}
        assert "collsim.hardware.loader" not in imported, path
    code = "import collsim.hardware.kinds.cluster as c; print(c.CLUSTER.name)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "cluster", done.stderr


@pytest.mark.parametrize("name", shipped_names())
def test_predicted_link_counts_are_the_built_counts_for_shipped_files(name):
    topology = load_topology(find_topology(name))
    node = getattr(topology, "node", None)
    if node is not None:
        assert node.spec.links == len(node.graph.links)


NODE_TEXT = """\
kind: {kind}
gpus: {gpus}
nvlink: {link}
wiring: {wiring}
links_per_pair: 2
pcie: {{switches: {switches}, sockets: {sockets}, link: {link}, uplink: {link},
       inter_socket: {link}}}
nics: {{count: {nics}, link: {link}}}
"""


@st.composite
def nodes(draw):
    gpus = draw(st.integers(1, 12))
    switches = draw(st.integers(1, gpus))
    kind = draw(st.sampled_from(["nvswitch", "nvlink", "pcie"]))
    text = NODE_TEXT.format(kind=kind, gpus=gpus, link=LINK,
                            wiring=draw(st.sampled_from(["ring", "mesh"])),
                            switches=switches, sockets=draw(st.integers(1, switches)),
                            nics=draw(st.integers(1, gpus)))
    if kind != "nvlink":
        text = "\n".join(line for line in text.splitlines()
                         if not line.startswith(("wiring", "links_per_pair")))
    if kind == "pcie":
        text = "\n".join(line for line in text.splitlines() if not line.startswith("nvlink"))
    return text


@settings(max_examples=40, deadline=None)
@given(nodes())
def test_predicted_node_links_are_the_built_links(text):
    node = topology_from_text(text).node
    assert node.spec.links == len(node.graph.links)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(1, 4), st.data())
def test_predicted_fabric_links_are_the_built_links(nodes, nics, data):
    kind = data.draw(st.sampled_from(["switch", "fat_tree", "rail", "torus"]))
    fabric = {"kind": kind}
    if kind == "fat_tree":
        fabric.update(leaf_ports=nics * data.draw(st.integers(1, 3)), latency="1us",
                      oversubscription=data.draw(st.sampled_from([1, 2, 3.5])))
    elif kind == "rail":
        fabric.update(latency="1us", spines=data.draw(st.integers(1, 3)))
    elif kind == "torus":
        fabric.update(dims=[nodes], link={"latency": "1us", "bandwidth": "10GB/s"})
    text = f"""\
kind: cluster
nodes: {nodes}
node: {{kind: pcie, gpus: 4, pcie: {{switches: 1, link: {LINK}, uplink: {LINK}}},
        nics: {{count: {nics}, link: {LINK}}}}}
fabric: {{kind: switch}}
"""
    cluster = topology_from_text(text, {"fabric": fabric})
    plan = FABRIC_KINDS[kind].read(Document({"fabric": fabric}, "f.yaml"), ("fabric",),
                                   Cabling(nodes, nics, cluster.node.spec.nics.link))
    assert plan.links == len(cluster.fabric.links)


@given(st.lists(st.integers(1, 7), min_size=1, max_size=3))
def test_torus_link_count_is_the_number_of_neighbour_pairs(dims):
    assert torus_link_count(tuple(dims)) == len(torus_neighbours(tuple(dims)))


EXTRA_KINDS = {
    "nvlink": f"kind: nvlink\ngpus: 4\nwiring: mesh\nnvlink: {LINK}\n",
    "torus": f"kind: torus\ndims: [2, 3]\nlink: {LINK}\n",
    "rail": "kind: cluster\nnodes: 3\nnode: {kind: pcie, gpus: 2, pcie: {switches: 1, "
            f"link: {LINK}, uplink: {LINK}}}, nics: {{count: 2, link: {LINK}}}}}\n"
            "fabric: {kind: rail, latency: 1us}\n",
    "torus_fabric": "kind: cluster\nnodes: 4\nnode: {kind: pcie, gpus: 1, pcie: {switches: 1, "
                    f"link: {LINK}, uplink: {LINK}}}, nics: {{count: 1, link: {LINK}}}}}\n"
                    f"fabric: {{kind: torus, dims: [2, 2], link: {LINK}}}\n",
}


@pytest.mark.parametrize("name", [*shipped_names(), *EXTRA_KINDS])
def test_topo_show_prints_every_shipped_file_and_every_kind(name, tmp_path, capsys):
    if name in EXTRA_KINDS:
        path = tmp_path / f"{name}.yaml"
        path.write_text(EXTRA_KINDS[name])
        name = str(path)
    assert main(["topo", "show", name]) == 0
    out = capsys.readouterr().out
    topology = load_topology(find_topology(name))
    assert f"(kind {topology.kind})" in out and f"GPUs            {topology.gpus} on" in out
    assert "bisection" in out


ONE_GPU = {
    "switch": f"kind: switch\ngpus: 1\nlink: {LINK}\n",
    "fully_connected": f"kind: fully_connected\ngpus: 1\nlink: {LINK}\n",
    "nvswitch": f"kind: nvswitch\ngpus: 1\nnvlink: {LINK}\n",
    "nvlink": f"kind: nvlink\ngpus: 1\nnvlink: {LINK}\nwiring: ring\n",
    "pcie": f"kind: pcie\ngpus: 1\npcie: {{switches: 1, link: {LINK}, uplink: {LINK}}}\n",
    "cluster": f"kind: cluster\nnodes: 1\nnode: {{kind: nvswitch, gpus: 1, nvlink: {LINK}}}\n"
               "fabric: {kind: switch}\n",
    "torus": f"kind: torus\ndims: [1]\nlink: {LINK}\n",
}


def test_one_gpu_tests_cover_every_kind():
    assert set(ONE_GPU) == set(KINDS)


@pytest.mark.parametrize("kind", ONE_GPU)
def test_a_machine_of_one_gpu_of_every_kind_is_summarized(kind):
    summary = summarize(topology_from_text(ONE_GPU[kind]))
    assert (summary.gpus, summary.nodes, summary.intra_injection) == (1, 1, 0.0)
    assert summary.bisection is None and summary.network_injection is None
