"""The "did you mean" of an error message: the known name closest to a misspelt one."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def edits(a: str, b: str) -> int:
    """How many characters must be inserted, deleted or replaced to turn ``a`` into ``b``."""
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i]
        for j, y in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
        previous = current
    return previous[-1]


def closest(word: str, known: Iterable[str]) -> str | None:
    """The name in ``known`` that ``word`` most resembles, or None if none is close: among
    difflib's close matches, the fewest edits away, then the one of the same length (a
    mistyped letter: ``nodez`` is ``nodes`` before ``node``)."""
    word = str(word)
    found = difflib.get_close_matches(word, sorted(set(known)), n=5)
    if not found:
        return None
    return min(found, key=lambda name: (edits(word, name), abs(len(name) - len(word))))


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """``"; did you mean 'ring'?"`` for the closest known name, or ``""`` if none is close."""
    name = closest(word, known)
    return f"; did you mean '{name}'?" if name is not None else ""
