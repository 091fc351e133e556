"""The error every importer raises for bad input: it names the file and the field."""

from __future__ import annotations

from pathlib import Path

__all__ = ["InputError"]


class InputError(ValueError):
    """Malformed or unsupported input file.

    ``str(err)`` is one line: ``"<path>: <field>: <problem>"``.

    Attributes:
        path: the offending file.
        field: where in the file (e.g. ``"accessors[3].count"``, ``"HIERARCHY line 12"``, ``"/Root/Skel.joints"``).
        problem: what is wrong.
    """

    def __init__(self, path: str | Path, field: str, problem: str):
        self.path = str(path)
        self.field = field
        self.problem = problem
        super().__init__(f"{self.path}: {field}: {problem}")
