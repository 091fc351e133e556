"""glTF importer: skinning against an independent glTF reference (Fox, SimpleSkin, synthetic characters) at every
key time, accessor decoding, samplers against analytic curves, warnings, and one InputError per kind of bad file."""

from __future__ import annotations

import functools
import json
import struct
import warnings
from pathlib import Path

import gltf_builders as B
import gltf_reference as ref
import numpy as np
import pytest

import sim
import usd_io
from sim.rotations import axis_angle_to_quat
from usd_io import InputError
from usd_io._gltf import GltfWarning, read_gltf

SKIN_TOL = 1e-5
"""Allowed skinned-vertex error relative to the model height (the importer works in float64: expect ~1e-15)."""
BIND_TOL = 1e-7
"""Rigid-mesh bind points: ours use the float32 inverse bind matrix, the reference the rest pose (same pose)."""
EXACT_TOL = 1e-12
"""For values the importer only decodes, rotates or copies."""
C = ref.Y_UP_TO_Z_UP


# -- helpers ---------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=32)
def _read_cached(path: str) -> usd_io.Asset:
    return read_gltf(path)


def read_quiet(path) -> usd_io.Asset:
    """read_gltf with the importer's expected warnings silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GltfWarning)
        return read_gltf(path)


def skinned(asset: usd_io.Asset, motion: sim.Motion) -> np.ndarray:
    return sim.skin_motion(asset.rig, motion)[0]


def assert_matches_reference(asset: usd_io.Asset, path, clips=None, bind_tol: float = EXACT_TOL) -> dict[str, float]:
    """Rest pose, bind pose and every key time of every clip against the reference; returns max errors / height."""
    height = ref.reference_model_height(path)
    errors = {}
    bind = asset.rig.merged_mesh().points
    np.testing.assert_allclose(bind, ref.reference_bind_points(path), rtol=0, atol=bind_tol * height)
    errors["bind"] = np.abs(bind - ref.reference_bind_points(path)).max() / height
    rest = skinned(asset, sim.Motion.rest(asset.rig))[0]
    np.testing.assert_allclose(rest, ref.reference_skinned_points(path), rtol=0, atol=SKIN_TOL * height)
    errors["rest"] = np.abs(rest - ref.reference_skinned_points(path)).max() / height
    names = ref.reference_clip_names(path) if clips is None else clips
    assert list(asset.clips) == ref.reference_clip_names(path)
    for name in names:
        clip = asset.clips[name]
        keys = ref.reference_key_times(path, name)
        times = clip.times
        # keys keep their times; CUBICSPLINE clips (and rotating non-joint nodes) get samples between sparse keys,
        # STEP keys a hold sample at most 1 ms before them (all checked as well)
        assert np.isin(keys, times).all(), f"clip {name}: key times {keys} not all in {times}"
        extra = np.setdiff1d(times, keys)
        holds = extra[keys[np.searchsorted(keys, extra)] - extra <= 1e-3 + 1e-12]
        assert len(holds) == len(extra) or np.diff(times).max() <= 1 / 30 + 1e-9
        ours = skinned(asset, clip)
        expected = np.stack([ref.reference_skinned_points(path, name, t) for t in times])
        np.testing.assert_allclose(ours, expected, rtol=0, atol=SKIN_TOL * height, err_msg=f"clip {name}")
        errors[name] = np.abs(ours - expected).max() / height
    return errors


def gltf_json(path: Path) -> dict:
    data = path.read_bytes()
    if data[:4] == b"glTF":
        length = struct.unpack_from("<I", data, 12)[0]
        return json.loads(data[20 : 20 + length])
    return json.loads(data)


# -- the shared sample assets -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def fox_path(assets_dir) -> Path:
    return assets_dir / "gltf" / "Fox.glb"


@pytest.fixture(scope="module")
def simple_skin_path(assets_dir) -> Path:
    return assets_dir / "gltf" / "SimpleSkin.gltf"


def test_fox_facts(fox_path):
    asset = _read_cached(str(fox_path))
    doc = gltf_json(fox_path)
    position = doc["accessors"][doc["meshes"][0]["primitives"][0]["attributes"]["POSITION"]]
    assert asset.rig.joint_count == 24
    assert asset.rig.joint_names[0] == "_rootJoint"  # the non-joint node "root" above it is folded in
    assert list(asset.clips) == ["Survey", "Walk", "Run"]
    assert asset.rig.merged_mesh().vertex_count == position["count"] == 1728
    assert asset.source_meters_per_unit == 1.0
    assert asset.source == str(fox_path)
    # Y-up -> Z-up: glTF Y extent (the fox's height, ~79 units) becomes Z; its ~155-unit body length along
    # glTF Z becomes our Y. No rescaling.
    lo, hi = np.array(position["min"]), np.array(position["max"])
    np.testing.assert_allclose(asset.rig.height(), hi[1] - lo[1], rtol=1e-6)
    pts = asset.rig.merged_mesh().points
    np.testing.assert_allclose(np.ptp(pts[:, 1]), hi[2] - lo[2], rtol=1e-6)
    assert 150 < np.ptp(pts[:, 1]) < 160 and 75 < asset.rig.height() < 85
    for clip in asset.clips.values():
        assert clip.fps == 24.0  # keys every 1/24 s
        assert clip.translations is not None  # b_Hip_01 (not the root joint) has a translation channel


@pytest.mark.parametrize("clip", ["Survey", "Walk", "Run"])
def test_fox_clip_matches_reference(fox_path, clip):
    errors = assert_matches_reference(_read_cached(str(fox_path)), fox_path, clips=[clip])
    assert errors[clip] < SKIN_TOL


def test_fox_unanimated_joints_hold_rest(fox_path):
    asset = _read_cached(str(fox_path))
    doc = gltf_json(fox_path)
    animated = {doc["nodes"][c["target"]["node"]]["name"] for c in doc["animations"][0]["channels"]}
    still = [j for j, n in enumerate(asset.rig.joint_names) if n not in animated]
    assert {asset.rig.joint_names[j] for j in still} == {"_rootJoint", "b_Root_00", "b_LeftFoot02_018",
                                                          "b_RightFoot02_022"}  # fmt: skip
    clip = asset.clips["Survey"]
    np.testing.assert_allclose(clip.rotations[:, still], np.broadcast_to(asset.rig.rest_rotations[still],
                               (clip.frame_count, len(still), 4)), atol=EXACT_TOL)  # fmt: skip
    np.testing.assert_allclose(clip.root_translations, np.broadcast_to(asset.rig.rest_translations[0],
                               (clip.frame_count, 3)), atol=EXACT_TOL)  # fmt: skip


def test_simple_skin_matches_reference(simple_skin_path):
    asset = _read_cached(str(simple_skin_path))
    assert asset.rig.joint_names == ("node1", "node2")  # unnamed nodes
    assert list(asset.clips) == ["animation_0"]
    clip = asset.clips["animation_0"]
    assert clip.fps == 2.0 and clip.translations is None
    # the skinned mesh node is the root joint's parent (identity here): rest root = C
    np.testing.assert_allclose(asset.rig.rest_rotations[0], [np.sqrt(0.5), 0, 0, np.sqrt(0.5)], atol=EXACT_TOL)
    assert_matches_reference(asset, simple_skin_path)


def test_load_asset_dispatches_to_gltf(fox_path):
    asset = usd_io.load_asset(fox_path)
    assert asset.rig.joint_count == 24 and list(asset.clips) == ["Survey", "Walk", "Run"]


# -- synthetic characters ---------------------------------------------------------------------------------------
CHARACTERS = {
    "folded": B.folded_character,
    "rigid": B.rigid_character,
    "forest": B.forest_character,
    "minimal": B.minimal_skin,
}


@pytest.mark.parametrize("mode", ["data", "external", "glb"])
@pytest.mark.parametrize("name", list(CHARACTERS))
def test_synthetic_character_matches_reference(tmp_path, name, mode):
    path = CHARACTERS[name]().write(tmp_path / f"{name}.{'glb' if mode == 'glb' else 'gltf'}", mode)
    asset = read_quiet(path)
    assert_matches_reference(asset, path, bind_tol=BIND_TOL if name == "rigid" else EXACT_TOL)


def test_container_variants_are_identical(tmp_path):
    builder = B.folded_character()
    assets = [read_gltf(builder.write(tmp_path / f"a{i}.{ext}", mode))
              for i, (ext, mode) in enumerate([("gltf", "data"), ("gltf", "external"), ("glb", "glb")])]  # fmt: skip
    for other in assets[1:]:
        np.testing.assert_array_equal(other.rig.inverse_bind_matrices, assets[0].rig.inverse_bind_matrices)
        np.testing.assert_array_equal(other.rig.merged_mesh().points, assets[0].rig.merged_mesh().points)
        for name, clip in assets[0].clips.items():
            np.testing.assert_array_equal(other.clips[name].rotations, clip.rotations)


def test_folded_character_structure(tmp_path):
    asset = read_gltf(B.folded_character().write(tmp_path / "f.glb"))
    rig = asset.rig
    # skin joints listed shuffled -> depth-first order; duplicate "spine" and the unnamed node get unique names
    assert rig.joint_names == ("hips", "spine", "spine_1", "node1", "tail")
    np.testing.assert_array_equal(rig.parents, [-1, 0, 1, 2, 0])
    (mesh,) = rig.meshes
    assert mesh.name == "body"
    assert mesh.vertex_count == 12 + 6 + 8  # three primitives, vertex order kept
    assert len(mesh.triangles) == 10 + 2 + 6  # indexed, non-indexed, strip of 8 vertices
    assert mesh.influence_count == 8  # JOINTS_0 + JOINTS_1
    # uniform scales (Armature 0.5, hips 2, the unnamed tip 1.5) are pushed into translations; the file's inverse
    # bind matrices hold the inverse bind-pose scales, which the pushed-down scale cancels: ours are rigid
    scale = np.cbrt(np.linalg.det(rig.inverse_bind_matrices[:, :3, :3]))
    np.testing.assert_allclose(scale, 1.0, rtol=1e-6)
    # the root sits at Armature (t, Rz(0.52), scale 0.5) applied to Offset + hips translations (0, 0.1 + 1, 0)
    a = 0.52
    hips = np.array([0.3, 0, -0.2]) + 0.5 * 1.1 * np.array([-np.sin(a), np.cos(a), 0])
    np.testing.assert_allclose(rig.rest_translations[0], C @ hips, atol=1e-12)
    # below hips the accumulated scale is 0.5 * 2 = 1: local translations keep their glTF values
    np.testing.assert_allclose(rig.rest_translations[2:4], [[0, 0.5, 0], [0, 0.4, 0]], atol=1e-12)
    assert list(asset.clips) == ["Wave", "animation_1"]
    wave = asset.clips["Wave"]  # CUBICSPLINE channels, keys 0.1-0.25 s apart: sampled at >= 30 per second, plus
    # hold samples 1 ms before the STEP spine rotation's keys at 0.25 and 0.75 s, which the nominal fps ignores
    holds = np.array([0.25, 0.75]) - 1e-3
    assert np.abs(wave.times[:, None] - holds).min(axis=0).max() < 1e-12
    even = wave.times[np.abs(wave.times[:, None] - holds).min(axis=1) > 1e-12]
    assert np.diff(wave.times).max() <= 1 / 30 + 1e-9 and wave.fps == pytest.approx(1 / np.diff(even).min())
    assert asset.clips["Wave"].translations is not None  # a non-root joint is translated
    assert asset.clips["animation_1"].fps == 30.0
    assert asset.clips["animation_1"].translations is None  # only an ancestor of the root moves


def test_forest_promotes_common_ancestor(tmp_path):
    asset = read_gltf(B.forest_character().write(tmp_path / "forest.gltf"))
    assert asset.rig.joint_names == ("Armature", "legL", "footL", "legR", "footR")
    np.testing.assert_array_equal(asset.rig.parents, [-1, 0, 1, 0, 3])


def read_recording(path) -> tuple[usd_io.Asset, list[str]]:
    """read_gltf and the messages of the GltfWarnings it emitted."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asset = read_gltf(path)
    return asset, [str(w.message) for w in caught if issubclass(w.category, GltfWarning)]


