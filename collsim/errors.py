"""The one error type users see: bad input, reported without a traceback (exit status 2)."""

from __future__ import annotations


class InputError(Exception):
    """Bad input: names where it came from (file, line, key) and what was expected."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        key: str | None = None,
        line: int | None = None,
    ) -> None:
        self.message = message
        self.file = file
        self.key = key
        self.line = line
        self.suggested_key: str | None = None  # for an unknown key: the known key it resembles
        super().__init__(str(self))

    def __str__(self) -> str:
        where = []
        if self.file:
            where.append(f"{self.file}" + (f":{self.line}" if self.line else ""))
        if self.key:
            where.append(f"key '{self.key}'")
        prefix = ", ".join(where)
        return f"{prefix}: {self.message}" if prefix else self.message


class InputErrors(InputError):
    """Several input problems found at once (all of a file's schema errors)."""

    def __init__(self, errors: list[InputError]) -> None:
        self.errors = errors
        super().__init__("\n".join(str(e) for e in errors))

    def __str__(self) -> str:
        return "\n".join(str(e) for e in self.errors)


class SimulationError(Exception):
    """The simulated programs cannot finish (a receive that nothing matches)."""


class OutputError(InputError):
    """A file collsim must write cannot be written (read-only folder, full disk, ...): names
    the path and the reason, and nothing half-written is left behind."""


class WorkerLost(Exception):
    """A worker process ended before finishing its points; names the point it was on."""
