"""The "did you mean" of an error message: the known name closest to a misspelt one."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(word: str, known: Iterable[str]) -> str | None:
    """The name in ``known`` that ``word`` most resembles, or None if none is close."""
    found = difflib.get_close_matches(str(word), sorted(set(known)), n=1)
    return found[0] if found else None


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """``"; did you mean 'ring'?"`` for the closest known name, or ``""`` if none is close."""
    name = closest(word, known)
    return f"; did you mean '{name}'?" if name is not None else ""
