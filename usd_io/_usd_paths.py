"""Output paths of USD stages."""

from __future__ import annotations

from pathlib import Path

USD_SUFFIXES = (".usda", ".usdc", ".usd")
"""Extensions USD writes: text, binary crate, and ``.usd`` (crate by default)."""


def usd_output_path(path: str | Path, field: str = "output") -> Path:
    """``path`` as a Path, checked to name a USD layer USD can write.

    Raises:
        ValueError: another extension (USD picks the file format from it), naming the path and ``field``.
    """
    path = Path(path)
    if path.suffix.lower() not in USD_SUFFIXES:
        raise ValueError(f"{path}: {field}: a USD stage must end in {', '.join(USD_SUFFIXES)}, not {path.suffix!r}")
    return path
