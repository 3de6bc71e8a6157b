"""What a loaded scenario is: its topologies, collectives, algorithms, axes and figures, all
checked, plus the points of its sweep."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from collsim.hardware.loader import topology_from_document
from collsim.hardware.topology import Topology
from collsim.yamlfile import Document, KeyPath


@dataclass(frozen=True)
class TopologySource:
    """A topology as written (a file, or inline in the scenario), rebuilt with each ``set``
    combination by whichever process runs the point."""

    label: str
    data: dict[str, Any]
    file: str
    lines: dict[KeyPath, int] = field(default_factory=dict, compare=False, hash=False)
    files: dict[KeyPath, str] = field(default_factory=dict, compare=False, hash=False)

    @classmethod
    def of(cls, label: str, doc: Document) -> TopologySource:
        """The source of a document already merged over its bases (data, lines, files)."""
        return cls(label, doc.data, doc.file, doc.lines, doc.files)

    def document(self) -> Document:
        return Document(self.data, self.file, dict(self.lines), dict(self.files))

    def build(self, overrides: dict[str, Any] | None = None) -> Topology:
        """The machine, with dotted-key overrides applied."""
        return topology_from_document(self.document(), overrides or None)


@dataclass(frozen=True)
class Point:
    """One simulation of the sweep; ``index`` is its place in sweep order."""

    index: int
    topology: int
    topology_name: str
    collective: str
    algorithm: str
    ranks: int
    size: int
    settings: tuple[tuple[str, Any], ...] = ()
    params: tuple[tuple[str, Any], ...] = ()


@dataclass(repr=False)
class Scenario:
    """A scenario file, validated; ``settings`` and ``params`` are the swept topology keys and
    algorithm parameters, each with its values in order."""

    name: str
    file: str
    doc: Document
    topologies: list[TopologySource]
    topology_names: list[str]
    collectives: list[str]
    algorithms: dict[str, list[str]]
    sizes: list[int]
    ranks: list[int] | None
    settings: dict[str, list[Any]]
    params: dict[str, list[Any]]
    where: list[Any]
    figures: list[dict[str, Any]]
    formats: list[str]
    digest: str
    quick: bool = False
    description: str = ""
    exact: bool = False  # every point on the full simulation's times (no pipeline path)
    paths: dict[str, KeyPath] = field(default_factory=dict)

    def __repr__(self) -> str:
        ranks = "every GPU" if self.ranks is None else self.ranks
        return (f"<Scenario {self.name!r}: {', '.join(self.topology_names)}; "
                f"{self.algorithms}; {len(self.sizes)} sizes; ranks {ranks}>")

    @property
    def swept_columns(self) -> list[str]:
        """The results-table columns this scenario adds: one per ``set`` and ``param`` key."""
        return [*self.settings, *self.params]
