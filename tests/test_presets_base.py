"""Topology files that derive from a base (``base:``): the shipped variants differ from their
base only in the keys they write; merging is deep, a list or scalar replaces, null removes;
loops and missing bases are refused at the ``base`` key; an error in a merged key names the
file and line it was written at; ``--set`` applies on top; ``topo show`` names the bases."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from collsim.cli import main
from collsim.errors import InputError
from collsim.hardware.bases import as_cluster
from collsim.hardware.loader import load_topology, topology_from_text
from collsim.hardware.shipped import find_topology, shipped_names
from collsim.scenarios.loader import scenario_from_text
from collsim.yamlfile import load_yaml

# Each variant and the preset it derives from: clusters over their node, cloud presets over
# the node they use, a newer GPU on the same board or rack over the older one.
VARIANTS = {
    "h100-cluster-2to1": "h100-cluster",
    "h100-cluster": "dgx-h100", "a100-cluster": "dgx-a100", "b200-cluster": "dgx-b200",
    "gb200-nvl72-cluster": "gb200-nvl72", "gb300-nvl72-cluster": "gb300-nvl72",
    "dgx-h200": "dgx-h100", "gb300-nvl72": "gb200-nvl72",
    "p4d-efa-cluster": "dgx-a100", "p5-efa-cluster": "dgx-h100", "a3-mega-cluster": "dgx-h100",
    "a3-high-cluster": "dgx-h100",
}
OWN_KEYS = {"name", "kind", "base", "description"}  # what every file says for itself


def leaves(data: dict[str, Any], prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    """Every non-mapping value by its key path."""
    out: dict[tuple[str, ...], Any] = {}
    for key, value in data.items():
        if isinstance(value, dict) and value:
            out.update(leaves(value, prefix + (key,)))
        else:
            out[prefix + (key,)] = value
    return out


def merged_base(name: str, derived_kind: str) -> dict[str, Any]:
    """The base as the derived file sees it: merged over its own bases, and read as a
    cluster of its node where a cluster derives from a one-node file."""
    doc = load_topology_document(name)
    return as_cluster(doc).data if derived_kind == "cluster" and doc.data["kind"] != "cluster" \
        else doc.data


def load_topology_document(name: str):
    from collsim.hardware.bases import resolve_bases

    return resolve_bases(load_yaml(find_topology(name)))


def test_every_file_with_a_base_is_a_listed_variant():
    with_base = {name for name in shipped_names()
                 if "base" in load_yaml(find_topology(name)).data}
    assert with_base == set(VARIANTS)
    assert {name: load_yaml(find_topology(name)).data["base"] for name in VARIANTS} == VARIANTS


@pytest.mark.parametrize("name, base", sorted(VARIANTS.items()))
def test_a_variant_differs_from_its_base_only_in_what_it_writes(name, base):
    own = load_yaml(find_topology(name)).data
    merged = load_topology_document(name).data
    of_base = leaves(merged_base(base, merged["kind"]))
    expected = dict(of_base)
    for path, value in leaves({k: v for k, v in own.items() if k not in OWN_KEYS}).items():
        # only what differs: a key the variant writes does not repeat the base's value
        assert of_base.get(path) != value, f"{name} repeats its base's {path}"
        expected = {p: v for p, v in expected.items() if p[:len(path)] != path}
        if value is not None:
            expected[path] = value
    got = {p: v for p, v in leaves(merged).items() if p[0] not in OWN_KEYS}
    assert got == {p: v for p, v in expected.items() if p[0] not in OWN_KEYS}


def test_the_oversubscribed_cluster_is_the_cluster_with_half_the_uplinks():
    full = load_topology(find_topology("h100-cluster"), {"nodes": 8})
    half = load_topology(find_topology("h100-cluster-2to1"), {"nodes": 8})
    assert half.machine == full.machine                     # same GPU and NCCL figures
    assert half.node.spec == full.node.spec                 # same node, PCIe switches and all
    uplinks = [sum(1 for link in t.links if link.kind == "fabric" and "spine" in link.dst)
               for t in (full, half)]
    assert uplinks[1] * 2 == uplinks[0] > 0


# --- merging, on files written here -----------------------------------------------------

NODE = """\
name: node
kind: nvswitch
gpus: 8
nvlink: {latency: 0.5us, bandwidth: 450GB/s}
pcie:
  switches: 8
  sockets: 2
  link: {latency: 0.5us, bandwidth: 63GB/s}
  uplink: {latency: 0.5us, bandwidth: 63GB/s}
  inter_socket: {latency: 1us, bandwidth: 128GB/s}
