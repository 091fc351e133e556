"""Atomic file writes inside ``sim`` (previews, checkpoints): a temporary file beside the target, synced, then renamed
over it. (``usd_io.atomic_output`` is the stage writers' one, with USD layer reloads and errors naming the file;
``sim`` sits below ``usd_io`` and cannot use it.)"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["atomic_file"]


@contextlib.contextmanager
def atomic_file(path: str | Path, suffix: str = "") -> Iterator[Path]:
    """Yields a new empty file ``.NAME.PID.NS.tmpSUFFIX`` beside ``path`` (usual permissions: the umask applies) to
    write; on normal exit it is synced and renamed to ``path`` (a crash leaves the old file or the new one, never
    half of one), on an exception it is removed and ``path`` is left untouched. ``suffix`` serves writers that pick
    a format from the name (``".mp4"``). The parent folder is created when missing."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp{suffix}"
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    try:
        yield tmp
        _fsync(tmp)  # the data is on disk before the rename makes it the file
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync(path.parent, folder=True)  # the rename itself


def _fsync(path: Path, folder: bool = False) -> None:
    """Flushes a file's data (or a folder's entries) to the disk; folders that cannot be synced are skipped."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - folders that cannot be opened (some platforms)
        if folder:
            return
        raise
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        if not folder:
            raise
    finally:
        os.close(fd)
