"""UsdSkel export/import: round trips, Pixar's UsdSkel skinning as the reference, validators, atomicity, bad input."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import sim
from sim import Motion, Rig, RigError, SkinnedMesh
from sim.rotations import axis_angle_to_quat, quat_multiply, transform_matrix
from usd_io import (
    InputError,
    UsdSkelWarning,
    load_asset,
    read_usdskel,
    validate_stage,
    validation_issues,
    write_usdskel,
)

pxr = pytest.importorskip("pxr")
from pixar_reference import pixar_skinning, pixar_world_skinning  # noqa: E402
from pxr import Gf, Sdf, Usd, UsdGeom, UsdSkel, Vt  # noqa: E402

pytestmark = pytest.mark.usd

FLOAT32_ATOL = 2e-6
"""Values that pass through float32 (points, translations [m], weights, quaternions) agree to this."""
MATRIX_ATOL = 1e-10
"""Matrices written as matrix4d (rest and bind transforms) agree to this."""
TIME_ATOL = 1e-9
"""Times [s] and time codes survive the time-code mapping to this."""
SKINNING_RTOL = 1e-5
"""Our skinning vs Pixar's UsdSkel, as a fraction of the rig height."""


# -- test rigs --------------------------------------------------------------------------------------------------
def _tube(z0, z1, center, radius, rings, segments):
    zs = np.linspace(z0, z1, rings)
    ang = 2 * np.pi * np.arange(segments) / segments
    pts = np.array([[center[0] + radius * np.cos(a), center[1] + radius * np.sin(a), z] for z in zs for a in ang])
    tris = []
    for i in range(rings - 1):
        for k in range(segments):
            a, b = i * segments + k, i * segments + (k + 1) % segments
            tris += [[a, b, b + segments], [a, b + segments, a + segments]]
    return pts, np.array(tris)


def make_rig() -> Rig:
    """A little tree (hips-spine-chest with head and two arms) with a bind pose that differs from the rest pose
    (one inverse bind matrix carries a uniform scale), a tube body skinned with 4 influences (some padded), and a
    box on an arm with 2 influences. Names need sanitizing for USD."""
    names = ["hips", "spine", "chest", "arm:L", "arm R", "head.001"]
    parents = [-1, 0, 1, 2, 2, 2]
    rest_t = np.array([[0.1, -0.2, 0.9], [0, 0, 0.2], [0, 0.01, 0.25], [0.2, 0, 0.15], [-0.2, 0, 0.15], [0, 0, 0.3]])
    rest_q = axis_angle_to_quat([[0, 0, 0.3], [0.1, 0, 0], [0, 0.1, 0], [0, 0.4, 0], [0, -0.4, 0], [0.05, 0, 0.1]])
    rest = Rig(names, parents, rest_t, rest_q)
    world = rest.rest_world_matrices()
    wiggle = transform_matrix(np.array([0.01, 0, -0.02]), axis_angle_to_quat(np.array([0.05, -0.03, 0.02])))
    bind = world @ wiggle
    bind[4, :3, :3] *= 1.1  # a uniform scale in one inverse bind matrix
    ibm = np.linalg.inv(bind)

    pos = world[:, :3, 3]
    body_pts, body_tris = _tube(pos[0, 2] - 0.05, pos[5, 2] + 0.1, pos[0, :2], 0.08, 7, 10)
    d = np.linalg.norm(body_pts[:, None, :] - pos[None, [0, 1, 2, 5], :], axis=-1)
    body_w = np.exp(-((d / 0.12) ** 2))
    body_w /= body_w.sum(1, keepdims=True)
    body_j = np.tile([0, 1, 2, 5], (len(body_pts), 1))
    body_w[:10, 3] = 0.0  # bottom ring: padded fourth influence
    body_w[:10] /= body_w[:10].sum(1, keepdims=True)
    body = SkinnedMesh("body", body_pts, body_tris, body_j, body_w, joint_count=6)

    c = pos[3]
    box_pts = c + 0.05 * np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)])
    box_tris = [[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1]]
    box_w = np.stack([np.linspace(0.2, 0.9, 8), 1 - np.linspace(0.2, 0.9, 8)], axis=1)
    box = SkinnedMesh("arm box.001", box_pts, box_tris, np.tile([3, 2], (8, 1)), box_w, joint_count=6)
    return Rig(names, parents, rest_t, rest_q, ibm, [body, box], name="test rig")


def make_clips(rig: Rig) -> list[Motion]:
    """Two clips with non-uniform key times: one with per-joint translations, one without."""
    rng = np.random.default_rng(7)
    j = rig.joint_count
    times_a = np.array([0.0, 0.1, 0.25, 0.3, 0.7])
    rot_a = quat_multiply(rig.rest_rotations, axis_angle_to_quat(rng.normal(scale=0.4, size=(5, j, 3))))
    trans_a = rig.rest_translations + rng.normal(scale=0.02, size=(5, j, 3))
    walk = Motion(30.0, trans_a[:, 0], rot_a, trans_a, times=times_a, name="walk/cycle")
    times_b = np.array([0.0, 1 / 24, 0.2, 0.5])
    rot_b = axis_angle_to_quat(rng.normal(scale=0.5, size=(4, j, 3)))
    root_b = rig.rest_translations[0] + rng.normal(scale=0.1, size=(4, 3))
    idle = Motion(24.0, root_b, rot_b, times=times_b, name="idle")
    return [walk, idle]


@pytest.fixture(scope="module")
def rig() -> Rig:
    return make_rig()


@pytest.fixture(scope="module")
def clips(rig) -> list[Motion]:
    return make_clips(rig)


# -- references -----------------------------------------------------------------------------------------------
def dense_weights(mesh: SkinnedMesh, joint_count: int) -> np.ndarray:
    """(V, J) weight matrix: influences summed per joint (order-independent)."""
    w = np.zeros((mesh.vertex_count, joint_count))
    np.add.at(w, (np.arange(mesh.vertex_count)[:, None], mesh.influence_joints), mesh.influence_weights)
    return w


def assert_same_quats(actual, desired, atol):
    """Quaternions equal up to sign."""
    sign = np.sign(np.sum(actual * desired, axis=-1, keepdims=True))
    np.testing.assert_allclose(actual * sign, desired, atol=atol)


# -- (a) round trip -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("suffix", [".usda", ".usdc"])
def test_round_trip(tmp_path, rig, clips, suffix):
    path = tmp_path / f"rig{suffix}"
    write_usdskel(path, rig, clips, time_codes_per_second=60.0, start_time_code=12.0)
    asset = read_usdskel(path)
    out = asset.rig
    assert out.name == rig.name
    assert out.joint_names == rig.joint_names
    np.testing.assert_array_equal(out.parents, rig.parents)
    np.testing.assert_allclose(out.rest_translations, rig.rest_translations, atol=MATRIX_ATOL)
    assert_same_quats(out.rest_rotations, rig.rest_rotations, MATRIX_ATOL)
    np.testing.assert_allclose(out.inverse_bind_matrices, rig.inverse_bind_matrices, atol=MATRIX_ATOL)
    assert [m.name for m in out.meshes] == [m.name for m in rig.meshes]
    for got, want in zip(out.meshes, rig.meshes):
        np.testing.assert_allclose(got.points, want.points, atol=FLOAT32_ATOL)
        np.testing.assert_array_equal(got.triangles, want.triangles)
        assert got.influence_count == want.influence_count
        np.testing.assert_allclose(
            dense_weights(got, rig.joint_count), dense_weights(want, rig.joint_count), atol=FLOAT32_ATOL
        )
    assert list(asset.clips) == [c.name for c in clips]
    for want in clips:
        got = asset.clips[want.name]
        assert got.fps == want.fps
        np.testing.assert_allclose(got.times, want.times, atol=TIME_ATOL)
        assert_same_quats(got.rotations, want.rotations, FLOAT32_ATOL)
        np.testing.assert_allclose(got.root_translations, want.root_translations, atol=FLOAT32_ATOL)
        np.testing.assert_allclose(got.local_translations(out), want.local_translations(rig), atol=FLOAT32_ATOL)
    assert (asset.clips["idle"].translations is None) and (asset.clips["walk/cycle"].translations is not None)
    # the dispatcher reaches the same reader
    again = load_asset(path)
    assert again.rig.joint_names == rig.joint_names and list(again.clips) == list(asset.clips)


def test_stage_layout_and_metadata(tmp_path, rig, clips):
    path = tmp_path / "rig.usda"
    write_usdskel(path, rig, clips, bound_clip="idle", time_codes_per_second=48.0, start_time_code=-3.0,
                  meters_per_unit=0.01)  # fmt: skip
    stage = Usd.Stage.Open(str(path))
    assert UsdGeom.GetStageUpAxis(stage) == "Z"
    assert UsdGeom.GetStageMetersPerUnit(stage) == 0.01
    assert stage.GetMetadata("kilogramsPerUnit") == 1.0
    assert stage.GetTimeCodesPerSecond() == 48.0 and stage.GetFramesPerSecond() == 48.0
    codes = np.concatenate([c.times * 48.0 - 3.0 for c in clips])
    assert stage.GetStartTimeCode() == pytest.approx(codes.min())
    assert stage.GetEndTimeCode() == pytest.approx(codes.max())
    root = stage.GetDefaultPrim()
    assert root.GetPath() == Sdf.Path("/test_rig") and root.IsA(UsdSkel.Root)
    skel = UsdSkel.Skeleton(stage.GetPrimAtPath("/test_rig/Skeleton"))
    assert list(skel.GetJointsAttr().Get()) == [
        "hips", "hips/spine", "hips/spine/chest", "hips/spine/chest/arm_L", "hips/spine/chest/arm_R",
        "hips/spine/chest/head_001",
    ]  # fmt: skip
    (source,) = UsdSkel.BindingAPI(skel.GetPrim()).GetAnimationSourceRel().GetTargets()
    assert source == Sdf.Path("/test_rig/Animations/idle")
    assert stage.GetPrimAtPath("/test_rig/Animations/walk_cycle").IsA(UsdSkel.Animation)
    anim = UsdSkel.Animation(stage.GetPrimAtPath(source))
    np.testing.assert_allclose(anim.GetRotationsAttr().GetTimeSamples(), clips[1].times * 48.0 - 3.0, atol=TIME_ATOL)
    mesh = UsdGeom.Mesh(stage.GetPrimAtPath("/test_rig/arm_box_001"))
    assert mesh.GetSubdivisionSchemeAttr().Get() == "none"
    assert mesh.GetNormalsInterpolation() == "vertex"
    # lengths are written in the stage unit (cm here) and read back in metres
    np.testing.assert_allclose(np.array(mesh.GetPointsAttr().Get()), rig.meshes[1].points * 100, rtol=1e-6)
    binding = UsdSkel.BindingAPI(mesh.GetPrim())
    assert binding.GetJointWeightsPrimvar().GetElementSize() == 2
    assert binding.GetJointWeightsPrimvar().GetInterpolation() == "vertex"
    asset = read_usdskel(path)
    assert asset.source_meters_per_unit == 0.01
    assert list(asset.clips) == ["idle", "walk/cycle"]  # the bound clip first
    np.testing.assert_allclose(asset.rig.rest_translations, rig.rest_translations, atol=MATRIX_ATOL)
    np.testing.assert_allclose(asset.rig.meshes[1].points, rig.meshes[1].points, atol=FLOAT32_ATOL)
    np.testing.assert_allclose(asset.clips["idle"].times, clips[1].times, atol=TIME_ATOL)


