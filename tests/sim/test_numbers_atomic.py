"""The shared number rule (``sim._numbers``) and atomic writer (``sim._atomic``)."""

from __future__ import annotations

import fractions
import os

import numpy as np
import pytest

from sim._atomic import atomic_file
from sim._numbers import is_finite_real, is_integer, is_real, plain


@pytest.mark.parametrize("value", [0, 3, -2.5, np.float32(1.5), np.int64(7), np.uint8(3), np.float64("nan")])
def test_reals(value):
    assert is_real(value)


@pytest.mark.parametrize(
    "value", [True, False, np.bool_(True), "1", None, 1j, [1.0], np.array([1.0]), fractions.Fraction(1, 2)]
)
def test_not_reals(value):
    assert not is_real(value)


def test_finite_reals():
    assert is_finite_real(1.0) and is_finite_real(np.float32(2.0)) and is_finite_real(10**300)
    assert not is_finite_real(float("nan")) and not is_finite_real(np.float64("-inf"))
    assert not is_finite_real(10**400)  # an int beyond float range: not an OverflowError
    assert not is_finite_real(True)


def test_integers():
    assert is_integer(4) and is_integer(np.int32(-1)) and is_integer(np.uint16(2))
    assert (
        not is_integer(4.0) and not is_integer(np.float32(4)) and not is_integer(True) and not is_integer(np.bool_(0))
    )


def test_atomic_file_writes_and_replaces(tmp_path):
    target = tmp_path / "sub" / "out.bin"
    with atomic_file(target, suffix=".mp4") as tmp:
        assert tmp.parent == target.parent and tmp.name.endswith(".mp4") and tmp.exists()
        assert not target.exists()  # nothing at the target while it is written
        tmp.write_bytes(b"first")
    assert target.read_bytes() == b"first"
    with atomic_file(target) as tmp:
        tmp.write_bytes(b"second")
    assert target.read_bytes() == b"second"
    assert sorted(p.name for p in target.parent.iterdir()) == ["out.bin"]  # no temporaries left


def test_atomic_file_leaves_old_file_on_error(tmp_path):
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError, match="boom"), atomic_file(target) as tmp:
        tmp.write_bytes(b"half")
        raise RuntimeError("boom")
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["out.bin"]


def test_plain_turns_nested_numpy_scalars_into_python_numbers():
    value = plain({"lr": np.float32(0.5), "rows": [{"n": np.int64(3)}, (np.float64(2.0), "a")], "x": None})
    assert value == {"lr": 0.5, "rows": [{"n": 3}, (2.0, "a")], "x": None}
    assert type(value["lr"]) is float and type(value["rows"][0]["n"]) is int and type(value["rows"][1]) is tuple
    assert type(value["rows"][1][0]) is float
