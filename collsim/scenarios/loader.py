"""Scenario files: parse the YAML, validate it against the published schema, then check what a
schema cannot (units, ranges, topology files, algorithm names) and report every problem at
once, each with its file, line and key."""

from __future__ import annotations

import difflib
import hashlib
import json
from pathlib import Path
from typing import Any

import yaml

from collsim.algorithms.registry import REGISTRY, algorithms_for
from collsim.calls.plan import NCCL_PARAMS, SELECTORS, canonical_algorithm
from collsim.errors import InputError, InputErrors
from collsim.hardware.bases import resolve_bases
from collsim.hardware.nccl_names import ALGORITHMS as NCCL_NAMES
from collsim.hardware.shipped import find_topology
from collsim.output.kinds import DEFAULT_FIGURES, DEFAULT_FORMATS
from collsim.params import COMMON_PARAMS
from collsim.scenarios.axes import parse_ranks, parse_sizes, value_axis
from collsim.scenarios.model import Scenario, TopologySource
from collsim.scenarios.schema import SCENARIO_SCHEMA
from collsim.scenarios.where import Filter
from collsim.schema import validate
from collsim.simulate import TABLE_COLUMNS
from collsim.yamlfile import Document, KeyPath, load_yaml, parse_yaml

POINT_NAMES = ("size", "ranks", "collective", "algorithm", "topology", "gpus", "nodes")


def load_scenario(path: str | Path, quick: bool = False) -> Scenario:
    """Read, validate and check a scenario file; ``quick`` applies its ``quick:`` section."""
    return scenario_from_document(_guarded(load_yaml, path, file=str(path)), quick)


def scenario_from_text(text: str, file: str = "<scenario>", quick: bool = False) -> Scenario:
    """A scenario from YAML text; relative topology paths are relative to ``file``'s folder."""
    return scenario_from_document(_guarded(parse_yaml, text, file, file=file), quick)


def _guarded(read: Any, *args: Any, file: str) -> Document:
    """Characters YAML refuses outright (control codes) fail before the YAML reader's own
    error handling; they are bad input like any other syntax error."""
    try:
        return read(*args)
    except yaml.YAMLError as exc:
        raise InputError(f"not valid YAML: {exc}".splitlines()[0], file=file) from None


def scenario_from_document(doc: Document, quick: bool = False) -> Scenario:
    """Validate a parsed scenario document and build the :class:`Scenario` it describes."""
    if not isinstance(doc.data, dict):
        raise InputError("a scenario file must be a mapping of keys (name, topologies, "
                         "collectives, algorithms, sweep) to values", file=doc.file, line=1)
    try:
        validate(doc, SCENARIO_SCHEMA)
    except InputError as exc:
        raise _without_echoes(exc) from None
    return _Reader(doc, quick).scenario()


def _without_echoes(error: InputError) -> InputError:
    """Drop "required key is missing" where a misspelt key next to it already says "did you
    mean" that key: a typo is one problem, reported once."""
    if not isinstance(error, InputErrors):
        return error
    suggested = set()
    for e in error.errors:
        if "did you mean" in e.message:
            parent, _, _ = (e.key or "").rpartition(".")
            word = e.message.split("'")[-2]
            suggested.add(f"{parent}.{word}" if parent else word)
    kept = [e for e in error.errors
            if not (e.message == "required key is missing" and e.key in suggested)]
    return kept[0] if len(kept) == 1 else InputErrors(kept)


