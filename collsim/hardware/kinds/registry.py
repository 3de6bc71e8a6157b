"""The registries of kinds: one record per kind of topology file (its ``kind`` key), per kind
of node and per kind of fabric (a cluster's ``node`` and ``fabric`` sections). Each record
holds the kind's keys (JSON Schema properties), which of them are required, what builds
it, and a one-line summary for ``collsim list``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from collsim.hardware.graph import LinkGraph
from collsim.hardware.nodes import LinkSpec, Wiring
from collsim.hardware.topology import Topology
from collsim.hardware.transports import DEFAULT as DEFAULT_TRANSPORT
from collsim.yamlfile import Document, KeyPath


@dataclass(frozen=True)
class Kind:
    """A kind of topology file: its keys and the builder of its machine."""

    name: str
    properties: dict[str, Any]
    required: tuple[str, ...]
    build: Callable[[Document], Topology]
    summary: str

    def schema(self) -> dict[str, Any]:
        """The JSON Schema of a whole file of this kind."""
        return {
            "type": "object",
            "properties": {"name": {"type": "string"}, "kind": {"const": self.name},
                           "description": {"type": "string"},
                           # merged away before validation (hardware.bases); listed so that
                           # a misspelt 'base' is told what was meant
                           "base": {"type": "string"}, **self.properties},
            "required": ["kind", *self.required],
            "additionalProperties": False,
        }


@dataclass(frozen=True)
class NodeKind:
    """A kind of node: its keys besides the common ones (``gpus``, ``pcie``, ``nics``), and
    ``wiring(doc, prefix, gpus)``, which reads them at ``prefix`` into the node's wiring."""

    name: str
    properties: dict[str, Any]
    required: tuple[str, ...]
    wiring: Callable[[Document, KeyPath, int], Wiring]
    summary: str


class Fabric(Protocol):
    """A fabric as read from its section, for a given number of nodes and NICs per node."""

    @property
    def links(self) -> int:
        """Directed links :meth:`build` makes, NIC ports included."""

    @property
    def dims(self) -> tuple[int, ...]:
        """The grid the nodes sit on (rings walk it in Gray order); () if none."""

    def build(self, port: LinkSpec) -> LinkGraph:
        """The fabric's graph: NIC endpoints, switches and their links."""


@dataclass(frozen=True)
class Cabling:
    """What a fabric is read for: the nodes, their NICs each, a NIC's port (no NICs:
    ``nics`` is 0 and ``port`` None; the fabric is then checked but never built) and the
    network transport, whose routing a fat-tree takes unless the file names one."""

    nodes: int
    nics: int
    port: LinkSpec | None
    transport: str = DEFAULT_TRANSPORT


@dataclass(frozen=True)
class FabricKind:
    """A kind of fabric: its keys and ``read(doc, prefix, cabling)``, which checks them
    against the nodes it joins and returns the fabric to build."""

    name: str
    properties: dict[str, Any]
    required: tuple[str, ...]
    read: Callable[[Document, KeyPath, Cabling], Fabric]
    summary: str


KINDS: dict[str, Kind] = {}
NODE_KINDS: dict[str, NodeKind] = {}
FABRIC_KINDS: dict[str, FabricKind] = {}


def _add(registry: dict[str, Any], record: Any) -> Any:
    if record.name in registry:
        raise ValueError(f"kind {record.name!r} registered twice")
    registry[record.name] = record
    return record


def register_kind(kind: Kind) -> Kind:
    """Make ``kind`` loadable from topology files."""
    return _add(KINDS, kind)


def register_node_kind(kind: NodeKind) -> NodeKind:
    """Make ``kind`` usable as a cluster's ``node``."""
    return _add(NODE_KINDS, kind)


def register_fabric_kind(kind: FabricKind) -> FabricKind:
    """Make ``kind`` usable as a cluster's ``fabric``."""
    return _add(FABRIC_KINDS, kind)


def section_schema(records: dict[str, NodeKind] | dict[str, FabricKind], kind: Any,
                   common: dict[str, Any] | None = None) -> dict[str, Any]:
    """The schema of a ``node`` or ``fabric`` section: strict once its ``kind`` is known
    (its record's keys plus ``common``), else only that ``kind`` is one of ``records``."""
    record = records.get(kind) if isinstance(kind, str) else None
    if record is None:
        return {"type": "object", "properties": {"kind": {"enum": list(records)}},
                "required": ["kind"]}
    return {"type": "object",
            "properties": {"kind": {"const": kind}, **(common or {}), **record.properties},
            "required": ["kind", *record.required], "additionalProperties": False}
