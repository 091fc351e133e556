"""Atomic file output: write to a temporary file beside the target, then rename over it."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["atomic_output"]


@contextlib.contextmanager
def atomic_output(path: str | Path) -> Iterator[Path]:
    """Yields a temporary path with the same suffix as ``path`` in the same folder; on normal exit it is renamed
    to ``path`` (atomic on POSIX), on an exception it is removed and ``path`` is left untouched.

    The parent folder is created when missing. Writers that pick their format from the extension (USD, imageio)
    see the right suffix.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=f".tmp{path.suffix}", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp_path, 0o666 & ~umask)  # mkstemp creates 0600; give the result the usual permissions
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise
