"""The range of numbers the importers accept."""

from __future__ import annotations

import numpy as np

MAX_MAGNITUDE = 1e15
"""Largest magnitude of a number read from a file (a length in any unit, an angle in degrees, a time). USD stores
them as float32, which holds 3.4e38, but squares and products of such values overflow (a BVH offset of 1e308 was
written to USD as inf); 1e15 lies beyond any real scene in any unit."""


AFFINE_TOLERANCE = 1e-6
"""Largest deviation of a 4x4 matrix's last row from (0, 0, 0, 1) still read as an affine transform."""


def not_affine(matrices) -> np.ndarray:
    """Mask of the 4x4 matrices (..., 4, 4) (column-vector convention: translation in the last column) whose last
    row is not (0, 0, 0, 1): projective transforms, which skinning (top three rows) and inversion read differently."""
    m = np.asarray(matrices, dtype=np.float64)
    return np.abs(m[..., 3, :] - [0.0, 0.0, 0.0, 1.0]).max(axis=-1) > AFFINE_TOLERANCE


def too_large(values) -> np.ndarray:
    """Mask of the finite entries of ``values`` whose magnitude exceeds :data:`MAX_MAGNITUDE`."""
    values = np.asarray(values, dtype=np.float64)
    return np.isfinite(values) & (np.abs(values) > MAX_MAGNITUDE)
