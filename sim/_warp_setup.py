"""One place that initializes Warp quietly for the whole toolkit."""

from __future__ import annotations

import warp as wp

_initialized = False


def init_warp() -> None:
    """Initializes Warp once, with its info logging off (the CUDA-driver notice on CPU machines is harmless)."""
    global _initialized
    if _initialized:
        return
    wp.config.quiet = True
    wp.config.log_level = 30
    wp.init()
    _initialized = True
