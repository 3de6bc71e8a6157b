"""Topology files that derive from another: ``base: NAME`` names a shipped topology or a file
(relative to the deriving file), and the deriving file's keys are merged over the base's.

Mappings merge key by key; a list or a scalar replaces what the base has; a key set to null
(``key: ~``) removes the base's key. A base may itself have a base; a loop, or a base that is
not there, is refused at the ``base`` key that names it. A ``cluster`` file whose base is a
one-node file (``nvswitch``, ``nvlink``, ``pcie``) takes that file's node keys as its
``node`` section and its ``gpu`` and ``nccl`` sections as its own. Every merged key keeps the
file and line it was written at, so an error in it points there.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from collsim.hardware.kinds import NODE_KINDS
from collsim.hardware.shipped import find_topology
from collsim.yamlfile import Document, KeyPath, dotted, load_yaml

# Keys of a one-node file that stay at the top level when a cluster derives from it.
MACHINE_KEYS = ("name", "description", "gpu", "nccl")


def resolve_bases(doc: Document) -> Document:
    """``doc`` with its chain of bases merged under it; ``doc`` itself if it names none.
    The result has no ``base`` key; its ``bases`` lists the files merged in, nearest first."""
    return _resolve(doc, [_identity(doc.file)])


def _resolve(doc: Document, chain: list[str]) -> Document:
    """``doc`` merged over its base, which is merged over its own; ``chain`` holds the files
    being resolved, so that a base that is one of them is a loop."""
    if not isinstance(doc.data, dict) or "base" not in doc.data:
        return doc
    reference = doc.data["base"]
    if not isinstance(reference, str) or not reference.strip():
        raise doc.error(("base",), f"expected the name of a shipped topology or the path of "
                                   f"a topology file, got {reference!r}")
    folder = Path(doc.file).parent if not doc.file.startswith("<") else Path.cwd()
    found = find_topology(reference, folder)
    if found is None or not found.is_file():
        raise doc.error(("base",), f"no topology file {reference!r} (looked for "
                                   f"{folder / reference} and the shipped topologies)")
    identity = _identity(str(found))
    if identity in chain:
        loop = " -> ".join(Path(step).name for step in [*chain, identity])
        raise doc.error(("base",), f"the bases form a loop: {loop}")
    base = load_yaml(found)
    if not isinstance(base.data, dict):
        raise doc.error(("base",), f"{found} is not a topology file: it is not a mapping of "
                                   f"keys to values")
    base = _resolve(base, [*chain, identity])
    if doc.data.get("kind", base.data.get("kind")) == "cluster" and \
            base.data.get("kind") in NODE_KINDS:
        base = as_cluster(base)
    return dataclasses.replace(merge(base, doc), bases=(str(found), *base.bases))


def _identity(file: str) -> str:
    """A file's absolute path, so that two spellings of one file are one step of a chain."""
    return file if file.startswith("<") else str(Path(file).resolve())


def as_cluster(node: Document) -> Document:
    """A one-node file read as a cluster of such nodes: its node keys under ``node``, its
    ``gpu`` and ``nccl`` (and name) where a cluster has them."""
    data: dict[str, Any] = {"kind": "cluster", "node": {}}
    moved: dict[KeyPath, KeyPath] = {(): ()}
    for key, value in node.data.items():
        if key in MACHINE_KEYS:
            data[key] = value
            moved[(key,)] = (key,)
        else:
            data["node"][key] = value
            moved[(key,)] = ("node", key)
    lines: dict[KeyPath, int] = {}
    files: dict[KeyPath, str] = {}
    for path, line in node.lines.items():
        target = moved[path[:1]] + path[1:] if path else ()
        lines[target] = line
        files[target] = node.source(path)
    lines[("node",)] = node.lines.get(("kind",), node.lines.get((), 1))
    files[("node",)] = node.source(("kind",))
    return Document(data, node.file, lines, files, node.bases)


def merge(base: Document, over: Document) -> Document:
    """``over``'s keys merged over ``base``'s (see the module docstring), without ``base``;
    each key path keeps the line and file it was written at."""
    lines = {path: line for path, line in base.lines.items() if path}
    files = {path: base.source(path) for path in lines}
    data = _merge(base.data, {k: v for k, v in over.data.items() if k != "base"}, (),
                  over, lines, files)
    lines[()] = over.lines.get((), 1)
    files = {path: file for path, file in files.items() if file != over.file}
    return Document(data, over.file, lines, files)


def _merge(base: dict[str, Any], over: dict[str, Any], prefix: KeyPath, doc: Document,
           lines: dict[KeyPath, int], files: dict[KeyPath, str]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        path = prefix + (key,)
        if value is None:
            if key not in base:
                raise doc.error(path, f"null removes a key of the base, and the base has no "
                                      f"'{dotted(path)}'")
            del out[key]
            _forget(path, lines, files)
            continue
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            out[key] = _merge(base[key], value, path, doc, lines, files)
        else:
            _forget(path, lines, files)
            out[key] = value
            _take(path, doc, lines, files)
            continue
        if path in doc.lines:
            lines[path], files[path] = doc.lines[path], doc.source(path)
    return out


def _forget(path: KeyPath, lines: dict[KeyPath, int], files: dict[KeyPath, str]) -> None:
    for known in [p for p in lines if p[:len(path)] == path]:
        del lines[known]
        files.pop(known, None)


def _take(path: KeyPath, doc: Document, lines: dict[KeyPath, int],
          files: dict[KeyPath, str]) -> None:
    for known, line in doc.lines.items():
        if known[:len(path)] == path:
            lines[known], files[known] = line, doc.source(known)
