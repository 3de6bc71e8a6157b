"""Safe YAML reading that remembers the line of every key, so errors can name it."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from collsim.errors import InputError
from collsim.units import MAX_DIGITS

KeyPath = tuple[Any, ...]

# A topology or scenario file is a few hundred lines; these bounds are far above any real one
# and keep a hostile file (a billion-laughs alias bomb, a 10 GB file) from hanging the reader.
MAX_YAML_BYTES = 4 * 2**20
MAX_YAML_VALUES = 100_000  # values once aliases are expanded, each use of an alias counted
MAX_YAML_DEPTH = 64  # levels of nested mappings and lists
INT_TAG = "tag:yaml.org,2002:int"


@dataclass
class Document:
    """A parsed YAML file: its data, where it came from, and the line of each key path.

    A document merged from several files (a topology's ``base:``) also records, in ``files``,
    the file of each key path written in another file than ``file``, and in ``bases`` the
    files merged under it, so that an error names the file and line the key was written at."""

    data: Any
    file: str
    lines: dict[KeyPath, int] = field(default_factory=dict)
    files: dict[KeyPath, str] = field(default_factory=dict)
    bases: tuple[str, ...] = ()

    def _written(self, path: KeyPath) -> KeyPath | None:
        """`path`, or its nearest enclosing key path that has a line; None if none has."""
        path = tuple(path)
        while path:
            if path in self.lines:
                return path
            path = path[:-1]
        return () if () in self.lines else None

    def line(self, path: KeyPath) -> int | None:
        """The line of `path`, or of its nearest enclosing key that has one."""
        written = self._written(path)
        return None if written is None else self.lines[written]

    def source(self, path: KeyPath) -> str:
        """The file `path` (or its nearest enclosing key that has a line) was written in."""
        written = self._written(path)
        return self.file if written is None else self.files.get(written, self.file)

    def error(self, path: KeyPath, message: str) -> InputError:
        """An InputError at `path` of this document (in the file the key was written in)."""
        return InputError(message, file=self.source(path), key=dotted(path) or None,
                          line=self.line(path))


def dotted(path: KeyPath) -> str:
    """'link.bandwidth' or 'sweep.sizes[2]' for a key path."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _walk(node: yaml.Node, path: KeyPath, lines: dict[KeyPath, int], file: str) -> None:
    if isinstance(node, yaml.MappingNode):
        seen: set[Any] = set()
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node.value)
            if isinstance(key_node, yaml.ScalarNode):
                _check_digits(key_node, path + (key[:20],), file)
            if key in seen:
                raise InputError(
                    "duplicate key", file=file, key=dotted(path + (key,)),
                    line=key_node.start_mark.line + 1,
                )
            seen.add(key)
            lines[path + (key,)] = key_node.start_mark.line + 1
            _walk(value_node, path + (key,), lines, file)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            lines[path + (index,)] = item.start_mark.line + 1
            _walk(item, path + (index,), lines, file)
    else:
        _check_digits(node, path, file)


def parse_yaml(text: str, file: str = "<string>") -> Document:
    """Parse YAML text with the safe loader; a syntax error becomes an InputError with its line.

    Aliases (``*name``) are allowed, but the document they expand to is bounded
    (:data:`MAX_YAML_VALUES` values, :data:`MAX_YAML_DEPTH` levels), so that an alias bomb is
    refused in milliseconds instead of expanding to gigabytes."""
    loader = None
    try:
        loader = yaml.SafeLoader(text)  # rejects control characters itself: inside the try
        node = loader.get_single_node()
        if node is not None:
            _check_expansion(node, file)
        lines: dict[KeyPath, int] = {}
        if node is not None:
            lines[()] = node.start_mark.line + 1
            _walk(node, (), lines, file)  # before constructing: it refuses what cannot be
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        problem = " ".join(p for p in (exc.context, exc.problem) if p)
        raise InputError(f"not valid YAML: {problem}", file=file, line=line) from None
    except yaml.reader.ReaderError as exc:  # a control character: no mark, a position
        line = text[:exc.position].count("\n") + 1
        raise InputError(f"not valid YAML: {str(exc).splitlines()[0]}", file=file,
                         line=line) from None
    except yaml.YAMLError as exc:
        raise InputError(f"not valid YAML: {str(exc).splitlines()[0]}", file=file) from None
    except RecursionError:
        raise InputError(f"nested more than {MAX_YAML_DEPTH} levels deep; a collsim file "
                         f"needs a handful", file=file) from None
    finally:
        if loader is not None:
            loader.dispose()
    return Document(data, file, lines)


