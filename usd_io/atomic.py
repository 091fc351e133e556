"""Atomic file output: write to a temporary file beside the target, then rename over it."""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from .errors import InputError

__all__ = ["Terminated", "atomic_output", "check_folder", "interrupt_exit_status", "make_folder", "stop_on_sigterm"]

TEMP_STEM_BYTES = 200
"""Bytes of the target's stem kept in the temporary file's name (a 245-byte name overflowed the 255-byte limit)."""
USD_LAYER_SUFFIXES = (".usd", ".usda", ".usdc")
"""Suffixes of the files whose open USD layers :func:`atomic_output` reloads after replacing them."""


@contextlib.contextmanager
def atomic_output(path: str | Path) -> Iterator[Path]:
    """Yields a temporary path with the same suffix as ``path`` in the same folder; on normal exit it is renamed
    to ``path`` (atomic on POSIX), on an exception it is removed and ``path`` is left untouched.

    The parent folder is created when missing. Writers that pick their format from the extension (USD, imageio)
    see the right suffix.

    Raises:
        InputError: ``path`` cannot be written (its folder cannot be created, a parent is a file, ``path`` is a
            folder, no permission); the message names the path and the reason. Errors of the writer inside the
            ``with`` block propagate unchanged.
    """
    path = requested = Path(path)
    if path.is_symlink():  # write through the link (as open() does): the link stays, its target gets the content
        path = path.resolve()
    try:
        is_folder = path.is_dir()
    except OSError as e:  # a parent that cannot be entered (Path.is_dir re-raises EACCES)
        raise InputError(path, "output", f"cannot reach it ({_reason(e)})") from e
    if is_folder:
        raise InputError(path, "output", "is a folder, not a file")
    make_folder(path.parent)
    try:
        # the temporary name stays within the file system's 255 bytes whatever the target's length
        stem = path.stem.encode()[:TEMP_STEM_BYTES].decode(errors="ignore")
        fd, tmp = tempfile.mkstemp(prefix=f".{stem}.", suffix=f".tmp{path.suffix}", dir=path.parent)
    except OSError as e:
        raise InputError(path, "output", f"cannot create a file in {path.parent} ({_reason(e)})") from e
    os.close(fd)
    tmp_path = Path(tmp)
    try:  # mkstemp creates 0600: an existing file keeps its mode, a new one gets the usual permissions
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:
        mode = 0o666 & ~_UMASK
    try:
        try:
            os.chmod(tmp_path, mode)
        except OSError:  # file systems that refuse chmod (vfat, CIFS): the new file keeps mkstemp's 0600
            pass
        yield tmp_path
        try:
            _fsync(tmp_path)  # the content reaches the disk before the name does: no empty file after a crash
            os.replace(tmp_path, path)
        except OSError as e:
            raise InputError(path, "output", f"cannot replace it ({_reason(e)})") from e
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise
    _fsync(path.parent, missing_ok=True)  # the rename itself
    _reload_open_layer(path, requested)


def _read_umask() -> int:
    """The process umask, read once at import (setting it to probe it changes it for every thread meanwhile)."""
    umask = os.umask(0)
    os.umask(umask)
    return umask


_UMASK = _read_umask()


def _fsync(path: Path, missing_ok: bool = False) -> None:
    """Flushes a file's (or a folder's) data to the disk. Folders that cannot be opened or synced (some file
    systems and platforms) are skipped when ``missing_ok``."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        if missing_ok:
            return
        raise
    try:
        os.fsync(fd)
    except OSError:
        if not missing_ok:
            raise
    finally:
        os.close(fd)


def _reload_open_layer(path: Path, requested: Path | None = None) -> None:
    """Reloads a USD layer of ``path`` this process holds open (a stage, a viewer, an earlier read): USD's layer
    registry kept serving the replaced file's content to every later open of the path. ``requested``: the path as
    given, when it is a link to ``path`` (a layer opened through the link is registered under the link's name)."""
    if path.suffix.lower() not in USD_LAYER_SUFFIXES or "pxr" not in sys.modules:
        return  # nothing of USD loaded: no layer can be open
    from pxr import Sdf

    names = [str(path), str(path.resolve())]
    if requested is not None:
        names += [str(requested), os.path.abspath(requested)]
    for name in dict.fromkeys(names):
        layer = Sdf.Layer.Find(name)
        if layer is not None:
            layer.Reload(force=True)


def check_folder(path: str | Path) -> bool:
    """Whether folder ``path`` exists; creates nothing.

    Raises:
        InputError: the folder could not be created: it or a parent is a file, or a parent cannot be entered.
    """
    path = Path(path)
    try:
        if path.is_dir():
            return True
        for parent in [path, *path.parents]:
            if parent.exists() and not parent.is_dir():
                raise InputError(path, "output", f"cannot create the folder: {parent} is a file")
    except OSError as e:  # a parent that cannot be entered (Path.is_dir/exists re-raise EACCES)
        raise InputError(path, "output", f"cannot reach the folder ({_reason(e)})") from e
    return False


def make_folder(path: str | Path) -> Path:
    """Creates folder ``path`` and its parents when missing and returns it as a Path.

    Raises:
        InputError: the folder cannot be created (a parent is a file, ``path`` is a file, no permission); the
            message names the folder and the reason.
    """
    path = Path(path)
    if check_folder(path):
        return path
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(path, "output", f"cannot create the folder ({_reason(e)})") from e
    return path


class Terminated(KeyboardInterrupt):
    """SIGTERM (kill, docker stop, a Slurm time limit), raised where Ctrl-C raises KeyboardInterrupt (after
    :func:`stop_on_sigterm`) so that the same clean-up runs: :func:`atomic_output` removes its temporary file."""


def _raise_terminated(signum, frame) -> None:
    raise Terminated


def stop_on_sigterm() -> None:
    """Makes SIGTERM raise :class:`Terminated` in the main thread (command-line programs call it once at start)."""
    signal.signal(signal.SIGTERM, _raise_terminated)


def interrupt_exit_status(e: KeyboardInterrupt) -> int:
    """The exit status of an interrupted run: 130 (128 + SIGINT) for Ctrl-C, 143 (128 + SIGTERM) for SIGTERM."""
    return 143 if isinstance(e, Terminated) else 130


def _reason(e: OSError) -> str:
    return e.strerror or str(e)
