"""UsdSkel import: a Skeleton, the meshes bound to it and its SkelAnimations as a :class:`usd_io.Asset`.

Frames and units. A UsdSkel skeleton lives in its own *skeleton space*; the Skeleton prim's local-to-world
transform places it in the stage, whose length unit is ``metersPerUnit`` and whose up axis is Y or Z. We fold all
of that into one conversion ``C = R_up @ diag(metersPerUnit) @ skel_local_to_world`` and split it into a rigid part
``G`` and a uniform scale ``s`` (``C = G @ S``). Our world transforms are ``W' = C @ W @ S^-1``: lengths are
scaled by ``s`` everywhere, and the rigid part ``G`` is folded into the root joint's rest transform and motion
channels (other joints' local rotations are unchanged), the inverse bind matrices and the mesh points, as
:mod:`sim.rig` asks of importers. Skinned meshes are in skeleton space after their ``geomBindTransform`` (UsdSkel
ignores a skinned gprim's own transform), so their points get ``C`` too.

USD matrices act on row vectors; we transpose them to our column-vector convention. USD quaternions are
(real, imaginary) by constructor but (imaginary, real) in memory, so numpy views of ``VtQuatfArray`` are xyzw.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np

from sim import Motion, Rig, RigError, SkinnedMesh
from sim.rig import WEIGHT_SUM_TOLERANCE, RigWarning
from sim.rotations import axis_angle_to_quat, matrix_to_quat, quat_multiply, quat_rotate, transform_matrix

from ._files import NOT_REGULAR
from ._limits import MAX_MAGNITUDE, not_affine, too_large
from ._usd_names import unique_identifiers
from .asset import Asset
from .errors import InputError

__all__ = ["UsdSkelWarning", "read_usdskel"]

RIGID_TOLERANCE = 1e-4
"""Largest deviation of R^T R from identity (per entry) accepted for a joint's rest transform or the stage
conversion; beyond it the transform carries scale or shear, which the rig cannot represent."""

SINGULAR_TOLERANCE = 1e-9
"""A geomBindTransform whose 3x3 part has ``|det| <= SINGULAR_TOLERANCE * (product of its column lengths)`` is
singular: it flattens the mesh (the ratio is 1 for any rotation and scale, 0 for a collapsed axis)."""

ANIMATION_SCALE_TOLERANCE = 2e-3
"""Animation scales further than this from 1 are reported (and ignored); half3 rounds 1 to within ~5e-4."""

TRANSLATION_MATCH_TOLERANCE = 1e-6
"""Relative difference under which animated non-root translations count as the rest translations (float32)."""

FPS_CUSTOM_DATA_KEY = "kinedistill:fps"

TIME_ORIGIN_CUSTOM_DATA_KEY = "kinedistill:timeOrigin"
"""Root layer customLayerData key holding the time code of clip time 0 (written by write_usdskel); without it
(foreign stages) the stage's startTimeCode is time 0."""


class UsdSkelWarning(UserWarning):
    """Part of a UsdSkel stage was ignored or approximated on import (e.g. animation scales)."""


def _np(value, dtype=np.float64) -> np.ndarray:
    return np.array(value, dtype=dtype)


VECTOR3_ARRAY_TYPES = ("float3[]", "half3[]", "double3[]")
"""Declared types accepted for UsdSkelAnimation translations and scales (the schema's float3[] / half3[] and the
other precisions; role types of the same value type, e.g. vector3f[], count as it)."""

QUAT_ARRAY_TYPES = ("quatf[]", "quath[]", "quatd[]")
"""Declared types accepted for UsdSkelAnimation rotations (the schema's quatf[] and the other precisions). A
float4[] is refused: it stores (real, i, j, k) in another component order than a quaternion's memory layout."""


def _check_type(attr, path: Path, field: str, allowed: tuple[str, ...]) -> None:
    """InputError naming ``field`` unless every spec of ``attr`` is declared with one of the ``allowed`` value types
    (SdfValueTypeName strings such as ``"float3[]"``; a role type of the same values, e.g. ``vector3f[]``, counts).

    A schema attribute reports its schema type whatever the layers declare, and its values are read as numbers
    whatever their type: without this check a float2[] translation or a float4[] rotation would load as wrong data
    (pairs regrouped into triples, quaternion components in another order)."""
    from pxr import Sdf

    wanted = {Sdf.ValueTypeNames.Find(t).type for t in allowed}
    for spec in attr.GetPropertyStack():
        declared = spec.typeName
        if declared.type not in wanted:
            raise InputError(
                path, field, f"declared as {str(declared) or 'an unknown type'}, expected {' or '.join(allowed)}"
            )


def _usd_matrices(value) -> np.ndarray:
    """VtMatrix4dArray (row-vector convention) -> column-vector matrices, shape (N, 4, 4)."""
    return _np(value).reshape(-1, 4, 4).transpose(0, 2, 1)


def _usd_matrix(value) -> np.ndarray:
    return _np(value).reshape(4, 4).T


def _authored(attr):
    """The attribute's default value, else its value at the earliest time sample, else None."""
    from pxr import Usd

    if not attr or not attr.HasAuthoredValue():
        return None
    value = attr.Get()
    if value is None:
        value = attr.Get(Usd.TimeCode.EarliestTime())
    return value