nics: {count: 8, link: {latency: 1us, bandwidth: 400Gbps}}
gpu: {model: H100-SXM5-80GB, arch: 90}
nccl: {launch: 5us, cpu: intel, nvls: true, reachable: {nvlink: 370.8GB/s, network: 96%}}
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def test_mappings_merge_key_by_key_and_scalars_and_lists_replace(tmp_path):
    write(tmp_path, "node.yaml", NODE)
    derived = write(tmp_path, "derived.yaml", "base: node.yaml\nname: derived\n"
                                              "nvlink: {bandwidth: 900GB/s}\n"
                                              "nccl: {reachable: {nvlink: 721.8GB/s}}\n")
    t = load_topology(derived)
    assert t.name == "derived" and t.gpus == 8
    assert {link.bandwidth for link in t.links if link.kind == "nvlink"} == {900e9}
    nccl = t.machine.nccl
    assert nccl.reached("nvlink") == pytest.approx(721.8e9)    # written here
    assert nccl.reached("network") == pytest.approx(0.96 * 50e9)  # kept from the base
    assert nccl.launch == pytest.approx(5e-6) and nccl.nvls
    assert t.bases == (str(tmp_path / "node.yaml"),)


def test_null_removes_a_key_of_the_base_and_refuses_one_it_has_not(tmp_path):
    write(tmp_path, "node.yaml", NODE)
    derived = write(tmp_path, "derived.yaml", "base: node.yaml\nnics: ~\n")
    assert load_topology(derived).node.spec.nics is None
    typo = write(tmp_path, "typo.yaml", "base: node.yaml\npcie:\n  upliink: ~\n")
    with pytest.raises(InputError) as caught:
        load_topology(typo)
    assert (caught.value.file, caught.value.line, caught.value.key) == \
        (str(typo), 3, "pcie.upliink")
    assert "the base has no 'pcie.upliink'" in caught.value.message


def test_a_cluster_over_a_node_file_takes_its_node_gpu_and_nccl(tmp_path):
    write(tmp_path, "node.yaml", NODE)
    cluster = write(tmp_path, "cluster.yaml", "name: c\nkind: cluster\nbase: node.yaml\n"
                                              "nodes: 3\nfabric: {kind: switch}\n")
    t = load_topology(cluster)
    assert (t.kind, t.gpus, t.nodes, len(t.node.nics)) == ("cluster", 24, 3, 8)
    assert t.machine.gpu.model == "H100-SXM5-80GB" and t.machine.nccl.nvls


def test_bases_chain_and_set_applies_on_top(tmp_path):
    write(tmp_path, "node.yaml", NODE)
    write(tmp_path, "middle.yaml", "base: node.yaml\nname: middle\n"
                                   "nvlink: {bandwidth: 600GB/s}\n")
    top = write(tmp_path, "top.yaml", "base: middle.yaml\nname: top\n"
                                      "nccl: {launch: 7us}\n")

    def nvlink(t):
        return {link.bandwidth for link in t.links if link.kind == "nvlink"}

    t = load_topology(top)
    assert nvlink(t) == {600e9} and t.machine.nccl.launch == pytest.approx(7e-6)
    assert t.bases == (str(tmp_path / "middle.yaml"), str(tmp_path / "node.yaml"))
    t = load_topology(top, {"nvlink.bandwidth": "500GB/s", "nccl.launch": "9us"})
    assert nvlink(t) == {500e9} and t.machine.nccl.launch == pytest.approx(9e-6)


def test_a_shipped_name_is_a_base_from_anywhere(tmp_path):
    mine = write(tmp_path, "mine.yaml", "base: dgx-h100\nname: mine\nnccl: {launch: 1us}\n")
    t = load_topology(mine)
    assert t.gpus == 8 and t.machine.nccl.launch == pytest.approx(1e-6)
    assert t.bases == (str(find_topology("dgx-h100")),)