def test_rigid_meshes_become_single_joint_skins(tmp_path):
    asset, messages = read_recording(B.rigid_character().write(tmp_path / "rigid.gltf"))
    assert (
        len(messages) == 1 and "nodes[4]: mesh of nodes[4] 'lamp' has no skin and is not below a joint" in messages[0]
    )
    assert [m.name for m in asset.rig.meshes] == ["prop", "prop_1", "body"]
    for mesh in asset.rig.meshes[:2]:
        np.testing.assert_array_equal(mesh.influence_joints, 1)  # both props ride on "arm"
        np.testing.assert_array_equal(mesh.influence_weights, 1.0)
    _, messages = read_recording(B.rigid_character(animate_holder=True).write(tmp_path / "rigid_anim.gltf"))
    assert any("animation of nodes[0] 'holder' below a joint and above a rigid mesh ignored" in m for m in messages)


def _signed_volume(points: np.ndarray, triangles: np.ndarray) -> float:
    a, b, c = points[triangles[:, 0]], points[triangles[:, 1]], points[triangles[:, 2]]
    return float(np.einsum("ij,ij->i", a, np.cross(b, c)).sum() / 6.0)


@pytest.mark.parametrize("mirror", [1.0, -1.0])
def test_rigid_mesh_under_a_mirroring_node_keeps_its_faces_outward(tmp_path, mirror):
    """glTF 3.7.4: a node transform with a negative determinant reverses the winding. A closed tetrahedron
    (counter-clockwise from outside, positive signed volume) under a joint through a node scaled -1 on x (a left
    shoe made from a right one) comes out mirrored, with outward faces: positive volume, as the unmirrored one."""
    tet = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1.0]]) * 0.1
    tris = np.array([[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]])
    assert _signed_volume(tet, tris) > 0
    b = B.GltfBuilder()
    prim = {"attributes": {"POSITION": b.accessor(tet)}, "indices": b.accessor(tris.reshape(-1), B.UINT)}
    shoe = b.node("shoe", mesh=b.mesh([prim]))
    holder = b.node("holder", children=[shoe], scale=[mirror, 1.0, 1.0], translation=[0.3, 0, 0])
    joint = b.node("foot", children=[holder])
    b.skin([joint])
    b.roots(joint)
    asset, _ = read_recording(b.write(tmp_path / "shoe.gltf"))
    (mesh,) = asset.rig.meshes
    # the points are mirrored (x of the tip vertex 1 lies on the mirrored side of the holder)...
    assert np.sign(mesh.points[1, 0] - mesh.points[0, 0]) == mirror
    # ...and the faces still point outward
    np.testing.assert_allclose(_signed_volume(mesh.points, mesh.triangles), _signed_volume(tet, tris), rtol=1e-6)