def test_no_clips(tmp_path, rig):
    path = tmp_path / "static.usd"
    write_usdskel(path, rig)
    stage = Usd.Stage.Open(str(path))
    assert (stage.GetStartTimeCode(), stage.GetEndTimeCode()) == (0.0, 0.0)
    asset = read_usdskel(path)
    assert asset.clips == {}
    assert validate_stage(path) == []


def test_a_binding_without_clips_is_refused(tmp_path, rig):
    # write_usdskel(..., [], bound_clip="nope") wrote a stage; with clips the same name is refused
    for bound in ("nope", 2):
        with pytest.raises(ValueError, match=r"bound_clip: .* asks for a binding, but there are no clips to bind"):
            write_usdskel(tmp_path / "s.usda", rig, [], bound_clip=bound)
    assert not (tmp_path / "s.usda").exists()


def test_hole_faces_are_left_out_and_an_empty_rest_pose_is_named(tmp_path, rig, clips):
    """holeIndices were read as real faces (renderers leave them out, contact checks saw geometry that is not
    there); an authored empty restTransforms became the bind pose without a word (Pixar warns)."""
    path = tmp_path / "holes.usda"
    write_usdskel(path, rig, clips)
    meshes = read_usdskel(path).rig.meshes
    whole = meshes[0]
    stage = Usd.Stage.Open(str(path))
    mesh = UsdGeom.Mesh(stage.GetPrimAtPath("/test_rig/body"))
    counts = np.array(mesh.GetFaceVertexCountsAttr().Get())
    holes = [0, 5, len(counts) - 1]
    mesh.CreateHoleIndicesAttr(Vt.IntArray(holes))
    stage.Save()
    cut = read_usdskel(path).rig.meshes[0]
    assert len(cut.triangles) == len(whole.triangles) - int((counts[holes] - 2).sum())
    kept = {tuple(t) for t in cut.triangles.tolist()}
    assert kept < {tuple(t) for t in whole.triangles.tolist()}
    mesh.GetHoleIndicesAttr().Set(Vt.IntArray(list(range(len(counts)))))
    stage.Save()
    with pytest.warns(UsdSkelWarning, match=r"holeIndices: every face is a hole: skipped"):
        assert [m.name for m in read_usdskel(path).rig.meshes] == [m.name for m in meshes[1:]]
    stage = _skeleton_stage(tmp_path / "rest.usda", ["a", "a/b"], bind=2)
    UsdSkel.Skeleton(stage.GetPrimAtPath("/Root/Skeleton")).CreateRestTransformsAttr(Vt.Matrix4dArray([]))
    stage.Save()
    with pytest.warns(UsdSkelWarning, match=r"restTransforms: authored empty \(0 matrices for 2 joints\): the rest"):
        assert read_usdskel(tmp_path / "rest.usda").rig.joint_count == 2


def test_time_codes_near_whole_frames_are_whole(tmp_path, rig, clips):
    clip = clips[0]
    frames = np.arange(clip.frame_count)
    # float32 key times, as glTF stores them (k / 24 s is not exact in float32), plus one key truly between frames
    times = (frames / 24.0).astype(np.float32).astype(np.float64)
    times[-1] = (frames[-1] - 0.5) / 24.0
    keyed = Motion(24.0, clip.root_translations, clip.rotations, times=times)
    path = tmp_path / "keys.usda"
    write_usdskel(path, rig, [keyed])
    stage = Usd.Stage.Open(str(path))
    anim = next(p for p in stage.Traverse() if p.IsA(UsdSkel.Animation))
    codes = UsdSkel.Animation(anim).GetRotationsAttr().GetTimeSamples()
    raw = times * 24.0
    assert np.any(raw[:-1] != frames[:-1])  # the float32 noise is there before writing
    assert codes[:-1] == [float(f) for f in frames[:-1]]
    assert codes[-1] == pytest.approx(frames[-1] - 0.5)  # a key between frames is not moved
    assert stage.GetEndTimeCode() == pytest.approx(frames[-1] - 0.5)


# -- (b) Pixar's skinning -------------------------------------------------------------------------------------
@pytest.mark.parametrize("bound", [0, 1])
def test_skinning_matches_pixar(tmp_path, rig, clips, bound):
    path = tmp_path / "rig.usdc"
    tcps, start = 60.0, 5.0
    write_usdskel(path, rig, clips, bound_clip=bound, time_codes_per_second=tcps, start_time_code=start)
    codes, pixar, l2w = pixar_skinning(path)
    clip = clips[bound]
    np.testing.assert_allclose(codes, clip.times * tcps + start, atol=TIME_ATOL)
    np.testing.assert_allclose(l2w, np.eye(4))
    tol = SKINNING_RTOL * rig.height()
    for mesh, prim_name in zip(rig.meshes, ["body", "arm_box_001"]):
        ours, _ = sim.skin_motion(rig, clip, mesh=mesh)
        np.testing.assert_allclose(ours, pixar[prim_name], atol=tol)


EXTENT_TIGHTNESS = 3e-5
"""The SkelRoot extent exceeds Pixar's skinned bounds by at most this fraction of its largest side (1e-5 padding,
float32 rounding and float32 skinning)."""


def _pixar_bounds(path, time) -> np.ndarray:
    """(min, max) of Pixar's skinning of every mesh under the default SkelRoot at ``time``, shape (2, 3)."""
    stage = Usd.Stage.Open(str(path))
    root = UsdSkel.Root(stage.GetDefaultPrim())
    cache = UsdSkel.Cache()
    cache.Populate(root, Usd.TraverseInstanceProxies())
    (binding,) = cache.ComputeSkelBindings(root, Usd.TraverseInstanceProxies())
    xforms = cache.GetSkelQuery(binding.GetSkeleton()).ComputeSkinningTransforms(time)
    points = []
    for query in binding.GetSkinningTargets():
        p = UsdGeom.Mesh(query.GetPrim()).GetPointsAttr().Get()
        assert query.ComputeSkinnedPoints(xforms, p, time)
        points.append(np.array(p, dtype=np.float64))
    points = np.concatenate(points)
    return np.stack([points.min(0), points.max(0)])


@pytest.mark.parametrize(("bound", "meters_per_unit"), [(0, 1.0), (1, 0.01)])
def test_skel_root_extent_bounds_the_skinned_meshes(tmp_path, rig, clips, bound, meters_per_unit):
    """The SkelRoot's extent (what renderers cull with) contains every point of Pixar's skinning at every time code
    of the bound clip and at the default time (the rest pose), and is tight (UsdSkel's own estimate pads the joint
    positions: it left the Fox's paws outside and was 0.15 m too large on a 0.5 m fox)."""
    path = tmp_path / "rig.usda"
    write_usdskel(path, rig, clips, bound_clip=bound, meters_per_unit=meters_per_unit)
    stage = Usd.Stage.Open(str(path))
    extent = UsdGeom.Boundable(stage.GetDefaultPrim()).GetExtentAttr()
    codes, pixar, _ = pixar_skinning(path)
    # the keys and every whole code between them: USD interpolates the extent linearly, the pose by slerp, so
    # between sparse keys a box of the keys alone left the limbs outside
    samples = extent.GetTimeSamples()
    whole = np.arange(np.ceil(codes[0]), np.floor(codes[-1]) + 1)
    np.testing.assert_array_equal(samples, np.union1d(codes, whole))
    assert len(samples) > len(codes)  # the clips are keyframed: the test sees codes between keys
    for code in [Usd.TimeCode.Default(), *samples]:
        authored = np.array(extent.Get(code), dtype=np.float64)
        want = _pixar_bounds(path, code)
        if not code == Usd.TimeCode.Default() and code in list(codes):
            k = list(codes).index(code)
            points = np.concatenate([pixar[name][k] for name in pixar])
            np.testing.assert_allclose(want, [points.min(0), points.max(0)])  # the two references agree
        assert np.all(authored[0] <= want[0]) and np.all(authored[1] >= want[1]), code
        np.testing.assert_allclose(authored, want, atol=EXTENT_TIGHTNESS * np.ptp(want, axis=0).max())
    assert validate_stage(path) == []


def test_keys_closer_than_the_time_code_snap_are_all_written(tmp_path, rig):
    """Codes within 1e-5 of a whole number are snapped to it: two keys that close (0 and 0.4 us at 24 fps) landed on
    one code and the second overwrote the first (3 frames written, 2 read back)."""
    rest = Motion.rest(rig, 3, 24.0)
    motion = Motion(24.0, rest.root_translations, rest.rotations, times=[0.0, 0.4e-6, 1.0], name="close")
    write_usdskel(tmp_path / "close.usda", rig, [motion])
    back = load_asset(tmp_path / "close.usda").clip("close")
    assert back.frame_count == 3
    np.testing.assert_allclose(back.times, motion.times, atol=1e-12)


def test_skel_root_without_meshes_has_no_extent(tmp_path, rig, clips):
    """A SkelRoot bounds its skinned prims only (UsdSkel computes none without bindings)."""
    bare = Rig(rig.joint_names, rig.parents, rig.rest_translations, rig.rest_rotations, name="bare")
    path = tmp_path / "bare.usda"
    write_usdskel(path, bare, clips)
    stage = Usd.Stage.Open(str(path))
    assert not UsdGeom.Boundable(stage.GetDefaultPrim()).GetExtentAttr().HasAuthoredValue()
    assert validate_stage(path) == []
    # an empty mesh bounds nothing: beside a real one the extent is the real one's, alone there is none
    empty = SkinnedMesh("empty", np.zeros((0, 3)), np.zeros((0, 3), int), np.zeros((0, 1), int), np.zeros((0, 1)))
    for meshes, name in (([*rig.meshes, empty], "with_empty"), ([empty], "only_empty")):
        r = Rig(rig.joint_names, rig.parents, rig.rest_translations, rig.rest_rotations, rig.inverse_bind_matrices,
                meshes, name=name)  # fmt: skip
        # a mesh without points was written as one, which load_asset then refused ("no points authored")
        with pytest.warns(UserWarning, match="mesh 'empty' has no vertices: not written"):
            write_usdskel(tmp_path / f"{name}.usda", r, clips)
    assert [m.name for m in load_asset(tmp_path / "with_empty.usda").rig.meshes] == [m.name for m in rig.meshes]
    stage = Usd.Stage.Open(str(tmp_path / "with_empty.usda"))
    authored = np.array(UsdGeom.Boundable(stage.GetDefaultPrim()).GetExtentAttr().Get(), dtype=np.float64)
    want = _pixar_bounds(tmp_path / "with_empty.usda", Usd.TimeCode.Default())
    np.testing.assert_allclose(authored, want, atol=EXTENT_TIGHTNESS * np.ptp(want, axis=0).max())
    stage = Usd.Stage.Open(str(tmp_path / "only_empty.usda"))
    assert not UsdGeom.Boundable(stage.GetDefaultPrim()).GetExtentAttr().HasAuthoredValue()