def test_a_loop_of_bases_is_refused_at_the_base_key(tmp_path):
    a = write(tmp_path, "a.yaml", "name: a\nbase: b.yaml\n")
    write(tmp_path, "b.yaml", "name: b\nkind: switch\nbase: a.yaml\n")
    with pytest.raises(InputError) as caught:
        load_topology(a)
    error = caught.value
    assert (error.file, error.line, error.key) == (str(tmp_path / "b.yaml"), 3, "base")
    assert "loop: a.yaml -> b.yaml -> a.yaml" in error.message
    itself = write(tmp_path, "self.yaml", "kind: switch\nbase: self.yaml\n")
    with pytest.raises(InputError, match="loop: self.yaml -> self.yaml"):
        load_topology(itself)


@pytest.mark.parametrize("value, message", [
    ("nowhere", "no topology file 'nowhere'"),
    ("sub/nowhere.yaml", "no topology file 'sub/nowhere.yaml'"),
    ("[dgx-h100]", "expected the name of a shipped topology"),
    ("''", "expected the name of a shipped topology"),
])
def test_a_missing_or_malformed_base_names_the_file_line_and_key(tmp_path, value, message):
    path = write(tmp_path, "derived.yaml", f"name: d\n\nbase: {value}\n")
    with pytest.raises(InputError) as caught:
        load_topology(path)
    assert (caught.value.file, caught.value.line, caught.value.key) == (str(path), 3, "base")
    assert message in caught.value.message


def test_an_error_in_a_merged_key_points_where_the_key_was_written(tmp_path):
    base = write(tmp_path, "node.yaml", NODE.replace("sockets: 2", "sockets: two"))
    derived = write(tmp_path, "derived.yaml", "# a variant\nbase: node.yaml\n"
                                              "nvlink: {bandwidth: 9 furlongs}\n")
    with pytest.raises(InputError) as caught:
        load_topology(derived)
    errors = getattr(caught.value, "errors", [caught.value])
    where = {(e.file, e.line, e.key) for e in errors}
    assert (str(base), 7, "pcie.sockets") in where            # the base's own mistake
    write(tmp_path, "node.yaml", NODE)
    with pytest.raises(InputError) as caught:
        load_topology(derived)
    assert (caught.value.file, caught.value.line, caught.value.key) == \
        (str(derived), 3, "nvlink.bandwidth")


def test_an_error_in_a_cluster_over_a_node_file_points_into_the_node_file(tmp_path):
    node = write(tmp_path, "node.yaml", NODE.replace("gpus: 8", "gpus: 0"))
    cluster = write(tmp_path, "cluster.yaml", "kind: cluster\nbase: node.yaml\nnodes: 2\n"
                                              "fabric: {kind: switch}\n")
    with pytest.raises(InputError) as caught:
        load_topology(cluster)
    errors = getattr(caught.value, "errors", [caught.value])
    assert any((e.file, e.line, e.key) == (str(node), 3, "node.gpus") for e in errors), \
        str(caught.value)


def test_inline_text_and_scenarios_resolve_bases_too(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "node.yaml", NODE)
    t = topology_from_text("base: node.yaml\nname: inline\nnics: {count: 2}\n")
    assert (t.name, t.gpus, len(t.node.nics)) == ("inline", 8, 2)
    scenario = scenario_from_text(
        "name: s\ntopologies:\n  - {kind: cluster, name: two, base: node.yaml, nodes: 2,\n"
        "     fabric: {kind: switch}}\ncollectives: [allreduce]\nalgorithms: [ring]\n"
        "sweep: {size: [1MiB]}\n", str(tmp_path / "s.yaml"))
    source = scenario.topologies[0]
    assert "base" not in source.data and source.data["node"]["gpus"] == 8
    assert source.build().gpus == 16


def test_topo_show_names_the_bases_and_a_missing_base_exits_2(tmp_path, capsys):
    assert main(["topo", "show", "h100-cluster-2to1", "--no-bisection",
                 "--set", "nodes=2"]) == 0
    out = capsys.readouterr().out
    assert "\nbase            h100-cluster <- dgx-h100\n" in out
    path = write(tmp_path, "bad.yaml", "base: nowhere\n")
    assert main(["topo", "show", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:1" in err and "key 'base'" in err and "Traceback" not in err


def test_a_misspelt_base_is_told_what_was_meant(tmp_path):
    path = write(tmp_path, "typo.yaml", NODE + "bse: dgx-h100\n")
    with pytest.raises(InputError) as caught:
        load_topology(path)
    errors = getattr(caught.value, "errors", [caught.value])
    assert any(e.key == "bse" and "did you mean 'base'" in e.message for e in errors)
