"""A lock on an output folder, so that two runs never write one table at once.

It is an ``flock`` on a file in the folder: the kernel releases it when the holder's process
ends, however it ends, so a lock left by a killed run never blocks ``--resume``. A holder that
ends without an error removes the file (while still holding the lock), so a finished folder
holds only the run's outputs."""

from __future__ import annotations

import os
from pathlib import Path
from types import TracebackType

from collsim.errors import InputError
from collsim.output.files import reported

try:
    import fcntl
except ImportError:  # not POSIX: runs are not locked
    fcntl = None  # type: ignore[assignment]

LOCK_FILE = ".collsim.lock"


class FolderLock:
    """Held from ``__enter__`` to ``__exit__``; a second holder is refused with a message."""

    def __init__(self, folder: Path, option: str = "--out") -> None:
        self.path = Path(folder) / LOCK_FILE
        self.option = option
        self._fd: int | None = None

    def __enter__(self) -> FolderLock:
        if fcntl is None:
            return self
        with reported(self.path):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode("ascii", "replace").strip()
            os.close(fd)
            raise InputError(f"another collsim run (process {holder or 'unknown'}) is writing "
                             f"{self.path.parent}; wait for it to end, or choose another "
                             f"{self.option}", key=self.option) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if self._fd is not None:
            if kind is None:
                self.path.unlink(missing_ok=True)  # before the release: no one holds it then
            os.close(self._fd)  # closing releases the lock
            self._fd = None