def _rigid_on_animated_node(tmp_path, on_holder: bool, animate_j1: bool) -> Path:
    """Joints ``j0 -> X -> j1`` (X a non-joint node 1 m up, turning LINEAR about glTF z from 0 to 1.2 rad over 1 s)
    with a rigid mesh ``lid`` on X, or on a non-joint ``holder`` child of X (0.3 m along x); ``animate_j1`` also
    turns j1 about x."""
    b = B.GltfBuilder()
    box = np.array([[x, y, z] for x in (-0.1, 0.1) for y in (-0.1, 0.1) for z in (-0.1, 0.1)])
    tris = np.array([0, 1, 3, 0, 3, 2, 4, 6, 7, 4, 7, 5, 0, 4, 5, 0, 5, 1, 2, 3, 7, 2, 7, 6])
    lid = b.mesh([{"attributes": {"POSITION": b.accessor(box)}, "indices": b.accessor(tris, B.UBYTE)}], "lid")
    j1 = b.node("j1", translation=[0, 1, 0])
    holder = b.node("holder", translation=[0.3, 0, 0], mesh=lid) if on_holder else None
    x = b.node("X", translation=[0, 1, 0], mesh=None if on_holder else lid,
               children=[j1] + ([holder] if on_holder else []))  # fmt: skip
    j0 = b.node("j0", children=[x])
    pts = B.strip_points(rows=3, height=2.0)
    prim = {"attributes": {"POSITION": b.accessor(pts), "JOINTS_0": b.accessor(np.zeros((len(pts), 4)), B.UBYTE),
                           "WEIGHTS_0": b.accessor(np.tile([1.0, 0, 0, 0], (len(pts), 1)))}}  # fmt: skip
    rest = [np.eye(4), B.trs_matrix((0, 2, 0))]  # bind pose = rest pose
    b.roots(j0, b.node("body", mesh=b.mesh([prim]), skin=b.skin([j0, j1], np.linalg.inv(rest))))
    channels = [(x, "rotation", [0.0, 1.0], [B.quat_axis_angle([0, 0, 1], a) for a in (0.0, 1.2)], "LINEAR")]
    if animate_j1:
        channels.append((j1, "rotation", [0.0, 1.0], [B.quat_axis_angle([1, 0, 0], a) for a in (0.0, 0.8)], "LINEAR"))
    b.animation("Bend", channels)
    return b.write(tmp_path / "rigid_mid.gltf")


@pytest.mark.parametrize("on_holder", [False, True])
def test_rigid_mesh_follows_an_animated_node_between_joints(tmp_path, on_holder):
    """A rigid mesh on (or below) an animated non-joint node X between joints j0 and j1 moves with X in glTF. j1 is
    not animated, so it carries X's motion exactly: the mesh rides on j1, no warning, and its points follow
    ``C @ T(0, 1, 0) Rz(1.2 t) [T(0.3, 0, 0)] p`` at every sample."""
    path = _rigid_on_animated_node(tmp_path, on_holder, animate_j1=False)
    asset, messages = read_recording(path)
    assert messages == []
    clip = asset.clips["Bend"]
    box = np.array([[x, y, z] for x in (-0.1, 0.1) for y in (-0.1, 0.1) for z in (-0.1, 0.1)])
    offset = B.trs_matrix((0.3, 0, 0)) if on_holder else np.eye(4)
    points = skinned(asset, clip)[:, : len(box)]
    for k, t in enumerate(clip.times):
        world = B.trs_matrix((0, 1, 0), B.quat_axis_angle([0, 0, 1], 1.2 * t)) @ offset
        expected = (box @ world[:3, :3].T + world[:3, 3]) @ C.T
        np.testing.assert_allclose(points[k], expected, atol=1e-6, err_msg=f"t = {t}")
    lid = asset.rig.meshes[0]
    assert lid.name == "lid"
    np.testing.assert_array_equal(lid.influence_joints, asset.rig.joint_names.index("j1"))
    assert_matches_reference(asset, path, bind_tol=BIND_TOL)


def test_rigid_mesh_warns_when_no_joint_carries_an_animated_node(tmp_path):
    """With j1 animated too, no joint moves with X alone: the mesh keeps riding on j0 at X's rest offset, and the
    importer says so, naming X, the mesh and the joint."""
    asset, messages = read_recording(_rigid_on_animated_node(tmp_path, on_holder=False, animate_j1=True))
    assert len(messages) == 1, messages
    assert (
        "nodes[1]: animation of nodes[1] 'X' moves the joints below it but not the rigid mesh 'lid' of nodes[1] 'X': "
        "the mesh follows joint 'j0' at its rest offset" in messages[0]
    )
    np.testing.assert_array_equal(asset.rig.meshes[0].influence_joints, 0)


# -- accessors ---------------------------------------------------------------------------------------------------
def single_joint_file(tmp_path, position: dict, raw) -> Path:
    """A one-joint skin whose POSITION accessor is written with ``B.GltfBuilder.accessor(raw, **position)``."""
    b = B.GltfBuilder()
    joint = b.node("j")
    count = len(np.asarray(raw))
    prim = {"attributes": {"POSITION": b.accessor(raw, **position),
                           "JOINTS_0": b.accessor(np.zeros((count, 4)), B.UBYTE),
                           "WEIGHTS_0": b.accessor(np.tile([1.0, 0, 0, 0], (count, 1)))}}  # fmt: skip
    b.roots(joint, b.node("m", mesh=b.mesh([prim]), skin=b.skin([joint])))
    return b.write(tmp_path / "single.glb")


RAW = np.array([[0, 1, 2], [127, -128, 5], [3, 100, -1]])


@pytest.mark.parametrize(
    ("ctype", "normalized", "expected"),
    [
        (B.FLOAT, False, RAW.astype(float)),
        (B.BYTE, False, RAW),
        (B.BYTE, True, np.maximum(RAW / 127.0, -1.0)),  # -128 clamps to -1
        (B.SHORT, True, RAW / 32767.0),
        (B.UBYTE, True, np.abs(RAW) / 255.0),
        (B.USHORT, True, np.abs(RAW) / 65535.0),
        (B.USHORT, False, np.abs(RAW)),
        (B.UINT, False, np.abs(RAW)),
    ],
)
def test_accessor_component_types(tmp_path, ctype, normalized, expected):
    raw = np.abs(RAW) if ctype in (B.UBYTE, B.USHORT, B.UINT) else RAW
    asset = read_gltf(single_joint_file(tmp_path, {"ctype": ctype, "normalized": normalized}, raw))
    np.testing.assert_allclose(asset.rig.meshes[0].points, expected @ C.T, rtol=0, atol=EXACT_TOL)


