"""Reading an input file's bytes: regular files only, so a device or a pipe named by a path or a URI cannot make a
reader wait or read forever."""

from __future__ import annotations

from pathlib import Path

from .errors import InputError

__all__ = ["NOT_REGULAR", "read_regular_file"]

NOT_REGULAR = "not a regular file: a folder, a device or a pipe"
"""Why a path that exists is not read."""


def read_regular_file(path: Path, field: str, what: str = "file", *, error_path: Path | None = None,
                      limit: int | None = None) -> bytes:  # fmt: skip
    """The bytes of ``path``, or its first ``limit`` bytes.

    Args:
        path: the file to read.
        field: the field an error names (``"path"``, ``"buffers[0].uri"``).
        what: what the file is, for messages (``"file"``, ``"buffer file"``).
        error_path: the file an error names (default ``path``; a glTF document for the buffer files it names, which
            the message then quotes).
        limit: read at most this many bytes.

    Raises:
        InputError: ``path`` is missing, not a regular file (a folder, a device such as /dev/zero, a pipe) or
            unreadable.
    """
    where = path if error_path is None else error_path
    shown = "" if error_path is None else f" {str(path)!r}"
    try:
        if not path.exists():
            reason = "no such file"
        elif not path.is_file():
            reason = NOT_REGULAR
        else:
            with path.open("rb") as f:
                return f.read() if limit is None else f.read(limit)
    except OSError as e:
        reason = e.strerror or str(e)
    raise InputError(where, field, f"cannot read {what}{shown} ({reason})")
