"""Node kinds, each also a kind of one-node topology file (keys at the top level)::

    name: dgx-h100
    kind: nvswitch
    gpus: 8
    nvlink: {latency: 0.5us, bandwidth: 450GB/s}   # per GPU, per direction, to the NVSwitches
                                                   # (optional links: 18, the NVLinks in it)
    pcie:                                          # optional for nvswitch/nvlink, needed for NICs
      switches: 4              # PCIe switches, spread over the sockets; GPUs spread over them
      sockets: 2               # or gpus_per_switch / switches_per_socket (they follow --set gpus)
      link: {latency: 0.5us, bandwidth: 63GB/s}          # GPU or NIC <-> PCIe switch
      uplink: {latency: 0.5us, bandwidth: 63GB/s}        # PCIe switch <-> CPU root port
      inter_socket: {latency: 1us, bandwidth: 64GB/s}    # CPU <-> CPU (needed if sockets > 1)
    nics: {count: 8, link: {latency: 1us, bandwidth: 400Gbps}, transport: ib}
                                                   # transport: ib | roce | efa | tcpx |
                                                   # tcpxo | socket (default ib); gpudirect:
                                                   # true | false overrides the transport's
    gpu: {reduce_bandwidth: 1TB/s}                 # and model, arch for NCCL's figures
    nccl: {launch: 15us, cpu: intel, ...}          # see collsim.hardware.kinds.declarations

- ``nvswitch``: every GPU has ``nvlink.bandwidth`` per direction to one non-blocking NVSwitch
  fabric (DGX/HGX A100, H100).
- ``nvlink``: GPU pairs wired directly, ``links_per_pair`` NVLinks of ``nvlink.bandwidth``
  each, as a ``ring`` or a full ``mesh`` (``wiring``), or an explicit ``pairs: [[a, b,
  links], ...]``. Pairs without NVLink talk over PCIe, so such a node needs ``pcie``.
- ``pcie``: no NVLink at all; GPU-to-GPU traffic takes the PCIe tree.

Every PCIe switch must have a GPU under it, every socket a switch, and every NIC a GPU that
uses it; see :mod:`collsim.hardware.nodes` for what is built.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from collsim.hardware.cluster import ClusterTopology
from collsim.hardware.graph import LinkGraph, NoRoute
from collsim.hardware.kinds.declarations import NCCL_SCHEMA, read_machine
from collsim.hardware.kinds.keys import (
    COUNT,
    GPU_SCHEMA,
    LINK_SCHEMA,
    amount,
    count,
    link,
    machine_name,
    reduce_bandwidth,
)
from collsim.hardware.kinds.registry import (
    NODE_KINDS,
    Kind,
    NodeKind,
    register_kind,
    register_node_kind,
)
from collsim.hardware.limits import MAX_GPUS_PER_NODE, check_gpus, check_links, count_text
from collsim.hardware.nodes import (
    LAYER_NVSWITCH,
    LinkSpec,
    NicSpec,
    NodeGraph,
    NodeSpec,
    PcieSpec,
    Unwired,
    build_node,
)
from collsim.hardware.topology import Topology
from collsim.hardware.transports import DEFAULT, TRANSPORTS, transport
from collsim.schema import QUANTITY, at
from collsim.units import UnitError, check_bandwidth
from collsim.yamlfile import Document, KeyPath

PCIE_SCHEMA = {
    "type": "object",
    "properties": {"switches": COUNT, "gpus_per_switch": COUNT, "sockets": COUNT,
                   "switches_per_socket": COUNT, "link": LINK_SCHEMA, "uplink": LINK_SCHEMA,
                   "inter_socket": LINK_SCHEMA},
    "required": ["link", "uplink"],
    "additionalProperties": False,
}
NVLINK_SCHEMA = {  # an NVSwitch node's NVLink: per GPU, per direction, and how many links
    "type": "object",
    "properties": {"latency": QUANTITY, "bandwidth": QUANTITY, "links": COUNT},
    "required": ["latency", "bandwidth"],
    "additionalProperties": False,
}
NICS_SCHEMA = {
    "type": "object",
    "properties": {"count": COUNT, "link": LINK_SCHEMA, "gpudirect": {"type": "boolean"},
                   "transport": {"enum": list(TRANSPORTS)}},
    "required": ["count", "link"],
    "additionalProperties": False,
}
PAIR = {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 3,
        "maxItems": 3}
COMMON = {"gpus": COUNT, "pcie": PCIE_SCHEMA, "nics": NICS_SCHEMA}


@dataclass(frozen=True)
class NvSwitch:
    """Every GPU joined to one non-blocking NVSwitch by ``link``; ``nvlinks`` is how many
    NVLinks per GPU make up that figure, where the file says (``nvlink.links``)."""

    link: LinkSpec
    gpus: int
    nvlinks: int | None = None

    @property
    def links(self) -> int:
        return 2 * self.gpus

    def wire(self, g: LinkGraph, gpus: list[str]) -> None:
        g.vertex("nvswitch", "nvswitch", layer=LAYER_NVSWITCH)
        for gpu in gpus:
            g.connect(gpu, "nvswitch", self.link.latency, self.link.bandwidth, "nvlink")

    def nvlink_per_gpu(self, gpus: int) -> float:
        return self.link.bandwidth if gpus > 0 else 0.0


@dataclass(frozen=True)
class NvLinkPairs:
    """GPU pairs joined directly by ``links`` NVLinks of ``link`` each: (a, b, links)."""

    link: LinkSpec
    pairs: tuple[tuple[int, int, int], ...]

    @property
    def links(self) -> int:
        return 2 * len(self.pairs)

    def wire(self, g: LinkGraph, gpus: list[str]) -> None:
        for a, b, links in self.pairs:
            g.connect(gpus[a], gpus[b], self.link.latency, links * self.link.bandwidth,
                      "nvlink")

    def nvlink_per_gpu(self, gpus: int) -> float:
        per_gpu = [0] * gpus
        for a, b, links in self.pairs:
            per_gpu[a] += links
            per_gpu[b] += links
        return max(per_gpu, default=0) * self.link.bandwidth


def nvlink_pairs(gpus: int, wiring: str, links: int) -> tuple[tuple[int, int, int], ...]:
    """GPU pairs of a ``ring`` (g, g+1 mod n) or full ``mesh``, each with ``links`` NVLinks."""
    if wiring == "ring":
        pairs = {tuple(sorted((g, (g + 1) % gpus))) for g in range(gpus) if gpus > 1}
    else:
        pairs = set(itertools.combinations(range(gpus), 2))
    return tuple((a, b, links) for a, b in sorted(pairs))


def _nvswitch(doc: Document, prefix: KeyPath, gpus: int) -> NvSwitch:
    path = prefix + ("nvlink", "links")
    nvlinks = count(doc, path) if at(doc.data, path) is not None else None
    return NvSwitch(link(doc, prefix + ("nvlink",)), gpus, nvlinks)


def _nvlink(doc: Document, prefix: KeyPath, gpus: int) -> NvLinkPairs:
    data = at(doc.data, prefix)
    nvlink = link(doc, prefix + ("nvlink",))
    if "pairs" not in data:
        links = count(doc, prefix + ("links_per_pair",), 1)
        _check_bundle(doc, prefix + ("links_per_pair",), links, nvlink)
        return NvLinkPairs(nvlink, nvlink_pairs(gpus, data.get("wiring", "mesh"), links))
    for key in ("wiring", "links_per_pair"):
        if key in data:
            raise doc.error(prefix + (key,), "has no effect with explicit 'pairs': "
                            "give 'pairs' or 'wiring' with 'links_per_pair', not both")
    seen = set()
    for i, (a, b, links) in enumerate(data["pairs"]):
        if not (a < gpus and b < gpus and a != b and links >= 1):
            raise doc.error(prefix + ("pairs", i), f"[{a}, {b}, {links}] must join two "
                            f"different GPUs from 0 to {gpus - 1} with at least one link")
        if (min(a, b), max(a, b)) in seen:
            raise doc.error(prefix + ("pairs", i), f"GPUs {a} and {b} are listed twice")
        seen.add((min(a, b), max(a, b)))
        _check_bundle(doc, prefix + ("pairs", i), links, nvlink)
    return NvLinkPairs(nvlink, tuple((int(a), int(b), int(n)) for a, b, n in data["pairs"]))


def _check_bundle(doc: Document, path: KeyPath, links: int, nvlink: LinkSpec) -> None:
    """``links`` NVLinks together must stay within the bandwidth range of one link."""
    try:
        check_bandwidth(links * nvlink.bandwidth)
    except UnitError as exc:
        raise doc.error(path, f"{count_text(links)} NVLinks of {nvlink.bandwidth:.3g} B/s "
                        f"together: {exc}") from None


def _unwired(doc: Document, prefix: KeyPath, gpus: int) -> Unwired:
    return Unwired()


def _either(doc: Document, path: KeyPath, fixed: str, ratio: str) -> str | None:
    """Which of two exclusive keys at ``path`` is given (None if neither)."""
    data = at(doc.data, path)
    if fixed in data and ratio in data:
        raise doc.error(path + (ratio,), f"give '{fixed}' or '{ratio}', not both")
    return fixed if fixed in data else ratio if ratio in data else None


def _pcie(doc: Document, prefix: KeyPath, gpus: int) -> PcieSpec:
    path = prefix + ("pcie",)
    data = at(doc.data, path)
    given = _either(doc, path, "switches", "gpus_per_switch")
    if given is None:
        raise doc.error(path + ("switches",), "required key is missing (or give "
                        "'gpus_per_switch', which follows the GPU count)")
    switches = count(doc, path + (given,))
    if given == "gpus_per_switch":
        switches = -(-gpus // switches)
    given = _either(doc, path, "sockets", "switches_per_socket")
    sockets = count(doc, path + (given,)) if given else 1
    if given == "switches_per_socket":
        sockets = -(-switches // sockets)
    if switches > gpus:
        raise doc.error(path + ("switches",), f"{switches} PCIe switches for "
                        f"{amount(gpus, 'GPU', 'GPUs')}: "
                        f"GPUs are spread evenly over the switches and each needs one; give "
                        f"at most {gpus}")
    if sockets > switches:
        raise doc.error(path + ("sockets",), f"{sockets} sockets for "
                        f"{amount(switches, 'PCIe switch', 'PCIe switches')}: switches are "
                        f"spread evenly over the sockets and each needs one; give at most "
                        f"{switches}")
    if sockets > 1 and "inter_socket" not in data:
        raise doc.error(path + ("inter_socket",), f"required with {sockets} sockets")
    return PcieSpec(switches, sockets, link(doc, path + ("link",)),
                    link(doc, path + ("uplink",)),
                    link(doc, path + ("inter_socket",)) if sockets > 1 else None)


def _nics(doc: Document, prefix: KeyPath, gpus: int) -> NicSpec:
    path = prefix + ("nics",)
    nics = count(doc, path + ("count",))
    if nics > gpus:
        raise doc.error(path + ("count",), f"{nics} NICs for {amount(gpus, 'GPU', 'GPUs')}: "
                        f"GPU g uses NIC "
                        f"g * count // gpus, so NICs beyond one per GPU would carry nothing; "
                        f"give at most {gpus}")
    carrier = transport(at(doc.data, path + ("transport",), DEFAULT),
                        key=".".join(map(str, path + ("transport",))))
    given = at(doc.data, path + ("gpudirect",))
    gpudirect = bool(carrier.gpudirect.value) if given is None else bool(given)
    return NicSpec(nics, link(doc, path + ("link",)), gpudirect, carrier.name,
                   frozenset() if given is None else frozenset({"gpudirect"}))


def read_node(doc: Document, prefix: KeyPath = ()) -> NodeSpec:
    """The node whose keys are at ``prefix`` (the top level, or ``node``), checked."""
    data = at(doc.data, prefix)
    kind = NODE_KINDS[data["kind"]]
    gpus = count(doc, prefix + ("gpus",))
    check_gpus(doc, prefix + ("gpus",), gpus, limit=MAX_GPUS_PER_NODE)
    pcie = _pcie(doc, prefix, gpus) if "pcie" in data else None
    if "nics" in data and pcie is None:
        raise doc.error(prefix + ("pcie",), "required when the node has 'nics': NICs sit "
                        "under the node's PCIe switches")
    nics = _nics(doc, prefix, gpus) if "nics" in data else None
    return NodeSpec(kind.name, gpus, kind.wiring(doc, prefix, gpus), pcie, nics)


def node_graph(doc: Document, spec: NodeSpec, prefix: KeyPath = ()) -> NodeGraph:
    """The built node; GPUs that cannot reach each other are an error at ``prefix``."""
    try:
        return build_node(spec)
    except NoRoute as exc:
        where = next(((key,) for key in ("pairs", "wiring") if key in at(doc.data, prefix)),
                     ())
        raise doc.error(prefix + where, str(exc)) from None


def build_single_node(doc: Document) -> Topology:
    """A one-node machine (``kind: nvswitch | nvlink | pcie``)."""
    spec = read_node(doc)
    check_links(doc, ("gpus",), spec.links, f"a node of {spec.gpus:,} GPUs")
    node = node_graph(doc, spec)
    topology = ClusterTopology(machine_name(doc), spec.kind, node, 1, None,
                               reduce_bandwidth(doc), doc.file)
    topology.machine = read_machine(doc, spec)
    return topology


def _register(kind: NodeKind) -> None:
    """``kind`` as a cluster's node, and as a one-node topology file."""
    register_node_kind(kind)
    properties: dict[str, Any] = {**COMMON, **kind.properties, "gpu": GPU_SCHEMA,
                                  "nccl": NCCL_SCHEMA}
    register_kind(Kind(kind.name, properties, kind.required, build_single_node,
                       "one node: " + kind.summary))


_register(NodeKind("nvswitch", {"nvlink": NVLINK_SCHEMA}, ("gpus", "nvlink"), _nvswitch,
                   "GPUs on a non-blocking NVSwitch fabric, PCIe tree and NICs"))
_register(NodeKind("nvlink", {"nvlink": LINK_SCHEMA, "wiring": {"enum": ["ring", "mesh"]},
                              "links_per_pair": COUNT, "pairs": {"type": "array", "items": PAIR}},
                   ("gpus", "nvlink"), _nvlink,
                   "GPUs wired pairwise by NVLink (ring, mesh or explicit pairs)"))
_register(NodeKind("pcie", {}, ("gpus", "pcie"), _unwired,
                   "GPUs under PCIe switches and CPU sockets, no NVLink"))
