"""glTF mesh primitives -> one vertex/triangle/influence block per mesh node.

All primitives of a mesh are concatenated in file order, each keeping its vertex order (so a mesh's vertex count
is the sum of its primitives' POSITION counts). TRIANGLES are read as they are, TRIANGLE_STRIP and TRIANGLE_FAN
are triangulated with glTF's winding rules, POINTS and LINES primitives are skipped with a warning. Default morph
target weights (node ``weights``, else mesh ``weights``) are applied to the positions; morph animation is not.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._gltf_accessors import read_accessor
from ._gltf_document import GltfDocument
from ._limits import MAX_MAGNITUDE, too_large

__all__ = ["MeshData", "read_mesh"]

_TRIANGLES, _STRIP, _FAN = 4, 5, 6
_MODE_NAMES = {0: "POINTS", 1: "LINES", 2: "LINE_LOOP", 3: "LINE_STRIP"}


@dataclass
class MeshData:
    """A mesh's primitives concatenated.

    Attributes:
        points: positions in the mesh's glTF space [file units], shape (V, 3).
        triangles: vertex indices, shape (T, 3).
        joints: skin-local joint indices, shape (V, K) (None when not read).
        weights: influence weights as stored, shape (V, K) (None when not read).
    """

    points: np.ndarray
    triangles: np.ndarray
    joints: np.ndarray | None
    weights: np.ndarray | None


def read_mesh(doc: GltfDocument, mesh_index: int, node: dict, node_index: int, skinned: bool) -> MeshData:
    """Reads ``meshes[mesh_index]`` as instanced by ``nodes[node_index]``.

    Args:
        skinned: read JOINTS_n / WEIGHTS_n (required then).

    Raises:
        InputError: missing POSITION, counts that differ between attributes, bad indices, unknown mode,
            JOINTS_n without WEIGHTS_n, skinned primitives without influences.
    """
    where = f"meshes[{mesh_index}]"
    mesh = doc.table("meshes")[mesh_index]
    primitives = doc.get_list(mesh, "primitives", where)
    morph, morph_field = doc.get_list(node, "weights", f"nodes[{node_index}]", None), f"nodes[{node_index}].weights"
    if morph is None:
        morph, morph_field = doc.get_list(mesh, "weights", where, None), f"{where}.weights"
    points, triangles, joints, weights = [], [], [], []
    offset = 0
    for p, prim in enumerate(primitives):
        pw = f"{where}.primitives[{p}]"
        if not isinstance(prim, dict):
            raise doc.error(pw, "must be an object")
        mode = doc.get_int(prim, "mode", pw, _TRIANGLES)
        if mode in _MODE_NAMES:
            doc.warn(f"{pw}.mode", f"{_MODE_NAMES[mode]} primitive skipped (only triangles are imported)")
            continue
        if mode not in (_TRIANGLES, _STRIP, _FAN):
            raise doc.error(f"{pw}.mode", f"unknown primitive mode {mode}")
        attributes = doc.get_dict(prim, "attributes", pw)
        pos = _float_attribute(doc, attributes, "POSITION", pw, 3)
        count = len(pos)
        pos = _apply_morph(doc, prim, pw, pos, morph, morph_field)
        tris = _triangles(doc, prim, pw, mode, count)
        points.append(pos)
        triangles.append(tris + offset)
        offset += count
        if skinned:
            j, w = _influences(doc, attributes, pw, count)
            joints.append(j)
            weights.append(w)
    if not points:
        empty = (np.zeros((0, 1), np.int64), np.zeros((0, 1))) if skinned else (None, None)
        return MeshData(np.zeros((0, 3)), np.zeros((0, 3), np.int64), *empty)
    if skinned:
        k = max(j.shape[1] for j in joints)
        joints = [np.pad(j, ((0, 0), (0, k - j.shape[1]))) for j in joints]
        weights = [np.pad(w, ((0, 0), (0, k - w.shape[1]))) for w in weights]
        return MeshData(
            np.concatenate(points), np.concatenate(triangles), np.concatenate(joints), np.concatenate(weights)
        )
    return MeshData(np.concatenate(points), np.concatenate(triangles), None, None)


def _float_attribute(doc, attributes: dict, name: str, where: str, width: int, count: int | None = None) -> np.ndarray:
    acc = doc.get_index(attributes, name, f"{where}.attributes", "accessors")
    values = np.asarray(read_accessor(doc, acc), dtype=np.float64)
    if values.ndim != 2 or values.shape[1] != width:
        raise doc.error(f"{where}.attributes.{name}", f"accessors[{acc}] must be VEC{width}, got {values.shape[1:]}")
    if count is not None and len(values) != count:
        raise doc.error(f"{where}.attributes.{name}", f"accessors[{acc}] has {len(values)} elements, POSITION {count}")
    if not np.all(np.isfinite(values)):
        raise doc.error(f"{where}.attributes.{name}", f"accessors[{acc}] holds non-finite values")
    if too_large(values).any():
        raise doc.error(
            f"{where}.attributes.{name}", f"accessors[{acc}] holds values out of range (> {MAX_MAGNITUDE:g})"
        )
    return values


def _apply_morph(doc, prim: dict, where: str, pos: np.ndarray, morph: list | None, morph_field: str) -> np.ndarray:
    """Positions with the default morph weights ``morph`` (read from ``morph_field``, the node's or the mesh's
    ``weights``) applied (``pos + sum_i w_i target_i.POSITION``)."""
    targets = doc.get_list(prim, "targets", where, [])
    if not morph or not targets:
        return pos
    pos = pos.copy()
    for i, (target, w) in enumerate(zip(targets, morph)):
        if isinstance(w, bool) or not isinstance(w, int | float):
            raise doc.error(f"{morph_field}[{i}]", f"must be a number, got {w!r}")
        if w != 0 and isinstance(target, dict) and "POSITION" in target:
            pos += w * _float_attribute(doc, target, "POSITION", f"{where}.targets[{i}]", 3, len(pos))
    return pos


def _triangles(doc, prim: dict, where: str, mode: int, count: int) -> np.ndarray:
    acc = doc.get_index(prim, "indices", where, "accessors", None)
    if acc is None:
        idx = np.arange(count, dtype=np.int64)
    else:
        idx = np.asarray(read_accessor(doc, acc))
        if idx.ndim != 1 or idx.dtype.kind != "i":
            raise doc.error(f"{where}.indices", f"accessors[{acc}] must be SCALAR unsigned integers")
        if len(idx) and (idx.min() < 0 or idx.max() >= count):
            raise doc.error(f"{where}.indices", f"accessors[{acc}] holds index {idx.max()} >= vertex count {count}")
    n = len(idx)
    if mode == _TRIANGLES:
        if n % 3:
            raise doc.error(where, f"TRIANGLES primitive with {n} indices (not a multiple of 3)")
        return idx.reshape(-1, 3)
    if n < 3:
        return np.zeros((0, 3), dtype=np.int64)
    i = np.arange(n - 2)
    if mode == _STRIP:  # triangle i = (v_i, v_{i+1+i%2}, v_{i+2-i%2})
        return np.stack([idx[i], idx[i + 1 + i % 2], idx[i + 2 - i % 2]], axis=1)
    return np.stack([idx[i + 1], idx[i + 2], np.full(n - 2, idx[0])], axis=1)  # fan: (v_{i+1}, v_{i+2}, v_0)


def _influences(doc, attributes: dict, where: str, count: int) -> tuple[np.ndarray, np.ndarray]:
    """JOINTS_0.. and WEIGHTS_0.. concatenated, shapes (V, 4 * sets)."""
    joints, weights = [], []
    n = 0
    while f"JOINTS_{n}" in attributes or f"WEIGHTS_{n}" in attributes:
        jw = f"{where}.attributes.JOINTS_{n}"
        if f"JOINTS_{n}" not in attributes or f"WEIGHTS_{n}" not in attributes:
            missing = "JOINTS" if f"JOINTS_{n}" not in attributes else "WEIGHTS"
            raise doc.error(f"{where}.attributes", f"{missing}_{n} is missing while its partner set is present")
        acc = doc.get_index(attributes, f"JOINTS_{n}", f"{where}.attributes", "accessors")
        j = np.asarray(read_accessor(doc, acc))
        if j.ndim != 2 or j.shape[1] != 4 or j.dtype.kind != "i" or len(j) != count:
            raise doc.error(jw, f"accessors[{acc}] must be {count} VEC4 unsigned integers, got {j.shape} {j.dtype}")
        if j.size and j.min() < 0:  # a signed component type: -1 would pick the skin's last joint
            v = int(np.argwhere(j < 0)[0, 0])
            raise doc.error(jw, f"accessors[{acc}] gives vertex {v} joint index {int(j.min())} (unsigned byte or"
                                " short, at least 0)")  # fmt: skip
        joints.append(j)
        weights.append(_float_attribute(doc, attributes, f"WEIGHTS_{n}", where, 4, count))
        n += 1
    if not joints:
        raise doc.error(f"{where}.attributes", "skinned primitive has no JOINTS_0 / WEIGHTS_0")
    return np.concatenate(joints, axis=1), np.concatenate(weights, axis=1)
