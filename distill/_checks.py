"""Value checks shared by the distill settings dataclasses."""

from __future__ import annotations

import math
import numbers

import numpy as np


def is_number(value) -> bool:
    """A real number (Python or NumPy scalar), not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def is_finite_number(value) -> bool:
    """A finite real number (Python or NumPy scalar), not a bool."""
    return is_number(value) and math.isfinite(value)


def is_integer(value) -> bool:
    """An integer (Python or NumPy scalar), not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))