def test_read_converts_y_up_units_and_skeleton_transform(tmp_path, rig, clips):
    """A centimetre, Y-up stage whose Skeleton prim is moved, rotated and uniformly scaled: our skinning of the
    imported asset matches Pixar's world-space result converted to metres and Z-up by hand."""
    path = tmp_path / "yup.usda"
    write_usdskel(path, rig, clips, meters_per_unit=0.01)
    stage = Usd.Stage.Open(str(path))
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.y)
    xform = UsdGeom.Xformable(stage.GetPrimAtPath("/test_rig/Skeleton"))
    xform.AddTranslateOp().Set(Gf.Vec3d(30.0, -20.0, 50.0))
    xform.AddRotateXYZOp().Set(Gf.Vec3f(10.0, 20.0, 30.0))
    xform.AddScaleOp().Set(Gf.Vec3f(2.0, 2.0, 2.0))
    stage.Save()
    codes, pixar, l2w = pixar_skinning(path)
    np.testing.assert_allclose(codes, clips[0].times * clips[0].fps, atol=TIME_ATOL)
    asset = read_usdskel(path)
    y_to_z = np.array([[1.0, 0, 0], [0, 0, -1.0], [0, 1.0, 0]])  # (x, y, z) -> (x, -z, y)
    clip = asset.clip()
    assert clip.name == clips[0].name
    tol = SKINNING_RTOL * asset.rig.height()
    for mesh, prim_name in zip(asset.rig.meshes, ["body", "arm_box_001"]):
        world = pixar[prim_name] @ l2w[:3, :3] + l2w[3, :3]
        expected = 0.01 * world @ y_to_z.T
        ours, _ = sim.skin_motion(asset.rig, clip, mesh=mesh)
        np.testing.assert_allclose(ours, expected, atol=tol)
    # the Skeleton prim's scale of 2 is folded into the lengths
    np.testing.assert_allclose(asset.rig.bone_lengths(), 2 * rig.bone_lengths(), rtol=1e-9)


def _moving_root_stage(tmp_path, rig, clip, samples) -> tuple[Path, Usd.Stage]:
    """``rig`` and ``clip`` written, then the SkelRoot moved by time-sampled translate / rotateZ / scale ops:
    ``samples`` = [(time code, (x, y, z), yaw [deg], uniform scale)]."""
    path = tmp_path / "moving.usda"
    write_usdskel(path, rig, [clip])
    stage = Usd.Stage.Open(str(path))
    xform = UsdGeom.Xformable(stage.GetPrimAtPath("/test_rig"))
    t_op, r_op, s_op = xform.AddTranslateOp(), xform.AddRotateZOp(), xform.AddScaleOp()
    for code, offset, yaw, scale in samples:
        t_op.Set(Gf.Vec3d(*offset), code)
        r_op.Set(float(yaw), code)
        s_op.Set(Gf.Vec3f(scale, scale, scale), code)
    stage.Save()
    return path, stage


def test_animated_skel_root_placement_moves_the_character(tmp_path, rig, clips):
    """Root motion authored on the SkelRoot prim (as DCC exporters write it), sampled at a time the animation
    does not sample too: the clip holds the union of both sets of time codes, and our skinning at each matches
    Pixar's, placed in the stage by the Skeleton's local-to-world transform at that code."""
    clip = clips[0]
    samples = [(0.0, (0.0, 0.0, 0.0), 0.0, 1.0), (6.0, (0.5, 0.05, 0.1), 30.0, 1.0), (21.0, (2.0, 0.2, 0.0), 90.0, 1.0)]
    path, stage = _moving_root_stage(tmp_path, rig, clip, samples)
    tcps = stage.GetTimeCodesPerSecond()
    codes = sorted(set(np.round(clip.times * tcps, 9)) | {6.0})
    asset = read_usdskel(path)
    ours_clip = asset.clip()
    np.testing.assert_allclose(ours_clip.times, (np.array(codes) - stage.GetStartTimeCode()) / tcps, atol=TIME_ATOL)
    assert UsdGeom.GetStageUpAxis(stage) == UsdGeom.Tokens.z and UsdGeom.GetStageMetersPerUnit(stage) == 1.0
    pixar = pixar_world_skinning(path, codes)
    tol = SKINNING_RTOL * asset.rig.height()
    for mesh, prim_name in zip(asset.rig.meshes, ["body", "arm_box_001"]):
        ours, _ = sim.skin_motion(asset.rig, ours_clip, mesh=mesh)
        np.testing.assert_allclose(ours, pixar[prim_name], atol=tol)
    # the character travels 2 m and turns 90 degrees: not a rest-time placement applied to every frame
    root = ours_clip.root_translations
    assert np.linalg.norm(root[-1] - root[0]) > 1.5


def test_single_sample_skel_root_placement_is_the_rest_placement(tmp_path, rig, clips):
    """A placement authored as one time sample (no default value) places the character at every time: the rig's
    rest pose sits there too (USD resolves a single sample at every time; the default time reads identity)."""
    path, _ = _moving_root_stage(tmp_path, rig, clips[0], [(0.0, (5.0, 0.0, 0.0), 0.0, 1.0)])
    asset = read_usdskel(path)
    np.testing.assert_allclose(asset.rig.rest_world_matrices()[:, 0, 3], rig.rest_world_matrices()[:, 0, 3] + 5.0)
    codes = clips[0].times * clips[0].fps
    pixar = pixar_world_skinning(path, codes)
    ours, _ = sim.skin_motion(asset.rig, asset.clip(), mesh=asset.rig.meshes[0])
    np.testing.assert_allclose(ours, pixar["body"], atol=SKINNING_RTOL * asset.rig.height())


def test_skel_root_placement_scaling_over_time_is_refused(tmp_path, rig, clips):
    samples = [(0.0, (0.0, 0.0, 0.0), 0.0, 1.0), (21.0, (1.0, 0.0, 0.0), 0.0, 2.0)]
    path, _ = _moving_root_stage(tmp_path, rig, clips[0], samples)
    with pytest.raises(InputError, match=r"moving\.usda.*/test_rig/Skeleton\.xformOp.*scales over time"):
        read_usdskel(path)


def _matrix(m: np.ndarray) -> Gf.Matrix4d:
    return Gf.Matrix4d(np.asarray(m).T.tolist())


@pytest.mark.parametrize("rest_authored", [True, False])
def test_read_general_stage_matches_pixar(tmp_path, rest_authored):
    """A hand-authored stage: two root joints, bind pose != rest pose (or no rest pose at all), a mesh with
    skel:joints remapping, polygons and a geomBindTransform, a rigidly bound mesh (constant interpolation), and an
    animation listing joints in another order (covering all but one joint when a rest pose exists)."""
    rng = np.random.default_rng(3)
    path = tmp_path / "general.usda"
    stage = Usd.Stage.CreateNew(str(path))
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    stage.SetTimeCodesPerSecond(24.0)
    root = UsdSkel.Root.Define(stage, "/Root")
    stage.SetDefaultPrim(root.GetPrim())
    joints = ["a", "b", "a/c", "a/c/d"]
    parents = [-1, -1, 0, 2]

    def random_rigid(n, spread):
        return transform_matrix(rng.normal(scale=spread, size=(n, 3)), axis_angle_to_quat(rng.normal(size=(n, 3))))

    local_rest = random_rigid(4, 0.3)
    world_rest = local_rest.copy()
    for j, p in enumerate(parents):
        if p >= 0:
            world_rest[j] = world_rest[p] @ local_rest[j]
    bind = world_rest @ random_rigid(4, 0.02)
    skel = UsdSkel.Skeleton.Define(stage, "/Root/Skel")
    skel.CreateJointsAttr(joints)
    skel.CreateBindTransformsAttr(Vt.Matrix4dArray([_matrix(m) for m in bind]))
    if rest_authored:
        skel.CreateRestTransformsAttr(Vt.Matrix4dArray([_matrix(m) for m in local_rest]))

    anim_joints = ["a/c/d", "b", "a/c"] if rest_authored else ["a/c/d", "b", "a/c", "a"]
    anim = UsdSkel.Animation.Define(stage, "/Root/Anim")
    anim.CreateJointsAttr(anim_joints)
    n = len(anim_joints)
    for code in (0.0, 2.0, 5.0):
        quats = axis_angle_to_quat(rng.normal(scale=0.6, size=(n, 3)))
        anim.CreateRotationsAttr().Set(Vt.QuatfArray([Gf.Quatf(q[3], *q[:3]) for q in quats]), code)
    for code in (0.0, 5.0):
        anim.CreateTranslationsAttr().Set(Vt.Vec3fArray(rng.normal(scale=0.3, size=(n, 3)).tolist()), code)
    anim.CreateScalesAttr().Set(Vt.Vec3hArray([Gf.Vec3h(1.0)] * n))  # Pixar ignores animations without scales
    UsdSkel.BindingAPI.Apply(skel.GetPrim()).CreateAnimationSourceRel().SetTargets([anim.GetPath()])

    # polygon mesh bound through skel:joints = [a/c/d, a, b]
    points = rng.normal(scale=0.4, size=(8, 3))
    poly = UsdGeom.Mesh.Define(stage, "/Root/Poly")
    poly.CreatePointsAttr(Vt.Vec3fArray(points.tolist()))
    poly.CreateFaceVertexCountsAttr([4, 3, 5])
    poly.CreateFaceVertexIndicesAttr([0, 1, 2, 3, 3, 2, 4, 4, 5, 6, 7, 0])
    binding = UsdSkel.BindingAPI.Apply(poly.GetPrim())
    binding.CreateSkeletonRel().SetTargets([skel.GetPath()])
    binding.CreateJointsAttr(["a/c/d", "a", "b"])
    local_idx = rng.integers(0, 3, size=(8, 2))
    local_idx[:, 1] = (local_idx[:, 0] + 1) % 3
    w = rng.uniform(0.1, 1.0, size=(8, 2))
    w /= w.sum(1, keepdims=True)
    binding.CreateJointIndicesPrimvar(False, 2).Set(Vt.IntArray(local_idx.reshape(-1).tolist()))
    binding.CreateJointWeightsPrimvar(False, 2).Set(Vt.FloatArray(w.reshape(-1).tolist()))
    gbt = random_rigid(1, 0.2)[0]
    binding.CreateGeomBindTransformAttr(_matrix(gbt))

    # rigid mesh: constant interpolation, skeleton joint order
    rigid = UsdGeom.Mesh.Define(stage, "/Root/Rigid")
    rigid.CreatePointsAttr(Vt.Vec3fArray(rng.normal(scale=0.2, size=(3, 3)).tolist()))
    rigid.CreateFaceVertexCountsAttr([3])
    rigid.CreateFaceVertexIndicesAttr([0, 1, 2])
    rbinding = UsdSkel.BindingAPI.Apply(rigid.GetPrim())
    rbinding.CreateSkeletonRel().SetTargets([skel.GetPath()])
    rbinding.CreateJointIndicesPrimvar(True, 1).Set(Vt.IntArray([3]))
    rbinding.CreateJointWeightsPrimvar(True, 1).Set(Vt.FloatArray([1.0]))
    stage.Save()

    reference = path
    if not rest_authored:  # Pixar needs restTransforms: author UsdSkel's rest = bind relative to the parent
        reference = tmp_path / "general_with_rest.usda"
        rest = np.array([bind[j] if p < 0 else np.linalg.inv(bind[p]) @ bind[j] for j, p in enumerate(parents)])
        skel.CreateRestTransformsAttr(Vt.Matrix4dArray([_matrix(m) for m in rest]))
        stage.GetRootLayer().Export(str(reference))
        skel.GetRestTransformsAttr().Clear()
        stage.Save()
    codes, pixar, _ = pixar_skinning(reference)
    np.testing.assert_allclose(codes, [0.0, 2.0, 5.0])
    asset = read_usdskel(path)
    rig = asset.rig
    # a synthetic root joins the two USD roots
    assert rig.joint_names == ("root", "a", "b", "c", "d")
    np.testing.assert_array_equal(rig.parents, [-1, 0, 0, 1, 3])
    if not rest_authored:  # the rest pose falls back to the bind pose
        np.testing.assert_allclose(rig.rest_world_matrices()[1:], bind, atol=MATRIX_ATOL)
    poly_mesh, rigid_mesh = rig.meshes
    assert poly_mesh.name == "Poly" and rigid_mesh.name == "Rigid"
    np.testing.assert_array_equal(
        poly_mesh.triangles, [[0, 1, 2], [0, 2, 3], [3, 2, 4], [4, 5, 6], [4, 6, 7], [4, 7, 0]]
    )
    np.testing.assert_allclose(poly_mesh.points, points @ gbt[:3, :3].T + gbt[:3, 3], atol=FLOAT32_ATOL)
    expected_w = np.zeros((8, 5))
    to_rig = np.array([4, 1, 2])  # skel:joints [a/c/d, a, b] -> rig joints (after the synthetic root)
    np.add.at(expected_w, (np.arange(8)[:, None], to_rig[local_idx]), w)
    np.testing.assert_allclose(dense_weights(poly_mesh, 5), expected_w, atol=FLOAT32_ATOL)
    np.testing.assert_allclose(dense_weights(rigid_mesh, 5)[:, 4], 1.0)

    clip = asset.clip()
    np.testing.assert_allclose(clip.times, np.array([0.0, 2.0, 5.0]) / 24.0, atol=TIME_ATOL)
    tol = SKINNING_RTOL * max(rig.height(), 1.0)
    for mesh in rig.meshes:
        ours, _ = sim.skin_motion(rig, clip, mesh=mesh)
        np.testing.assert_allclose(ours, pixar[mesh.name], atol=tol)


