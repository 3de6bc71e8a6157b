"""Topology kinds, node kinds and fabric kinds, one module per family; importing this
package registers them all (see :mod:`collsim.hardware.kinds.registry`). A new kind is a
new module here that registers its record, imported below."""

from collsim.hardware.kinds import canonical, cluster, fabrics, nodes, torus  # noqa: F401
from collsim.hardware.kinds.registry import (
    FABRIC_KINDS,
    KINDS,
    NODE_KINDS,
    FabricKind,
    Kind,
    NodeKind,
    register_fabric_kind,
    register_kind,
    register_node_kind,
)

__all__ = ["FABRIC_KINDS", "KINDS", "NODE_KINDS", "FabricKind", "Kind", "NodeKind",
           "register_fabric_kind", "register_kind", "register_node_kind"]
