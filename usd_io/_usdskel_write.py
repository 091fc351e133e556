"""UsdSkel export: a rig, its skinned meshes and motion clips as one UsdSkel stage.

Layout (``<...>`` = sanitized, unique identifiers; original names kept in ``displayName`` / ``jointNames``)::

    /<rig>                      SkelRoot (defaultPrim, kind = component, extent: the skinned meshes' bounds in
                                the rest pose (default) and at every time code of the bound clip)
        Skeleton                Skeleton + SkelBindingAPI (skel:animationSource -> the bound clip)
        Animations              Scope
            <clip>              SkelAnimation per clip (time-sampled translations/rotations/scales)
        <mesh>                  Mesh + SkelBindingAPI (skel:skeleton, jointIndices/jointWeights, geomBindTransform)

Frames and units: the rig's skeleton space is written as the Skeleton's (identity-transformed) space, Z-up, in
units of ``meters_per_unit`` metres: every length (translations, points, extents) is divided by it; rotations and
weights are unchanged. USD matrices act on row vectors, so our column-vector matrices are written transposed.
Quaternions: ours are xyzw; ``GfQuatf`` stores (imaginary xyz, real w) in memory, so ``VtQuatfArray.FromNumpy``
takes our xyzw arrays as they are (its constructor order is (real, imaginary)).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from sim import Motion, Rig, skin_motion
from sim.rotations import transform_matrix

from ._usd_names import unique_identifiers
from ._usd_paths import usd_output_path
from .atomic import atomic_output
from .errors import InputError

__all__ = ["write_usdskel"]

DEFAULT_TIME_CODES_PER_SECOND = 24.0
"""timeCodesPerSecond of a stage written without clips (USD's own fallback)."""

FPS_CUSTOM_DATA_KEY = "kinedistill:fps"
"""SkelAnimation customData key holding the clip's nominal frame rate [1/s] (read back by read_usdskel)."""

TIME_ORIGIN_CUSTOM_DATA_KEY = "kinedistill:timeOrigin"
"""Root layer customLayerData key holding the time code of clip time 0 (``start_time_code``; read back by
read_usdskel). startTimeCode is the playback range start, which lies below it when a clip has keys before 0."""


def _joint_paths(rig: Rig) -> list[str]:
    """UsdSkel joint paths (``"Hips/Spine/Chest"``) from unique sanitized joint names, parents-first."""
    idents = unique_identifiers(rig.joint_names)
    paths: list[str] = []
    for j, parent in enumerate(rig.parents):
        paths.append(idents[j] if parent < 0 else f"{paths[parent]}/{idents[j]}")
    return paths


def _usd_matrices(matrices: np.ndarray, length_scale: float):
    """Column-vector 4x4 matrices (N, 4, 4) -> VtMatrix4dArray (row-vector), translations scaled."""
    from pxr import Vt

    m = np.array(matrices, dtype=np.float64)
    m[:, :3, 3] *= length_scale
    return Vt.Matrix4dArray.FromNumpy(np.ascontiguousarray(m.transpose(0, 2, 1)))


def _resolve_bound_clip(clips: Sequence[Motion], bound_clip: int | str) -> int | None:
    """The index of the bound clip; None without clips (where only the default 0 is accepted)."""
    if not clips:
        if isinstance(bound_clip, str) or int(bound_clip) != 0:
            raise ValueError(f"bound_clip: {bound_clip!r} asks for a binding, but there are no clips to bind")
        return None
    if isinstance(bound_clip, str):
        names = [c.name for c in clips]
        if bound_clip not in names:
            raise ValueError(f"bound_clip: no clip named {bound_clip!r}; clips: {', '.join(names)}")
        return names.index(bound_clip)
    index = int(bound_clip)
    if not -len(clips) <= index < len(clips):
        raise ValueError(f"bound_clip: index {bound_clip} out of range for {len(clips)} clips")
    return index % len(clips)


TIME_CODE_SNAP = 1e-5
"""Time codes this close to a whole number [time codes] are written as that number: float32 key times (glTF)
times the frame rate land ~2e-6 off whole frames (Fox Walk's last key: 82.0000019), float64 products ~1e-14."""


def _snap_time_codes(codes: np.ndarray, clip_name: str = "") -> np.ndarray:
    """Whole numbers for time codes within :data:`TIME_CODE_SNAP` of one; others unchanged (keys are not moved).
    When snapping would merge two keys (closer than the snap), the clip's codes are kept as they are.

    Raises:
        ValueError: the codes are not strictly increasing even unsnapped (keys closer than float precision).
    """
    whole = np.round(codes)
    snapped = np.where(np.abs(codes - whole) <= TIME_CODE_SNAP, whole, codes)
    if np.all(np.diff(snapped) > 0):
        return snapped
    if np.all(np.diff(codes) > 0):  # the second of two keys on one code overwrote the first
        return codes
    raise ValueError(f"clip {clip_name!r}: times: two keys fall on one USD time code; resample the clip")


MAX_EXTENT_SAMPLES = 20000
"""Most SkelRoot extent samples written between a keyframed clip's keys (evenly spread beyond that)."""


EXTENT_PADDING = 1e-5
"""Outward padding of the SkelRoot extent [fraction of its largest side]: float32 skinning (Pixar's, a renderer's)
lands within ~1e-6 of the size of ours, and the float32 extent is rounded outward on top."""

EXTENT_CHUNK_POINTS = 2_000_000
"""Skinned points computed at once for the extent (frames x vertices), bounding memory on long, dense clips."""


def _extent_samples(
    keys: np.ndarray, key_times: np.ndarray, tcps: float, start: float
) -> tuple[np.ndarray, np.ndarray]:
    """Time codes and times [s] of a bound clip's extent samples: its keys plus every whole code between them
    (USD interpolates an extent linearly, the pose between sparse keys by slerp: a swinging limb left the box)."""
    first, last = np.ceil(keys[0]), np.floor(keys[-1])
    if last - first + 1.0 > MAX_EXTENT_SAMPLES + len(keys):  # spread them without listing every whole code (a
        whole = np.unique(np.linspace(first, last, MAX_EXTENT_SAMPLES + len(keys)).round())  # 1e6 s span took 0.8 GB)
    else:
        whole = np.arange(first, last + 1.0)
    extra = whole[~np.isin(whole, keys)]
    if len(extra) > MAX_EXTENT_SAMPLES:
        extra = extra[np.linspace(0, len(extra) - 1, MAX_EXTENT_SAMPLES).round().astype(int)]
    codes = np.concatenate([keys, extra])
    times = np.concatenate([key_times, (extra - float(start)) / tcps])
    order = np.argsort(codes, kind="stable")
    return codes[order], times[order]


def _written(mesh) -> bool:
    """Whether a mesh is written: one without points is not a valid UsdGeom mesh, one without faces readers (ours
    too) skip; neither bounds the SkelRoot."""
    return mesh.vertex_count > 0 and len(mesh.triangles) > 0


def skinned_extents(rig: Rig, motion: Motion, length_scale: float = 1.0) -> np.ndarray:
    """Bounds of all the rig's skinned meshes at every frame of ``motion`` (a SkelRoot's extent).

    Args:
        rig: a rig with at least one non-empty mesh.
        motion: the motion that poses it.
        length_scale: stage units per metre.

    Returns:
        (min, max) corners per frame in stage units, float32, shape (F, 2, 3), padded outward by
        :data:`EXTENT_PADDING` of the largest side so that float32 skinnings of the same pose stay inside.
    """
    lo = np.full((motion.frame_count, 3), np.inf)
    hi = np.full((motion.frame_count, 3), -np.inf)
    for mesh in (m for m in rig.meshes if _written(m)):
        step = max(1, EXTENT_CHUNK_POINTS // mesh.vertex_count)
        for start in range(0, motion.frame_count, step):
            stop = min(start + step, motion.frame_count)
            points, _ = skin_motion(rig, motion.slice(start, stop), mesh=mesh)
            lo[start:stop] = np.minimum(lo[start:stop], points.min(axis=1))
            hi[start:stop] = np.maximum(hi[start:stop], points.max(axis=1))
    lo, hi = lo * length_scale, hi * length_scale
    pad = EXTENT_PADDING * (hi - lo).max(axis=1, keepdims=True)
    lo32, hi32 = (lo - pad).astype(np.float32), (hi + pad).astype(np.float32)
    lo32 = np.where(lo32 > lo - pad, np.nextafter(lo32, np.float32(-np.inf)), lo32)  # round outward
    hi32 = np.where(hi32 < hi + pad, np.nextafter(hi32, np.float32(np.inf)), hi32)
    return np.ascontiguousarray(np.stack([lo32, hi32], axis=1))


def write_usdskel(
    path: str | Path,
    rig: Rig,
    clips: Sequence[Motion] = (),
    *,
    bound_clip: int | str = 0,
    time_codes_per_second: float | None = None,
    start_time_code: float = 0.0,
    meters_per_unit: float = 1.0,
) -> None:
    """Writes ``rig`` and ``clips`` as a UsdSkel stage, atomically (a failure leaves no file behind).

    The format follows the extension (``.usda`` text, ``.usdc``/``.usd`` binary crate). Each clip becomes a
    SkelAnimation time-sampled at ``time code = times[s] * timeCodesPerSecond + start_time_code`` (keyframed
    clips keep their key times; codes within ``TIME_CODE_SNAP`` of a whole number are written as it); every
    joint is animated (translations from the clip's root channel and per-joint translations or the rest pose,
    rotations, unit scales). The time code of time 0 (``start_time_code``) is recorded as the root layer's
    customLayerData ``kinedistill:timeOrigin``: the stage's startTimeCode is the playback range start, the
    smallest code, which lies below ``start_time_code`` when a clip has keys before time 0; read_usdskel
    measures times from the recorded origin, so such keys keep their times.

    Args:
        path: output file (``.usda``, ``.usdc`` or ``.usd``); its folder is created when missing.
        rig: the character; its meshes become skinned UsdGeom.Mesh prims (vertex and triangle order kept).
        clips: motion clips for ``rig``.
        bound_clip: index or name of the clip bound as the Skeleton's ``skel:animationSource``.
        time_codes_per_second: stage timeCodesPerSecond and framesPerSecond [1/s]; default: the first clip's
            fps (24 without clips).
        start_time_code: time code of clip time 0 [time codes], recorded as ``kinedistill:timeOrigin``. The
            stage's start/end time codes span all clips' samples (and include ``start_time_code``); 0/0
            without clips.
        meters_per_unit: the stage's length unit [m]; lengths are divided by it.

    Raises:
        ValueError: bad ``bound_clip``, ``time_codes_per_second`` or ``meters_per_unit``.
        sim.RigError: a clip that does not fit the rig.
        InputError: ``path`` cannot be written, or USD fails to write the stage (the previous file is kept).
    """
    from pxr import Gf, Kind, Sdf, Usd, UsdGeom, UsdPhysics, UsdSkel, Vt

    clips = tuple(clips)
    if not (np.isfinite(meters_per_unit) and meters_per_unit > 0):
        raise ValueError(f"meters_per_unit: must be a positive number, got {meters_per_unit}")
    if time_codes_per_second is None:
        tcps = clips[0].fps if clips else DEFAULT_TIME_CODES_PER_SECOND
    else:
        tcps = float(time_codes_per_second)
    if not (np.isfinite(tcps) and tcps > 0):
        raise ValueError(f"time_codes_per_second: must be a positive number, got {time_codes_per_second}")
    if not np.isfinite(start_time_code):
        raise ValueError(f"start_time_code: must be finite, got {start_time_code}")
    path = usd_output_path(path)
    bound = _resolve_bound_clip(clips, bound_clip)
    scale = 1.0 / float(meters_per_unit)

    with atomic_output(path) as tmp:
        stage = Usd.Stage.CreateInMemory(tmp.name)
        UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
        UsdGeom.SetStageMetersPerUnit(stage, float(meters_per_unit))
        UsdPhysics.SetStageKilogramsPerUnit(stage, 1.0)
        stage.SetTimeCodesPerSecond(tcps)
        stage.SetFramesPerSecond(tcps)
        stage.GetRootLayer().customLayerData = {TIME_ORIGIN_CUSTOM_DATA_KEY: float(start_time_code)}

        root_name = unique_identifiers([rig.name])[0]
        root_path = Sdf.Path.absoluteRootPath.AppendChild(root_name)
        skel_root = UsdSkel.Root.Define(stage, root_path)
        root_prim = skel_root.GetPrim()
        root_prim.SetDisplayName(rig.name)
        Usd.ModelAPI(root_prim).SetKind(Kind.Tokens.component)
        stage.SetDefaultPrim(root_prim)

        # -- skeleton ------------------------------------------------------------------------------------
        skel = UsdSkel.Skeleton.Define(stage, root_path.AppendChild("Skeleton"))
        joint_paths = _joint_paths(rig)
        skel.CreateJointsAttr(Vt.TokenArray(joint_paths))
        skel.CreateJointNamesAttr(Vt.TokenArray(list(rig.joint_names)))
        skel.CreateBindTransformsAttr(_usd_matrices(rig.bind_world_matrices(), scale))
        rest_local = transform_matrix(rig.rest_translations, rig.rest_rotations)
        skel.CreateRestTransformsAttr(_usd_matrices(rest_local, scale))
        skel_binding = UsdSkel.BindingAPI.Apply(skel.GetPrim())

        # -- animations ----------------------------------------------------------------------------------
        time_codes = [float(start_time_code)]
        bound_codes: list[float] = []
        if clips:
            scope_path = root_path.AppendChild("Animations")
            UsdGeom.Scope.Define(stage, scope_path)
            anim_names = unique_identifiers([c.name for c in clips])
            joint_tokens = Vt.TokenArray(joint_paths)
            ones = np.ones((rig.joint_count, 3), dtype=np.float16)
            for index, (clip, name) in enumerate(zip(clips, anim_names)):
                clip.check_rig(rig)
                anim = UsdSkel.Animation.Define(stage, scope_path.AppendChild(name))
                anim.GetPrim().SetDisplayName(clip.name)
                anim.GetPrim().SetCustomDataByKey(FPS_CUSTOM_DATA_KEY, float(clip.fps))
                anim.CreateJointsAttr(joint_tokens)
                translations = (clip.local_translations(rig) * scale).astype(np.float32)
                rotations = clip.rotations.astype(np.float32)
                t_attr = anim.CreateTranslationsAttr()
                r_attr = anim.CreateRotationsAttr()
                s_attr = anim.CreateScalesAttr()
                codes = _snap_time_codes(clip.times * tcps + float(start_time_code), clip.name)
                for f, code in enumerate(codes):
                    tc = Usd.TimeCode(float(code))
                    t_attr.Set(Vt.Vec3fArray.FromNumpy(translations[f]), tc)
                    r_attr.Set(Vt.QuatfArray.FromNumpy(np.ascontiguousarray(rotations[f])), tc)
                    s_attr.Set(Vt.Vec3hArray.FromNumpy(ones), tc)
                time_codes.extend(float(c) for c in codes)
                if index == bound:  # by position: the same Motion may be passed twice
                    bound_codes = [float(c) for c in codes]
                    skel_binding.CreateAnimationSourceRel().SetTargets([anim.GetPath()])
            stage.SetStartTimeCode(min(time_codes))
            stage.SetEndTimeCode(max(time_codes))
        else:
            stage.SetStartTimeCode(0.0)
            stage.SetEndTimeCode(0.0)

        # -- meshes --------------------------------------------------------------------------------------
        mesh_names = unique_identifiers([m.name for m in rig.meshes], reserved=("Skeleton", "Animations"))
        identity = Gf.Matrix4d(1.0)
        for mesh, name in zip(rig.meshes, mesh_names):
            if not _written(mesh):
                warnings.warn(f"{path}: mesh {mesh.name!r} has no {'vertices' if mesh.vertex_count == 0 else 'faces'}:"
                              " not written", stacklevel=2)  # fmt: skip
                continue
            usd_mesh = UsdGeom.Mesh.Define(stage, root_path.AppendChild(name))
            usd_mesh.GetPrim().SetDisplayName(mesh.name)
            points = Vt.Vec3fArray.FromNumpy((mesh.points * scale).astype(np.float32))
            usd_mesh.CreatePointsAttr(points)
            usd_mesh.CreateFaceVertexCountsAttr(Vt.IntArray([3] * len(mesh.triangles)))
            usd_mesh.CreateFaceVertexIndicesAttr(Vt.IntArray.FromNumpy(mesh.triangles.reshape(-1).astype(np.int32)))
            usd_mesh.CreateNormalsAttr(Vt.Vec3fArray.FromNumpy(mesh.vertex_normals().astype(np.float32)))
            usd_mesh.SetNormalsInterpolation(UsdGeom.Tokens.vertex)
            usd_mesh.CreateSubdivisionSchemeAttr(UsdGeom.Tokens.none)
            usd_mesh.CreateOrientationAttr(UsdGeom.Tokens.rightHanded)
            usd_mesh.CreateExtentAttr(UsdGeom.PointBased.ComputeExtent(points))
            binding = UsdSkel.BindingAPI.Apply(usd_mesh.GetPrim())
            binding.CreateSkeletonRel().SetTargets([skel.GetPath()])
            k = mesh.influence_count
            binding.CreateJointIndicesPrimvar(False, k).Set(
                Vt.IntArray.FromNumpy(mesh.influence_joints.reshape(-1).astype(np.int32))
            )
            binding.CreateJointWeightsPrimvar(False, k).Set(
                Vt.FloatArray.FromNumpy(mesh.influence_weights.reshape(-1).astype(np.float32))
            )
            binding.CreateGeomBindTransformAttr(identity)

        # -- SkelRoot bounds: the skinned meshes' extent at the default time and every code of the bound clip --
        if any(_written(m) for m in rig.meshes):
            root_extent = skel_root.CreateExtentAttr()
            root_extent.Set(Vt.Vec3fArray.FromNumpy(skinned_extents(rig, Motion.rest(rig), scale)[0]))
            if bound is not None:
                codes, times = _extent_samples(np.asarray(bound_codes), clips[bound].times, tcps, start_time_code)
                for code, extent in zip(codes, skinned_extents(rig, clips[bound].sample(times), scale)):
                    root_extent.Set(Vt.Vec3fArray.FromNumpy(extent), Usd.TimeCode(float(code)))

        if not stage.GetRootLayer().Export(str(tmp)):  # atomic_output then removes tmp and keeps the old file
            raise InputError(path, "output", "USD could not write the stage (Sdf.Layer.Export failed)")