def test_accessor_stride_offset_and_sparse(tmp_path):
    base = np.arange(18.0).reshape(6, 3)  # 6 vertices: two non-indexed triangles
    zeros = np.zeros((6, 3))
    cases = [
        ({"stride": 20, "offset": 8}, base, base),  # interleaved, with an accessor byteOffset
        ({"ctype": B.SHORT, "stride": 8}, base, base),  # 6-byte elements padded to 8
        ({"offset": 3}, base, base),  # misaligned floats (invalid glTF, read anyway)
        ({"sparse": ([1, 4], [[-1, -2, -3], [7, 8, 9]])}, base, [base[0], [-1, -2, -3], *base[2:4], [7, 8, 9],
                                                                 base[5]]),
        ({"sparse": ([3], [[1, 2, 3]]), "view": False}, zeros, [[0, 0, 0]] * 3 + [[1, 2, 3]] + [[0, 0, 0]] * 2),
        ({"view": False}, zeros, zeros),
        ({"sparse": ([0, 2], [[4, 4, 4], [5, 5, 5]]), "index_ctype": B.UBYTE}, base, [[4, 4, 4], base[1], [5, 5, 5],
                                                                                       *base[3:]]),
    ]  # fmt: skip
    for position, raw, expected in cases:
        asset = read_gltf(single_joint_file(tmp_path, position, raw))
        np.testing.assert_allclose(
            asset.rig.meshes[0].points, np.array(expected) @ C.T, atol=EXACT_TOL, err_msg=str(position)
        )


# -- samplers against analytic curves ------------------------------------------------------------------------
def test_samplers_match_analytic_curves(tmp_path):
    """CUBICSPLINE reproduces a cubic exactly (tangents = derivative, scaled by the key interval); LINEAR slerp
    about a fixed axis is linear in angle; STEP holds; channels clamp outside their keys."""
    b = B.GltfBuilder()
    child = b.node("child", translation=[0, 1, 0])
    root = b.node("root", children=[child])
    b.roots(root)
    b.skin([root, child])
    key_t = np.array([0.0, 0.5, 1.5, 2.0])
    x = key_t**3 - 2 * key_t
    dx = 3 * key_t**2 - 2
    cubic = np.stack([np.stack([dx, np.zeros(4), np.zeros(4)], 1), np.stack([x, np.zeros(4), np.zeros(4)], 1),
                      np.stack([dx, np.zeros(4), np.zeros(4)], 1)], axis=1)  # fmt: skip
    b.animation("A", [
        (root, "translation", key_t, cubic, "CUBICSPLINE"),
        (child, "rotation", [0.25, 1.75], [B.quat_axis_angle([0, 0, 1], 0.0), B.quat_axis_angle([0, 0, 1], 1.2)],
         "LINEAR"),
        (child, "translation", [0.0, 1.0], [[0, 1, 0], [0.5, 2, 0]], "STEP"),
    ])  # fmt: skip
    clip = read_gltf(b.write(tmp_path / "s.gltf")).clips["A"]
    # a CUBICSPLINE clip is sampled at >= 30 per second between its sparse keys (every key kept), so the curves
    # below are checked between the keys too, not only at them
    t = clip.times
    keys = np.array([0.0, 0.25, 0.5, 1.0, 1.5, 1.75, 2.0])
    assert np.abs(t[:, None] - keys[None]).min(axis=0).max() < 1e-12
    assert t[0] == 0.0 and t[-1] == 2.0 and np.diff(t).max() <= 1 / 30 + 1e-12 and len(t) > 60
    gltf_root = np.stack([t**3 - 2 * t, 0 * t, 0 * t], axis=1)
    np.testing.assert_allclose(clip.root_translations, gltf_root @ C.T, atol=1e-12)
    angle = 1.2 * np.clip((t - 0.25) / 1.5, 0.0, 1.0)
    # local rotations below the root are glTF's own (C cancels between parent and child)
    np.testing.assert_allclose(clip.rotations[:, 1], axis_angle_to_quat(angle[:, None] * [0, 0, 1]), atol=1e-12)
    step = np.where(t[:, None] < 1.0, [0, 1, 0], [0.5, 2, 0])
    np.testing.assert_allclose(clip.translations[:, 1], step, atol=1e-12)


@pytest.mark.parametrize(
    ("spacing", "fps"),
    [(1 / 24, 24.0), (1 / 29.97, 30.0), (1 / 60, 60.0), (0.5, 2.0), (1 / 7, 7.0), (0.3, 1 / 0.3)],
)
def test_clip_fps_from_key_spacing(tmp_path, spacing, fps):
    times = np.arange(4) * spacing
    clip = read_gltf(B.minimal_skin(times=times).write(tmp_path / "m.glb")).clips["Bend"]
    np.testing.assert_allclose(clip.fps, fps, rtol=1e-6)


def _angle_from_first(q: np.ndarray) -> np.ndarray:
    """Rotation angle [rad] of each quaternion (F, 4) relative to the first, shape (F,)."""
    return 2 * np.arccos(np.clip(np.abs(q @ q[0]), 0.0, 1.0))


def _step_clip(tmp_path, with_linear: bool) -> tuple[usd_io.Asset, Path]:
    """minimal_skin plus clip ``Step``: the root turns 0 -> 1.5 rad about glTF z as a STEP rotation keyed at 0 and
    1 s; ``with_linear`` adds the tip's LINEAR rotation 0 -> 1.2 rad (keys 0, 0.5, 1 s) and a STEP translation."""
    b = B.minimal_skin()  # nodes: 0 tip, 1 root
    channels = [(1, "rotation", [0.0, 1.0], [B.quat_axis_angle([0, 0, 1], a) for a in (0.0, 1.5)], "STEP")]
    if with_linear:
        channels += [
            (0, "rotation", [0.0, 0.5, 1.0], [B.quat_axis_angle([0, 0, 1], a) for a in (0.0, 0.6, 1.2)], "LINEAR"),
            (0, "translation", [0.0, 1.0], [[0, 1, 0], [0, 2, 0]], "STEP"),
        ]
    b.animation("Step", channels)
    path = b.write(tmp_path / "step.gltf")
    return read_gltf(path), path


@pytest.mark.parametrize("with_linear", [False, True])
def test_step_channels_hold_between_keys(tmp_path, with_linear):
    """glTF STEP holds the previous key until the next: sampling the Motion between the keys (Motion.sample,
    resample) gives the held value, not a ramp; a LINEAR channel in the same clip stays exact between its keys,
    and the nominal fps comes from the key times (not the 1 ms hold sample before the 1 s key)."""
    asset, path = _step_clip(tmp_path, with_linear)
    clip = asset.clips["Step"]
    t = np.array([0.0, 0.25, 0.5, 0.75, 0.99, 1.0])
    sampled = clip.sample(t)
    np.testing.assert_allclose(_angle_from_first(sampled.rotations[:, 0]), [0, 0, 0, 0, 0, 1.5], atol=1e-6)
    np.testing.assert_allclose(_angle_from_first(clip.resample(10).rotations[:, 0]), [0] * 10 + [1.5], atol=1e-6)
    if with_linear:  # the tip's local rotation is glTF's own: slerp about z, linear in angle
        np.testing.assert_allclose(sampled.rotations[:, 1], axis_angle_to_quat(1.2 * t[:, None] * [0, 0, 1]),
                                   atol=1e-6)  # fmt: skip
        np.testing.assert_allclose(sampled.translations[:, 1], np.where(t[:, None] < 1, [0, 1, 0], [0, 2, 0]),
                                   atol=1e-12)  # fmt: skip
    assert clip.fps == (2.0 if with_linear else 1.0)
    np.testing.assert_allclose(clip.times, [0.0, 0.5, 0.999, 1.0] if with_linear else [0.0, 0.999, 1.0], atol=1e-12)
    assert_matches_reference(asset, path)  # the hold sample too