def _check_expansion(root: yaml.Node, file: str) -> None:
    """Refuse a document that nests too deeply, refers to itself, or expands (through aliases,
    which repeat the node their anchor names) to more than MAX_YAML_VALUES values."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: yaml.Node, depth: int) -> int:
        if depth > MAX_YAML_DEPTH:
            raise InputError(f"nested more than {MAX_YAML_DEPTH} levels deep (line "
                             f"{node.start_mark.line + 1}); a collsim file needs a handful",
                             file=file, line=node.start_mark.line + 1)
        if id(node) in sizes:
            return sizes[id(node)]
        if id(node) in open_nodes:
            raise InputError("an alias refers to a node that contains it: the document "
                             "would be infinite", file=file, line=node.start_mark.line + 1)
        open_nodes.add(id(node))
        total = 1
        if isinstance(node, yaml.MappingNode):
            children = [child for pair in node.value for child in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        else:
            children = []
        for child in children:
            total += size(child, depth + 1)
            if total > MAX_YAML_VALUES:
                raise InputError(f"expands to more than {MAX_YAML_VALUES:,} values once its "
                                 f"aliases (*name) are replaced by what their anchors (&name) "
                                 f"hold; a collsim file needs far fewer (is it an alias "
                                 f"bomb?)", file=file, line=node.start_mark.line + 1)
        open_nodes.discard(id(node))
        sizes[id(node)] = total
        return total

    size(root, 0)


def _check_digits(node: yaml.Node, path: KeyPath, file: str) -> None:
    """Refuse a scalar the safe loader would read as an integer of more than MAX_DIGITS
    digits: above Python's limit (4,300) it would end in a ValueError inside the loader."""
    if node.tag == INT_TAG and len(node.value) > MAX_DIGITS:
        raise InputError(f"an integer of {len(node.value):,} digits; collsim reads integers "
                         f"of at most {MAX_DIGITS:,} digits",
                         file=file, key=dotted(path) or None, line=node.start_mark.line + 1)


def read_text(path: str | Path, what: str = "file", limit: int = MAX_YAML_BYTES) -> str:
    """A UTF-8 regular file's text, at most ``limit`` bytes; anything else (missing,
    unreadable, a directory, a device or FIFO, too large) is an InputError naming ``what``."""
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; regular files ignore it.
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise InputError(f"no such {what}", file=str(path)) from None
    except IsADirectoryError:
        raise InputError(f"is a directory; expected a {what}", file=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot read {what}: {exc.strerror or exc}", file=str(path)) from None
    try:
        status = os.fstat(descriptor)
        mode = status.st_mode
        if stat.S_ISDIR(mode):
            raise InputError(f"is a directory; expected a {what}", file=str(path))
        if not stat.S_ISREG(mode):
            raise InputError(f"is not a regular file but a device, FIFO or socket; expected "
                             f"a {what}", file=str(path))
        if status.st_size > limit:
            raise InputError(f"larger than {format_limit(limit)}, the most a {what} may hold",
                             file=str(path))
        with os.fdopen(descriptor, "rb", closefd=False) as handle:
            data = handle.read(limit + 1)  # the file may have grown since
    except OSError as exc:
        raise InputError(f"cannot read {what}: {exc.strerror or exc}", file=str(path)) from None
    finally:
        os.close(descriptor)
    if len(data) > limit:
        raise InputError(f"larger than {format_limit(limit)}, the most a {what} may hold",
                         file=str(path))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise InputError(f"cannot read {what}: not UTF-8 text (byte {exc.start})",
                         file=str(path), line=line) from None


def format_limit(limit: int) -> str:
    """A byte limit as text: '4 MiB'."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if limit >= scale and limit % scale == 0:
            return f"{limit // scale} {unit}"
    return f"{limit} B"


def load_yaml(path: str | Path) -> Document:
    """Read and parse a YAML file; a missing or unreadable file is an InputError."""
    return parse_yaml(read_text(path), str(path))
