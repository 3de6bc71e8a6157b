"""The canonical kinds (docs/design.md#kinds), ``switch`` and ``fully_connected``: ``gpus`` GPUs
with one ``link`` figure for every link, where the closed forms hold exactly."""

from __future__ import annotations

from collections.abc import Callable

from collsim.hardware.kinds.keys import (
    COUNT,
    GPU_SCHEMA,
    LINK_SCHEMA,
    count,
    link,
    machine_name,
    reduce_bandwidth,
)
from collsim.hardware.kinds.registry import Kind, register_kind
from collsim.hardware.limits import check_gpus, check_links
from collsim.hardware.topology import Topology, fully_connected, switch
from collsim.yamlfile import Document

KEYS = {"gpus": COUNT, "link": LINK_SCHEMA, "gpu": GPU_SCHEMA}


def _uniform(builder: Callable[..., Topology], links: Callable[[int], int]
             ) -> Callable[[Document], Topology]:
    """A kind's builder: check the size, then ``builder(name, gpus, latency, bandwidth,
    reduce_bandwidth)``; ``links(gpus)`` is how many directed links it makes."""
    def build(doc: Document) -> Topology:
        gpus = count(doc, ("gpus",))
        check_gpus(doc, ("gpus",), gpus)
        check_links(doc, ("gpus",), links(gpus), f"a {doc.data['kind']} machine of "
                    f"{gpus:,} GPUs")
        spec = link(doc, ("link",))
        return builder(machine_name(doc), gpus, spec.latency, spec.bandwidth,
                       reduce_bandwidth(doc))
    return build


register_kind(Kind("switch", KEYS, ("gpus", "link"), _uniform(switch, lambda g: 2 * g),
                   "every GPU has one full-duplex port to one non-blocking switch"))
register_kind(Kind("fully_connected", KEYS, ("gpus", "link"),
                   _uniform(fully_connected, lambda g: g * (g - 1)),
                   "a dedicated full-duplex link between every pair of GPUs"))
