"""``run.json``: what produced a results table (collsim version, scenario hash, times, points),
so that ``--resume`` can refuse a table made from a different scenario."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from collsim import __version__
from collsim.errors import InputError
from collsim.output.files import replace_text
from collsim.yamlfile import read_text

RUN_FILE = "run.json"
MAX_RUN_BYTES = 16 * 2**20


def now() -> str:
    """The current time, UTC, ISO 8601 to the second."""
    return datetime.now(UTC).replace(microsecond=0).isoformat()


def new_info(**fields: Any) -> dict[str, Any]:
    """A run record for a run starting now."""
    info = {"collsim_version": __version__, "status": "running", "started": now(),
            "finished": None, "sessions": []}
    info.update(fields)
    return info


def read_info(directory: Path,
              hint: str = "pass --force to replace it (and the results beside it)"
              ) -> dict[str, Any] | None:
    """The run record in ``directory``, or None if there is none; an unreadable or corrupted
    one is an InputError that ends with ``hint``, how to get past it."""
    path = Path(directory) / RUN_FILE
    if not path.exists():
        return None
    try:
        info = json.loads(read_text(path, "run record", MAX_RUN_BYTES))
    except json.JSONDecodeError as exc:
        raise InputError(f"the run record is corrupted ({exc.msg}, line {exc.lineno} "
                         f"column {exc.colno}); "
                         f"{hint}", file=str(path), line=exc.lineno) from None
    except InputError as exc:
        raise InputError(f"{exc.message}; {hint}", file=str(path)) from None
    if not isinstance(info, dict):
        raise InputError(f"not a collsim run record (expected a JSON object); {hint}",
                         file=str(path))
    return info


def write_info(directory: Path, info: dict[str, Any]) -> None:
    """Write the run record whole or not at all (a temporary file, then a rename)."""
    text = json.dumps(info, indent=2, default=str) + "\n"
    replace_text(Path(directory) / RUN_FILE, lambda file: file.write(text))