def _pivot_file(tmp_path, between_joints: bool) -> Path:
    """A non-joint node ``pivot`` turning LINEAR about glTF y from 0 to 0.999 pi (keys 0 and 1 s), with a joint 1 m
    from it along x: the root joint (pivot above the skeleton) or ``j1`` (pivot between the root ``j0`` and it)."""
    b = B.GltfBuilder()
    arm = b.node("arm", translation=[1, 0, 0])
    pivot = b.node("pivot", children=[arm])
    top = b.node("j0", children=[pivot]) if between_joints else pivot
    joints = [top, arm] if between_joints else [arm]
    pts = B.strip_points(rows=2, height=0.5) + np.array([1, 0, 0])
    prim = {"attributes": {"POSITION": b.accessor(pts),
                           "JOINTS_0": b.accessor(np.tile([len(joints) - 1, 0, 0, 0], (len(pts), 1)), B.UBYTE),
                           "WEIGHTS_0": b.accessor(np.tile([1.0, 0, 0, 0], (len(pts), 1)))},
            "indices": b.accessor(B.strip_indices(rows=2), B.USHORT)}  # fmt: skip
    b.roots(top, b.node("body", mesh=b.mesh([prim]), skin=b.skin(joints)))
    turn = [B.quat_axis_angle([0, 1, 0], a) for a in (0.0, 0.999 * np.pi)]
    b.animation("Spin", [(pivot, "rotation", [0.0, 1.0], turn, "LINEAR")])
    return b.write(tmp_path / "pivot.gltf")


@pytest.mark.parametrize("between_joints", [False, True])
def test_rotating_non_joint_node_moves_joints_along_arcs(tmp_path, between_joints):
    """The joint 1 m from a rotating non-joint pivot follows an arc in glTF, also between keys. The clip is sampled
    at 30 per second, so a Motion (which interpolates linearly) stays within the sagitta
    ``r (1 - cos(w h / 2))`` of the arc: r = 1 m, w = 0.999 pi rad/s, h = 1/30 s: 1.4 mm (a chord between the two
    keys alone passes within 1.6 mm of the pivot, 1 m off)."""
    path = _pivot_file(tmp_path, between_joints)
    asset = read_gltf(path)
    clip = asset.clips["Spin"]
    w, h = 0.999 * np.pi, 1 / 30
    sagitta = 1.0 - np.cos(w * h / 2)
    t = np.union1d([0.5], (clip.times[:-1] + clip.times[1:]) / 2)  # midpoints: the largest chord error
    a = w * t
    sampled = clip.sample(t)
    if between_joints:  # j1's local translation in j0's frame: glTF's own axes (no C below the root)
        got, arc = sampled.translations[:, 1], np.stack([np.cos(a), 0 * a, -np.sin(a)], axis=1)
    else:  # the root's position in Z-up skeleton space: C @ (cos a, 0, -sin a)
        got, arc = sampled.root_translations, np.stack([np.cos(a), np.sin(a), 0 * a], axis=1)
    error = np.linalg.norm(got - arc, axis=1)
    assert error.max() <= sagitta * (1 + 1e-3) + 1e-6, (error.max(), sagitta)
    assert error[t == 0.5] < 1e-6  # t = 0.5 s is one of the samples
    assert clip.fps == 30.0 and np.diff(clip.times).max() <= 1 / 30 + 1e-12 and clip.times[[0, -1]].tolist() == [0, 1]
    assert_matches_reference(asset, path)


# -- repairs and warnings -------------------------------------------------------------------------------------
def test_unnormalized_weights_are_renormalized(tmp_path):
    """Renormalized weights are reported with the file and the WEIGHTS_n field (the rig's own RigWarning named
    neither and is not repeated)."""
    path = B.minimal_skin(weight_scale=0.5).write(tmp_path / "w.gltf")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        asset = read_gltf(path)
    assert not [w for w in record if issubclass(w.category, sim.RigWarning)]
    (message,) = [str(w.message) for w in record if issubclass(w.category, GltfWarning)]
    assert message.startswith(f"{path}: meshes[0].primitives[0].attributes.WEIGHTS_0: the weights of 10 of 10")
    assert "sum to 0.5 .. 0.5, not 1" in message and "renormalized" in message
    np.testing.assert_allclose(asset.rig.meshes[0].influence_weights.sum(axis=1), 1.0, atol=EXACT_TOL)
    assert_matches_reference(asset, path)  # the reference normalizes weights too


def _with_scale_channel(values) -> B.GltfBuilder:
    b = B.minimal_skin()
    b.doc["nodes"][0]["scale"] = [2.0, 2.0, 2.0]  # the tip joint has a uniform rest scale
    b.animation("Grow", [(0, "scale", [0.0, 1.0], values, "LINEAR"), (0, "rotation", [0.0, 0.5], [[0, 0, 0, 1],
                B.quat_axis_angle([1, 0, 0], 0.4)], "LINEAR")])  # fmt: skip
    return b


def test_scale_channel_at_rest_scale_is_a_no_op(tmp_path):
    path = _with_scale_channel([[2, 2, 2], [2, 2, 2]]).write(tmp_path / "s.gltf")
    with warnings.catch_warnings():
        warnings.simplefilter("error", GltfWarning)
        asset = read_gltf(path)
    assert_matches_reference(asset, path)


def test_scale_animation_is_ignored_with_a_warning(tmp_path):
    b = _with_scale_channel([[2, 2, 2], [3, 3, 3]])
    path = b.write(tmp_path / "s.gltf")
    with pytest.warns(GltfWarning, match=r"animations\[1\]\.channels\[0\]: scale animation of nodes\[0\] 'tip'"):
        asset = read_gltf(path)
    # equals glTF skinning of the same file without the scale channel (its key times stay in the clip)
    b.doc["animations"][1]["channels"][0]["target"]["path"] = "weights"
    stripped = b.write(tmp_path / "stripped.gltf")
    clip = asset.clips["Grow"]
    for k, t in enumerate(clip.times):
        expected = ref.reference_skinned_points(stripped, "Grow", t)
        np.testing.assert_allclose(skinned(asset, clip)[k], expected, atol=SKIN_TOL * ref.reference_model_height(path))


def test_morph_weight_channels_are_ignored_with_a_warning(tmp_path):
    b = B.minimal_skin()
    b.animation("Morph", [(2, "weights", [0.0, 0.4], [0.0, 1.0], "LINEAR")])
    with pytest.warns(GltfWarning, match="morph target weights channel"):
        asset = read_gltf(b.write(tmp_path / "m.gltf"))
    np.testing.assert_array_equal(
        asset.clips["Morph"].times, [0.0, np.float32(0.4)]
    )  # keys kept; the pose is the rest pose
    np.testing.assert_allclose(asset.clips["Morph"].rotations[1], asset.rig.rest_rotations, atol=EXACT_TOL)