class _Conversion:
    """``C = G @ S``: a rigid transform ``G`` (rotation ``q`` [xyzw], translation ``t`` [m]) after a uniform scale."""

    def __init__(self, matrix: np.ndarray, path: Path, field: str):
        m3 = matrix[:3, :3]
        det = float(np.linalg.det(m3))
        if not np.isfinite(det) or det <= 0:
            raise InputError(path, field, f"skeleton-to-world transform is singular or mirrored (det {det:.3g})")
        self.scale = det ** (1.0 / 3.0)
        rot = m3 / self.scale
        if np.abs(rot.T @ rot - np.eye(3)).max() > RIGID_TOLERANCE:
            raise InputError(path, field, "skeleton-to-world transform has non-uniform scale or shear (unsupported)")
        self.rotation = matrix_to_quat(rot)
        self.translation = matrix[:3, 3].copy()
        self.matrix = matrix

    def local(
        self, parents: np.ndarray, translations: np.ndarray, rotations: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Converts local joint transforms: lengths scaled, ``G`` applied to the roots (whose local = skeleton space).

        Args:
            parents: parent per joint (-1 for roots), shape (J,).
            translations: local translations in stage units, shape (..., J, 3).
            rotations: local rotations [xyzw], shape (..., J, 4).

        Returns:
            converted copies of both, same shapes.
        """
        t = translations * self.scale
        q = np.array(rotations, dtype=np.float64)
        roots = parents < 0
        t[..., roots, :] = quat_rotate(self.rotation, t[..., roots, :]) + self.translation
        q[..., roots, :] = quat_multiply(np.broadcast_to(self.rotation, q[..., roots, :].shape), q[..., roots, :])
        return t, q

    def points(self, points: np.ndarray) -> np.ndarray:
        return points @ self.matrix[:3, :3].T + self.matrix[:3, 3]

    def world_matrices(self, matrices: np.ndarray) -> np.ndarray:
        """Skeleton-space joint matrices (N, 4, 4) -> ``C @ W @ S^-1``."""
        out = self.matrix @ matrices
        out[:, :, :3] /= self.scale
        return out


def _rigid(matrix: np.ndarray, path: Path, field: str, joint: str) -> tuple[np.ndarray, np.ndarray]:
    """Translation (3,) and rotation [xyzw] (4,) of a rigid 4x4 matrix; InputError naming ``field`` otherwise."""
    if not np.all(np.isfinite(matrix)):
        raise InputError(path, field, f"joint {joint!r}: non-finite matrix")
    rot = matrix[:3, :3]
    if np.abs(rot.T @ rot - np.eye(3)).max() > RIGID_TOLERANCE or np.linalg.det(rot) <= 0:
        scale = np.linalg.norm(rot, axis=0)
        raise InputError(
            path, field, f"joint {joint!r}: transform is not rigid (column scales {np.round(scale, 6).tolist()});"
            " scaled, sheared or mirrored joints are not supported"
        )  # fmt: skip
    return matrix[:3, 3].copy(), matrix_to_quat(rot)


def _tf_reason(error: Exception, limit: int = 300) -> str:
    """The messages of a ``Tf.ErrorException`` without its C++ locations (``Error in 'f' at line n in file x : 'm'``)
    and the generic 'Failed to open layer'; a parser's template names are cut to where it failed."""
    detail = " ".join(str(error).split())
    messages = re.findall(r"in file \S+ : '(.*?)'(?= Error in |$)", detail)
    messages = [m for m in messages if not m.startswith("Failed to open layer")] or [detail]
    text = " / ".join(re.sub(r"parse error matching .*?> at '", "parse error at '", m) for m in messages)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _open_stage(path: Path):
    from pxr import Tf, Usd

    if path.exists() and not path.is_file():  # USD would read a device or wait on a pipe
        raise InputError(path, "file", NOT_REGULAR)
    try:
        stage = Usd.Stage.Open(str(path), Usd.Stage.LoadAll)
    except Tf.ErrorException as e:
        raise InputError(path, "file", f"cannot open as a USD stage ({_tf_reason(e)})") from None
    if stage is None:
        raise InputError(path, "file", "cannot open as a USD stage")
    return stage


def _enclosing_skel_root(prim):
    """The nearest SkelRoot ancestor of ``prim``, or None."""
    from pxr import UsdSkel

    root = prim.GetParent()
    while root and not root.IsA(UsdSkel.Root):
        root = root.GetParent()
    return root if root else None


def _find_skeleton(stage, path: Path, skeleton: str | None):
    """The Skeleton prim to import and its enclosing SkelRoot prim.

    Without ``skeleton``, the candidates are the Skeletons inside a SkelRoot, in traversal order; those under the
    stage's defaultPrim are preferred (the asset's declared entry point). When several remain, the first is read
    and a :class:`UsdSkelWarning` names it, the others and the ``skeleton=`` argument that chooses.
    """
    from pxr import Sdf, Usd, UsdSkel

    predicate = Usd.TraverseInstanceProxies(Usd.PrimDefaultPredicate)
    everything = list(Usd.PrimRange.Stage(stage, predicate))
    candidates = [(p, r) for p in everything if p.IsA(UsdSkel.Skeleton) for r in [_enclosing_skel_root(p)] if r]

    def listing() -> str:
        return ", ".join(str(p.GetPath()) for p, _ in candidates) or "none"

    if skeleton is not None:
        sdf_path = Sdf.Path(skeleton) if Sdf.Path.IsValidPathString(skeleton) else None
        if sdf_path is None or not (sdf_path.IsAbsolutePath() and sdf_path.IsPrimPath()):
            raise InputError(path, skeleton, f"not an absolute prim path; Skeletons in the stage: {listing()}")
        prim = stage.GetPrimAtPath(skeleton)
        if not prim or not prim.IsA(UsdSkel.Skeleton):
            raise InputError(path, skeleton, f"no Skeleton prim at this path; Skeletons in the stage: {listing()}")
        root = _enclosing_skel_root(prim)
        if root is None:
            raise InputError(path, skeleton, "the Skeleton is not inside a SkelRoot")
        return prim, root
    if not candidates:
        roots = [p for p in everything if p.IsA(UsdSkel.Root)]
        if not roots:
            raise InputError(path, "SkelRoot", "no SkelRoot prim in the stage")
        raise InputError(path, str(roots[0].GetPath()), "no Skeleton prim under the SkelRoot")
    default = stage.GetDefaultPrim()
    preferred = [(p, r) for p, r in candidates if default and p.GetPath().HasPrefix(default.GetPath())]
    chosen = preferred or candidates
    if len(chosen) > 1:
        prim = chosen[0][0]
        others = ", ".join(str(p.GetPath()) for p, _ in chosen[1:])
        scope = f"under the defaultPrim {default.GetPath()}" if preferred else "in the stage"
        warnings.warn(
            f"{path}: {prim.GetPath()}: {len(chosen)} Skeletons {scope}; read this one (the first in traversal"
            f" order), not {others}; choose with skeleton='<Skeleton prim path>' (--skeleton)",
            UsdSkelWarning,
            3,
        )
    return chosen[0]


class _Skeleton:
    """Joint topology, rest pose and bind pose of a UsdSkel Skeleton, in our frame."""

    def __init__(self, prim, path: Path, conversion: _Conversion):
        from pxr import UsdSkel

        skel = UsdSkel.Skeleton(prim)
        where = str(prim.GetPath())
        tokens = [str(t) for t in (skel.GetJointsAttr().Get() or [])]
        if not tokens:
            raise InputError(path, f"{where}.joints", "no joints authored")
        if len(set(tokens)) != len(tokens):
            dup = next(t for t in tokens if tokens.count(t) > 1)
            raise InputError(path, f"{where}.joints", f"joint {dup!r} is listed twice")
        parents = np.array(UsdSkel.Topology(tokens).GetParentIndices(), dtype=np.int64)
        for j, p in enumerate(parents):
            if p > j:
                raise InputError(
                    path, f"{where}.joints", f"joint {tokens[j]!r} is listed before its parent {tokens[p]!r}"
                )
        count = len(tokens)
        self.tokens = tokens
        self.index = {t: j for j, t in enumerate(tokens)}
        # joint paths are unique, their last elements need not be (``arm_l/end``, ``arm_r/end``)
        names = unique_identifiers([t.rsplit("/", 1)[-1] for t in tokens])
        authored_names = skel.GetJointNamesAttr().Get()
        if authored_names is not None and len(authored_names) == count and len(set(authored_names)) == count:
            names = [str(n) for n in authored_names]
        elif authored_names is not None and len(authored_names):
            warnings.warn(
                f"{path}: {where}.jointNames: {len(authored_names)} names for {count} joints"
                f"{'' if len(authored_names) != count else ', not unique'}: joints named after their paths",
                UsdSkelWarning,
                3,
            )

        bind = skel.GetBindTransformsAttr().Get()
        rest = skel.GetRestTransformsAttr().Get()
        if bind is not None and not len(bind):  # Pixar's skinning fails on it: the rest pose would bind silently
            raise InputError(path, f"{where}.bindTransforms", f"0 matrices for {count} joints (authored empty)")
        if rest is not None and not len(rest):
            warnings.warn(f"{path}: {where}.restTransforms: authored empty (0 matrices for {count} joints): the rest "
                          "pose is taken from bindTransforms", UsdSkelWarning, 3)  # fmt: skip
        bind = _usd_matrices(bind) if bind is not None else None
        rest = _usd_matrices(rest) if rest is not None and len(rest) else None
        if bind is None and rest is None:
            raise InputError(path, f"{where}.restTransforms", "neither restTransforms nor bindTransforms authored")
        for field, value in (("bindTransforms", bind), ("restTransforms", rest)):
            if value is not None and len(value) != count:
                raise InputError(path, f"{where}.{field}", f"{len(value)} matrices for {count} joints")
            if value is not None and not np.all(np.isfinite(value)):
                raise InputError(path, f"{where}.{field}", "non-finite matrix entries")
            if value is not None and too_large(value).any():
                raise InputError(path, f"{where}.{field}", f"matrix entries out of range (> {MAX_MAGNITUDE:g})")
            if value is not None:  # USD's row-vector matrices: the 4th column, here the 4th row
                off = not_affine(value)
                if off.any():
                    j = int(np.argmax(off))
                    column = value[j, 3].tolist()
                    raise InputError(path, f"{where}.{field}", f"joint {names[j]!r}: the matrix's 4th column {column}"
                                     " is not (0, 0, 0, 1) (not an affine transform)")  # fmt: skip
        rest_field = f"{where}.restTransforms"
        if rest is None:  # rest pose = bind pose, relative to the parent
            rest_field = f"{where}.bindTransforms"
            rest = np.array([bind[j] if p < 0 else np.linalg.solve(bind[p], bind[j]) for j, p in enumerate(parents)])

        # several roots (allowed by UsdSkel): add one identity root above them
        roots = np.flatnonzero(parents < 0)
        self.offset = 1 if len(roots) > 1 else 0
        if self.offset:
            names = [unique_identifiers(["root"], reserved=names)[0], *names]
            parents = np.concatenate([[-1], np.where(parents < 0, 0, parents + 1)])
            rest = np.concatenate([np.eye(4)[None], rest])
            if bind is not None:
                bind = np.concatenate([np.eye(4)[None], bind])
        self.names = names
        self.parents = parents

        t = np.zeros((len(names), 3))
        q = np.zeros((len(names), 4))
        for j, m in enumerate(rest):
            t[j], q[j] = _rigid(m, path, rest_field, names[j])
        self.usd_rest_translations, self.usd_rest_rotations = t, q  # in the stage's skeleton space and unit
        self.rest_translations, self.rest_rotations = conversion.local(parents, t, q)
        if bind is None:
            self.inverse_bind = None  # the rig derives it from the (converted) rest pose
        else:
            world = conversion.world_matrices(bind)
            dets = np.linalg.det(world[:, :3, :3])
            if not np.all(np.abs(dets) > 1e-12):
                j = int(np.argmax(~(np.abs(dets) > 1e-12)))
                joint = tokens[j - self.offset] if j >= self.offset else names[j]
                raise InputError(path, f"{where}.bindTransforms", f"joint {joint!r}: the matrix is singular")
            self.inverse_bind = np.linalg.inv(world)
        self.where = where


def _triangulate(counts: np.ndarray, indices: np.ndarray, path: Path, where: str, left_handed: bool) -> np.ndarray:
    """Fan triangulation ``(v0, vi, vi+1)`` of each polygon, keeping vertex order; shape (T, 3)."""
    if (counts < 3).any():
        f = int(np.argmax(counts < 3))
        raise InputError(path, f"{where}.faceVertexCounts", f"face {f} has {counts[f]} vertices (< 3)")
    if counts.sum() != len(indices):
        raise InputError(
            path, f"{where}.faceVertexIndices", f"{len(indices)} indices but faceVertexCounts sum to {counts.sum()}"
        )
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    face = np.repeat(np.arange(len(counts)), counts - 2)
    corner = np.arange(len(face)) - np.repeat(np.cumsum(counts - 2) - (counts - 2), counts - 2) + 1
    first = indices[starts[face]]
    tris = np.stack([first, indices[starts[face] + corner], indices[starts[face] + corner + 1]], axis=-1)
    return tris[:, [0, 2, 1]] if left_handed else tris


def _read_mesh(skinning_query, skeleton: _Skeleton, conversion: _Conversion, path: Path) -> SkinnedMesh | None:
    """The skinned mesh of ``skinning_query`` in our frame; None (with a warning) for a skinned prim that is no Mesh
    or a Mesh without faces.

    Warns:
        UsdSkelWarning: blend shapes (ignored); joint weights that do not sum to 1 (renormalized, as the rig's
            linear blend skinning needs; Pixar's UsdSkel skins with them as authored); a geomBindTransform that
            varies over time (its earliest value is used); a mesh without faces (skipped: None).

    Raises:
        InputError: a skinning method other than classicLinear, missing or inconsistent points, faces or
            influences, attributes declared with another type than the schema's (points point3f[], faces int[],
            jointIndices int[], jointWeights float[], geomBindTransform matrix4d), a non-finite, out-of-range or
            singular geomBindTransform.
    """
    from pxr import Usd, UsdGeom, UsdSkel

    prim = skinning_query.GetPrim()
    where = str(prim.GetPath())
    if not prim.IsA(UsdGeom.Mesh):
        warnings.warn(f"{path}: {where}: skinned {prim.GetTypeName()} is not a Mesh; ignored", UsdSkelWarning, 2)
        return None
    method = str(skinning_query.GetSkinningMethod())
    if method != UsdSkel.Tokens.classicLinear:  # Pixar's dual-quaternion skinning differs by ~1% of the height
        raise InputError(
            path,
            f"{where}.skel:skinningMethod",
            f"{method} skinning is not supported; the toolkit skins with linear blend skinning (classicLinear)",
        )
    if skinning_query.HasBlendShapes():
        shapes = [str(t) for t in (skinning_query.GetBlendShapeOrder() or [])]
        listed = f" ({', '.join(map(repr, shapes[:5]))}{' ...' if len(shapes) > 5 else ''})" if shapes else ""
        warnings.warn(
            f"{path}: {where}.skel:blendShapes: {len(shapes)} blend shape(s){listed} ignored; the mesh is read in"
            " its base shape (Pixar's UsdSkel adds the weighted shape offsets before skinning)",
            UsdSkelWarning,
            2,
        )
    mesh = UsdGeom.Mesh(prim)
    points = _authored(mesh.GetPointsAttr())
    if points is None or len(points) == 0:
        raise InputError(path, f"{where}.points", "no points authored")
    _check_type(mesh.GetPointsAttr(), path, f"{where}.points", ("point3f[]", "float3[]"))
    points = _np(points).reshape(-1, 3)
    if not np.all(np.isfinite(points)):
        raise InputError(path, f"{where}.points", f"non-finite point {int(np.argmax(~np.isfinite(points).all(1)))}")
    huge = too_large(points).any(1)
    if huge.any():
        bad = int(np.argmax(huge))
        raise InputError(path, f"{where}.points", f"point {bad} out of range (> {MAX_MAGNITUDE:g})")
    v = len(points)
    for attr in (mesh.GetFaceVertexCountsAttr(), mesh.GetFaceVertexIndicesAttr()):
        if attr.HasAuthoredValue():
            _check_type(attr, path, f"{where}.{attr.GetName()}", ("int[]",))
    counts = _np(_authored(mesh.GetFaceVertexCountsAttr()) or [], np.int64)
    indices = _np(_authored(mesh.GetFaceVertexIndicesAttr()) or [], np.int64)
    if indices.size and (indices.min() < 0 or indices.max() >= v):
        raise InputError(path, f"{where}.faceVertexIndices", f"vertex index outside [0, {v})")
    if not len(counts):  # as the glTF reader skips a mesh without triangles
        warnings.warn(
            f"{path}: {where}.faceVertexCounts: the mesh has {v} points but no faces: skipped", UsdSkelWarning, 2
        )
        return None
    left = mesh.GetOrientationAttr().Get() == UsdGeom.Tokens.leftHanded
    triangles = _triangulate(counts, indices, path, where, left)
    holes = _np(_authored(mesh.GetHoleIndicesAttr()) or [], np.int64)
    if holes.size:  # faces renderers leave out: contact and intersection checks must not see them either
        if holes.min() < 0 or holes.max() >= len(counts):
            raise InputError(path, f"{where}.holeIndices", f"face index outside [0, {len(counts)})")
        face = np.repeat(np.arange(len(counts)), counts - 2)
        triangles = triangles[~np.isin(face, holes)]
        if not len(triangles):
            warnings.warn(f"{path}: {where}.holeIndices: every face is a hole: skipped", UsdSkelWarning, 2)
            return None

    primvars = {
        "jointIndices": skinning_query.GetJointIndicesPrimvar(),
        "jointWeights": skinning_query.GetJointWeightsPrimvar(),
    }
    primvar_types = {"jointIndices": "int[]", "jointWeights": "float[]"}  # UsdSkelBindingAPI's (Pixar's only)
    for name, primvar in primvars.items():  # Pixar's query fails a C++ verification on a missing one
        if not primvar or not primvar.HasAuthoredValue():
            other = next(n for n in primvars if n != name)
            raise InputError(path, f"{where}.primvars:skel:{name}", f"not authored ({other} is)")
        _check_type(primvar.GetAttr(), path, f"{where}.primvars:skel:{name}", (primvar_types[name],))
    influences = skinning_query.ComputeJointInfluences(Usd.TimeCode.Default())
    if influences is None:
        influences = skinning_query.ComputeJointInfluences(Usd.TimeCode.EarliestTime())
    if influences is None:
        described = []
        for name, primvar in primvars.items():
            value = primvar.ComputeFlattened()
            described.append(
                f"{name}: {0 if value is None else len(value)} values, {primvar.GetInterpolation()} interpolation,"
                f" elementSize {primvar.GetElementSize()}"
            )
        raise InputError(
            path,
            f"{where}.primvars:skel:jointWeights",
            f"jointIndices and jointWeights disagree ({'; '.join(described)}): both need the same interpolation and"
            f" elementSize, with elementSize values per point ({v} points) for vertex interpolation, or elementSize"
            " values for constant",
        )
    joint_ids, weights = _np(influences[0], np.int64), _np(influences[1])
    k = int(skinning_query.GetNumInfluencesPerComponent())
    if np.isnan(weights).any():
        bad = int(np.argmax(np.isnan(weights)))
        raise InputError(path, f"{where}.primvars:skel:jointWeights", f"NaN weight at element {bad}")
    if not np.all(np.isfinite(weights)):
        raise InputError(path, f"{where}.primvars:skel:jointWeights", "infinite weight")
    rigid = skinning_query.IsRigidlyDeformed()
    expected = k if rigid else v * k
    for name, arr in (("jointIndices", joint_ids), ("jointWeights", weights)):
        if len(arr) != expected:
            mode = "constant" if rigid else f"vertex ({v} points)"
            raise InputError(
                path, f"{where}.primvars:skel:{name}", f"{len(arr)} values; {mode} interpolation with"
                f" elementSize {k} needs {expected}"
            )  # fmt: skip
    joint_ids, weights = joint_ids.reshape(-1, k), weights.reshape(-1, k)
    if rigid:
        joint_ids, weights = np.repeat(joint_ids, v, axis=0), np.repeat(weights, v, axis=0)

    order = skinning_query.GetJointOrder()
    if order is not None and len(order):
        lookup = []
        for token in order:
            if str(token) not in skeleton.index:
                raise InputError(path, f"{where}.skel:joints", f"joint {str(token)!r} is not in {skeleton.where}")
            lookup.append(skeleton.index[str(token)])
        local_count = len(lookup)
    else:
        lookup, local_count = list(range(len(skeleton.tokens))), len(skeleton.tokens)
    used = weights > 0
    if used.any() and (joint_ids[used].min() < 0 or joint_ids[used].max() >= local_count):
        raise InputError(
            path, f"{where}.primvars:skel:jointIndices", f"joint index outside [0, {local_count}) with nonzero weight"
        )
    joint_ids = np.where(used, np.asarray(lookup)[np.clip(joint_ids, 0, local_count - 1)], 0) + skeleton.offset

    # the bind transform at the earliest time: its default when not sampled, else its first sample (one authored
    # only as time samples has no default value, which reads as identity), as Pixar skins with it at every time
    gbt_field = f"{where}.primvars:skel:geomBindTransform"
    gbt_attr = skinning_query.GetGeomBindTransformAttr()
    if gbt_attr and gbt_attr.HasAuthoredValue():
        _check_type(gbt_attr, path, gbt_field, ("matrix4d",))
    gbt = _usd_matrix(skinning_query.GetGeomBindTransform(Usd.TimeCode.EarliestTime()))
    if not np.all(np.isfinite(gbt)):
        raise InputError(path, gbt_field, "non-finite matrix entries")
    if too_large(gbt).any():
        raise InputError(path, gbt_field, f"matrix entries out of range (> {MAX_MAGNITUDE:g})")
    if not_affine(gbt):  # Pixar skins with the whole matrix (divide by w): the top three rows alone were 0.9 m off
        raise InputError(path, gbt_field, f"the matrix's 4th column {gbt[3].tolist()} is not (0, 0, 0, 1) (not an "
                         "affine transform)")  # fmt: skip
    gbt_det = float(np.linalg.det(gbt[:3, :3]))
    if not abs(gbt_det) > SINGULAR_TOLERANCE * float(np.prod(np.linalg.norm(gbt[:3, :3], axis=0))):
        raise InputError(
            path, gbt_field, f"the matrix is singular (determinant {gbt_det:.3g}): it would collapse the mesh's points"
        )
    if gbt_attr and gbt_attr.GetNumTimeSamples() > 1:
        samples = [_np(gbt_attr.Get(c)) for c in gbt_attr.GetTimeSamples()]
        if any(not np.array_equal(m, samples[0]) for m in samples[1:]):
            warnings.warn(
                f"{path}: {gbt_field}: varies over time; its earliest value is used at every time",
                UsdSkelWarning,
                2,
            )
    points = points @ gbt[:3, :3].T + gbt[:3, 3]
    if np.linalg.det(gbt[:3, :3]) < 0:  # a mirroring bind transform turns the faces inside out: flip them back
        triangles = triangles[:, ::-1].copy()
    # the rig renormalizes weights that do not sum to 1 (with a RigWarning naming neither file nor field): say so
    # here, with the field (Pixar's UsdSkel skins with the weights as authored)
    totals = weights.sum(axis=1)
    off = np.abs(totals - 1.0) > WEIGHT_SUM_TOLERANCE
    renormalized = bool(off.any()) and not (weights < 0).any() and bool((totals > 0).all())
    if renormalized:
        warnings.warn(
            f"{path}: {where}.primvars:skel:jointWeights: the weights of {int(off.sum())} of {len(totals)} vertices"
            f" sum to {totals[off].min():.6g} .. {totals[off].max():.6g}, not 1 (tolerance {WEIGHT_SUM_TOLERANCE:g}):"
            " renormalized (Pixar's UsdSkel skins with them as authored)",
            UsdSkelWarning,
            2,
        )
    name = prim.GetDisplayName() or prim.GetName()
    try:
        with warnings.catch_warnings():
            if renormalized:  # reported above, with file and field
                warnings.simplefilter("ignore", RigWarning)
            return SkinnedMesh(name, conversion.points(points), triangles, joint_ids, weights)
    except RigError as e:
        raise InputError(path, where, str(e)) from None


class _Placement:
    """The Skeleton prim's stage placement over time (its own and its ancestors' xformOps).

    A SkelRoot moved by time samples (root motion on the prim, as some exporters write it) moves the whole
    skeleton; we fold that motion into the root joint's channels frame by frame.
    """

    def __init__(self, prim, base: _Conversion, conversion_at, path: Path, field: str):
        from pxr import UsdGeom

        codes: set[float] = set()
        p = prim
        while p and not p.IsPseudoRoot():
            xf = UsdGeom.Xformable(p)
            if xf and xf.TransformMightBeTimeVarying():
                codes.update(float(c) for c in xf.GetTimeSamples())
            p = p.GetParent()
        self.codes = sorted(codes)
        self.base, self.conversion_at, self.path, self.field = base, conversion_at, path, field

    def at(self, code: float) -> _Conversion:
        """The conversion at ``code``; refuses a placement whose scale changes (the rig's lengths are fixed)."""
        if not self.codes:
            return self.base
        conv = self.conversion_at(code)
        if abs(conv.scale - self.base.scale) > 1e-6 * self.base.scale:
            raise InputError(
                self.path,
                self.field,
                f"the skeleton's placement scales over time ({self.base.scale:.6g} at the earliest time,"
                f" {conv.scale:.6g} at time {code}): an animated scale is not supported",
            )
        return conv


def _time_origin(stage, path: Path) -> float:
    """The time code of clip time 0: the root layer's ``kinedistill:timeOrigin`` (our writer's ``start_time_code``,
    which differs from startTimeCode when a clip has keys before time 0), else the stage's startTimeCode."""
    data = stage.GetRootLayer().customLayerData
    if TIME_ORIGIN_CUSTOM_DATA_KEY not in data:
        return float(stage.GetStartTimeCode())
    origin = data[TIME_ORIGIN_CUSTOM_DATA_KEY]
    field = f"customLayerData:{TIME_ORIGIN_CUSTOM_DATA_KEY}"
    if isinstance(origin, bool) or not isinstance(origin, int | float) or not np.isfinite(origin):
        raise InputError(path, field, f"must be a finite number, got {origin!r}")
    if too_large(origin):
        raise InputError(path, field, f"out of range (> {MAX_MAGNITUDE:g}), got {origin!r}")
    return float(origin)


def _sample(attr, code: float, path: Path, field: str) -> np.ndarray:
    """``attr``'s value at time code ``code`` as float64; InputError naming ``field`` and the time code when the
    value there is blocked (a ``None`` time sample, held until the next sample)."""
    value = attr.Get(code)
    if value is None:
        raise InputError(path, field, f"no value at time code {code} (a blocked time sample, None)")
    return _np(value)


def _read_animation(anim_prim, skeleton: _Skeleton, placement: _Placement, stage, path: Path) -> Motion:
    from pxr import UsdSkel

    anim = UsdSkel.Animation(anim_prim)
    where = str(anim_prim.GetPath())
    tokens = [str(t) for t in (anim.GetJointsAttr().Get() or [])]
    if len(set(tokens)) != len(tokens):
        dup = next(t for t in tokens if tokens.count(t) > 1)
        raise InputError(path, f"{where}.joints", f"joint {dup!r} is listed twice")
    unknown = [t for t in tokens if t not in skeleton.index]
    if unknown:
        warnings.warn(
            f"{path}: {where}.joints: {len(unknown)} joint(s) not in {skeleton.where} ignored:"
            f" {', '.join(map(repr, unknown[:5]))}{' ...' if len(unknown) > 5 else ''}",
            UsdSkelWarning,
            3,
        )
    targets = [(i, skeleton.index[t] + skeleton.offset) for i, t in enumerate(tokens) if t in skeleton.index]
    attrs = {"translations": anim.GetTranslationsAttr(), "rotations": anim.GetRotationsAttr()}
    scales_attr = anim.GetScalesAttr()
    codes = {float(c) for a in (*attrs.values(), scales_attr) if a and a.HasAuthoredValue() for c in a.GetTimeSamples()}
    codes.update(placement.codes)
    codes = sorted(codes)
    missing = [n for n, a in (*attrs.items(), ("scales", scales_attr)) if not (a and a.HasAuthoredValue())]
    if missing and tokens:
        warnings.warn(
            f"{path}: {where}: {', '.join(missing)} not authored; the animated joints keep their rest values there"
            " (Pixar's UsdSkel ignores such an animation)",
            UsdSkelWarning,
            2,
        )
    for key, attr, allowed in (
        ("translations", attrs["translations"], VECTOR3_ARRAY_TYPES),
        ("rotations", attrs["rotations"], QUAT_ARRAY_TYPES),
        ("scales", scales_attr, VECTOR3_ARRAY_TYPES),
    ):
        if attr and attr.HasAuthoredValue():
            _check_type(attr, path, f"{where}.{key}", allowed)
    tcps = stage.GetTimeCodesPerSecond()
    if not np.isfinite(tcps) or tcps <= 0:
        raise InputError(path, "timeCodesPerSecond", f"must be positive, got {tcps}")
    if too_large(tcps) or tcps < 1.0 / MAX_MAGNITUDE:
        raise InputError(
            path, "timeCodesPerSecond", f"out of range [{1.0 / MAX_MAGNITUDE:g}, {MAX_MAGNITUDE:g}], got {tcps:g}"
        )
    start = _time_origin(stage, path)
    if not codes:
        codes = [start]
    frame_count, joint_count = len(codes), len(skeleton.names)
    trans = np.broadcast_to(skeleton.usd_rest_translations, (frame_count, joint_count, 3)).copy()
    rot = np.broadcast_to(skeleton.usd_rest_rotations, (frame_count, joint_count, 4)).copy()
    src = np.array([i for i, _ in targets], dtype=np.int64)
    dst = np.array([j for _, j in targets], dtype=np.int64)
    for key, out, width in (("translations", trans, 3), ("rotations", rot, 4)):
        attr = attrs[key]
        if not attr or not attr.HasAuthoredValue():
            continue
        for f, code in enumerate(codes):
            value = _sample(attr, code, path, f"{where}.{key}").reshape(-1, width)
            if len(value) != len(tokens):
                raise InputError(path, f"{where}.{key}", f"{len(value)} values for {len(tokens)} joints at time {code}")
            if not np.all(np.isfinite(value)):
                raise InputError(path, f"{where}.{key}", f"non-finite value at time {code}")
            if too_large(value).any():
                raise InputError(path, f"{where}.{key}", f"value out of range (> {MAX_MAGNITUDE:g}) at time {code}")
            out[f, dst] = value[src]
    if scales_attr and scales_attr.HasAuthoredValue():
        worst = 0.0
        for code in codes:
            value = _sample(scales_attr, code, path, f"{where}.scales").reshape(-1, 3)
            if len(value) != len(tokens):
                raise InputError(
                    path, f"{where}.scales", f"{len(value)} values for {len(tokens)} joints at time {code}"
                )
            if not np.all(np.isfinite(value)):
                raise InputError(path, f"{where}.scales", f"non-finite value at time {code}")
            worst = max(worst, float(np.abs(value - 1.0).max(initial=0.0)))
        if worst > ANIMATION_SCALE_TOLERANCE:
            warnings.warn(f"{path}: {where}.scales: joint scales (up to {worst:.3g} off 1) ignored", UsdSkelWarning, 2)
    norms = np.linalg.norm(rot, axis=-1, keepdims=True)
    if (norms < 1e-12).any():
        frame, joint = np.argwhere(norms[..., 0] < 1e-12)[0]
        raise InputError(path, f"{where}.rotations", f"zero-length quaternion at time {codes[frame]}, joint {joint}")
    rot /= norms

    if placement.codes:  # an animated placement: each frame's own conversion
        for f, code in enumerate(codes):
            trans[f], rot[f] = placement.at(code).local(skeleton.parents, trans[f], rot[f])
    else:
        trans, rot = placement.base.local(skeleton.parents, trans, rot)
    non_root = skeleton.parents >= 0
    animated_t = not np.allclose(
        trans[:, non_root], skeleton.rest_translations[non_root], rtol=TRANSLATION_MATCH_TOLERANCE, atol=1e-9
    )
    fps = anim_prim.GetCustomDataByKey(FPS_CUSTOM_DATA_KEY)
    fps_field = f"{where}.customData:{FPS_CUSTOM_DATA_KEY}"
    if isinstance(fps, bool) or not isinstance(fps, int | float) or not np.isfinite(fps) or fps <= 0:  # True: 1
        spacing = np.diff(codes)
        if len(spacing) and np.allclose(spacing, spacing[0], rtol=1e-6, atol=0.0):
            fps = tcps / spacing[0]  # evenly sampled: its sampling rate (framesPerSecond is a playback hint)
            fps_field = f"{where}.timeSamples"
        elif stage.HasAuthoredMetadata("framesPerSecond"):
            fps, fps_field = stage.GetFramesPerSecond(), "framesPerSecond"
        else:
            fps, fps_field = tcps, "timeCodesPerSecond"
    times = (np.asarray(codes) - start) / tcps
    if not np.all(np.isfinite(times)) or too_large(times).any():
        code = codes[int(np.argmax(~np.isfinite(times) | too_large(times)))]
        raise InputError(
            path, where, f"time code {code} is {(code - start) / tcps:g} s from the time origin {start} at"
            f" {tcps:g} time codes per second: out of range (> {MAX_MAGNITUDE:g} s)"
        )  # fmt: skip
    if too_large(fps):
        raise InputError(path, fps_field, f"frame rate {fps:g} per second out of range (> {MAX_MAGNITUDE:g})")
    name = anim_prim.GetDisplayName() or anim_prim.GetName()
    try:
        return Motion(fps, trans[:, 0], rot, trans if animated_t else None, times=times, name=name)
    except RigError as e:
        raise InputError(path, where, str(e)) from None


def _warn_unresolved_bindings(root_prim, predicate, path: Path) -> None:
    """Warns about meshes whose ``skel:skeleton`` targets no Skeleton (Pixar skips them: they are not imported)."""
    from pxr import Usd, UsdGeom, UsdSkel

    stage = root_prim.GetStage()
    for prim in Usd.PrimRange(root_prim, predicate):
        if not prim.IsA(UsdGeom.Mesh) or not prim.HasAPI(UsdSkel.BindingAPI):
            continue
        rel = UsdSkel.BindingAPI(prim).GetSkeletonRel()
        targets = rel.GetTargets() if rel else []
        bad = [t for t in targets if not (stage.GetPrimAtPath(t) and stage.GetPrimAtPath(t).IsA(UsdSkel.Skeleton))]
        if bad:
            warnings.warn(
                f"{path}: {prim.GetPath()}.skel:skeleton: targets {', '.join(map(str, bad))}, which is no Skeleton:"
                " the mesh is not imported",
                UsdSkelWarning,
                3,
            )


def read_usdskel(path: str | Path, *, skeleton: str | None = None) -> Asset:
    """Reads a UsdSkel skeleton, its skinned meshes and animations from a USD file.

    Args:
        path: a ``.usd``, ``.usda`` or ``.usdc`` file.
        skeleton: absolute prim path of the Skeleton to read (inside a SkelRoot); default: the Skeleton under
            the stage's defaultPrim, else the one in the stage. When several qualify, the first in traversal
            order is read and a :class:`UsdSkelWarning` names it and the others.

    Returns:
        the asset in our frame (SI metres, Z-up): the rig (named after the SkelRoot's displayName or name),
        every Mesh with faces bound to the skeleton (faces triangulated as fans in vertex order), and every
        SkelAnimation under the SkelRoot as a clip (the one bound as ``skel:animationSource`` first), sampled at
        the union of its authored time samples with ``times = (timeCode - origin) / timeCodesPerSecond``, where
        ``origin`` is the root layer's customLayerData ``kinedistill:timeOrigin`` (the time code of time 0, written by
        :func:`write_usdskel`; it differs from startTimeCode when a clip has keys before time 0), else the
        stage's startTimeCode (foreign stages); the clip's
        ``fps`` is the one we wrote (customData ``kinedistill:fps``), else the rate of evenly spaced samples, else
        the stage's framesPerSecond (timeCodesPerSecond when not authored).

    Warns:
        UsdSkelWarning: several Skeletons to choose from (see ``skeleton``); ignored content (blend shapes,
            joint scales, unresolved bindings, unknown animation joints, meshes without faces); joint weights not
            summing to 1 (renormalized; the message names the file, the ``primvars:skel:jointWeights`` field, how
            many vertices and the range of their sums).

    Raises:
        InputError: unreadable file, no SkelRoot or Skeleton, ``skeleton`` naming no Skeleton inside a SkelRoot
            (the message lists the stage's Skeletons), joints not parents-first, missing rest and bind
            transforms, scaled joints, mismatched array sizes, NaN weights, non-finite animation values or
            scales, a non-finite or out-of-range geomBindTransform, a skinning method other than classicLinear
            (dual-quaternion skinning would differ from ours by ~1% of the height), a bad
            ``kinedistill:timeOrigin``, attributes declared with other types than the schema's (e.g. float2[]
            translations, float4[] rotations), blocked animation time samples, a singular geomBindTransform,
            ``metersPerUnit`` or ``timeCodesPerSecond`` outside ``[1 / MAX_MAGNITUDE, MAX_MAGNITUDE]``, clip times
            or rates beyond ``MAX_MAGNITUDE`` (the message names file and prim/attribute); corrupt data that
            USD reads lazily (a damaged .usdc opens, then fails on the first value it decompresses: field ``file``).
    """
    from pxr import Tf

    path = Path(path)
    try:
        return _read_usdskel(path, skeleton)
    except Tf.ErrorException as e:
        raise InputError(path, "file", f"corrupt data ({_tf_reason(e)})") from None


def _read_usdskel(path: Path, skeleton: str | None) -> Asset:
    """:func:`read_usdskel` of ``path``, letting USD's own read errors (``Tf.ErrorException``) through."""
    from pxr import Usd, UsdGeom, UsdSkel

    stage = _open_stage(path)
    skel_prim, root_prim = _find_skeleton(stage, path, skeleton)
    where = str(skel_prim.GetPath())

    meters_per_unit = float(UsdGeom.GetStageMetersPerUnit(stage))
    if not np.isfinite(meters_per_unit) or meters_per_unit <= 0:
        raise InputError(path, "metersPerUnit", f"must be positive, got {meters_per_unit}")
    if too_large(meters_per_unit) or meters_per_unit < 1.0 / MAX_MAGNITUDE:
        raise InputError(
            path, "metersPerUnit", f"out of range [{1.0 / MAX_MAGNITUDE:g}, {MAX_MAGNITUDE:g}], got {meters_per_unit:g}"
        )
    up = UsdGeom.GetStageUpAxis(stage)
    up_rotation = np.eye(4)
    if up == UsdGeom.Tokens.y:  # +Y up -> +Z up: rotate +90 degrees about X
        up_rotation = transform_matrix(np.zeros(3), axis_angle_to_quat([np.pi / 2, 0.0, 0.0]))
    elif up != UsdGeom.Tokens.z:
        raise InputError(path, "upAxis", f"unsupported up axis {up!r}")
    stage_frame = up_rotation @ np.diag([meters_per_unit] * 3 + [1.0])

    def conversion_at(code) -> _Conversion:
        skel_to_world = _usd_matrix(UsdGeom.Imageable(skel_prim).ComputeLocalToWorldTransform(code))
        return _Conversion(stage_frame @ skel_to_world, path, f"{where}.xformOp")

    # the placement at the earliest time: its default when not sampled, else its first sample (a placement
    # authored only as time samples has no default value, which read as identity)
    conversion = conversion_at(Usd.TimeCode.EarliestTime())
    placement = _Placement(skel_prim, conversion, conversion_at, path, f"{where}.xformOp")

    skel = _Skeleton(skel_prim, path, conversion)

    cache = UsdSkel.Cache()
    skel_root = UsdSkel.Root(root_prim)
    predicate = Usd.TraverseInstanceProxies(Usd.PrimDefaultPredicate)
    cache.Populate(skel_root, predicate)
    meshes = []
    for binding in cache.ComputeSkelBindings(skel_root, predicate):
        if binding.GetSkeleton().GetPrim() != skel_prim:
            continue
        for query in binding.GetSkinningTargets():
            mesh = _read_mesh(query, skel, conversion, path)
            if mesh is not None:
                meshes.append(mesh)

    _warn_unresolved_bindings(root_prim, predicate, path)

    rig_name = root_prim.GetDisplayName() or root_prim.GetName()
    try:
        rig = Rig(
            skel.names, skel.parents, skel.rest_translations, skel.rest_rotations, skel.inverse_bind, meshes,
            name=rig_name,
        )  # fmt: skip
    except RigError as e:
        raise InputError(path, where, str(e)) from None

    anim_prims = []
    skel_query = cache.GetSkelQuery(UsdSkel.Skeleton(skel_prim))
    anim_query = skel_query.GetAnimQuery() if skel_query else None
    if anim_query:
        anim_prims.append(anim_query.GetPrim())
    others = set()  # the animation sources of the other skeletons of the SkelRoot: their clips, not this one's
    found = []
    for prim in Usd.PrimRange(root_prim, predicate):
        if prim.IsA(UsdSkel.Skeleton) and prim != skel_prim:
            query = cache.GetSkelQuery(UsdSkel.Skeleton(prim))
            source = query.GetAnimQuery() if query else None
            if source:
                others.add(source.GetPrim().GetPath())
        elif prim.IsA(UsdSkel.Animation) and prim not in anim_prims:
            found.append(prim)
    anim_prims += [prim for prim in found if prim.GetPath() not in others]
    clips: dict[str, Motion] = {}
    for prim in anim_prims:
        motion = _read_animation(prim, skel, placement, stage, path)
        name, k = motion.name, 1
        while name in clips:
            name, k = f"{motion.name}_{k}", k + 1
        motion.name = name
        clips[name] = motion
    return Asset(rig, clips, str(path), meters_per_unit)
