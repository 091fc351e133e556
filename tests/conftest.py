"""Shared test fixtures: locating ../shared/assets, tiny synthetic rigs."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def assets_root() -> Path:
    """``$KINEDISTILL_ASSETS`` or ``<repo>/../shared/assets``."""
    return Path(os.environ.get("KINEDISTILL_ASSETS", REPO_ROOT.parent / "shared" / "assets"))


@pytest.fixture(scope="session")
def assets_dir() -> Path:
    """The shared test assets folder; skips the test when it is absent."""
    root = assets_root()
    if not root.is_dir():
        pytest.skip(f"shared test assets not found at {root} (set KINEDISTILL_ASSETS)")
    return root


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)
