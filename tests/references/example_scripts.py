"""Example scripts imported in-process, for tests that call their functions directly."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_example(script: Path, name: str) -> ModuleType:
    """``script`` (e.g. examples/posespace.py) imported as module ``name``: under its own file name it would
    shadow the package of the same name on sys.path."""
    spec = importlib.util.spec_from_file_location(name, script)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module
