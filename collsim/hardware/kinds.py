"""Topology-file kinds for real machines: their keys (JSON Schema) and builders.

One node (``kind: nvswitch | nvlink | pcie``), keys at the top level::

    name: dgx-h100
    kind: nvswitch
    gpus: 8
    nvlink: {latency: 0.5us, bandwidth: 450GB/s}   # per GPU, per direction, to the NVSwitches
    pcie:                                          # optional for nvswitch/nvlink, needed for NICs
      switches: 4              # PCIe switches, spread over the sockets; GPUs spread over them
      sockets: 2
      link: {latency: 0.5us, bandwidth: 63GB/s}          # GPU or NIC <-> PCIe switch
      uplink: {latency: 0.5us, bandwidth: 63GB/s}        # PCIe switch <-> CPU root port
      inter_socket: {latency: 1us, bandwidth: 64GB/s}    # CPU <-> CPU (needed if sockets > 1)
    nics: {count: 8, link: {latency: 1us, bandwidth: 400Gbps}, gpudirect: true}
    gpu: {reduce_bandwidth: 1TB/s}

``kind: nvlink`` replaces the NVSwitch by direct links: ``nvlink`` is per link, pairs are
``wiring: ring | mesh`` with ``links_per_pair: N``, or explicit ``pairs: [[a, b, links], ...]``.
``kind: pcie`` has no ``nvlink``; its GPUs talk through the PCIe tree.

Many nodes (``kind: cluster``): ``nodes`` at the top level (so ``--set nodes=16`` sweeps it),
the node's keys under ``node`` (with the node's ``kind``), and the network under ``fabric``::

    kind: cluster
    nodes: 16
    node: {kind: nvswitch, gpus: 8, nvlink: ..., pcie: ..., nics: ...}
    fabric: {kind: fat_tree, leaf_ports: 32, oversubscription: 1, latency: 1us}
    # or {kind: switch} | {kind: rail, spines: 8, latency: 1us}
    #    | {kind: torus, dims: [4, 4], link: {latency: 1us, bandwidth: 50GB/s}}

A TPU-style torus of GPUs (``kind: torus``): ``dims: [4, 4, 4]``, ``link``, ``gpu``.
See :mod:`collsim.hardware.nodes` and :mod:`collsim.hardware.fabrics` for what is built.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from collsim.hardware.cluster import ClusterTopology
from collsim.hardware.fabrics import FABRIC_KINDS, FabricSpec, build_fabric
from collsim.hardware.graph import NoRoute
from collsim.hardware.loader import GPU_SCHEMA, LINK_SCHEMA, Kind, reduce_bandwidth
from collsim.hardware.nodes import (
    NODE_KINDS,
    LinkSpec,
    NicSpec,
    NodeGraph,
    NodeSpec,
    PcieSpec,
    build_node,
    nvlink_pairs,
)
from collsim.hardware.topology import Topology
from collsim.hardware.torus import TorusTopology
from collsim.schema import QUANTITY, at, quantity, validate
from collsim.units import parse_bandwidth, parse_time
from collsim.yamlfile import Document, KeyPath

COUNT = {"type": "integer", "minimum": 1}
PCIE_SCHEMA = {
    "type": "object",
    "properties": {"switches": COUNT, "sockets": COUNT, "link": LINK_SCHEMA,
                   "uplink": LINK_SCHEMA, "inter_socket": LINK_SCHEMA},
    "required": ["switches", "link", "uplink"],
    "additionalProperties": False,
}
NICS_SCHEMA = {
    "type": "object",
    "properties": {"count": COUNT, "link": LINK_SCHEMA, "gpudirect": {"type": "boolean"}},
    "required": ["count", "link"],
    "additionalProperties": False,
}
PAIR = {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 3,
        "maxItems": 3}
NODE_PROPERTIES: dict[str, dict[str, Any]] = {
    "nvswitch": {"gpus": COUNT, "nvlink": LINK_SCHEMA, "pcie": PCIE_SCHEMA,
                 "nics": NICS_SCHEMA},
    "nvlink": {"gpus": COUNT, "nvlink": LINK_SCHEMA, "wiring": {"enum": ["ring", "mesh"]},
               "links_per_pair": COUNT, "pairs": {"type": "array", "items": PAIR},
               "pcie": PCIE_SCHEMA, "nics": NICS_SCHEMA},
    "pcie": {"gpus": COUNT, "pcie": PCIE_SCHEMA, "nics": NICS_SCHEMA},
}
NODE_REQUIRED = {"nvswitch": ("gpus", "nvlink"), "nvlink": ("gpus", "nvlink"),
                 "pcie": ("gpus", "pcie")}
FABRIC_PROPERTIES: dict[str, dict[str, Any]] = {
    "switch": {},
    "fat_tree": {"leaf_ports": COUNT, "oversubscription": {"type": "number", "minimum": 1},
                 "spines": COUNT, "latency": QUANTITY},
    "rail": {"spines": COUNT, "oversubscription": {"type": "number", "minimum": 1},
             "latency": QUANTITY},
    "torus": {"dims": {"type": "array", "items": COUNT, "minItems": 1, "maxItems": 3},
              "link": LINK_SCHEMA},
}
FABRIC_REQUIRED = {"switch": (), "fat_tree": ("leaf_ports", "latency"), "rail": ("latency",),
                   "torus": ("dims", "link")}


def _strict(properties: dict[str, Any], required: tuple[str, ...], kinds: tuple[str, ...],
            kind: str | None) -> dict[str, Any]:
    """The schema of a ``node`` or ``fabric`` section: strict once its kind is known."""
    if kind not in kinds:
        return {"type": "object", "properties": {"kind": {"enum": list(kinds)}},
                "required": ["kind"]}
    return {"type": "object", "properties": {"kind": {"const": kind}, **properties},
            "required": ["kind", *required], "additionalProperties": False}


def _link(doc: Document, path: KeyPath) -> LinkSpec:
    return LinkSpec(quantity(doc, path + ("latency",), parse_time),
                    quantity(doc, path + ("bandwidth",), parse_bandwidth))


def _name(doc: Document) -> str:
    return doc.data.get("name") or Path(doc.file).stem


def node_spec(doc: Document, kind: str, prefix: KeyPath = ()) -> NodeSpec:
    """A NodeSpec from the node keys at ``prefix`` (the top level, or ``node``)."""
    data = at(doc.data, prefix)
    gpus = int(data["gpus"])
    pcie = nics = nvlink = None
    pairs: tuple[tuple[int, int, int], ...] = ()
    if "pcie" in data:
        p = prefix + ("pcie",)
        sockets = int(data["pcie"].get("sockets", 1))
        if sockets > 1 and "inter_socket" not in data["pcie"]:
            raise doc.error(p + ("inter_socket",), f"required with {sockets} sockets")
        pcie = PcieSpec(int(data["pcie"]["switches"]), sockets, _link(doc, p + ("link",)),
                        _link(doc, p + ("uplink",)),
                        _link(doc, p + ("inter_socket",)) if sockets > 1 else None)
    if "nics" in data:
        if pcie is None:
            raise doc.error(prefix + ("pcie",), "required when the node has 'nics': NICs "
                            "sit under the node's PCIe switches")
        nics = NicSpec(int(data["nics"]["count"]), _link(doc, prefix + ("nics", "link")),
                       bool(data["nics"].get("gpudirect", True)))
    if kind in ("nvswitch", "nvlink"):
        nvlink = _link(doc, prefix + ("nvlink",))
    if kind == "nvlink":
        pairs = _pairs(doc, prefix, gpus)
    return NodeSpec(kind, gpus, nvlink, pairs, pcie, nics)


def _pairs(doc: Document, prefix: KeyPath, gpus: int) -> tuple[tuple[int, int, int], ...]:
    data = at(doc.data, prefix)
    if "pairs" not in data:
        return nvlink_pairs(gpus, data.get("wiring", "mesh"), int(data.get("links_per_pair", 1)))
    seen = set()
    for i, (a, b, links) in enumerate(data["pairs"]):
        if not (a < gpus and b < gpus and a != b and links >= 1):
            raise doc.error(prefix + ("pairs", i), f"[{a}, {b}, {links}] must join two "
                            f"different GPUs from 0 to {gpus - 1} with at least one link")
        if (min(a, b), max(a, b)) in seen:
            raise doc.error(prefix + ("pairs", i), f"GPUs {a} and {b} are listed twice")
        seen.add((min(a, b), max(a, b)))
    return tuple((int(a), int(b), int(n)) for a, b, n in data["pairs"])


def fabric_spec(doc: Document, prefix: KeyPath = ("fabric",)) -> FabricSpec:
    """A FabricSpec from the ``fabric`` section."""
    data = at(doc.data, prefix)
    kind = data["kind"]
    latency = quantity(doc, prefix + ("latency",), parse_time) if "latency" in data else 0.0
    link = _link(doc, prefix + ("link",)) if "link" in data else None
    return FabricSpec(kind, latency, int(data.get("leaf_ports", 0)),
                      float(data.get("oversubscription", 1)), data.get("spines"),
                      tuple(int(d) for d in data.get("dims", ())), link)


def _node(doc: Document, spec: NodeSpec, prefix: KeyPath) -> NodeGraph:
    try:
        return build_node(spec)
    except NoRoute as exc:
        raise doc.error(prefix + (("pairs",) if spec.kind == "nvlink" else ()), str(exc)) \
            from None


def build_single_node(doc: Document) -> Topology:
    """A one-node machine (``kind: nvswitch | nvlink | pcie``)."""
    kind = doc.data["kind"]
    spec = node_spec(doc, kind)
    node = _node(doc, spec, ())
    return ClusterTopology(_name(doc), kind, node, 1, None, reduce_bandwidth(doc), doc.file)


def build_cluster(doc: Document) -> Topology:
    """``nodes`` copies of ``node`` joined by ``fabric``."""
    data = doc.data
    node_kind = at(data, ("node", "kind"))
    fabric_kind = at(data, ("fabric", "kind"))
    schema = cluster_kind().schema()
    schema["properties"]["node"] = _strict(NODE_PROPERTIES.get(node_kind, {}),
                                           NODE_REQUIRED.get(node_kind, ()), NODE_KINDS,
                                           node_kind)
    schema["properties"]["fabric"] = _strict(FABRIC_PROPERTIES.get(fabric_kind, {}),
                                             FABRIC_REQUIRED.get(fabric_kind, ()),
                                             FABRIC_KINDS, fabric_kind)
    validate(doc, schema)
    nodes = int(data["nodes"])
    spec = node_spec(doc, node_kind, ("node",))
    if spec.nics is None and nodes > 1:
        raise doc.error(("node", "nics"), "required: the nodes reach the fabric through NICs")
    fabric = fabric_spec(doc)
    if fabric.kind == "torus" and math.prod(fabric.dims) != nodes:
        raise doc.error(("fabric", "dims"), f"{list(fabric.dims)} holds "
                        f"{math.prod(fabric.dims)} nodes but 'nodes' is {nodes}; change both")
    node = _node(doc, spec, ("node",))
    graph = build_fabric(fabric, nodes, spec.nics.count, spec.nics.link) if spec.nics else None
    return ClusterTopology(_name(doc), "cluster", node, nodes, graph, reduce_bandwidth(doc),
                           doc.file, fabric.dims if fabric.kind == "torus" else ())


def build_torus(doc: Document) -> Topology:
    """A torus of GPUs (``kind: torus``)."""
    dims = tuple(int(d) for d in doc.data["dims"])
    link = _link(doc, ("link",))
    return TorusTopology(_name(doc), dims, link.latency, link.bandwidth, reduce_bandwidth(doc),
                         doc.file)


def cluster_kind() -> Kind:
    """The ``cluster`` kind (its node and fabric sections are checked strictly when built)."""
    return Kind("cluster", {"nodes": COUNT, "gpu": GPU_SCHEMA,
                            "node": _strict({}, (), NODE_KINDS, None),
                            "fabric": _strict({}, (), FABRIC_KINDS, None)},
                ("nodes", "node", "fabric"), build_cluster,
                "identical nodes joined at their NICs by a switch, fat-tree, rails or torus")


SUMMARIES = {
    "nvswitch": "one node: GPUs on a non-blocking NVSwitch fabric, PCIe tree and NICs",
    "nvlink": "one node: GPUs wired pairwise by NVLink (ring, mesh or explicit pairs)",
    "pcie": "one node: GPUs under PCIe switches and CPU sockets, no NVLink",
}


def kinds() -> list[Kind]:
    """Every kind this module adds to the loader."""
    out = [Kind(k, {**NODE_PROPERTIES[k], "gpu": GPU_SCHEMA}, NODE_REQUIRED[k],
                build_single_node, SUMMARIES[k]) for k in NODE_KINDS]
    out.append(cluster_kind())
    out.append(Kind("torus", {"dims": FABRIC_PROPERTIES["torus"]["dims"], "link": LINK_SCHEMA,
                              "gpu": GPU_SCHEMA}, ("dims", "link"), build_torus,
                    "a TPU-style 1D/2D/3D torus of GPUs, each a router"))
    return out