# -- (c) validators -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("suffix", [".usda", ".usdc"])
def test_written_stage_passes_validators(tmp_path, rig, clips, suffix):
    path = tmp_path / f"rig{suffix}"
    write_usdskel(path, rig, clips, meters_per_unit=0.01)
    assert validate_stage(path) == []


def test_validators_flag_a_bad_stage(tmp_path):
    """The validation helper is live: a stage without metadata and with a SkelBindingAPI outside a SkelRoot fails."""
    path = tmp_path / "bad.usda"
    stage = Usd.Stage.CreateNew(str(path))
    mesh = UsdGeom.Mesh.Define(stage, "/World/Mesh")
    UsdSkel.BindingAPI.Apply(mesh.GetPrim())
    stage.Save()
    errors = validate_stage(path)
    joined = "\n".join(errors)
    assert "metersPerUnit" in joined and "upAxis" in joined and "defaultPrim" in joined
    assert any("usdSkelValidators:SkelBindingApiValidator" in e and "/World/Mesh" in e for e in errors)
    assert {i.severity for i in validation_issues(path)} >= {"error"}


# -- (d) atomic writes ----------------------------------------------------------------------------------------
def test_failed_write_leaves_nothing(tmp_path, rig, clips):
    bad = Motion(30.0, np.zeros((2, 3)), np.tile([0.0, 0, 0, 1], (2, rig.joint_count - 1, 1)), name="bad")
    target = tmp_path / "out" / "rig.usda"
    with pytest.raises(RigError, match="bad"):
        write_usdskel(target, rig, [clips[0], bad])
    assert list((tmp_path / "out").iterdir()) == []


def test_non_usd_extension_is_refused(tmp_path, rig, clips):
    # USD picks the file format from the extension: a .txt or .json output would be a text layer in disguise
    for name in ("rig.txt", "rig.json", "rig"):
        with pytest.raises(ValueError, match=rf"{name}: output: a USD stage must end in \.usda"):
            write_usdskel(tmp_path / name, rig, clips[:1])
    assert list(tmp_path.iterdir()) == []


def test_failed_write_keeps_previous_file(tmp_path, rig, clips):
    target = tmp_path / "rig.usdc"
    write_usdskel(target, rig, clips)
    before = target.read_bytes()
    bad = Motion(30.0, np.zeros((1, 3)), np.tile([0.0, 0, 0, 1], (1, rig.joint_count + 1, 1)), name="bad")
    with pytest.raises(RigError):
        write_usdskel(target, rig, [bad])
    with pytest.raises(ValueError, match="bound_clip"):
        write_usdskel(target, rig, clips, bound_clip="nope")
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rig.usdc"]


# -- (e) malformed input --------------------------------------------------------------------------------------
def _skeleton_stage(path, joints, bind=None, rest=None):
    stage = Usd.Stage.CreateNew(str(path))
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    root = UsdSkel.Root.Define(stage, "/Root")
    stage.SetDefaultPrim(root.GetPrim())
    skel = UsdSkel.Skeleton.Define(stage, "/Root/Skeleton")
    skel.CreateJointsAttr(joints)
    if bind is not None:
        skel.CreateBindTransformsAttr(Vt.Matrix4dArray([Gf.Matrix4d(1.0)] * bind))
    if rest is not None:
        skel.CreateRestTransformsAttr(Vt.Matrix4dArray([Gf.Matrix4d(1.0)] * rest))
    stage.Save()
    return stage


def test_joints_out_of_order(tmp_path):
    path = tmp_path / "order.usda"
    _skeleton_stage(path, ["a/b", "a"], bind=2)
    with pytest.raises(InputError) as err:
        read_usdskel(path)
    assert str(err.value) == f"{path}: /Root/Skeleton.joints: joint 'a/b' is listed before its parent 'a'"


def test_repeated_leaf_joint_names_are_made_unique(tmp_path):
    """UsdSkel needs unique joint *paths* only: ``a/b/end`` and ``a/c/end`` are legal. Without jointNames the rig
    names joints after their paths' last elements, made unique; jointNames that repeat are ignored with a
    warning naming the field."""
    path = tmp_path / "leaves.usda"
    joints = ["a", "a/b", "a/b/end", "a/c", "a/c/end"]
    stage = _skeleton_stage(path, joints, bind=5)
    assert UsdSkel.Topology(joints).Validate()[0]
    assert read_usdskel(path).rig.joint_names == ("a", "b", "end", "c", "end_1")
    UsdSkel.Skeleton(stage.GetPrimAtPath("/Root/Skeleton")).CreateJointNamesAttr(["a", "b", "x", "c", "x"])
    stage.Save()
    with pytest.warns(UsdSkelWarning, match=r"leaves\.usda: /Root/Skeleton\.jointNames: .*not unique"):
        assert read_usdskel(path).rig.joint_names == ("a", "b", "end", "c", "end_1")


def _signed_volume(points: np.ndarray, triangles: np.ndarray) -> float:
    a, b, c = points[triangles[:, 0]], points[triangles[:, 1]], points[triangles[:, 2]]
    return float(np.einsum("ij,ij->i", a, np.cross(b, c)).sum() / 6.0)


@pytest.mark.parametrize("mirror", [1.0, -1.0])
def test_mirroring_geom_bind_transform_keeps_faces_outward(tmp_path, mirror):
    """A skinned mesh whose geomBindTransform mirrors it (scale -1 on x): its points are mirrored and its faces
    still point outward (positive enclosed volume, as the source tetrahedron's)."""
    path = tmp_path / "mirror.usda"
    stage = _skeleton_stage(path, ["a"], bind=1)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    tet = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1.0]]) * 0.1
    tris = np.array([[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]])
    assert _signed_volume(tet, tris) > 0
    mesh = UsdGeom.Mesh.Define(stage, "/Root/Tet")
    mesh.CreatePointsAttr(Vt.Vec3fArray(tet.tolist()))
    mesh.CreateFaceVertexCountsAttr([3] * 4)
    mesh.CreateFaceVertexIndicesAttr(tris.reshape(-1).tolist())
    binding = UsdSkel.BindingAPI.Apply(mesh.GetPrim())
    binding.CreateSkeletonRel().SetTargets(["/Root/Skeleton"])
    binding.CreateJointIndicesPrimvar(True, 1).Set(Vt.IntArray([0]))
    binding.CreateJointWeightsPrimvar(True, 1).Set(Vt.FloatArray([1.0]))
    binding.CreateGeomBindTransformAttr(_matrix(np.diag([mirror, 1.0, 1.0, 1.0])))
    skel = UsdSkel.Skeleton(stage.GetPrimAtPath("/Root/Skeleton"))
    skel.CreateRestTransformsAttr(Vt.Matrix4dArray([Gf.Matrix4d(1.0)]))
    stage.Save()
    (ours,) = read_usdskel(path).rig.meshes
    np.testing.assert_allclose(ours.points, tet * [mirror, 1.0, 1.0], atol=FLOAT32_ATOL)
    np.testing.assert_allclose(_signed_volume(ours.points, ours.triangles), _signed_volume(tet, tris), rtol=1e-6)


def test_nan_weights(tmp_path, rig, clips):
    path = tmp_path / "nan.usda"
    write_usdskel(path, rig, clips)
    stage = Usd.Stage.Open(str(path))
    primvar = UsdSkel.BindingAPI(stage.GetPrimAtPath("/test_rig/body")).GetJointWeightsPrimvar()
    weights = np.array(primvar.Get())
    weights[7] = np.nan
    primvar.Set(Vt.FloatArray(weights.tolist()))
    stage.Save()
    with pytest.raises(InputError, match="NaN") as err:
        read_usdskel(path)
    assert err.value.path == str(path)
    assert err.value.field == "/test_rig/body.primvars:skel:jointWeights"


