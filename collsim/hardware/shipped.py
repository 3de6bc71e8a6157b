"""The topology files collsim ships (the repository's ``topologies/`` folder, installed as the
package ``collsim.topologies``), and how a topology reference becomes a file: a path if such
a file exists, else a shipped topology's name (:mod:`collsim.shipped`)."""

from __future__ import annotations

from pathlib import Path

from collsim.shipped import find_file, names_in, resolve_file, shipped_folder


def shipped_directory() -> Path:
    """The folder of the shipped topology files."""
    return shipped_folder("collsim.topologies", "topologies")


def shipped_names() -> list[str]:
    """The names of the shipped topologies (file names without ``.yaml``), sorted."""
    return names_in(shipped_directory())


def find_topology(reference: str | Path, base: Path | None = None) -> Path | None:
    """The file ``reference`` names: ``base / reference`` if it exists (``base`` defaults
    to the current folder), else the shipped topology of that name; None if neither."""
    return find_file(reference, shipped_directory(), base)


def resolve_topology(reference: str | Path, key: str = "--topology") -> Path:
    """:func:`find_topology` from the current folder; an unknown bare name is an InputError
    that lists the shipped topologies and suggests the closest."""
    return resolve_file(reference, shipped_directory(), "topology", key)
