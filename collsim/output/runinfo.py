"""``run.json``: what produced a results table (collsim version, scenario hash, times, points),
so that ``--resume`` can refuse a table made from a different scenario."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from collsim import __version__
from collsim.errors import InputError

RUN_FILE = "run.json"


def now() -> str:
    """The current time, UTC, ISO 8601 to the second."""
    return datetime.now(UTC).replace(microsecond=0).isoformat()


def new_info(**fields: Any) -> dict[str, Any]:
    """A run record for a run starting now."""
    info = {"collsim_version": __version__, "status": "running", "started": now(),
            "finished": None, "sessions": []}
    info.update(fields)
    return info


def read_info(directory: Path) -> dict[str, Any] | None:
    """The run record in ``directory``, or None if there is none."""
    path = Path(directory) / RUN_FILE
    if not path.exists():
        return None
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read the run record: {exc}", file=str(path)) from None
    if not isinstance(info, dict):
        raise InputError("not a collsim run record", file=str(path))
    return info


def write_info(directory: Path, info: dict[str, Any]) -> None:
    """Write the run record atomically (a temporary file, then a rename)."""
    path = Path(directory) / RUN_FILE
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(info, indent=2, default=str) + "\n", encoding="utf-8")
    os.replace(temporary, path)