@pytest.mark.parametrize(
    ("case", "field", "problem"),
    [
        ("no_skelroot", "SkelRoot", "no SkelRoot"),
        ("no_skeleton", "/Root", "no Skeleton"),
        ("not_usd", "file", "cannot open"),
        ("no_transforms", "/Root/Skeleton.restTransforms", "neither restTransforms nor bindTransforms"),
        ("bind_count", "/Root/Skeleton.bindTransforms", "1 matrices for 2 joints"),
        ("scaled_rest", "/Root/Skeleton.restTransforms", "not rigid"),
        ("weight_count", "/test_rig/body.primvars:skel:jointWeights", "jointIndices and jointWeights disagree"),
        ("weight_element_size", "/test_rig/body.primvars:skel:jointWeights", "elementSize 3; jointWeights"),
        ("no_weights", "/test_rig/body.primvars:skel:jointWeights", "not authored (jointIndices is)"),
        ("singular_bind", "/Root/Skeleton.bindTransforms", "joint 'a/b': the matrix is singular"),
        ("time_codes_per_second", "timeCodesPerSecond", "must be positive, got 0.0"),
        ("anim_count", "/test_rig/Animations/idle.translations", "values for 6 joints"),
        ("anim_scales_count", "/test_rig/Animations/idle.scales", "3 values for 6 joints"),
        ("anim_joint_twice", "/test_rig/Animations/idle.joints", "is listed twice"),
        ("huge_point", "/test_rig/body.points", "point 3 out of range (> 1e+15)"),
        ("bad_skeleton_arg", "/Root/Nope", "no Skeleton prim"),
        # from a review: an empty bindTransforms bound the rest pose silently; a projective geomBindTransform was
        # read as its top three rows (0.9 m off Pixar's skinning)
        ("bind_empty", "/Root/Skeleton.bindTransforms", "0 matrices for 2 joints (authored empty)"),
        ("projective_gbt", "/test_rig/body.primvars:skel:geomBindTransform", "is not (0, 0, 0, 1) (not an affine"),
        ("hole_range", "/test_rig/body.holeIndices", "face index outside [0, "),
    ],
)
def test_malformed_input(tmp_path, rig, clips, case, field, problem):
    path = tmp_path / f"{case}.usda"
    options = {}
    if case == "no_skelroot":
        stage = Usd.Stage.CreateNew(str(path))
        UsdSkel.Skeleton.Define(stage, "/World/Skeleton")
        stage.Save()
    elif case == "no_skeleton":
        stage = Usd.Stage.CreateNew(str(path))
        UsdSkel.Root.Define(stage, "/Root")
        stage.Save()
    elif case == "not_usd":
        path.write_text("this is not a USD layer\n{ [\n")
    elif case == "no_transforms":
        _skeleton_stage(path, ["a", "a/b"])
    elif case == "bind_count":
        _skeleton_stage(path, ["a", "a/b"], bind=1)
    elif case == "scaled_rest":
        stage = _skeleton_stage(path, ["a", "a/b"], bind=2, rest=2)
        attr = UsdSkel.Skeleton(stage.GetPrimAtPath("/Root/Skeleton")).GetRestTransformsAttr()
        attr.Set(Vt.Matrix4dArray([Gf.Matrix4d(1.0), Gf.Matrix4d(1.0).SetScale(Gf.Vec3d(1, 2, 1))]))
        stage.Save()
    elif case == "singular_bind":
        stage = _skeleton_stage(path, ["a", "a/b"], rest=2)
        singular = Gf.Matrix4d(1.0).SetScale(Gf.Vec3d(1, 0, 1))
        UsdSkel.Skeleton(stage.GetPrimAtPath("/Root/Skeleton")).CreateBindTransformsAttr(
            Vt.Matrix4dArray([Gf.Matrix4d(1.0), singular])
        )
        stage.Save()
    elif case in (
        "weight_count", "weight_element_size", "no_weights", "time_codes_per_second", "anim_count",
        "anim_scales_count", "anim_joint_twice", "huge_point",
    ):  # fmt: skip
        write_usdskel(path, rig, clips, bound_clip=1)
        stage = Usd.Stage.Open(str(path))
        binding = UsdSkel.BindingAPI(stage.GetPrimAtPath("/test_rig/body"))
        anim = UsdSkel.Animation(stage.GetPrimAtPath("/test_rig/Animations/idle"))
        if case == "weight_count":
            primvar = binding.GetJointWeightsPrimvar()
            primvar.Set(Vt.FloatArray(list(primvar.Get())[:-4]))
        elif case == "weight_element_size":
            binding.GetJointIndicesPrimvar().SetElementSize(3)
        elif case == "no_weights":
            binding.GetJointWeightsPrimvar().GetAttr().Clear()
        elif case == "time_codes_per_second":
            stage.SetTimeCodesPerSecond(0.0)
        elif case == "anim_count":
            anim.GetTranslationsAttr().Set(Vt.Vec3fArray([Gf.Vec3f(0.0)] * 3), 0.0)
        elif case == "huge_point":
            points = UsdGeom.Mesh(stage.GetPrimAtPath("/test_rig/body")).GetPointsAttr()
            value = np.array(points.Get())
            value[3, 1] = 1e30  # float32 holds it; squares of it do not
            points.Set(Vt.Vec3fArray(value.tolist()))
        elif case == "anim_scales_count":
            anim.GetScalesAttr().Set(Vt.Vec3hArray([Gf.Vec3h(1.0)] * 3), 0.0)
        else:
            joints = list(anim.GetJointsAttr().Get())
            anim.GetJointsAttr().Set(joints[:-1] + joints[:1])
        stage.Save()
    elif case == "bad_skeleton_arg":
        _skeleton_stage(path, ["a"], bind=1)
        options["skeleton"] = "/Root/Nope"
    elif case == "bind_empty":
        stage = _skeleton_stage(path, ["a", "a/b"], rest=2)
        UsdSkel.Skeleton(stage.GetPrimAtPath("/Root/Skeleton")).CreateBindTransformsAttr(Vt.Matrix4dArray([]))
        stage.Save()
    elif case in ("projective_gbt", "hole_range"):
        write_usdskel(path, rig, clips)
        stage = Usd.Stage.Open(str(path))
        body = stage.GetPrimAtPath("/test_rig/body")
        if case == "projective_gbt":
            m = Gf.Matrix4d(1.0)
            m.SetRow(3, Gf.Vec4d(0.1, 0.0, 0.0, 2.0))
            UsdSkel.BindingAPI(body).GetGeomBindTransformAttr().Set(m)
        else:
            UsdGeom.Mesh(body).CreateHoleIndicesAttr(Vt.IntArray([0, 100000]))
        stage.Save()
    with pytest.raises(InputError) as err:
        read_usdskel(path, **options)
    assert err.value.path == str(path)
    assert err.value.field == field
    assert problem in err.value.problem
    assert str(err.value).startswith(f"{path}: {field}: ")


def test_ignored_bindings_and_animation_joints_warn(tmp_path, rig, clips):
    """What Pixar's UsdSkel silently skips is named: a mesh whose skel:skeleton targets no Skeleton (not
    imported), and animation joints the Skeleton does not have (ignored)."""
    path = tmp_path / "skips.usda"
    write_usdskel(path, rig, clips[:1])
    stage = Usd.Stage.Open(str(path))
    UsdSkel.BindingAPI(stage.GetPrimAtPath("/test_rig/body")).GetSkeletonRel().SetTargets(["/test_rig/Nope"])
    stage.Save()
    with pytest.warns(UsdSkelWarning, match=r"skips\.usda: /test_rig/body\.skel:skeleton: targets /test_rig/Nope"):
        asset = read_usdskel(path)
    assert [m.name for m in asset.rig.meshes] == ["arm box.001"]

    path = tmp_path / "extra_joint.usda"
    stage = _skeleton_stage(path, ["a"], bind=1, rest=1)
    anim = UsdSkel.Animation.Define(stage, "/Root/Anim")
    anim.CreateJointsAttr(["a", "a/zz"])
    anim.CreateTranslationsAttr().Set(Vt.Vec3fArray([Gf.Vec3f(0.0)] * 2))
    anim.CreateRotationsAttr().Set(Vt.QuatfArray([Gf.Quatf(1.0)] * 2))
    anim.CreateScalesAttr().Set(Vt.Vec3hArray([Gf.Vec3h(1.0)] * 2))
    stage.Save()
    with pytest.warns(UsdSkelWarning, match=r"/Root/Anim\.joints: 1 joint\(s\) not in /Root/Skeleton ignored: 'a/zz'"):
        read_usdskel(path)


def test_animation_scales_are_checked(tmp_path, rig, clips):
    """Unauthored scales (Pixar would drop the animation) or non-unit scales (we cannot represent them) warn."""
    path = tmp_path / "scales.usda"
    write_usdskel(path, rig, clips[:1])
    stage = Usd.Stage.Open(str(path))
    attr = UsdSkel.Animation(stage.GetPrimAtPath("/test_rig/Animations/walk_cycle")).GetScalesAttr()
    attr.Clear()
    stage.Save()
    with pytest.warns(UsdSkelWarning, match="scales not authored"):
        asset = read_usdskel(path)
    assert_same_quats(asset.clip().rotations, clips[0].rotations, FLOAT32_ATOL)
    attr.Set(Vt.Vec3hArray([Gf.Vec3h(1.5, 1.0, 1.0)] * rig.joint_count), 0.0)
    stage.Save()
    with pytest.warns(UsdSkelWarning, match="scales: joint scales"):
        read_usdskel(path)


# -- (f) several skeletons in one stage -------------------------------------------------------------------------
def _small_rig() -> Rig:
    """A three-joint chain with no meshes, distinguishable from :func:`make_rig` by its joints."""
    q = axis_angle_to_quat(np.zeros((3, 3)))
    return Rig(["base", "mid", "tip"], [-1, 0, 1], np.array([[0, 0, 0.5], [0, 0, 0.3], [0, 0, 0.2]]), q, name="chain")


def _scene_with_references(path, layout, default="World"):
    """A stage whose prims reference whole-asset layers (their defaultPrim): ``layout`` maps prim path -> layer."""
    stage = Usd.Stage.CreateNew(str(path))
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    for prim_path, layer in layout.items():
        for ancestor in Sdf.Path(prim_path).GetPrefixes()[:-1]:
            UsdGeom.Xform.Define(stage, ancestor)
        stage.DefinePrim(prim_path).GetReferences().AddReference(str(layer))
    if default:
        stage.SetDefaultPrim(stage.GetPrimAtPath(f"/{default}"))
    stage.GetRootLayer().Save()


