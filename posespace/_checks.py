"""Range checks of config fields: each raises ValueError naming ``Config.field``, the rule and the value."""

from __future__ import annotations

from sim._numbers import is_finite_real, is_integer

__all__ = ["check_fraction", "check_int", "check_number"]


def check_int(name: str, value, low: int) -> int:
    """``value`` as an int, or ValueError naming ``name`` when it is not an integer >= ``low``."""
    if not is_integer(value) or value < low:
        raise ValueError(f"{name}: must be an integer >= {low}, got {value!r}")
    return int(value)


def check_number(name: str, value, low: float = 0.0, strict: bool = False) -> float:
    """``value`` as a float, or ValueError naming ``name`` when it is not a finite number ``>= low`` (``> low``
    when ``strict``)."""
    ok = is_finite_real(value) and (value > low if strict else value >= low)
    if not ok:
        raise ValueError(f"{name}: must be a finite number {'>' if strict else '>='} {low:g}, got {value!r}")
    return float(value)


def check_fraction(name: str, value, open_low: bool = False, open_high: bool = False) -> float:
    """``value`` as a float, or ValueError naming ``name`` when it is not in [0, 1] (ends excluded as asked)."""
    ok = is_finite_real(value) and (value > 0 if open_low else value >= 0) and (value < 1 if open_high else value <= 1)
    if not ok:
        interval = f"{'(' if open_low else '['}0, 1{')' if open_high else ']'}"
        raise ValueError(f"{name}: must be a number in {interval}, got {value!r}")
    return float(value)
