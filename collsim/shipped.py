"""Files collsim ships as package data (topologies, scenarios), and how a reference to one
becomes a file.

Each shipped folder of the repository (``topologies/``, ``scenarios/``) is installed as a
package of its own (``pyproject.toml`` maps it), so its files are found with
:mod:`importlib.resources` whether collsim is installed from a wheel or editable. A
reference (a command-line argument, a scenario's ``topologies`` entry) is a path if such a
file exists, else the name of a shipped file, with or without ``.yaml``.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path

from collsim.errors import InputError
from collsim.suggest import did_you_mean

SUFFIXES = (".yaml", ".yml")
ROOT = Path(__file__).resolve().parents[1]  # the source tree, where collsim is not installed


def shipped_folder(package: str, folder: str) -> Path:
    """The folder of the files ``package`` ships; the repository's ``folder`` in a source
    tree that is on ``sys.path`` but not installed."""
    try:
        return Path(str(importlib.resources.files(package)))
    except ModuleNotFoundError:
        return ROOT / folder


def names_in(folder: Path) -> list[str]:
    """The names of the YAML files in ``folder`` (without ``.yaml``), sorted."""
    return sorted(path.stem for path in folder.glob("*.yaml"))


def find_file(reference: str | Path, folder: Path, base: Path | None = None) -> Path | None:
    """The file ``reference`` names: ``base / reference`` if it exists (``base`` defaults
    to the current folder; an absolute path stands alone), else the file of that name in
    ``folder`` if ``reference`` is a bare name; None if neither exists."""
    path = Path(reference)
    candidate = path if base is None or path.is_absolute() else base / path
    if candidate.exists():
        return candidate
    if path.parent != Path(".") or not path.name:
        return None
    name = path.name if path.suffix in SUFFIXES else path.name + ".yaml"
    shipped = folder / name
    return shipped if shipped.is_file() else None


def resolve_file(reference: str | Path, folder: Path, what: str, key: str) -> Path:
    """:func:`find_file` from the current folder; a bare name that is neither a file nor
    shipped is an InputError (naming ``key``) that lists the shipped ``what`` and suggests the
    closest; a missing path with a folder in it is returned as it is, for its reader to
    report."""
    found = find_file(reference, folder)
    if found is not None:
        return found
    path = Path(reference)
    if path.parent != Path("."):
        return path
    names = names_in(folder)
    raise InputError(f"no {what} file '{reference}' here and no shipped {what} of that "
                     f"name (shipped: {', '.join(names) or 'none'})"
                     f"{did_you_mean(path.stem, names)}", key=key)