def test_several_skeletons_warn_and_choose(tmp_path, rig, clips):
    """Two SkelRoots under the defaultPrim: the first in namespace order is read with a warning naming both and the
    way to choose; ``skeleton=`` (through read_usdskel or load_asset) reads the other silently."""
    import warnings

    write_usdskel(tmp_path / "test_rig.usda", rig, clips[:1])
    write_usdskel(tmp_path / "chain.usda", _small_rig())
    path = tmp_path / "scene.usda"
    _scene_with_references(path, {"/World/B/C": tmp_path / "chain.usda", "/World/A": tmp_path / "test_rig.usda"})
    with pytest.warns(UsdSkelWarning) as record:
        asset = read_usdskel(path)
    assert asset.rig.joint_names == ("base", "mid", "tip")  # /World/B/C comes first in namespace order
    (message,) = [str(w.message) for w in record]
    assert message.startswith(f"{path}: /World/B/C/Skeleton: 2 Skeletons under the defaultPrim /World")
    assert "/World/A/Skeleton" in message and "skeleton=" in message
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for read in (read_usdskel, load_asset):
            chosen = read(path, skeleton="/World/A/Skeleton")
            assert chosen.rig.joint_names == rig.joint_names and list(chosen.clips) == [clips[0].name]
            np.testing.assert_allclose(chosen.rig.rest_translations, rig.rest_translations, atol=MATRIX_ATOL)
            assert read(path, skeleton="/World/B/C/Skeleton").rig.joint_names == ("base", "mid", "tip")
    for bad, problem in (("/World/A", "no Skeleton prim at this path"), ("World/A/Skeleton", "not an absolute"),
                         ("/World/A/Skeleton.joints", "not an absolute")):  # fmt: skip
        with pytest.raises(InputError) as err:
            load_asset(path, skeleton=bad)
        assert (err.value.path, err.value.field) == (str(path), bad)
        assert problem in err.value.problem
        assert err.value.problem.endswith("Skeletons in the stage: /World/B/C/Skeleton, /World/A/Skeleton")


def test_skeleton_under_the_default_prim_is_preferred(tmp_path, rig):
    """A SkelRoot outside the defaultPrim (first in traversal order) is not read, and nothing is reported."""
    import warnings

    write_usdskel(tmp_path / "test_rig.usda", rig)
    write_usdskel(tmp_path / "chain.usda", _small_rig())
    path = tmp_path / "scene.usda"
    _scene_with_references(path, {"/Other": tmp_path / "chain.usda", "/Asset/Char": tmp_path / "test_rig.usda"},
                           default="Asset")  # fmt: skip
    stage = Usd.Stage.Open(str(path))
    assert next(str(p.GetPath()) for p in stage.Traverse() if p.IsA(UsdSkel.Skeleton)) == "/Other/Skeleton"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_usdskel(path).rig.joint_names == rig.joint_names
    # no defaultPrim: both count, the first is read with a warning
    stage.GetRootLayer().ClearDefaultPrim()
    stage.Save()
    with pytest.warns(UsdSkelWarning, match=r"/Other/Skeleton: 2 Skeletons in the stage; .* /Asset/Char/Skeleton"):
        assert read_usdskel(path).rig.joint_names == ("base", "mid", "tip")


def test_skeleton_choice_is_for_usd_files_only(tmp_path):
    with pytest.raises(InputError) as err:
        load_asset("procedural:quadruped-walk", skeleton="/Root/Skeleton")
    assert (err.value.path, err.value.field) == ("procedural:quadruped-walk", "skeleton")
    path = tmp_path / "walk.bvh"
    path.write_text("HIERARCHY\n")
    with pytest.raises(InputError, match=r"walk\.bvh: skeleton: only USD files"):
        load_asset(path, skeleton="/Root/Skeleton")


def test_missing_file_through_dispatcher(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        load_asset(tmp_path / "missing.usda")
    (tmp_path / "folder.usda").mkdir()
    with pytest.raises(InputError, match=r"folder\.usda: path: is a folder, not a file"):
        load_asset(tmp_path / "folder.usda")


@pytest.mark.parametrize(
    ("text", "reason"), [("", "is not a valid usda layer"), ("#usda 1.0\n(\n", "broken.usda:3:1: Expected )")]
)
def test_unopenable_stage_names_the_reason_not_cpp_locations(tmp_path, text, reason):
    path = tmp_path / "broken.usda"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        read_usdskel(path)
    assert err.value.field == "file" and reason in err.value.problem
    assert "in file" not in err.value.problem and "Failed to open layer" not in err.value.problem


@pytest.mark.parametrize("step", [1, 3])
def test_foreign_clip_fps_is_its_sampling_rate(tmp_path, step):
    """A foreign stage (no kinedistill:fps) with timeCodesPerSecond 60, framesPerSecond 30 (a playback hint) and
    a rotation sample every ``step`` codes: the clip's fps is its sampling rate, so it is uniform at its own
    rate and nothing downstream resamples (drops) its frames; unevenly spaced samples fall back to
    framesPerSecond."""
    path = tmp_path / "rate.usda"
    stage = _skeleton_stage(path, ["a", "a/b"], bind=2, rest=2)
    stage.SetTimeCodesPerSecond(60.0)
    stage.SetFramesPerSecond(30.0)
    anim = UsdSkel.Animation.Define(stage, "/Root/Anim")
    anim.CreateJointsAttr(["a/b"])
    codes = np.arange(0, 12, step, dtype=float)
    for k, code in enumerate(codes):
        q = axis_angle_to_quat(np.array([0.05 * k, 0.0, 0.0]))
        anim.CreateRotationsAttr().Set(Vt.QuatfArray([Gf.Quatf(q[3], *q[:3])]), code)
    stage.Save()
    with pytest.warns(UsdSkelWarning):  # translations / scales not authored
        clip = read_usdskel(path).clip()
    assert clip.fps == pytest.approx(60.0 / step) and clip.is_uniform() and len(clip.times) == len(codes)
    anim.GetRotationsAttr().Set(Vt.QuatfArray([Gf.Quatf(1.0, 0.0, 0.0, 0.0)]), 13.0)  # uneven spacing now
    stage.Save()
    with pytest.warns(UsdSkelWarning):  # translations / scales not authored
        assert read_usdskel(path).clip().fps == pytest.approx(30.0)


def test_reader_options_are_checked_per_source_kind(tmp_path, rig, clips):
    """An option the source's reader does not take (BVH's meters_per_unit for a USD stage) is an InputError naming
    the file, the option and the options that kind takes; the options it takes still pass through."""
    path = tmp_path / "rig.usda"
    write_usdskel(path, rig, clips)
    with pytest.raises(InputError) as err:
        load_asset(path, meters_per_unit=0.01)
    assert err.value.path == str(path) and err.value.field == "options"
    assert "'meters_per_unit'" in str(err.value) and "they take: skeleton" in str(err.value)
    assert load_asset(path, skeleton="/test_rig/Skeleton").rig.joint_count == rig.joint_count
    with pytest.raises(InputError, match=r"procedural:biped: options: procedural assets take no option 'scene'"):
        load_asset("procedural:biped", scene=0)


def test_reads_copy_with_other_extension(tmp_path, rig, clips):
    """A .usd (binary by default) copy of a text stage reads the same."""
    src = tmp_path / "rig.usda"
    write_usdskel(src, rig, clips[:1])
    dst = tmp_path / "rig.usd"
    shutil.copy(src, dst)
    a, b = read_usdskel(src), read_usdskel(dst)
    assert a.rig.joint_names == b.rig.joint_names
    np.testing.assert_allclose(a.clip().rotations, b.clip().rotations)


def test_atomic_output_has_default_permissions(tmp_path):
    import os

    from usd_io import atomic_output

    target = tmp_path / "x.txt"
    with atomic_output(target) as tmp:
        tmp.write_text("hi")
    umask = os.umask(0)
    os.umask(umask)
    assert target.read_text() == "hi"
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask


def test_atomic_output_syncs_the_content_before_the_rename(tmp_path, monkeypatch):
    """Nothing was flushed before os.replace: after a power loss the new name could point at an empty file. The
    temporary file is synced (holding the full content) before the rename, the folder after it."""
    import os

    from usd_io import atomic_output

    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(a, b):
        events.append(("replace", str(a)))
        real_replace(a, b)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    target = tmp_path / "x.txt"
    with atomic_output(target) as tmp:
        tmp.write_text("content")
    assert [e[0] for e in events] == ["fsync", "replace", "fsync"]
    real = os.path.realpath
    assert real(events[0][1]) == real(events[1][1]) == real(tmp)  # the temporary file, before the rename
    assert real(events[2][1]) == real(tmp_path)  # the folder, after it
    assert target.read_text() == "content"


def test_atomic_output_keeps_links_modes_and_long_names(tmp_path):
    """A symlink was replaced by a regular file (its target kept the old content), an existing file's mode came back
    as the default, and a valid 245-byte name failed: the temporary name beside it was ~20 bytes longer."""
    import os

    from usd_io import atomic_output

    real = tmp_path / "real.txt"
    real.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    with atomic_output(link) as tmp:
        tmp.write_text("new")
    assert link.is_symlink() and real.read_text() == "new"
    os.chmod(real, 0o640)
    with atomic_output(real) as tmp:
        tmp.write_text("newer")
    assert real.stat().st_mode & 0o777 == 0o640
    long = tmp_path / ("n" * 240 + ".usda")
    with atomic_output(long) as tmp:
        tmp.write_text("#usda 1.0\n")
    assert long.read_text() == "#usda 1.0\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["real.txt", "link.txt", long.name])


def test_a_stage_rewritten_while_open_reads_back_new(tmp_path, rig, clips):
    """USD's layer registry served the replaced file's content to every later open while any stage of the path was
    held (a viewer, a notebook): load_asset read the first clip set after the second was written."""
    path = tmp_path / "open.usda"
    assert len(clips) > 1
    write_usdskel(path, rig, clips[:1])
    held = Usd.Stage.Open(str(path))
    write_usdskel(path, rig, clips)
    assert list(load_asset(path).clips) == [c.name for c in clips]
    assert held.GetRootLayer().ExportToString() == Sdf.Layer.OpenAsAnonymous(str(path)).ExportToString()


def test_atomic_output_names_an_unwritable_path(tmp_path, rig, clips):
    """A parent that is a file, or an output that is a folder: InputError naming the path, nothing left behind
    (the CLIs printed an OSError traceback)."""
    from usd_io import InputError, atomic_output, make_folder

    blocker = tmp_path / "afile"
    blocker.write_text("not a folder")
    with pytest.raises(InputError, match=rf"{blocker / 'sub'}: output: cannot create the folder: {blocker} is a file"):
        write_usdskel(blocker / "sub" / "x.usda", rig, clips)
    with pytest.raises(InputError, match=rf"{blocker}: output: cannot create the folder: {blocker} is a file"):
        make_folder(blocker)
    folder = tmp_path / "stage.usda"
    folder.mkdir()
    with pytest.raises(InputError, match=rf"{folder}: output: is a folder, not a file"):
        write_usdskel(folder, rig, clips)
    with pytest.raises(InputError, match="output"), atomic_output(folder):
        pass
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "stage.usda"]
    assert list(folder.iterdir()) == [] and blocker.read_text() == "not a folder"
    assert make_folder(tmp_path / "a" / "b") == tmp_path / "a" / "b" and (tmp_path / "a" / "b").is_dir()