def test_triangle_strips_fans_and_skipped_primitives(tmp_path):
    b = B.GltfBuilder()
    joint = b.node("j")
    pts = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0], [0, 2, 0]], dtype=float)

    def prim(mode):
        return {"attributes": {"POSITION": b.accessor(pts), "JOINTS_0": b.accessor(np.zeros((5, 4)), B.UBYTE),
                               "WEIGHTS_0": b.accessor(np.tile([1.0, 0, 0, 0], (5, 1)))}, "mode": mode}  # fmt: skip

    b.roots(joint, b.node("m", mesh=b.mesh([prim(5), prim(6), prim(0), prim(1)]), skin=b.skin([joint])))
    asset, messages = read_recording(b.write(tmp_path / "modes.gltf"))
    assert ["POINTS primitive skipped" in messages[0], "LINES primitive skipped" in messages[1]] == [True, True]
    mesh = asset.rig.meshes[0]
    assert mesh.vertex_count == 10  # the POINTS and LINES primitives (and their vertices) are dropped
    strip = [[0, 1, 2], [1, 3, 2], [2, 3, 4]]  # glTF: (i, i+1+i%2, i+2-i%2)
    fan = [[6, 7, 5], [7, 8, 5], [8, 9, 5]]  # glTF: (i+1, i+2, 0), offset by the strip's 5 vertices
    np.testing.assert_array_equal(mesh.triangles, strip + fan)


def test_vertices_without_weight_follow_the_root(tmp_path):
    b = B.minimal_skin()
    weights = np.concatenate([np.zeros((1, 4)), np.tile([1.0, 0, 0, 0], (9, 1))])  # vertex 0 has none
    b.doc["meshes"][0]["primitives"][0]["attributes"]["WEIGHTS_0"] = b.accessor(weights)
    asset, messages = read_recording(b.write(tmp_path / "w.gltf"))
    assert any("1 vertices have no weight: bound rigidly to the root joint" in m for m in messages)
    mesh = asset.rig.meshes[0]
    assert mesh.influence_joints[0, 0] == 0 and mesh.influence_weights[0, 0] == 1.0


def test_compressed_geometry_is_rejected(tmp_path):
    b = B.minimal_skin()
    b.doc["extensionsRequired"] = ["KHR_draco_mesh_compression"]
    with pytest.raises(InputError, match="extensionsRequired: KHR_draco_mesh_compression is not supported"):
        read_gltf(b.write(tmp_path / "draco.gltf"))


def test_scene_selection(tmp_path):
    b = B.minimal_skin()
    b.doc["scenes"].append({"nodes": [1]})  # the skeleton only, no mesh
    path = b.write(tmp_path / "scenes.gltf")
    assert len(read_gltf(path).rig.meshes) == 1
    assert read_gltf(path, scene=1).rig.meshes == ()
    with pytest.raises(InputError, match=r"scene: scene 2 does not exist \(2 scenes\)"):
        read_gltf(path, scene=2)


# -- malformed input ---------------------------------------------------------------------------------------------
def _mutate(doc_edit):
    def build(tmp_path: Path) -> Path:
        b = B.minimal_skin()
        doc_edit(b.doc)
        return b.write(tmp_path / "bad.gltf")

    return build


def _edit(path: str, value):
    """A doc edit setting the field at dotted ``path`` (list indices as digits) to ``value``."""

    def apply(doc):
        *head, last = [int(p) if p.isdigit() else p for p in path.split(".")]
        target = doc
        for key in head:
            target = target[key]
        target[last] = value

    return apply


def _raw_file(name: str, data: bytes):
    def build(tmp_path: Path) -> Path:
        path = tmp_path / name
        path.write_bytes(data)
        return path

    return build


def _truncated_glb(cut: int):
    def build(tmp_path: Path) -> Path:
        path = B.minimal_skin().write(tmp_path / "full.glb")
        data = path.read_bytes()
        out = tmp_path / "cut.glb"
        out.write_bytes(data[: cut if cut >= 0 else len(data) + cut])
        return out

    return build


def _external_missing(tmp_path: Path) -> Path:
    path = B.minimal_skin().write(tmp_path / "ext.gltf", "external")
    (tmp_path / "ext data.bin").unlink()
    return path


def _two_skins(differ: bool):
    """A second mesh node with a second skin over the same joints (listed reversed when ``differ``, so the
    shared inverse bind matrix accessor binds each joint with the other joint's matrix)."""

    def edit(doc):
        skin = dict(doc["skins"][0])
        if differ:
            skin["joints"] = skin["joints"][::-1]
        doc["skins"].append(skin)
        doc["nodes"].append({"mesh": 0, "skin": len(doc["skins"]) - 1})
        doc["scenes"][0]["nodes"].append(len(doc["nodes"]) - 1)

    return edit


def _disjoint(doc):
    doc["nodes"].append({"name": "other"})
    doc["nodes"][1]["children"] = []  # "tip" becomes a second scene root
    doc["scenes"][0]["nodes"].append(0)


