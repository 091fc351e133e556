"""USD prim-name and token sanitizing (pure Python: no pxr import).

USD prim names (and UsdSkel joint path elements) must be identifiers: ``[A-Za-z_][A-Za-z0-9_]*`` in the ASCII
subset every USD version accepts. Our rigs, meshes and clips carry arbitrary names (``"mixamorig:Hips"``,
``"Armature|Walk.001"``); these helpers map them to valid, unique identifiers. The original names travel in the
file separately (``Skeleton.jointNames``, prim ``displayName``), so readers can restore them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

__all__ = ["sanitize_identifier", "unique_identifiers"]

_INVALID = re.compile(r"[^A-Za-z0-9_]")


def sanitize_identifier(name: str) -> str:
    """A valid USD identifier close to ``name``.

    Every character outside ``[A-Za-z0-9_]`` becomes ``_``; a leading digit gets a ``_`` prefix; an empty name
    becomes ``_``.

    Args:
        name: any string.

    Returns:
        an identifier matching ``[A-Za-z_][A-Za-z0-9_]*``.
    """
    out = _INVALID.sub("_", str(name))
    if not out:
        return "_"
    if out[0].isdigit():
        out = "_" + out
    return out


def unique_identifiers(names: Sequence[str], reserved: Iterable[str] = ()) -> list[str]:
    """Sanitized identifiers for ``names``, made unique among themselves and distinct from ``reserved``.

    Collisions (after sanitizing) get a numeric suffix ``_1``, ``_2``, ... in order of appearance, so the
    mapping is deterministic.

    Args:
        names: the names, in order.
        reserved: identifiers already taken (e.g. sibling prims).

    Returns:
        one identifier per name, same order.
    """
    taken = set(reserved)
    out = []
    for name in names:
        base = sanitize_identifier(name)
        candidate, k = base, 1
        while candidate in taken:
            candidate = f"{base}_{k}"
            k += 1
        taken.add(candidate)
        out.append(candidate)
    return out