def test_output_under_an_unreachable_folder_is_an_input_error(tmp_path, monkeypatch):
    # Path.is_dir/exists re-raise EACCES for a parent without execute permission (simulated: tests may run as root)
    from pathlib import Path

    from usd_io import InputError, atomic_output, make_folder

    real_is_dir = Path.is_dir

    def is_dir(self):
        if "locked" in self.parts:
            raise PermissionError(13, "Permission denied", str(self))
        return real_is_dir(self)

    monkeypatch.setattr(Path, "is_dir", is_dir)
    with pytest.raises(InputError, match=r"locked/a: output: cannot reach the folder \(Permission denied\)"):
        make_folder(tmp_path / "locked" / "a")
    with pytest.raises(InputError, match=r"locked/x\.json: output: cannot reach it \(Permission denied\)"):
        with atomic_output(tmp_path / "locked" / "x.json"):
            pass


# -- (g) skinning method, blend shapes, bind transforms, weights, scales, time origin -------------------------------
def test_dual_quaternion_skinning_is_refused(tmp_path, rig, clips):
    """Pixar skins a ``skel:skinningMethod = dualQuaternion`` mesh by dual quaternions, which differ from our
    linear blend skinning far beyond the tolerance: the reader refuses it (reading it as LBS was silent)."""
    path = tmp_path / "dqs.usda"
    write_usdskel(path, rig, clips[:1])
    stage = Usd.Stage.Open(str(path))
    UsdSkel.BindingAPI(stage.GetPrimAtPath("/test_rig/body")).CreateSkinningMethodAttr(UsdSkel.Tokens.dualQuaternion)
    stage.Save()
    _, pixar, _ = pixar_skinning(path)
    ours, _ = sim.skin_motion(rig, clips[0], mesh=rig.meshes[0])
    assert np.abs(ours - pixar["body"]).max() > 10 * SKINNING_RTOL * rig.height()  # DQS really differs here
    with pytest.raises(InputError) as err:
        read_usdskel(path)
    assert err.value.path == str(path)
    assert err.value.field == "/test_rig/body.skel:skinningMethod"
    assert err.value.problem.startswith("dualQuaternion skinning is not supported; the toolkit skins with linear")


def test_blend_shapes_are_reported_as_ignored(tmp_path, rig, clips):
    """A mesh with a blend shape (Pixar's BakeSkinning adds its weighted offsets): the reader keeps the base shape,
    which is what Pixar's ComputeSkinnedPoints skins, and warns naming file, mesh and shape."""
    path = tmp_path / "blend.usda"
    write_usdskel(path, rig, clips[:1])
    stage = Usd.Stage.Open(str(path))
    prim = stage.GetPrimAtPath("/test_rig/body")
    shape = UsdSkel.BlendShape.Define(stage, prim.GetPath().AppendChild("bulge"))
    shape.CreateOffsetsAttr(Vt.Vec3fArray([Gf.Vec3f(0.0, 0.0, 0.1)] * rig.meshes[0].vertex_count))
    binding = UsdSkel.BindingAPI(prim)
    binding.CreateBlendShapesAttr(Vt.TokenArray(["bulge"]))
    binding.CreateBlendShapeTargetsRel().SetTargets([shape.GetPath()])
    anim = UsdSkel.Animation(stage.GetPrimAtPath("/test_rig/Animations/walk_cycle"))
    anim.CreateBlendShapesAttr(Vt.TokenArray(["bulge"]))
    anim.CreateBlendShapeWeightsAttr(Vt.FloatArray([1.0]))
    stage.Save()
    ignored = r"blend\.usda: /test_rig/body\.skel:blendShapes: 1 blend shape\(s\) \('bulge'\) ignored"
    with pytest.warns(UsdSkelWarning, match=ignored):
        asset = read_usdskel(path)
    _, pixar, _ = pixar_skinning(path)
    ours, _ = sim.skin_motion(asset.rig, asset.clip(), mesh=asset.rig.meshes[0])
    np.testing.assert_allclose(ours, pixar["body"], atol=SKINNING_RTOL * rig.height())


def test_time_sampled_geom_bind_transform_matches_pixar(tmp_path, rig, clips):
    """A geomBindTransform authored only as a time sample has no default value: Pixar skins with the sample, the
    reader read identity (0.25 m off). One that varies over time warns (its earliest value is used)."""
    path = tmp_path / "gbt.usda"
    write_usdskel(path, rig, clips[:1])
    stage = Usd.Stage.Open(str(path))
    attr = UsdSkel.BindingAPI(stage.GetPrimAtPath("/test_rig/body")).GetGeomBindTransformAttr()
    attr.Clear()
    moved = transform_matrix(np.array([0.0, 0.1, 0.25]), axis_angle_to_quat(np.array([0.0, 0.0, 0.4])))
    attr.Set(_matrix(moved), 0.0)
    stage.Save()
    _, pixar, _ = pixar_skinning(path)
    asset = read_usdskel(path)
    tol = SKINNING_RTOL * rig.height()
    for mesh, prim_name in zip(asset.rig.meshes, ["body", "arm_box_001"]):
        ours, _ = sim.skin_motion(asset.rig, asset.clip(), mesh=mesh)
        np.testing.assert_allclose(ours, pixar[prim_name], atol=tol)
    attr.Set(_matrix(np.eye(4)), 5.0)
    stage.Save()
    with pytest.warns(UsdSkelWarning, match=r"gbt\.usda: /test_rig/body\.primvars:skel:geomBindTransform: varies"):
        read_usdskel(path)


@pytest.mark.parametrize(("value", "problem"), [(np.nan, "non-finite matrix entries"), (1e30, "out of range")])
def test_bad_geom_bind_transform_is_an_input_error(tmp_path, value, problem):
    """A NaN geomBindTransform was reported as the mesh's points; a 1e30 one was accepted (points of 1e30 m)."""
    path = tmp_path / "gbt.usda"
    stage = _skeleton_stage(path, ["a"], bind=1, rest=1)
    mesh = UsdGeom.Mesh.Define(stage, "/Root/Tri")
    mesh.CreatePointsAttr(Vt.Vec3fArray([(0, 0, 0), (0.1, 0, 0), (0, 0.1, 0)]))
    mesh.CreateFaceVertexCountsAttr([3])
    mesh.CreateFaceVertexIndicesAttr([0, 1, 2])
    binding = UsdSkel.BindingAPI.Apply(mesh.GetPrim())
    binding.CreateSkeletonRel().SetTargets(["/Root/Skeleton"])
    binding.CreateJointIndicesPrimvar(True, 1).Set(Vt.IntArray([0]))
    binding.CreateJointWeightsPrimvar(True, 1).Set(Vt.FloatArray([1.0]))
    matrix = np.eye(4)
    if np.isnan(value):
        matrix[2, 3] = value  # a NaN translation
    else:
        matrix[:3, :3] *= value  # a float-valid, absurd scale
    binding.CreateGeomBindTransformAttr(_matrix(matrix))
    stage.Save()
    with pytest.raises(InputError) as err:
        read_usdskel(path)
    assert err.value.path == str(path)
    assert err.value.field == "/Root/Tri.primvars:skel:geomBindTransform"
    assert problem in err.value.problem


