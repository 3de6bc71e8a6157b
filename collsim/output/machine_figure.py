"""A picture of a machine: vertices in rows (GPUs and NVSwitch at the bottom, PCIe, CPUs and
NICs above, network switches on top), each node in its own column block; tori on their grid.
Drawn with matplotlib's Agg backend (no display needed)."""

from __future__ import annotations

import math
import re
from collections import defaultdict
from pathlib import Path

import networkx as nx
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from collsim.hardware.graph import LinkGraph
from collsim.hardware.summary import machine_graph
from collsim.hardware.topology import Topology
from collsim.output.files import replace_with

VERTEX_COLOURS = {"gpu": "#2e7d32", "nvswitch": "#6a1b9a", "pcie_switch": "#ef6c00",
                  "cpu": "#1565c0", "nic": "#c62828", "leaf": "#616161", "spine": "#212121",
                  "switch": "#616161", "router": "#616161"}
LINK_COLOURS = {"nvlink": "#6a1b9a", "pcie": "#ef6c00", "pcie_uplink": "#ef6c00",
                "inter_socket": "#1565c0", "nic": "#c62828", "fabric": "#424242",
                "torus": "#2e7d32"}
_NODE_PREFIX = re.compile(r"^n(\d+)\.")


def _natural(name: str) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def layout(graph: LinkGraph) -> dict[str, tuple[float, float]]:
    """Drawing positions: a vertex's own ``pos`` if every vertex has one, else rows by layer,
    node-prefixed vertices (``n3.gpu0``) inside their node's block of columns."""
    vertices = graph.vertices
    if vertices and all(v.pos is not None for v in vertices.values()):
        return {name: v.pos for name, v in vertices.items()}
    blocks: dict[tuple[int | None, int], list[str]] = defaultdict(list)
    for name, v in vertices.items():
        match = _NODE_PREFIX.match(name)
        blocks[int(match.group(1)) if match else None, v.layer].append(name)
    nodes = 1 + max((b for b, _ in blocks if b is not None), default=-1)
    width = max(1, nodes)
    pos = {}
    for (node, layer), names in blocks.items():
        names.sort(key=_natural)
        left, span = (node, 0.8) if node is not None else (0.0, width - 0.2)
        for i, name in enumerate(names):
            x = left + span * (i + 0.5) / len(names)
            pos[name] = (x, float(layer))
    return pos


def draw(topology: Topology, path: str | Path) -> Path:
    """Draw ``topology`` to an image file (format from the suffix: png, svg, pdf)."""
    graph = machine_graph(topology)
    pos = layout(graph)
    g = nx.Graph()
    g.add_nodes_from(graph.vertices)
    widths: dict[tuple[str, str], float] = {}
    kinds: dict[tuple[str, str], str] = {}
    for link in graph.links:
        key = tuple(sorted((link.src, link.dst)))
        widths[key] = max(widths.get(key, 0.0), link.bandwidth)
        kinds[key] = link.kind
        g.add_edge(*key)
    big = len(g) > 400
    figure = Figure(figsize=(min(40, 6 + 0.08 * len(g)), 8))
    FigureCanvasAgg(figure)
    ax = figure.add_subplot()
    edges = list(g.edges())
    keys = [tuple(sorted(e)) for e in edges]
    top = max(widths.values(), default=1.0)
    nx.draw_networkx_edges(
        g, pos, edgelist=edges, ax=ax, alpha=0.6,
        edge_color=[LINK_COLOURS.get(kinds[k], "#9e9e9e") for k in keys],
        width=[0.4 + 2.5 * math.log1p(widths[k] / top * 9) / math.log(10) for k in keys])
    kinds_present = sorted({v.kind for v in graph.vertices.values()})
    for kind in kinds_present:
        names = [n for n, v in graph.vertices.items() if v.kind == kind]
        nx.draw_networkx_nodes(g, pos, nodelist=names, ax=ax, node_size=8 if big else 260,
                               node_color=VERTEX_COLOURS.get(kind, "#9e9e9e"), label=kind)
    if len(g) <= 80:
        nx.draw_networkx_labels(g, pos, ax=ax, font_size=5, font_color="white",
                                labels={n: _NODE_PREFIX.sub("", n) for n in g})
    handles = [Line2D([], [], color=LINK_COLOURS.get(k, "#9e9e9e"), label=f"{k} link")
               for k in sorted(set(kinds.values()))]
    ax.legend(handles=ax.get_legend_handles_labels()[0] + handles, loc="upper left",
              bbox_to_anchor=(1.0, 1.0), fontsize=7, markerscale=0.6)
    ax.set_title(f"{topology.name}: {topology.gpus} GPUs on {topology.nodes} node(s)")
    ax.set_axis_off()
    path = Path(path)
    replace_with(path, lambda temporary: figure.savefig(
        temporary, dpi=120, bbox_inches="tight", format=path.suffix[1:] or None))
    return path
