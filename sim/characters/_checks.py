"""Checks of the characters' and gaits' option dataclasses: each error names ``Class.field`` and the value."""

from __future__ import annotations

import math
import numbers

__all__ = ["article", "require_config", "require_int", "require_real"]


def _where(config, name: str) -> str:
    return f"{type(config).__name__}.{name}"


def require_int(config, name: str, minimum: int) -> None:
    """``config.name`` is an integer (not a bool) >= ``minimum``."""
    value = getattr(config, name)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{_where(config, name)}: must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{_where(config, name)}: must be an integer >= {minimum}, got {value!r}")


def require_real(
    config,
    name: str,
    low: float | None = None,
    high: float | None = None,
    *,
    low_open: bool = False,
    high_open: bool = False,
    value=None,
) -> None:
    """``config.name`` (or ``value``, for an element of a field) is a finite real number in the given interval.

    ``low``/``high`` None: unbounded on that side; ``low_open``/``high_open``: the bound itself is excluded.
    """
    if value is None:
        value = getattr(config, name)
    want = "must be a finite number"
    if low is not None and high is not None:
        want += f" in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    elif low is not None:
        want += f" {'>' if low_open else '>='} {low:g}"
    elif high is not None:
        want += f" {'<' if high_open else '<='} {high:g}"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{_where(config, name)}: {want}, got {value!r}")
    v = float(value)
    ok = math.isfinite(v)
    if ok and low is not None:
        ok = v > low if low_open else v >= low
    if ok and high is not None:
        ok = v < high if high_open else v <= high
    if not ok:
        raise ValueError(f"{_where(config, name)}: {want}, got {value!r}")


def require_config(value, want: type, what: str) -> None:
    """``value`` is an instance of the dataclass ``want`` (``what`` names the argument in the message)."""
    if not isinstance(value, want):
        raise TypeError(f"{what} must be {article(want.__name__)} {want.__name__}, got {type(value).__name__}")


def article(word: str) -> str:
    """``"an"`` before a vowel, ``"a"`` otherwise."""
    return "an" if word[:1].lower() in "aeiou" else "a"
