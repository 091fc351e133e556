"""The range of numbers the importers accept."""

from __future__ import annotations

import numpy as np

MAX_MAGNITUDE = 1e15
"""Largest magnitude of a number read from a file (a length in any unit, an angle in degrees, a time). USD stores
them as float32, which holds 3.4e38, but squares and products of such values overflow (a BVH offset of 1e308 was
written to USD as inf); 1e15 lies beyond any real scene in any unit."""


def too_large(values) -> np.ndarray:
    """Mask of the finite entries of ``values`` whose magnitude exceeds :data:`MAX_MAGNITUDE`."""
    values = np.asarray(values, dtype=np.float64)
    return np.isfinite(values) & (np.abs(values) > MAX_MAGNITUDE)
