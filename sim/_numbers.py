"""The one number rule of every package's settings: Python and NumPy scalars are numbers (``np.float32`` is no
``float``), bools are not (``True`` read as 1 weighed, seeded and ran settings silently)."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["is_finite_real", "is_integer", "is_real", "plain"]


def is_real(value) -> bool:
    """A real number: a Python int/float or a NumPy integer/floating scalar, not a bool."""
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool | np.bool_)


def is_finite_real(value) -> bool:
    """A finite real number (:func:`is_real`, neither NaN nor infinite)."""
    try:
        return is_real(value) and math.isfinite(value)
    except OverflowError:  # an int beyond float range
        return False


def is_integer(value) -> bool:
    """An integer: a Python int or a NumPy integer scalar, not a bool."""
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


def plain(value):
    """``value`` with every NumPy scalar, also inside nested dicts, lists and tuples, as the Python number it holds
    (what ``json`` writes as a number and ``torch.load(weights_only=True)`` reads); anything else as it is."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(plain(v) for v in value)
    return value
