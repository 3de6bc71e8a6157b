"""Every ``>>>`` session of the README works pasted as it is into one Python interpreter.

A doctest reads an example up to the next prompt, but an interpreter fed a paste reads line
by line: a ``def`` or ``for`` block ends only at a blank line, or the next line is a syntax
error. So the README's examples are fed, line by line, to one
:class:`code.InteractiveConsole`, as a paste is read; each example must run without an
error, leave the console waiting for nothing, and print what the README shows (compared as
doctest compares)."""

from __future__ import annotations

import code
import contextlib
import doctest
import io
import re
from pathlib import Path

import pytest

import collsim

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FLAGS = doctest.NORMALIZE_WHITESPACE


class Session:
    """A ``python`` block of the README that holds a ``>>>`` prompt."""

    def __init__(self, text: str, first: int) -> None:
        self.lines = text.splitlines()
        self.first = first  # the README's line number of the block's first line
        self.examples = doctest.DocTestParser().get_examples(text)

    def pasted(self, example: doctest.Example) -> list[str]:
        """The lines a paste of ``example`` gives the interpreter: its prompt lines as they
        stand in the README, prompts cut off, a bare ``...`` as the blank line it is (doctest
        drops that line from ``example.source``)."""
        lines: list[str] = []
        for raw in self.lines[example.lineno:]:
            if lines and not raw.startswith("..."):
                break
            lines.append(raw[4:])
        return lines

    def where(self, example: doctest.Example) -> str:
        return f"README.md line {self.first + example.lineno}: {self.pasted(example)[0]}"


def sessions() -> list[Session]:
    """The README's ``python`` blocks that hold a ``>>>`` prompt, in order."""
    text = README.read_text(encoding="utf-8")
    return [Session(found.group(1), text.count("\n", 0, found.start(1)) + 1)
            for found in re.finditer(r"```python\n(.*?)```", text, re.DOTALL)
            if ">>>" in found.group(1)]


class Console(code.InteractiveConsole):
    """An interpreter that keeps its error text (a traceback, a SyntaxError) for the test."""

    def __init__(self) -> None:
        super().__init__({"__name__": "__console__"})
        self.errors: list[str] = []

    def write(self, data: str) -> None:
        self.errors.append(data)


@pytest.fixture
def console(monkeypatch):
    monkeypatch.chdir(ROOT)
    yield Console()
    if "star" in collsim.list_algorithms("allreduce")["allreduce"]:
        collsim.unregister("allreduce", "star")


def paste(console: Console, lines: list[str]) -> tuple[str, bool]:
    """Feed lines to the console as a paste is read; what it printed, and whether it still
    waits for more input."""
    printed = io.StringIO()
    more = False
    with contextlib.redirect_stdout(printed):
        for line in lines:
            more = console.push(line)
    return printed.getvalue(), more


def test_the_readme_has_sessions_to_paste():
    found = sessions()
    assert len(found) >= 2 and sum(len(session.examples) for session in found) > 5
    assert any(example.source.startswith(("def ", "@", "for "))
               for session in found for example in session.examples)


def test_every_readme_session_pasted_into_one_interpreter(console):
    checker = doctest.OutputChecker()
    for session in sessions():
        for example in session.examples:
            printed, more = paste(console, session.pasted(example))
            where = session.where(example)
            assert not console.errors, f"{where}\n{''.join(console.errors)}"
            assert not more, f"{where}: the block does not end (a '...' line must close it)"
            assert checker.check_output(example.want, printed, FLAGS), \
                f"{where}\nexpected:\n{example.want}got:\n{printed}"


def test_a_block_without_its_closing_line_is_caught(console):
    """The test's own check: a ``for`` whose closing ``...`` line is missing waits for more,
    and the next line then fails as it does in a real interpreter."""
    session = Session(">>> for i in range(2):\n...     print(i)\n0\n1\n>>> i\n1\n", 1)
    first, then = session.examples
    assert session.pasted(first) == ["for i in range(2):", "    print(i)"]
    assert paste(console, session.pasted(first))[1] is True
    paste(console, session.pasted(then))
    assert any("SyntaxError" in text for text in console.errors)
    closed = Session(">>> for i in range(2):\n...     print(i)\n...\n0\n1\n", 1)
    assert closed.pasted(closed.examples[0])[-1] == ""
