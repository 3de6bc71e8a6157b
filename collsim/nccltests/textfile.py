"""Reading a log from disk: regular files only, and no more than a set number of bytes.

collsim/yamlfile.py's ``read_text`` has neither check, hence this helper."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from collsim.errors import InputError

# A 1000-rank run with NCCL_DEBUG=INFO prints tens of MB; four times the largest seen keeps a
# wrong path (a disk image, a core dump) from filling memory.
MAX_LOG_BYTES = 256 * 2**20


def read_log_text(path: str | Path, max_bytes: int = MAX_LOG_BYTES) -> str:
    """The text of the log at ``path``; undecodable bytes become U+FFFD rather than errors."""
    name = str(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)  # a FIFO must not block the open
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise InputError("no such nccl-tests log", file=name) from None
    except OSError as exc:
        raise InputError(f"cannot read the nccl-tests log: {exc.strerror}", file=name) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InputError("not a regular file; an nccl-tests log must be a file", file=name)
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise InputError(f"larger than {max_bytes:,} bytes; cut it to the nccl-tests output",
                         file=name)
    return data.decode("utf-8", errors="replace")
