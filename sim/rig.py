"""Rig data model: a joint tree with rest pose and bind pose, and the meshes it skins.

Frames: the rig lives in its *skeleton space*, which is the world frame of the toolkit (SI metres, Z-up,
right-handed). Importers fold every transform above the root joint (and unit and up-axis conversions) into
the root's rest transform, the inverse bind matrices and the motion's root channels, so nothing outside the
rig is needed to pose it.

Skinning (linear blend skinning, as glTF and UsdSkel define it)::

    p'(v) = sum_k w[v, k] * W[j_k] @ inverse_bind[j_k] @ p(v)

where ``W[j]`` is joint ``j``'s world (skeleton-space) rigid transform and ``p(v)`` the bind-pose point.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from .rotations import quat_multiply, quat_normalize, quat_rotate, transform_matrix

__all__ = ["Rig", "RigError", "RigWarning", "SkinnedMesh"]

WEIGHT_SUM_TOLERANCE = 1e-3
"""Influence weights whose per-vertex sum differs from 1 by more than this are renormalized with a warning."""


class RigError(ValueError):
    """Invalid rig or motion data; the message names the offending field."""


class RigWarning(UserWarning):
    """Rig data was repaired on construction (e.g. weights renormalized)."""


def _index_array(name: str, value, shape: Sequence[int | None]) -> np.ndarray:
    """Integer indices as int32, checked like :func:`_array`: floats must be whole numbers (0.9 was index 0)
    and every value must fit int32 (2**32 wrapped to 0)."""
    raw = np.asarray(value)
    if raw.dtype.kind in "bc":
        raise RigError(
            f"{name}: expected integer indices, got {'booleans' if raw.dtype.kind == 'b' else 'complex numbers'}"
        )
    if raw.dtype.kind == "f" and raw.size:
        bad = ~np.isfinite(raw) | (raw != np.round(raw))
        if bad.any():
            first = raw[np.unravel_index(int(np.argmax(bad)), raw.shape)]
            raise RigError(f"{name}: expected integer indices, got {first.item()!r}")
    arr = _array(name, raw, np.int64, shape)
    if arr.size and (arr.min() < np.iinfo(np.int32).min or arr.max() > np.iinfo(np.int32).max):
        raise RigError(f"{name}: index out of the int32 range (got {arr.min() if arr.min() < 0 else arr.max()})")
    return arr.astype(np.int32)


def _array(name: str, value, dtype, shape: Sequence[int | None]) -> np.ndarray:
    """Converts ``value`` to ``dtype`` and checks its shape (None = any size) and finiteness."""
    try:
        arr = np.array(value, dtype=dtype, copy=True)
    except (TypeError, ValueError) as e:
        raise RigError(f"{name}: cannot convert to {np.dtype(dtype).name} array ({e})") from None
    if arr.ndim != len(shape) or any(s is not None and s != a for s, a in zip(shape, arr.shape)):
        want = "(" + ", ".join("N" if s is None else str(s) for s in shape) + ")"
        raise RigError(f"{name}: expected shape {want}, got {arr.shape}")
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise RigError(f"{name}: non-finite value at index {tuple(int(i) for i in bad)}")
    return arr


class SkinnedMesh:
    """A triangle mesh bound to a rig by per-vertex joint influences.

    Attributes:
        name: mesh name (used for the USD prim).
        points: bind-pose vertex positions in skeleton space [m], shape (vertex_count, 3).
        triangles: vertex indices, counter-clockwise seen from outside, shape (triangle_count, 3).
        influence_joints: joint indices, shape (vertex_count, influence_count); padding entries have weight 0.
        influence_weights: blend weights summing to 1 per vertex [unitless], shape (vertex_count, influence_count).
    """

    def __init__(
        self,
        name: str,
        points,
        triangles,
        influence_joints,
        influence_weights,
        *,
        joint_count: int | None = None,
    ):
        """Validates and stores the mesh.

        Args:
            joint_count: when given, influence indices must lie in ``[0, joint_count)``.

        Raises:
            RigError: on wrong shapes, non-finite values, out-of-range indices, or weights that are negative,
                NaN, or sum to zero for a vertex.
        """
        self.name = str(name)
        p = f"mesh {self.name!r}"
        self.points = _array(f"{p} points", points, np.float64, (None, 3))
        v = len(self.points)
        self.triangles = _index_array(f"{p} triangles", triangles, (None, 3))
        if self.triangles.size and (self.triangles.min() < 0 or self.triangles.max() >= v):
            raise RigError(f"{p} triangles: vertex index out of range [0, {v}) (max {self.triangles.max()})")
        w_raw = np.asarray(influence_weights, dtype=np.float64)
        if w_raw.ndim == 1:
            w_raw = w_raw[:, None]
        j_raw = np.asarray(influence_joints)
        if j_raw.ndim == 1:
            j_raw = j_raw[:, None]
        if w_raw.shape != j_raw.shape or w_raw.ndim != 2 or len(w_raw) != v:
            raise RigError(
                f"{p} influences: joints {j_raw.shape} and weights {w_raw.shape} must both be (vertex_count={v}, K)"
            )
        if np.isnan(w_raw).any():
            raise RigError(f"{p} influence_weights: NaN weight at vertex {int(np.argwhere(np.isnan(w_raw))[0, 0])}")
        weights = _array(f"{p} influence_weights", w_raw, np.float64, (v, None))
        joints = _index_array(f"{p} influence_joints", j_raw, (v, None)).astype(np.int64)
        if (weights < 0).any():
            raise RigError(f"{p} influence_weights: negative weight at vertex {int(np.argwhere(weights < 0)[0, 0])}")
        # padding influences (weight 0) may carry any index: point them at joint 0
        joints = np.where(weights > 0, joints, 0)
        if joint_count is not None and joints.size and (joints.min() < 0 or joints.max() >= joint_count):
            bad = int(np.argwhere((joints < 0) | (joints >= joint_count))[0, 0])
            raise RigError(f"{p} influence_joints: vertex {bad} references a joint outside [0, {joint_count})")
        total = weights.sum(axis=1)
        if v and (total <= 0).any():
            raise RigError(f"{p} influence_weights: all weights zero at vertex {int(np.argwhere(total <= 0)[0, 0])}")
        off = np.abs(total - 1.0) > WEIGHT_SUM_TOLERANCE
        if off.any():
            worst = total[np.argmax(np.abs(total - 1.0))]  # the sum furthest from 1
            warnings.warn(
                f"{p}: {int(off.sum())} vertices have weights not summing to 1 (worst {worst:.4g}); renormalized",
                RigWarning,
                stacklevel=2,
            )
        self.influence_weights = weights / total[:, None] if v else weights
        self.influence_joints = joints.astype(np.int32)

    @property
    def vertex_count(self) -> int:
        return len(self.points)

    @property
    def influence_count(self) -> int:
        return self.influence_weights.shape[1]

    def vertex_normals(self) -> np.ndarray:
        """Area-weighted vertex normals of the bind pose [unit], shape (vertex_count, 3)."""
        return _vertex_normals(self.points, self.triangles)

    def __repr__(self) -> str:
        return (
            f"SkinnedMesh({self.name!r}, vertices={self.vertex_count}, triangles={len(self.triangles)}, "
            f"influences={self.influence_count})"
        )


def _vertex_normals(points: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    n = np.zeros_like(points)
    if len(triangles):
        a, b, c = (points[triangles[:, i]] for i in range(3))
        fn = np.cross(b - a, c - a)
        for i in range(3):
            np.add.at(n, triangles[:, i], fn)
    length = np.linalg.norm(n, axis=-1, keepdims=True)
    return np.where(length > 1e-20, n / np.maximum(length, 1e-300), np.array([0.0, 0.0, 1.0]))


class Rig:
    """A skeleton (a tree of joints in parents-first order) with rest and bind poses and skinned meshes.

    Attributes:
        name: rig name (the USD SkelRoot's name).
        joint_names: unique joint names, length joint_count.
        parents: parent index per joint, -1 for the single root (index 0), shape (joint_count,).
        rest_translations: local rest translations [m], shape (joint_count, 3); the root's is in skeleton space.
        rest_rotations: local rest rotations [unit quat xyzw], shape (joint_count, 4).
        inverse_bind_matrices: skeleton space -> joint space at bind time, shape (joint_count, 4, 4);
            may carry a uniform scale folded in by importers.
        meshes: skinned meshes.
    """

    def __init__(
        self,
        joint_names: Sequence[str],
        parents,
        rest_translations,
        rest_rotations,
        inverse_bind_matrices=None,
        meshes: Sequence[SkinnedMesh] = (),
        *,
        name: str = "character",
    ):
        """Validates and stores the rig.

        Args:
            inverse_bind_matrices: when None, the rest pose is the bind pose.

        Raises:
            RigError: several roots, cycles, children listed before parents, duplicate names, bad shapes,
                non-finite values, meshes referencing missing joints.
        """
        self.name = str(name)
        names = tuple(str(n) for n in joint_names)
        count = len(names)
        if count == 0:
            raise RigError("joint_names: a rig needs at least one joint")
        if len(set(names)) != count:
            dup = next(n for n in names if names.count(n) > 1)
            raise RigError(f"joint_names: duplicate joint name {dup!r}")
        self.joint_names = names
        self.parents = _index_array("parents", parents, (count,))
        _check_tree(self.parents, names)
        self.rest_translations = _array("rest_translations", rest_translations, np.float64, (count, 3))
        rot = _array("rest_rotations", rest_rotations, np.float64, (count, 4))
        try:
            self.rest_rotations = quat_normalize(rot)
        except ValueError:
            raise RigError("rest_rotations: zero-length quaternion") from None
        if inverse_bind_matrices is None:
            inverse_bind_matrices = np.linalg.inv(self.rest_world_matrices())
        self.inverse_bind_matrices = _array("inverse_bind_matrices", inverse_bind_matrices, np.float64, (count, 4, 4))
        if np.abs(np.linalg.det(self.inverse_bind_matrices[:, :3, :3])).min() < 1e-12:
            raise RigError("inverse_bind_matrices: singular matrix")
        projective = np.abs(self.inverse_bind_matrices[:, 3] - [0.0, 0.0, 0.0, 1.0]).max(axis=-1) > 1e-9
        if projective.any():  # skinning reads the top three rows: the bottom row was dropped silently
            j = int(np.argmax(projective))
            raise RigError(
                f"inverse_bind_matrices: joint {j} ({names[j]!r}) has bottom row "
                f"{self.inverse_bind_matrices[j, 3].tolist()}, not [0, 0, 0, 1] (not an affine transform)"
            )
        self.meshes = tuple(meshes)
        for m in self.meshes:
            if not isinstance(m, SkinnedMesh):
                raise RigError(f"meshes: expected SkinnedMesh, got {type(m).__name__}")
            if m.influence_joints.size and m.influence_joints.max() >= count:
                raise RigError(f"mesh {m.name!r} influence_joints: index {m.influence_joints.max()} >= {count} joints")
            if m.influence_joints.size and m.influence_joints.min() < 0:  # NumPy would wrap it to the last joint
                raise RigError(f"mesh {m.name!r} influence_joints: negative index {m.influence_joints.min()}")

    # -- topology ---------------------------------------------------------------------------------------
    @property
    def joint_count(self) -> int:
        return len(self.joint_names)

    def joint_index(self, name: str) -> int:
        """Index of the joint called ``name``; KeyError naming the known joints otherwise."""
        try:
            return self.joint_names.index(name)
        except ValueError:
            raise KeyError(f"no joint {name!r} in rig {self.name!r}") from None

    def children(self) -> list[list[int]]:
        """Child indices per joint."""
        out: list[list[int]] = [[] for _ in range(self.joint_count)]
        for j, p in enumerate(self.parents):
            if p >= 0:
                out[p].append(j)
        return out

    def depths(self) -> np.ndarray:
        """Tree depth per joint (root 0), shape (joint_count,)."""
        d = np.zeros(self.joint_count, dtype=np.int32)
        for j in range(1, self.joint_count):
            d[j] = d[self.parents[j]] + 1
        return d

    # -- poses --------------------------------------------------------------------------------------------
    def rest_world_transforms(self) -> tuple[np.ndarray, np.ndarray]:
        """World rest transforms: positions [m] (joint_count, 3) and rotations [quat xyzw] (joint_count, 4)."""
        pos = np.zeros((self.joint_count, 3))
        rot = np.zeros((self.joint_count, 4))
        for j, p in enumerate(self.parents):
            if p < 0:
                pos[j], rot[j] = self.rest_translations[j], self.rest_rotations[j]
            else:
                pos[j] = pos[p] + quat_rotate(rot[p], self.rest_translations[j])
                rot[j] = quat_multiply(rot[p], self.rest_rotations[j])
        return pos, rot

    def rest_world_matrices(self) -> np.ndarray:
        """World rest transforms as 4x4 matrices, shape (joint_count, 4, 4)."""
        pos, rot = self.rest_world_transforms()
        return transform_matrix(pos, rot)

    def bind_world_matrices(self) -> np.ndarray:
        """Joint world transforms at bind time (inverse of the inverse bind matrices), shape (joint_count, 4, 4)."""
        return np.linalg.inv(self.inverse_bind_matrices)

    def bone_lengths(self) -> np.ndarray:
        """Rest distance from each joint to its parent [m] (0 for the root), shape (joint_count,)."""
        return np.linalg.norm(np.where(self.parents[:, None] >= 0, self.rest_translations, 0.0), axis=-1)

    def height(self, up_axis: int = 2) -> float:
        """Extent along ``up_axis`` of the bind-pose meshes (or of the rest skeleton when meshless) [m].

        Bind points are in the units the inverse bind matrices take (a uniform scale there converts them: bind
        points in cm with matrices that scale by 0.01): each vertex counts at its dominant joint's scale, so the
        height is in the skeleton's metres (it read 100 times too tall, and the physics builder then found every
        bone too small to be a body).
        """
        if self.meshes and sum(m.vertex_count for m in self.meshes):
            scale = np.abs(np.linalg.det(self.inverse_bind_matrices[:, :3, :3])) ** (1.0 / 3.0)
            pts = []
            for m in self.meshes:
                dominant = m.influence_joints[np.arange(m.vertex_count), np.argmax(m.influence_weights, axis=1)]
                pts.append(m.points * scale[dominant][:, None])
            pts = np.concatenate(pts)
        else:
            pts = self.rest_world_transforms()[0]
        return float(pts[:, up_axis].max() - pts[:, up_axis].min())

    # -- meshes -------------------------------------------------------------------------------------------
    def merged_mesh(self) -> SkinnedMesh:
        """All meshes concatenated in order (vertex and triangle order kept), influences padded to the max count."""
        if len(self.meshes) == 1:
            return self.meshes[0]
        if not self.meshes:
            raise RigError(f"rig {self.name!r} has no skinned mesh")
        k = max(m.influence_count for m in self.meshes)
        pts, tris, ji, jw, offset = [], [], [], [], 0
        for m in self.meshes:
            pad = k - m.influence_count
            pts.append(m.points)
            tris.append(m.triangles + offset)
            ji.append(np.pad(m.influence_joints, ((0, 0), (0, pad))))
            jw.append(np.pad(m.influence_weights, ((0, 0), (0, pad))))
            offset += m.vertex_count
        return SkinnedMesh(
            "merged", np.concatenate(pts), np.concatenate(tris), np.concatenate(ji), np.concatenate(jw),
            joint_count=self.joint_count,
        )  # fmt: skip

    def __repr__(self) -> str:
        return f"Rig({self.name!r}, joints={self.joint_count}, meshes={list(self.meshes)})"


def _check_tree(parents: np.ndarray, names: tuple[str, ...]) -> None:
    """Single root, every parent listed before its child (so the root is joint 0 and there is no cycle)."""
    count = len(parents)
    if (parents < -1).any() or (parents >= count).any():
        bad = int(np.argwhere((parents < -1) | (parents >= count))[0, 0])
        raise RigError(f"parents[{bad}] = {parents[bad]} is out of range for {count} joints (-1 marks the root)")
    roots = np.flatnonzero(parents == -1)
    if len(roots) == 0:
        raise RigError("parents: no root joint (every joint has a parent, so the hierarchy has a cycle)")
    if len(roots) > 1:
        listed = ", ".join(repr(names[r]) for r in roots[:5])
        raise RigError(f"parents: several root joints ({listed}); a rig needs exactly one")
    for j in range(count):
        p = parents[j]
        if p == j:
            raise RigError(f"parents[{j}]: joint {names[j]!r} is its own parent (cycle)")
        if p >= 0 and p > j:
            # distinguish a cycle from a plain ordering problem
            seen, k = set(), j
            while k >= 0 and k not in seen:
                seen.add(k)
                k = parents[k]
            if k >= 0:
                raise RigError(f"parents: cycle through joint {names[j]!r}")
            raise RigError(
                f"parents[{j}] = {p}: joint {names[j]!r} is listed before its parent {names[p]!r}"
                " (joints must be in parents-first order)"
            )
