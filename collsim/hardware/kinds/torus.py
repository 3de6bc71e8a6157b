"""The ``torus`` kind: a TPU-style 1D/2D/3D torus of GPUs, each a router::

    kind: torus
    dims: [4, 4, 4]
    link: {latency: 1us, bandwidth: 50GB/s}
"""

from __future__ import annotations

import math

from collsim.hardware.grid import torus_link_count
from collsim.hardware.kinds.keys import (
    DIMS_SCHEMA,
    GPU_SCHEMA,
    LINK_SCHEMA,
    count,
    link,
    machine_name,
    reduce_bandwidth,
)
from collsim.hardware.kinds.registry import Kind, register_kind
from collsim.hardware.limits import check_gpus, check_links
from collsim.hardware.topology import Topology
from collsim.hardware.torus import TorusTopology
from collsim.yamlfile import Document


def build_torus(doc: Document) -> Topology:
    """A torus of GPUs (``kind: torus``)."""
    dims = tuple(count(doc, ("dims", i)) for i in range(len(doc.data["dims"])))
    check_gpus(doc, ("dims",), math.prod(dims), "the product of dims")
    check_links(doc, ("dims",), 2 * torus_link_count(dims), "the torus")
    spec = link(doc, ("link",))
    return TorusTopology(machine_name(doc), dims, spec.latency, spec.bandwidth,
                         reduce_bandwidth(doc), doc.file)


register_kind(Kind("torus", {"dims": DIMS_SCHEMA, "link": LINK_SCHEMA, "gpu": GPU_SCHEMA},
                   ("dims", "link"), build_torus,
                   "a TPU-style 1D/2D/3D torus of GPUs, each a router"))
