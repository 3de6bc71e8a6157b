"""An NCCL release as a machine declares it (``nccl.version``): NCCL's own spelling read into a
comparable tuple. What each release does is in :mod:`collsim.nccl.versions`."""

from __future__ import annotations

import re

Version = tuple[int, int, int]

_PATTERN = re.compile(r"(\d+)\.(\d+)\.(\d+)(?:-\d+)?")


def parse_version(text: str) -> Version:
    """``"2.27.3"`` (or NCCL's tag form ``"2.27.3-1"``) as (2, 27, 3); ValueError saying what is
    expected otherwise."""
    match = _PATTERN.fullmatch(str(text).strip())
    if match is None:
        raise ValueError(f"{text!r} is not an NCCL release: expected MAJOR.MINOR.PATCH as NCCL "
                         "prints it (e.g. '2.27.3'), quoted in YAML")
    version = (int(match[1]), int(match[2]), int(match[3]))
    if version[0] != 2:
        raise ValueError(f"{text!r}: collsim models NCCL 2.x releases (e.g. '2.27.3')")
    return version


def format_version(version: Version) -> str:
    """(2, 27, 3) as ``2.27.3``."""
    return ".".join(str(part) for part in version)
