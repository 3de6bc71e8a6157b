"""Each directed link's load over a recorded run: bytes, busy time, average and peak
utilisation, peak concurrent transfers, and the utilisation over time (for traces).

Exact, from the rate history of every flow of a :class:`~collsim.engine.recording.RecordingFabric`:
a link's load at any instant is the sum of the rates of the flows moving bytes over it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from collsim.engine.recording import RecordingFabric, segments
from collsim.hardware.topology import Link
from collsim.units import format_bytes, format_time

# Link kinds (collsim/hardware) grouped as a reader names them.
GROUPS = {"nvlink": "NVLink", "pcie": "PCIe", "pcie_uplink": "PCIe",
          "inter_socket": "PCIe", "nic": "NIC", "fabric": "leaf-spine", "port": "switch port",
          "direct": "direct", "torus": "torus"}


def group_of(link: Link) -> str:
    """The group a link is reported in: NVLink, PCIe, NIC, leaf-spine, ..."""
    return GROUPS.get(link.kind, link.kind)


@dataclass
class LinkLoad:
    """One directed link's load (bandwidth is the cost model's, payload bytes/s)."""

    index: int
    link: Link
    bandwidth: float
    bytes: float = 0.0
    busy_s: float = 0.0
    peak_utilisation: float = 0.0
    peak_transfers: int = 0
    timeline: list[tuple[float, float]] = field(default_factory=list)  # (time, utilisation)

    def average_utilisation(self, span_s: float) -> float:
        """Bytes over what the link could carry in ``span_s`` seconds."""
        return self.bytes / (self.bandwidth * span_s) if span_s > 0 else 0.0


def link_loads(fabric: RecordingFabric) -> list[LinkLoad]:
    """The load of every directed link that carried bytes, in link order."""
    index_of = {id(channel): i for i, channel in enumerate(fabric.channels)}
    changes: dict[int, list[tuple[float, float, int]]] = {}
    loads: dict[int, LinkLoad] = {}
    links = fabric.topology.links
    for flow in fabric.flows:
        pieces = segments(flow)
        if not pieces:
            continue
        for channel in flow.channels:
            i = index_of.get(id(channel))
            if i is None:
                continue  # a virtual link (a cost model's cap)
            load = loads.get(i)
            if load is None:
                load = loads[i] = LinkLoad(i, links[i], channel.bandwidth)
            load.bytes += flow.size
            events = changes.setdefault(i, [])
            for start, end, rate in pieces:
                events.append((start, rate, 0))
                events.append((end, -rate, 0))
            events.append((pieces[0][0], 0.0, 1))
            events.append((pieces[-1][1], 0.0, -1))
    for i, load in loads.items():
        events = sorted(changes[i], key=lambda e: (e[0], e[2]))
        rate, flows, last = 0.0, 0, None
        position = 0
        while position < len(events):
            time = events[position][0]
            if last is not None and rate > load.bandwidth * 1e-12:
                load.busy_s += time - last
            while position < len(events) and events[position][0] == time:
                rate += events[position][1]
                flows += events[position][2]
                position += 1
            utilisation = max(rate, 0.0) / load.bandwidth
            if utilisation < 1e-12:
                utilisation = 0.0
            load.peak_utilisation = max(load.peak_utilisation, utilisation)
            load.peak_transfers = max(load.peak_transfers, flows)
            if not load.timeline or load.timeline[-1][1] != utilisation:
                load.timeline.append((time, utilisation))
            last = time
    return [loads[i] for i in sorted(loads)]


TOP = 10  # links listed per kind unless the user asks for more (--links)


def format_link_report(loads: list[LinkLoad], span_s: float, top: int | None = TOP) -> str:
    """Per group of link kind, hottest first (by busy time, then bytes): the ``top`` links'
    (every link's if None) bytes moved, busy time, average and peak utilisation and peak
    concurrent transfers."""
    groups: dict[str, list[LinkLoad]] = {}
    for load in loads:
        groups.setdefault(group_of(load.link), []).append(load)
    lines = [f"link report over {format_time(span_s)}: {len(loads)} directed links carried "
             "bytes"]
    header = (f"  {'link':<34}{'moved':>12}{'busy':>11}{'avg util':>10}{'peak util':>11}"
              f"{'peak xfers':>11}")
    order = ["NVLink", "PCIe", "NIC", "leaf-spine"]
    for name in sorted(groups, key=lambda g: (order.index(g) if g in order else 9, g)):
        members = sorted(groups[name], key=lambda x: (-x.busy_s, -x.bytes, x.index))
        peak = max(m.peak_utilisation for m in members)
        lines.append(f"{name}: {len(members)} links, peak utilisation {100 * peak:.0f}%, "
                     f"most concurrent transfers {max(m.peak_transfers for m in members)}")
        lines.append(header)
        shown = members if top is None else members[:top]
        for m in shown:
            lines.append(f"  {m.link.name:<34}{format_bytes(m.bytes):>12}"
                         f"{format_time(m.busy_s):>11}"
                         f"{100 * m.average_utilisation(span_s):>9.1f}%"
                         f"{100 * m.peak_utilisation:>10.1f}%{m.peak_transfers:>11}")
        if len(members) > len(shown):
            lines.append(f"  ... {len(members) - len(shown)} more (--links all lists them)")
    return "\n".join(lines)
