"""Stream one trace file's top-level JSON object without holding the file in memory: small
values whole, and the (possibly huge) ``traceEvents`` array one event at a time.

The standard library's C decoder does the work (``raw_decode`` on a sliding text buffer), so
a trace of a gigabyte is read in the memory of its largest single event, with no dependency."""

from __future__ import annotations

import gzip
import json
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from collsim.errors import InputError

CHUNK_CHARS = 1 << 18  # text read per refill
MAX_VALUE_CHARS = 256 << 20  # one value larger than this is not a trace (and would not fit)
STREAMED_KEY = "traceEvents"

_SPACE = re.compile(r"[ \t\n\r]*")
_NEXT_ITEM = re.compile(r"[ \t\n\r]*([,\]])[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def open_text(path: Path) -> TextIO:
    """The file as text; gzipped when its first two bytes say so, whatever its name."""
    with open(path, "rb") as probe:
        magic = probe.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


class _Cursor:
    """A window on the file's text: ``buf[pos:]`` is what is not consumed yet."""

    def __init__(self, stream: TextIO, name: str) -> None:
        self.stream = stream
        self.name = name
        self.buf = ""
        self.pos = 0
        self.consumed = 0  # characters dropped from the front of buf so far
        self.eof = False

    def offset(self) -> int:
        return self.consumed + self.pos

    def fail(self, what: str) -> InputError:
        return InputError(f"{what} (at character {self.offset()})", file=self.name)

    def refill(self) -> bool:
        """Append a chunk; False at the end of the file."""
        if self.eof:
            return False
        try:
            chunk = self.stream.read(max(CHUNK_CHARS, len(self.buf) - self.pos))
        except (OSError, EOFError, zlib.error, UnicodeDecodeError) as exc:
            raise self.fail(f"cannot be read: {exc}") from None
        if not chunk:
            self.eof = True
            return False
        self.consumed += self.pos
        self.buf = self.buf[self.pos:] + chunk  # keep only what is not consumed yet
        self.pos = 0
        return True

    def peek(self) -> str:
        """The next non-space character (not consumed), "" at the end of the file."""
        while True:
            self.pos = _SPACE.match(self.buf, self.pos).end()
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.refill():
                return ""

    def expect(self, chars: str, what: str) -> str:
        found = self.peek()
        if not found:
            raise self.fail(f"ends early (truncated?): expected {what}")
        if found not in chars:
            raise self.fail(f"is not a trace's JSON: expected {what}, found {found!r}")
        self.pos += 1
        return found

    def value(self) -> Any:
        """Decode the next JSON value, reading more text until it is whole."""
        try:  # the fast path: a whole value right here
            value, end = _DECODER.raw_decode(self.buf, self.pos)
            if end < len(self.buf):
                self.pos = end
                return value
        except json.JSONDecodeError:
            pass
        self.peek()
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                if len(self.buf) - self.pos > MAX_VALUE_CHARS:
                    raise self.fail("holds one JSON value over 256 MiB") from None
                if self.refill():
                    continue
                truncated = exc.pos >= len(self.buf.rstrip()) or "Unterminated" in exc.msg
                self.pos = exc.pos
                if truncated:
                    raise self.fail("ends early (truncated?) inside a JSON value") from None
                raise self.fail(f"is not valid JSON: {exc.msg}") from None
            # a number cut by the chunk boundary decodes as a shorter number: read on
            at_edge = end == len(self.buf) and isinstance(value, int | float)
            if at_edge and self.refill():
                continue
            self.pos = end
            return value


def stream_trace(path: Path, name: str) -> Iterator[tuple[str, Any]]:
    """Yield ``(key, value)`` for each top-level key, and ``("traceEvents", event)`` once per
    event of the events array, in file order. ``name`` is how errors call the file."""
    with open_text(path) as stream:
        cursor = _Cursor(stream, name)
        cursor.expect("{", "'{' opening the trace object")
        if cursor.peek() == "}":
            cursor.pos += 1
            return
        while True:
            key = cursor.value()
            if not isinstance(key, str):
                raise cursor.fail("is not a trace's JSON: expected a key string")
            cursor.expect(":", "':' after a key")
            if key == STREAMED_KEY and cursor.peek() == "[":
                cursor.pos += 1
                if cursor.peek() == "]":
                    cursor.pos += 1
                else:
                    while True:
                        yield key, cursor.value()
                        step = _NEXT_ITEM.match(cursor.buf, cursor.pos)
                        if step and step.end() < len(cursor.buf):
                            cursor.pos = step.end()
                            if step.group(1) == "]":
                                break
                        elif cursor.expect(",]", "',' or ']' in traceEvents") == "]":
                            break
            else:
                yield key, cursor.value()
            if cursor.expect(",}", "',' or '}' in the trace object") == "}":
                break
        if cursor.peek():
            raise cursor.fail("has text after the trace object")
