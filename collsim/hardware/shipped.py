"""The topology files collsim ships, and how a topology reference becomes a file.

The repository's ``topologies/`` folder is installed as the package ``collsim.topologies``
(``pyproject.toml`` maps it), so its files are found with :mod:`importlib.resources`
whether collsim is installed from a wheel or editable. A reference (``--topology``, a
scenario's ``topologies`` entry) is a path if such a file exists, else the name of a
shipped file, with or without ``.yaml``.
"""

from __future__ import annotations

import difflib
import importlib.resources
from pathlib import Path

from collsim.errors import InputError

SUFFIXES = (".yaml", ".yml")


def shipped_directory() -> Path:
    """The folder of the shipped topology files."""
    try:
        return Path(str(importlib.resources.files("collsim.topologies")))
    except ModuleNotFoundError:  # a source tree on sys.path, not installed
        return Path(__file__).resolve().parents[2] / "topologies"


def shipped_names() -> list[str]:
    """The names of the shipped topologies (file names without ``.yaml``), sorted."""
    return sorted(path.stem for path in shipped_directory().glob("*.yaml"))


def find_topology(reference: str | Path, base: Path | None = None) -> Path | None:
    """The file ``reference`` names: ``base / reference`` if it exists (``base`` defaults
    to the current folder; an absolute path stands alone), else the shipped topology of
    that name if ``reference`` is a bare name; None if neither exists."""
    path = Path(reference)
    candidate = path if base is None or path.is_absolute() else base / path
    if candidate.exists():
        return candidate
    if path.parent != Path(".") or not path.name:
        return None
    name = path.name if path.suffix in SUFFIXES else path.name + ".yaml"
    shipped = shipped_directory() / name
    return shipped if shipped.is_file() else None


def resolve_topology(reference: str | Path, key: str = "--topology") -> Path:
    """:func:`find_topology` from the current folder; a bare name that is neither a file
    nor shipped is an InputError that lists the shipped names; a missing path with a folder
    in it is returned as it is, for the loader to report."""
    found = find_topology(reference)
    if found is not None:
        return found
    path = Path(reference)
    if path.parent != Path("."):
        return path
    names = shipped_names()
    close = difflib.get_close_matches(path.name, names, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    raise InputError(f"no topology file '{reference}' here and no shipped topology of that "
                     f"name (shipped: {', '.join(names) or 'none'}){hint}", key=key)