class _Reader:
    """Collects every semantic problem of one document before raising them together."""

    def __init__(self, doc: Document, quick: bool) -> None:
        self.doc = doc
        self.data: dict[str, Any] = doc.data
        self.quick = quick
        self.problems: list[InputError] = []

    def attempt(self, function: Any, *args: Any, default: Any = None) -> Any:
        try:
            return function(*args)
        except InputError as exc:
            exc = _without_echoes(exc)
            self.problems.extend(exc.errors if isinstance(exc, InputErrors) else [exc])
        return default

    def source(self, key: str) -> KeyPath:
        """Where an axis or filter is read from: ``quick:`` when it replaces the main one."""
        quick = self.data.get("quick") or {}
        if key == "where":
            return ("quick", "where") if self.quick and "where" in quick else ("where",)
        if self.quick and key in (quick.get("sweep") or {}):
            return ("quick", "sweep", key)
        return ("sweep", key)

    def value(self, path: KeyPath, default: Any = None) -> Any:
        data: Any = self.data
        for part in path:
            if not isinstance(data, (dict, list)):
                return default
            try:
                data = data[part]
            except (KeyError, IndexError):
                return default
        return data

    def scenario(self) -> Scenario:
        doc = self.doc
        topologies = self.attempt(self.topologies, default=[])
        names = [name for _, name in topologies]
        collectives = list(self.data["collectives"])
        algorithms = self.attempt(self.algorithms, collectives, default={})
        sizes = self.attempt(parse_sizes, doc, self.source("size"),
                             self.value(self.source("size")), default=[])
        ranks_path = self.source("ranks")
        ranks_spec = self.value(ranks_path)
        ranks = None if ranks_spec is None else \
            self.attempt(parse_ranks, doc, ranks_path, ranks_spec, default=[])
        settings = self.attempt(self.axes, "set", default={})
        params = self.attempt(self.axes, "param", default={})
        self.attempt(self.check_params, params)
        self.attempt(self.check_columns, settings, params)
        where = self.attempt(self.filters, [*settings, *params], default=[])
        figures = self.attempt(self.figures, default=[])
        if self.problems:
            self.problems.sort(key=lambda e: (e.line or 0, e.key or ""))
            raise self.problems[0] if len(self.problems) == 1 else InputErrors(self.problems)
        sources = [source for source, _ in topologies]
        return Scenario(
            name=self.data["name"], file=doc.file, doc=doc, topologies=sources,
            topology_names=names, collectives=collectives, algorithms=algorithms, sizes=sizes,
            ranks=ranks, settings=settings, params=params, where=where, figures=figures,
            formats=list(self.data.get("formats") or DEFAULT_FORMATS),
            digest=self.digest(sources), quick=self.quick,
            description=self.data.get("description", ""), exact=self.data.get("exact", False),
            paths={key: self.source(key) for key in ("size", "ranks", "set", "param", "where")},
        )

    def topologies(self) -> list[tuple[TopologySource, str]]:
        entries = self.data["topologies"]
        entries = [entries] if isinstance(entries, str) else entries
        path0: KeyPath = ("topologies",)
        out: list[tuple[TopologySource, str]] = []
        seen: dict[str, int] = {}
        for index, entry in enumerate(entries):
            path = path0 if isinstance(self.data["topologies"], str) else path0 + (index,)
            source = self.attempt(self.topology_source, path, entry)
            if source is None:
                continue
            topology = self.attempt(source.build)
            if topology is None:
                continue
            if topology.name in seen:
                self.problems.append(self.doc.error(path, f"two topologies are named "
                                                          f"{topology.name!r}; give them "
                                                          f"different names"))
                continue
            seen[topology.name] = index
            out.append((source, topology.name))
        return out

    def topology_source(self, path: KeyPath, entry: Any) -> TopologySource:
        if isinstance(entry, str):
            base = Path(self.doc.file).resolve().parent
            file = find_topology(entry, base)
            if file is None:  # a directory or a device is named by the reader below
                raise self.doc.error(path, f"no topology file {entry!r} (looked for "
                                           f"{base / entry} and the shipped topologies)")
            topo_doc = load_yaml(file)
            if not isinstance(topo_doc.data, dict):
                raise InputError("a topology file must be a mapping of keys to values",
                                 file=str(file))
            return TopologySource.of(entry, resolve_bases(topo_doc))
        if not entry.get("name"):
            raise self.doc.error(path, "an inline topology needs a name")
        lines = {key[len(path):]: line for key, line in self.doc.lines.items()
                 if key[:len(path)] == path}
        inline = resolve_bases(Document(entry, self.doc.file, lines))
        return TopologySource.of(str(entry["name"]), inline)

    def algorithms(self, collectives: list[str]) -> dict[str, list[str]]:
        spec = self.data["algorithms"]
        out: dict[str, list[str]] = {}
        for collective in collectives:
            path: KeyPath = ("algorithms",)
            chosen = spec
            if isinstance(spec, dict):
                if collective not in spec:
                    raise self.doc.error(path, f"no algorithms listed for {collective}; add "
                                               f"'{collective}: all' or a list of names")
                chosen, path = spec[collective], path + (collective,)
            known = [a.name for a in algorithms_for(collective)]
            if chosen == "all":
                if not known:
                    raise self.doc.error(path, f"no algorithm implements {collective} yet")
                out[collective] = known
                continue
            chosen = [canonical_algorithm(collective, name) for name in chosen]
            for index, name in enumerate(chosen):
                if name not in known and name not in SELECTORS and name not in NCCL_NAMES:
                    hint = difflib.get_close_matches(name, known, n=1)
                    raise self.doc.error(path + (index,), f"no {collective} algorithm named "
                                         f"{name!r}; " + (f"did you mean {hint[0]!r}?" if hint
                                                          else f"choose from {', '.join(known)}"))
            out[collective] = list(dict.fromkeys(chosen))
        return out

    def axes(self, group: str) -> dict[str, list[Any]]:
        keys = dict(self.value(("sweep", group)) or {})
        quick = self.value(("quick", "sweep", group)) if self.quick else None
        out: dict[str, list[Any]] = {}
        for key in [*keys, *(k for k in (quick or {}) if k not in keys)]:
            path: KeyPath = ("quick", "sweep", group, key) if quick and key in quick else \
                ("sweep", group, key)
            values = self.attempt(value_axis, self.doc, path, self.value(path))
            if values is not None:
                out[key] = values
        return out

    def check_params(self, params: dict[str, list[Any]]) -> None:
        known = set(COMMON_PARAMS) | set(NCCL_PARAMS)
        for algorithm in REGISTRY.values():
            known.update(algorithm.params)
        for key in params:
            if key not in known:
                hint = difflib.get_close_matches(key, sorted(known), n=1)
                raise self.doc.error(self.source("param") + (key,), f"unknown algorithm "
                                     f"parameter {key!r}; " + (f"did you mean {hint[0]!r}?" if
                                     hint else f"parameters are {', '.join(sorted(known))}"))

    def check_columns(self, settings: dict[str, Any], params: dict[str, Any]) -> None:
        for key in settings:
            if key in params or key in TABLE_COLUMNS:
                raise self.doc.error(self.source("set") + (key,), f"{key!r} is already a column "
                                     f"of the results table; it cannot be a swept key too")
        for key in params:
            if key in TABLE_COLUMNS and key not in NCCL_PARAMS:
                raise self.doc.error(self.source("param") + (key,), f"{key!r} is already a "
                                     f"column of the results table")

    def filters(self, swept: list[str]) -> list[Filter]:
        path = self.source("where")
        spec = self.value(path)
        if spec is None:
            return []
        names = {*POINT_NAMES, *swept}
        if isinstance(spec, str):
            return [Filter(self.doc, path, spec, names)]
        return [Filter(self.doc, path + (i,), text, names) for i, text in enumerate(spec)]

    def figures(self) -> list[dict[str, Any]]:
        entries = self.data.get("figures")
        if entries is None:
            return [{"kind": kind} for kind in DEFAULT_FIGURES]
        out = []
        used: set[str] = set()
        for index, entry in enumerate(entries):
            spec = {"kind": entry} if isinstance(entry, str) else dict(entry)
            name = spec.get("name") or spec["kind"]
            if name in used:
                name = f"{name}-{index + 1}"
            used.add(name)
            spec["name"] = name
            if spec["kind"] == "speedup" and "baseline" not in spec:
                raise self.doc.error(("figures", index), "a speedup figure needs 'baseline': "
                                                         "the algorithm the others are divided by")
            out.append(spec)
        return out

    def digest(self, sources: list[TopologySource]) -> str:
        """A hash of everything that decides the results: the scenario and its topologies."""
        content = {"scenario": self.data, "quick": self.quick,
                   "topologies": [source.data for source in sources]}
        text = json.dumps(content, sort_keys=True, default=str, ensure_ascii=True)
        return hashlib.sha256(text.encode()).hexdigest()