def test_weights_not_summing_to_one_warn_with_file_and_field(tmp_path, rig, clips):
    """Pixar skins with the weights as authored; the rig renormalizes them. The reader says so with the file, the
    field, the vertex count and the range of sums (the rig's own RigWarning named neither and is not repeated)."""
    path = tmp_path / "sums.usda"
    write_usdskel(path, rig, clips[:1])
    stage = Usd.Stage.Open(str(path))
    primvar = UsdSkel.BindingAPI(stage.GetPrimAtPath("/test_rig/body")).GetJointWeightsPrimvar()
    k = rig.meshes[0].influence_count
    weights = np.array(primvar.Get(), dtype=np.float32).reshape(-1, k)
    weights[:5] *= 0.5
    weights[5] *= 1.25
    primvar.Set(Vt.FloatArray.FromNumpy(weights.reshape(-1)))
    stage.Save()
    with pytest.warns(UsdSkelWarning) as record:
        asset = read_usdskel(path)
    assert not [w for w in record if issubclass(w.category, sim.RigWarning)]
    (message,) = [str(w.message) for w in record if "jointWeights" in str(w.message)]
    v = rig.meshes[0].vertex_count
    assert message.startswith(f"{path}: /test_rig/body.primvars:skel:jointWeights: the weights of 6 of {v} vertices")
    assert "sum to 0.5 .. 1.25, not 1" in message and "renormalized" in message
    got = asset.rig.meshes[0]
    np.testing.assert_allclose(got.influence_weights.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(dense_weights(got, rig.joint_count), dense_weights(rig.meshes[0], rig.joint_count),
                               atol=FLOAT32_ATOL)  # fmt: skip
    _, pixar, _ = pixar_skinning(path)  # Pixar's skinning of the unnormalized weights differs from ours
    ours, _ = sim.skin_motion(asset.rig, asset.clip(), mesh=got)
    assert np.abs(ours - pixar["body"]).max() > 10 * SKINNING_RTOL * rig.height()


def test_non_finite_animation_scales_are_an_input_error(tmp_path, rig, clips):
    """A NaN scale was ignored (max(0, nan) is 0), unlike NaN translations and rotations; zero scales still warn."""
    path = tmp_path / "scales.usda"
    write_usdskel(path, rig, clips[:1])
    stage = Usd.Stage.Open(str(path))
    attr = UsdSkel.Animation(stage.GetPrimAtPath("/test_rig/Animations/walk_cycle")).GetScalesAttr()
    code = float(attr.GetTimeSamples()[1])
    scales = np.ones((rig.joint_count, 3), dtype=np.float16)
    scales[2, 1] = np.nan
    attr.Set(Vt.Vec3hArray.FromNumpy(scales), code)
    stage.Save()
    with pytest.raises(InputError) as err:
        read_usdskel(path)
    assert err.value.path == str(path)
    assert err.value.field == "/test_rig/Animations/walk_cycle.scales"
    assert err.value.problem == f"non-finite value at time {code}"
    attr.Set(Vt.Vec3hArray.FromNumpy(np.zeros((rig.joint_count, 3), dtype=np.float16)), code)
    stage.Save()
    with pytest.warns(UsdSkelWarning, match=r"walk_cycle\.scales: joint scales \(up to 1 off 1\) ignored"):
        read_usdskel(path)


def test_keys_before_time_zero_keep_their_times(tmp_path, rig, clips):
    """A clip keyed from -0.5 s beside one from 0: the stage's startTimeCode is the smallest code (the playback
    range), the time origin (``start_time_code``) is recorded in customLayerData, and both clips read back with
    their times (every clip was shifted by 0.5 s). A stage without the origin measures times from startTimeCode."""
    walk, idle = clips
    early = Motion(idle.fps, idle.root_translations, idle.rotations, times=idle.times - 0.5, name="early")
    path = tmp_path / "early.usda"
    tcps, start = 60.0, 12.0
    write_usdskel(path, rig, [early, walk], time_codes_per_second=tcps, start_time_code=start)
    stage = Usd.Stage.Open(str(path))
    assert stage.GetStartTimeCode() == pytest.approx(start - 0.5 * tcps)
    assert stage.GetEndTimeCode() == pytest.approx(walk.times[-1] * tcps + start)
    assert stage.GetRootLayer().customLayerData == {"kinedistill:timeOrigin": start}
    codes, _, _ = pixar_skinning(path)  # Pixar's samples of the bound clip: codes = times * tcps + start
    np.testing.assert_allclose(codes, early.times * tcps + start, atol=TIME_ATOL)
    asset = read_usdskel(path)
    for want in (early, walk):
        np.testing.assert_allclose(asset.clips[want.name].times, want.times, atol=TIME_ATOL)
    assert validate_stage(path) == []

    stage.GetRootLayer().customLayerData = {}  # a foreign stage: time 0 at startTimeCode
    stage.Save()
    np.testing.assert_allclose(read_usdskel(path).clips["walk/cycle"].times, walk.times + 0.5, atol=TIME_ATOL)
    stage.GetRootLayer().customLayerData = {"kinedistill:timeOrigin": "twelve"}
    stage.Save()
    with pytest.raises(InputError) as err:
        read_usdskel(path)
    assert (err.value.path, err.value.field) == (str(path), "customLayerData:kinedistill:timeOrigin")


def test_failed_export_keeps_previous_file(tmp_path, rig, clips, monkeypatch):
    """Sdf.Layer.Export reporting failure (False) left the empty temporary file in place of the target."""
    target = tmp_path / "rig.usda"
    write_usdskel(target, rig, clips)
    before = target.read_bytes()
    monkeypatch.setattr(Sdf.Layer, "Export", lambda self, *args, **kwargs: False)
    with pytest.raises(InputError) as err:
        write_usdskel(target, rig, clips[:1])
    assert (err.value.path, err.value.field) == (str(target), "output")
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rig.usda"]


def test_boolean_fps_custom_data_falls_back_to_the_sampling_rate(tmp_path):
    """``kinedistill:fps = True`` is a Python int 1: the clip read as 1 fps; it is now ignored like any non-number."""
    path = tmp_path / "bool_fps.usda"
    stage = _skeleton_stage(path, ["a", "a/b"], bind=2, rest=2)
    stage.SetTimeCodesPerSecond(24.0)
    anim = UsdSkel.Animation.Define(stage, "/Root/Anim")
    anim.CreateJointsAttr(["a/b"])
    for code in (0.0, 1.0, 2.0):
        anim.CreateRotationsAttr().Set(Vt.QuatfArray([Gf.Quatf(1.0, 0.0, 0.0, 0.0)]), code)
    anim.GetPrim().SetCustomDataByKey("kinedistill:fps", True)
    stage.Save()
    with pytest.warns(UsdSkelWarning):  # translations / scales not authored
        assert read_usdskel(path).clip().fps == pytest.approx(24.0)


@pytest.mark.parametrize("field", ["restTransforms", "bindTransforms"])
def test_projective_joint_matrix_is_refused(tmp_path, field):
    """A matrix whose 4th column is not (0, 0, 0, 1): the rest value lost it silently, the bind value became a
    wrong inverse bind matrix."""
    path = tmp_path / "projective.usda"
    stage = _skeleton_stage(path, ["a", "a/b"], **{field[:4]: 2})
    bad = Gf.Matrix4d(1.0)
    bad.SetColumn(3, Gf.Vec4d(0.5, 0.0, 0.0, 1.0))
    UsdSkel.Skeleton(stage.GetPrimAtPath("/Root/Skeleton")).GetPrim().GetAttribute(field).Set(
        Vt.Matrix4dArray([Gf.Matrix4d(1.0), bad])
    )
    stage.Save()
    with pytest.raises(InputError) as err:
        read_usdskel(path)
    assert err.value.field == f"/Root/Skeleton.{field}"
    assert "joint 'b'" in err.value.problem and "not an affine transform" in err.value.problem


def test_other_skeletons_animation_is_not_a_clip_of_this_one(tmp_path):
    """Two skeletons in one SkelRoot with the same joint names, each with its own animation source: reading one
    gave it the other's animation as a second clip."""
    path = tmp_path / "two.usda"
    stage = Usd.Stage.CreateNew(str(path))
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    root = UsdSkel.Root.Define(stage, "/Root")
    stage.SetDefaultPrim(root.GetPrim())
    for who, angle in (("A", 0.0), ("B", 90.0)):
        skel = UsdSkel.Skeleton.Define(stage, f"/Root/{who}/Skel")
        skel.CreateJointsAttr(["hips", "hips/spine"])
        skel.CreateRestTransformsAttr(
            Vt.Matrix4dArray([Gf.Matrix4d(1.0).SetTranslate(Gf.Vec3d(0, 0, z)) for z in (1, 0.5)])
        )
        anim = UsdSkel.Animation.Define(stage, f"/Root/{who}/Anim_{who}")
        anim.CreateJointsAttr(["hips", "hips/spine"])
        q = Gf.Quatf(Gf.Rotation(Gf.Vec3d(1, 0, 0), angle).GetQuat())
        for code in (0.0, 1.0):
            anim.CreateRotationsAttr().Set(Vt.QuatfArray([q, q]), code)
        anim.CreateTranslationsAttr().Set(Vt.Vec3fArray([(0, 0, 1), (0, 0, 0.5)]), 0.0)
        UsdSkel.BindingAPI.Apply(skel.GetPrim()).CreateAnimationSourceRel().SetTargets([anim.GetPath()])
    stage.Save()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UsdSkelWarning)
        assert list(read_usdskel(path, skeleton="/Root/A/Skel").clips) == ["Anim_A"]
        assert list(read_usdskel(path, skeleton="/Root/B/Skel").clips) == ["Anim_B"]


def test_bound_clip_is_chosen_by_position(tmp_path, rig, clips):
    """The same Motion passed twice: the bound clip was found by identity, so bound_clip=0 bound the last copy."""
    path = tmp_path / "twice.usda"
    write_usdskel(path, rig, [clips[0], clips[1], clips[0]], bound_clip=0)
    stage = Usd.Stage.Open(str(path))
    skel = next(p for p in stage.Traverse() if p.IsA(UsdSkel.Skeleton))
    targets = UsdSkel.BindingAPI(skel).GetAnimationSourceRel().GetTargets()
    anims = [p for p in stage.Traverse() if p.IsA(UsdSkel.Animation)]
    assert len(anims) == 3 and targets == [anims[0].GetPath()]  # the first of the three, not the last


def test_a_file_system_refusing_chmod_still_gets_the_file(tmp_path, rig, clips, monkeypatch):
    """chmod ran before the clean-up: a mount refusing it (vfat, CIFS) left the temporary file and a bare
    PermissionError naming no path."""
    import usd_io.atomic as atomic

    def refuse(*args, **kwargs):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(atomic.os, "chmod", refuse)
    path = tmp_path / "out" / "x.usda"
    write_usdskel(path, rig, clips[:1])
    assert [p.name for p in path.parent.iterdir()] == ["x.usda"]
    assert Usd.Stage.Open(str(path)) is not None


def test_extent_samples_of_a_long_sparse_clip_are_spread_without_listing_every_code():
    """Every whole time code of the span was listed before the cap applied: a two-key clip spanning 1e6 s took
    0.8 GB (about 24 GB at 1e8 s). The samples are spread directly now, the keys always among them."""
    import tracemalloc

    from usd_io._usdskel_write import MAX_EXTENT_SAMPLES, _extent_samples

    keys = np.array([0.0, 0.5, 1.0e7])
    tracemalloc.start()
    codes, times = _extent_samples(keys, keys / 24.0, 24.0, 0.0)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 20e6, peak  # listing 1e7 codes takes 80 MB
    assert len(codes) <= MAX_EXTENT_SAMPLES + len(keys) and set(keys) <= set(codes)
    assert np.all(np.diff(codes) > 0) and np.allclose(times, codes / 24.0)
    small = np.array([0.0, 2.5, 10.0])
    np.testing.assert_array_equal(_extent_samples(small, small / 24.0, 24.0, 0.0)[0],
                                  [0.0, 1.0, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0])  # fmt: skip


def test_a_mesh_without_faces_is_not_written_nor_bounded(tmp_path):
    """A mesh with points but no faces was written, counted in the SkelRoot extent, and dropped by our reader."""
    import warnings

    pts = np.array([[5.0, 5.0, 5.0], [6.0, 5.0, 5.0], [5.0, 6.0, 5.0]])
    loose = SkinnedMesh("pts", pts, np.zeros((0, 3), int), np.zeros((3, 1), int), np.ones((3, 1)))
    tube = SkinnedMesh("tube", np.array([[0.0, 0, 0], [0.1, 0, 0], [0, 0.1, 0]]), np.array([[0, 1, 2]]),
                       np.zeros((3, 1), int), np.ones((3, 1)))  # fmt: skip
    rig = Rig(["r"], [-1], [[0.0, 0.0, 0.0]], [[0.0, 0.0, 0.0, 1.0]], name="one", meshes=[loose, tube])
    path = tmp_path / "one.usda"
    with pytest.warns(UserWarning, match="mesh 'pts' has no faces: not written"):
        write_usdskel(path, rig, [Motion(30.0, [[0.0, 0.0, 0.0]], [[[0.0, 0.0, 0.0, 1.0]]], name="single")])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no 'skipped' warning on reading: nothing unreadable was written
        back = read_usdskel(path)
    assert [m.name for m in back.rig.meshes] == ["tube"]
    stage = Usd.Stage.Open(str(path))
    root = next(p for p in stage.Traverse() if p.IsA(UsdSkel.Root))
    assert max(max(c) for c in UsdGeom.Boundable(root).GetExtentAttr().Get()) < 1.0  # the loose points at 5 m


def test_rewriting_through_a_link_reloads_a_layer_opened_through_it(tmp_path, rig, clips):
    """atomic_output resolved the link and reloaded the target's layer only: a stage opened through the link kept
    serving the old content."""
    target, link = tmp_path / "target.usda", tmp_path / "link.usda"
    write_usdskel(target, rig, clips[:1])
    link.symlink_to(target)
    held = Usd.Stage.Open(str(link))
    write_usdskel(link, rig, clips[1:2])
    assert link.is_symlink() and clips[1].name in target.read_text()
    assert list(read_usdskel(link).clips) == [clips[1].name]
    assert clips[1].name in held.GetRootLayer().ExportToString()  # the stage held open sees the new content too