BAD_FILES = {
    "empty glb": (_raw_file("e.glb", b""), "header", "truncated GLB"),
    "short header": (_truncated_glb(11), "header", "truncated GLB"),
    "truncated chunk header": (_truncated_glb(16), "header.length", "truncated"),
    "truncated body": (_truncated_glb(-9), "header.length", "truncated"),
    "not glb": (_raw_file("x.glb", b"GIF89a" + b"\0" * 40), "header", "not a GLB file"),
    "bad JSON": (_raw_file("x.gltf", b'{"asset": {"version": "2.0"},'), "JSON", "invalid JSON at line 1"),
    "not UTF-8": (_raw_file("x.gltf", b'{"asset": "\xff"}'), "JSON", "not UTF-8"),
    "JSON array": (_raw_file("x.gltf", b"[1, 2]"), "JSON", "top level must be an object"),
    "version 1": (_mutate(_edit("asset.version", "1.0")), "asset.version", "unsupported glTF version"),
    "missing buffer file": (_external_missing, "buffers[0].uri", "cannot read buffer file"),
    "bad base64": (
        _mutate(_edit("buffers", [{"byteLength": 8, "uri": "data:x;base64,@@@@"}])),
        "buffers[0].uri",
        "invalid base64",
    ),
    "short buffer": (_mutate(lambda d: None), None, None),  # placeholder replaced below
    "accessor bufferView missing": (
        _mutate(_edit("accessors.3.bufferView", 9)),
        "accessors[3]",
        "bufferView 9 does not exist (7 bufferViews)",
    ),
    "accessor out of view": (_mutate(_edit("accessors.0.count", 1000)), "accessors[0]", "needs 12000 bytes"),
    "stride too small": (
        _mutate(_edit("bufferViews.0.byteStride", 4)),
        "bufferViews[0].byteStride",
        "smaller than the element size 12",
    ),
    "view out of buffer": (_mutate(_edit("bufferViews.0.byteLength", 10**6)), "bufferViews[0]", "exceeds buffers[0]"),
    "bad componentType": (_mutate(_edit("accessors.0.componentType", 5124)), "accessors[0]", "componentType 5124"),
    "normalized float": (_mutate(_edit("accessors.0.normalized", True)), "accessors[0]", "normalized is only"),
    "sparse index out of range": (
        _mutate(
            _edit(
                "accessors.0.sparse",
                {"count": 1, "indices": {"bufferView": 3, "componentType": 5125}, "values": {"bufferView": 0}},
            )
        ),
        "accessors[0].sparse",
        "index 65536 >= accessor count 10",
    ),
    "wrong type": (_mutate(_edit("nodes.1.translation", "up")), "nodes[1].translation", "must be list"),
    "child out of range": (_mutate(_edit("nodes.1.children", [7])), "nodes[1].children[0]", "not a valid index"),
    "two parents": (_mutate(_edit("nodes.2.children", [0])), "nodes[2].children", "already has parent node 1"),
    "cycle": (_mutate(_edit("nodes.0.children", [1])), "nodes[", "cycle"),
    "non-uniform joint scale": (
        _mutate(_edit("nodes.0.scale", [1, 2, 1])),
        "nodes[0].scale",
        "nodes[0] 'tip' has scale [1.0, 2.0, 1.0]",
    ),
    "non-uniform ancestor matrix": (
        _mutate(
            lambda d: (
                d["nodes"].append(
                    {"name": "arm", "children": [1], "matrix": [1, 0, 0, 0, 0, 3, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1]}
                ),
                d["scenes"][0].update(nodes=[2, 3]),
            )
        ),
        "nodes[3].matrix",
        "'arm' has scale",
    ),
    "mirroring scale": (_mutate(_edit("nodes.1.scale", [-1, -1, -1])), "nodes[1].scale", "uniform positive"),
    "tiny scale": (_mutate(_edit("nodes.0.scale", [1e-300] * 3)), "nodes[0].scale", "scale 1e-300: outside [1e-06"),
    "huge translation": (_mutate(_edit("nodes.1.translation", [1e300, 1, 0])), "nodes[1].translation", "out of range"),
    "disjoint joint trees": (_mutate(_disjoint), "skins[0].joints", "2 separate trees"),
    "joint index beyond skin": (_mutate(_edit("skins.0", {"joints": [1]})), "nodes[2]", "weighted to joint 1 but"),
    "IBM wrong type": (
        _mutate(_edit("skins.0.inverseBindMatrices", 0)),
        "skins[0].inverseBindMatrices",
        "must hold 2 MAT4",
    ),
    "two skins disagree": (_mutate(_two_skins(True)), "skins[1].inverseBindMatrices", "different inverse bind"),
    "no skin": (_mutate(lambda d: (d.pop("skins"), d["nodes"][2].pop("skin"))), "skins", "no skin"),
    "keys not increasing": (
        _mutate(_edit("animations.0.samplers.0.input", 0)),
        "animations[0].samplers[0].input",
        "must be SCALAR",
    ),
    "output count": (
        _mutate(_edit("animations.0.samplers.0.interpolation", "CUBICSPLINE")),
        "animations[0].samplers[0].output",
        "CUBICSPLINE needs 9",
    ),
    "bad interpolation": (
        _mutate(_edit("animations.0.samplers.0.interpolation", "BEZIER")),
        "animations[0].samplers[0].interpolation",
        "unknown interpolation",
    ),
    "bad path": (
        _mutate(_edit("animations.0.channels.0.target.path", "color")),
        "animations[0].channels[0]",
        "unknown path 'color'",
    ),
    "animated matrix node": (
        _mutate(_edit("nodes.0.matrix", np.eye(4).ravel().tolist())),
        "animations[0].channels[0].target",
        "has a matrix and cannot be animated",
    ),
    "bad mode": (_mutate(_edit("meshes.0.primitives.0.mode", 9)), "meshes[0].primitives[0].mode", "unknown"),
    "index out of range": (
        _mutate(_edit("meshes.0.primitives.0.indices", 1)),
        "meshes[0].primitives[0].indices",
        "must be SCALAR",
    ),
    "missing WEIGHTS_1": (
        _mutate(_edit("meshes.0.primitives.0.attributes.JOINTS_1", 1)),
        "meshes[0].primitives[0].attributes",
        "WEIGHTS_1 is missing",
    ),
}
BAD_FILES["short buffer"] = (
    _mutate(_edit("buffers", [{"byteLength": 10, "uri": "data:x;base64,AAAA"}])),
    "buffers[0]",
    "byteLength is 10 but the data has only 3 bytes",
)


def _decreasing_keys(doc):
    doc["accessors"].append({"bufferView": 2, "componentType": 5126, "count": 3, "type": "SCALAR", "byteOffset": 0})
    doc["animations"][0]["samplers"][0]["input"] = len(doc["accessors"]) - 1


