"""Writing output files whole or not at all: through a temporary file beside the target and a
rename, with any failure (read-only folder, full disk) reported as one OutputError naming the
path and the reason, and the temporary file removed."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import BinaryIO, TextIO

from collsim.errors import OutputError
from collsim.output.kinds import FIGURE_FORMATS

# A write that ran out of room: a full disk, a quota, a file-size limit.
FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def output_error(path: str | Path, exc: OSError) -> OutputError:
    """The one-line error for a failed write of ``path``."""
    reason = exc.strerror or str(exc)
    if isinstance(exc, IsADirectoryError):
        reason = "it is a directory"
    elif isinstance(exc, FileExistsError):
        reason = "it exists and is not a folder"
    elif isinstance(exc, (NotADirectoryError, FileNotFoundError)):
        folder = next((p for p in Path(path).parents if p.exists()), None)
        if folder is not None and not folder.is_dir():
            reason = f"{folder} is a file, not a folder"
        elif folder != Path(path).parent:
            reason = f"there is no folder {Path(path).parent}"
    return OutputError(f"cannot write {path}: {reason}")


@contextmanager
def reported(path: str | Path) -> Iterator[None]:
    """Turn an OSError inside the block into an OutputError naming ``path``."""
    try:
        yield
    except OutputError:
        raise
    except OSError as exc:
        raise output_error(path, exc) from None


def replace_text(path: str | Path, write: Callable[[TextIO], None]) -> None:
    """Write ``path`` through ``write(file)`` on a temporary file, then rename it into place."""
    _replace(path, lambda temporary: _with_text(temporary, write))


def replace_with(path: str | Path, write: Callable[[Path], None]) -> None:
    """Let ``write`` write a temporary path (matplotlib's savefig, say), then rename it."""
    _replace(path, write)


def _with_text(temporary: Path, write: Callable[[TextIO], None]) -> None:
    with open(temporary, "w", encoding="utf-8", newline="") as file:
        write(file)
        file.flush()
        os.fsync(file.fileno())


def _replace(path: str | Path, write: Callable[[Path], None]) -> None:
    path = Path(path)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with reported(path):
        try:
            if path.is_dir():
                raise IsADirectoryError(errno.EISDIR, "is a directory", str(path))
            if path.exists() and not path.is_file():
                raise OutputError(f"cannot write {path}: it is not a regular file but a "
                                  f"device, FIFO or socket; collsim writes regular files only")
            try:
                write(temporary)
                os.replace(temporary, path)
            except OSError as exc:
                if exc.errno not in FULL:
                    raise
                raise OutputError(f"{output_error(path, exc).message}; nothing half-written "
                                  f"is left (a file there before is kept as it was)") from None
        finally:
            with suppress(OSError):
                temporary.unlink(missing_ok=True)


def cut_torn_tail(file: BinaryIO) -> int:
    """Truncate an open file after its last newline (a crash or a full disk can leave half a
    line at the end); returns the bytes cut."""
    end = file.seek(0, os.SEEK_END)
    position = end
    while position > 0:
        step = min(4096, position)
        file.seek(position - step)
        chunk = file.read(step)
        newline = chunk.rfind(b"\n")
        if newline >= 0:
            position = position - step + newline + 1
            break
        position -= step
    if position < end:
        file.truncate(position)
        file.flush()
    return end - position



def is_figure_file(name: str) -> bool:
    """Whether ``name`` is a plain figure file name (``time_vs_size.png``): no folder, not
    hidden, one of the figure formats."""
    stem, dot, suffix = name.rpartition(".")
    return (Path(name).name == name and dot == "." and bool(stem) and not name.startswith(".")
            and suffix in FIGURE_FORMATS)


def check_figure_name(path: str | Path, key: str) -> None:
    """Refuse, before any work, a figure file whose name does not end in a figure format
    (matplotlib would fail only after the simulation, and with a traceback)."""
    suffix = Path(path).suffix.lstrip(".").lower()
    if suffix not in FIGURE_FORMATS:
        raise OutputError(f"cannot tell the figure format of {path}: the name must end in "
                          f"{', '.join('.' + f for f in FIGURE_FORMATS)}", key=key)
