"""The ``cluster`` kind: ``nodes`` copies of one node joined at their NICs by a fabric::

    kind: cluster
    nodes: 16
    node: {kind: nvswitch, gpus: 8, nvlink: ..., pcie: ..., nics: ...}
    fabric: {kind: fat_tree, leaf_ports: 32, oversubscription: 1, latency: 1us}
    gpu: {model: H100-SXM5-80GB, arch: 90}
    nccl: {launch: 18us, cpu: intel, ...}   # whole machine (see kinds.declarations)
    # or {kind: switch} | {kind: rail, spines: 8, latency: 1us}
    #    | {kind: torus, dims: [4, 4], link: {latency: 1us, bandwidth: 50GB/s}}

``nodes`` is at the top level so that ``--set nodes=16`` sweeps it. The ``node`` section takes
any node kind's keys and the ``fabric`` section any fabric kind's, checked strictly once
their ``kind`` is known.
"""

from __future__ import annotations

from collsim.hardware.cluster import ClusterTopology
from collsim.hardware.kinds.declarations import NCCL_SCHEMA, read_machine
from collsim.hardware.kinds.keys import COUNT, GPU_SCHEMA, count, machine_name, reduce_bandwidth
from collsim.hardware.kinds.nodes import COMMON, node_graph, read_node
from collsim.hardware.kinds.registry import (
    FABRIC_KINDS,
    NODE_KINDS,
    Cabling,
    Kind,
    register_kind,
    section_schema,
)
from collsim.hardware.limits import check_gpus, check_links
from collsim.hardware.topology import Topology
from collsim.hardware.transports import DEFAULT as DEFAULT_TRANSPORT
from collsim.schema import at, validate
from collsim.yamlfile import Document

SECTION = {"type": "object", "required": ["kind"]}


def build_cluster(doc: Document) -> Topology:
    """``nodes`` copies of ``node`` joined by ``fabric``."""
    schema = CLUSTER.schema()
    schema["properties"]["node"] = section_schema(NODE_KINDS, at(doc.data, ("node", "kind")),
                                                  COMMON)
    schema["properties"]["fabric"] = section_schema(FABRIC_KINDS,
                                                    at(doc.data, ("fabric", "kind")))
    validate(doc, schema)
    nodes = count(doc, ("nodes",))
    spec = read_node(doc, ("node",))
    check_gpus(doc, ("nodes",), nodes * spec.gpus, f"{nodes:,} nodes of {spec.gpus} GPUs"
               if nodes.bit_length() < 64 else "")
    if spec.nics is None and nodes > 1:
        raise doc.error(("node", "nics"), "required: the nodes reach the fabric through NICs")
    port = spec.nics.link if spec.nics else None
    fabric = FABRIC_KINDS[doc.data["fabric"]["kind"]].read(
        doc, ("fabric",), Cabling(nodes, spec.nics.count if spec.nics else 0, port,
                                  spec.nics.transport if spec.nics else DEFAULT_TRANSPORT))
    check_links(doc, ("nodes",), nodes * spec.links, f"{nodes:,} nodes of {spec.links:,} "
                "links each")
    check_links(doc, ("fabric",), nodes * spec.links + (fabric.links if port else 0),
                f"with its {fabric.links:,} links, the fabric makes a machine that")
    node = node_graph(doc, spec, ("node",))
    graph = fabric.build(port) if port else None
    topology = ClusterTopology(machine_name(doc), "cluster", node, nodes, graph,
                               reduce_bandwidth(doc), doc.file, fabric.dims)
    topology.machine = read_machine(doc, spec, ("node",))
    topology.routing = getattr(fabric, "routing", None)
    topology.routing_declared = getattr(fabric, "routing_declared", False)
    return topology


CLUSTER = register_kind(Kind(
    "cluster", {"nodes": COUNT, "gpu": GPU_SCHEMA, "nccl": NCCL_SCHEMA, "node": SECTION,
                "fabric": SECTION},
    ("nodes", "node", "fabric"), build_cluster,
    "identical nodes joined at their NICs by a switch, fat-tree, rails or torus"))