BAD_FILES["keys not increasing"] = (
    _mutate(_decreasing_keys),
    "animations[0].samplers[0].input",
    "key times not strictly increasing",
)


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_bad_files_raise_input_error(tmp_path, case):
    build, field, problem = BAD_FILES[case]
    path = build(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(InputError) as info:
            read_gltf(path)
    err = info.value
    assert err.path == str(path)
    assert err.field.startswith(field), f"field {err.field!r}, message {err}"
    assert problem in err.problem, f"message {err}"
    assert str(err).startswith(f"{path}: {err.field}: ")


def test_consistent_skins_share_one_rig(tmp_path):
    asset = read_gltf(_mutate(_two_skins(False))(tmp_path))
    assert asset.rig.joint_count == 2 and len(asset.rig.meshes) == 2


def test_corrupted_glb_never_leaks_other_exceptions(tmp_path):
    """Random byte flips and truncations of a valid GLB load or raise InputError, nothing else."""
    data = B.minimal_skin().write(tmp_path / "ok.glb").read_bytes()
    rng = np.random.default_rng(5)
    variants = [data[:cut] for cut in range(0, len(data), 37)]
    for _ in range(60):
        corrupt = bytearray(data)
        for pos in rng.integers(0, len(data), rng.integers(1, 4)):
            corrupt[pos] = rng.integers(0, 256)
        variants.append(bytes(corrupt))
    outcomes = {"ok": 0, "error": 0}
    path = tmp_path / "corrupt.glb"
    for variant in variants:
        path.write_bytes(variant)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                read_gltf(path)
                outcomes["ok"] += 1
            except InputError:
                outcomes["error"] += 1
    assert outcomes["error"] > 0 and sum(outcomes.values()) == len(variants)


def _all_paths(value, prefix=()):
    """Every (container path) inside a JSON value."""
    yield prefix
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        yield from _all_paths(child, (*prefix, key))


def test_malformed_json_fields_never_leak_other_exceptions(tmp_path):
    """Fields of a valid document replaced by junk of the wrong type or range: loads or raises InputError."""
    builder = B.folded_character()
    paths = [p for p in _all_paths(builder.doc) if p and p[0] != "buffers"]
    junk = [None, "x", -1, 7, 10**9, 0.5, [], {}, [0, 1, 2], {"a": 1}, True]
    rng = np.random.default_rng(11)
    path = tmp_path / "junk.glb"
    errors = 0
    for k in rng.permutation(len(paths))[:150]:
        doc = json.loads(json.dumps(builder.doc))
        *head, last = paths[k]
        target = doc
        for key in head:
            target = target[key]
        target[last] = junk[rng.integers(len(junk))]
        b = B.GltfBuilder()
        b.doc, b.data = doc, builder.data
        b.write(path)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                read_gltf(path)
            except InputError:
                errors += 1
    assert errors > 50


def _strip_skin(tmp_path: Path, joints, ctype) -> Path:
    """A two-joint strip whose vertices are all weighted to skin joint ``joints`` (VEC4 rows) of type ``ctype``."""
    b = B.GltfBuilder()
    pts = B.strip_points()
    tip = b.node("tip", translation=[0, 1, 0])
    root = b.node("root", children=[tip])
    weights = np.tile([1.0, 0.0, 0.0, 0.0], (len(pts), 1))
    attributes = {"POSITION": b.accessor(pts), "JOINTS_0": b.accessor(np.tile(joints, (len(pts), 1)), ctype),
                  "WEIGHTS_0": b.accessor(weights)}  # fmt: skip
    prim = {"attributes": attributes, "indices": b.accessor(B.strip_indices(), B.USHORT)}
    body = b.node("body", mesh=b.mesh([prim]), skin=b.skin([root, tip]))
    b.roots(body, root)
    return b.write(tmp_path / "strip.gltf")


def test_negative_joint_index_is_refused(tmp_path):
    """JOINTS_n are unsigned; a signed byte -1 indexed the skin's joint list from its end: every vertex rode on the
    last joint, silently."""
    read_gltf(_strip_skin(tmp_path, [0, 0, 0, 0], B.BYTE))  # a signed type holding valid indices still reads
    with pytest.raises(InputError, match=r"JOINTS_0: accessors\[\d+\] gives vertex 0 joint index -1") as info:
        read_gltf(_strip_skin(tmp_path, [-1, 0, 0, 0], B.BYTE))
    assert info.value.field == "meshes[0].primitives[0].attributes.JOINTS_0"


def test_projective_inverse_bind_matrix_is_refused(tmp_path):
    """Skinning uses the top three rows, the bind pose inverts all four: a last row [0, 0.5, 0, 1] moved a rigid
    mesh on that joint to 2/3 of its height without a word."""
    b = B.minimal_skin()
    ibm = np.linalg.inv([B.trs_matrix(), B.trs_matrix(t=(0, 1, 0))])
    ibm[1, 3] = [0.0, 0.5, 0.0, 1.0]
    b.doc["skins"][0]["inverseBindMatrices"] = b.accessor(ibm)
    with pytest.raises(InputError, match=r"matrix 1: last row \[0.0, 0.5, 0.0, 1.0\] is not \[0, 0, 0, 1\]") as info:
        read_gltf(b.write(tmp_path / "projective.gltf"))
    assert info.value.field == "skins[0].inverseBindMatrices"


def test_more_inverse_bind_matrices_than_joints_are_allowed(tmp_path):
    """glTF 2.0: the accessor's count MUST be at least the joint count (extra matrices are unused); it was refused."""
    good = B.minimal_skin()
    extra = B.minimal_skin()
    ibm = np.linalg.inv([B.trs_matrix(), B.trs_matrix(t=(0, 1, 0)), B.trs_matrix(t=(5, 5, 5))])
    good.doc["skins"][0]["inverseBindMatrices"] = good.accessor(ibm[:2])
    extra.doc["skins"][0]["inverseBindMatrices"] = extra.accessor(ibm)
    a, b = read_gltf(good.write(tmp_path / "two.gltf")), read_gltf(extra.write(tmp_path / "three.gltf"))
    np.testing.assert_array_equal(a.rig.inverse_bind_matrices, b.rig.inverse_bind_matrices)
    np.testing.assert_array_equal(a.rig.meshes[0].points, b.rig.meshes[0].points)
    fewer = B.minimal_skin()
    fewer.doc["skins"][0]["inverseBindMatrices"] = fewer.accessor(ibm[:1])
    with pytest.raises(InputError, match="holds 1 MAT4 for 2 joints"):
        read_gltf(fewer.write(tmp_path / "one.gltf"))


def test_sparse_indices_must_increase(tmp_path):
    """The spec requires strictly increasing sparse indices; [3, 1, 3] was applied with the last value winning."""
    b = B.minimal_skin()
    prim = b.doc["meshes"][0]["primitives"][0]
    prim["attributes"]["POSITION"] = b.accessor(B.strip_points(), sparse=([3, 1, 3], [[9, 9, 9], [5, 5, 5], [7, 7, 7]]))
    with pytest.raises(InputError, match=r"strictly increasing: index 1 at position 1 follows 3") as info:
        read_gltf(b.write(tmp_path / "sparse.gltf"))
    assert info.value.field.endswith(".sparse.indices")


def test_scales_multiplying_out_of_range_are_refused(tmp_path):
    """Each node's scale is bounded, their product was not: four ancestors at 1e5 loaded with rest translations of
    1e20 (beyond the reader's own 1e15 limit), sixty failed in an SVD with the field 'document'."""
    for count in (4, 60):
        b = B.minimal_skin()
        top = 1  # the root joint
        for k in range(count):
            top = b.node(f"s{k}", scale=[1e5] * 3, children=[top])
        b.roots(2, top)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(InputError, match=r"scales down to .* multiply to .* out of range") as info:
                read_gltf(b.write(tmp_path / f"scaled{count}.gltf"))
        assert info.value.field.startswith("nodes[") and info.value.field.endswith("].scale")


def test_integer_beyond_float_range_names_its_field(tmp_path):
    """A JSON integer of 400 digits reached float() unguarded: 'document: malformed glTF (OverflowError ...)'."""
    path = B.minimal_skin().write(tmp_path / "huge.gltf")
    doc = json.loads(path.read_text())
    node = next(i for i, n in enumerate(doc["nodes"]) if "translation" in n)
    text = json.dumps(doc).replace(json.dumps(doc["nodes"][node]["translation"]), "[0.0, 1" + "0" * 400 + ", 0.0]", 1)
    path.write_text(text)
    with pytest.raises(InputError) as info:
        read_gltf(path)
    assert info.value.field == f"nodes[{node}].translation"


@pytest.mark.parametrize("owner", ["node", "mesh"])
def test_bad_morph_weight_names_the_weights_it_came_from(tmp_path, owner):
    """A node's (or mesh's) default morph weight that is not a number was reported on the primitive's 'weights',
    a field glTF does not have."""
    b = B.minimal_skin()
    prim = b.doc["meshes"][0]["primitives"][0]
    prim["targets"] = [{"POSITION": b.accessor(np.zeros((len(B.strip_points()), 3)))}]
    node = next(i for i, n in enumerate(b.doc["nodes"]) if "mesh" in n)
    (b.doc["nodes"][node] if owner == "node" else b.doc["meshes"][0])["weights"] = ["x"]
    with pytest.raises(InputError, match="must be a number") as info:
        read_gltf(b.write(tmp_path / "morph.gltf"))
    assert info.value.field == (f"nodes[{node}].weights[0]" if owner == "node" else "meshes[0].weights[0]")
