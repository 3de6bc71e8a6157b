"""One benchmark case in a fresh interpreter, so that no case's caches or memory carry into the
next: the script is run again with ``--one CASE`` (JSON) and prints its result as JSON."""

from __future__ import annotations

import json
import subprocess
import sys


def run_fresh(script: str, case: list) -> dict:
    """``script --one CASE`` in a new process; its printed JSON result."""
    out = subprocess.run([sys.executable, script, "--one", json.dumps(case)], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)
