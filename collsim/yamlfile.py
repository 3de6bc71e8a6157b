"""Safe YAML reading that remembers the line of every key, so errors can name it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from collsim.errors import InputError

KeyPath = tuple[Any, ...]


@dataclass
class Document:
    """A parsed YAML file: its data, where it came from, and the line of each key path."""

    data: Any
    file: str
    lines: dict[KeyPath, int] = field(default_factory=dict)

    def line(self, path: KeyPath) -> int | None:
        """The line of `path`, or of its nearest enclosing key that has one."""
        path = tuple(path)
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.lines.get((), None)

    def error(self, path: KeyPath, message: str) -> InputError:
        """An InputError at `path` of this document."""
        return InputError(message, file=self.file, key=dotted(path) or None, line=self.line(path))


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


def parse_yaml(text: str, file: str = "<string>") -> Document:
    """Parse YAML text with the safe loader; a syntax error becomes an InputError with its line."""
    loader = None
    try:
        loader = yaml.SafeLoader(text)  # rejects control characters itself: inside the try
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
        lines: dict[KeyPath, int] = {}
        if node is not None:
            lines[()] = node.start_mark.line + 1
            _walk(node, (), lines, file)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        problem = " ".join(p for p in (exc.context, exc.problem) if p)
        raise InputError(f"not valid YAML: {problem}", file=file, line=line) from None
    except yaml.YAMLError as exc:
        raise InputError(f"not valid YAML: {exc}", file=file) from None
    finally:
        if loader is not None:
            loader.dispose()
    return Document(data, file, lines)


def read_text(path: str | Path, what: str = "file") -> str:
    """A UTF-8 file's text; a missing or unreadable one is an InputError naming ``what``."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"no such {what}", file=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {what}: {exc}", file=str(path)) from None


def load_yaml(path: str | Path) -> Document:
    """Read and parse a YAML file; a missing or unreadable file is an InputError."""
    return parse_yaml(read_text(path), str(path))
