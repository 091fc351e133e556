"""Procedural characters and gaits: skeletons, closed skins, weights, planted feet, exact loops."""

from __future__ import annotations

import numpy as np
import pytest
import trimesh
from scipy.spatial import cKDTree

import sim
from sim import characters
from sim.rotations import quat_conjugate, quat_multiply

JOINT_COUNT_RANGE = (20, 26)
VERTEX_COUNT_RANGE = (2000, 6000)
HEIGHT_RANGE = {"quadruped": (0.50, 0.60), "biped": (1.70, 1.80)}
GROUND_TOLERANCE = 0.005
"""The lowest skinned vertex of every walk frame lies within this of z = 0 [m]."""
CONTACT_HEIGHT = 0.003
"""A vertex below this height [m] in two consecutive frames is in contact with the ground."""
MAX_CONTACT_SLIDE = 0.002
"""Largest horizontal motion of a vertex in contact between consecutive frames [m]."""
MIN_SWING_LIFT = 0.03
"""Every foot's lowest vertex must rise at least this high during the walk [m]."""
MAX_EDGE_WEIGHT_JUMP = 0.5
"""Across any mesh edge, at most this fraction of a vertex's weight moves to other joints (no hard seams)."""
LOOP_ATOL = 1e-9
TRUNK = ("pelvis", "spine", "neck", "head")

SPECIES = ("quadruped", "biped")
LEGS = {"quadruped": ("front_left", "front_right", "hind_left", "hind_right"), "biped": ("left", "right")}


@pytest.fixture(scope="module", params=SPECIES)
def asset(request):
    rig, clips = characters.build(request.param)
    return request.param, rig, clips


@pytest.fixture(scope="module")
def walk_points(asset):
    _, rig, clips = asset
    points, _ = sim.skin_motion(rig, clips["walk"])
    return points


def _dominant(mesh) -> np.ndarray:
    return mesh.influence_joints[np.arange(mesh.vertex_count), np.argmax(mesh.influence_weights, axis=1)]


def _segment_distance(p: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    ab = b - a
    t = np.clip(((p - a) @ ab) / max(float(ab @ ab), 1e-30), 0.0, 1.0)
    return np.linalg.norm(p - (a + t[:, None] * ab), axis=1)


def _joint_positions(rig, motion) -> np.ndarray:
    """World positions of every joint in every frame [m], shape (F, J, 3): forward kinematics of the clip."""
    x, y, z, w = np.moveaxis(motion.rotations, -1, 0)
    local = np.stack(
        [
            np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)], -1),
            np.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)], -1),
            np.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], -1),
        ],
        -2,
    )  # rest rotations are the identity
    pos = np.zeros((*motion.rotations.shape[:2], 3))
    rot = np.zeros((*motion.rotations.shape[:2], 3, 3))
    for j, p in enumerate(rig.parents):
        if p < 0:
            pos[:, j], rot[:, j] = motion.root_translations, local[:, j]
        else:
            pos[:, j] = pos[:, p] + np.einsum("fab,b->fa", rot[:, p], rig.rest_translations[j])
            rot[:, j] = rot[:, p] @ local[:, j]
    return pos


def _mirror_joints(rig) -> np.ndarray:
    """Index of each joint's mirror twin (left <-> right; itself on the midline)."""
    names = [n.replace("left", "@").replace("right", "left").replace("@", "right") for n in rig.joint_names]
    return np.array([rig.joint_index(n) for n in names])


def _bone_distances(rig, points: np.ndarray) -> np.ndarray:
    """Distance from each point to each joint's bone: the segments to its children (a leaf: the joint itself)."""
    pos, _ = rig.rest_world_transforms()
    children = rig.children()
    out = np.empty((len(points), rig.joint_count))
    for j in range(rig.joint_count):
        segs = [_segment_distance(points, pos[j], pos[c]) for c in children[j]]
        out[:, j] = np.min(segs, axis=0) if segs else np.linalg.norm(points - pos[j], axis=1)
    return out


# -- catalog ---------------------------------------------------------------------------------------------------


def test_names_and_unknown_name():
    names = characters.procedural_asset_names()
    assert {"quadruped", "biped", "quadruped-walk", "biped-walk"} <= set(names)
    for bad in ("nope", "biped-run", ""):
        with pytest.raises(KeyError) as e:
            characters.build(bad)
        assert "quadruped-walk" in str(e.value) and "biped" in str(e.value)


def test_build_clip_selection():
    rig, clips = characters.build("biped-walk")
    assert list(clips) == ["walk"]
    assert clips["walk"].joint_count == rig.joint_count
    with pytest.raises(TypeError, match="BipedConfig"):
        characters.build("biped", config=characters.QuadrupedConfig())


def test_all_clips_walk_first(asset):
    _, rig, clips = asset
    assert next(iter(clips)) == "walk" and "idle" in clips
    for motion in clips.values():
        motion.check_rig(rig)
        assert motion.fps == 30.0


# -- skeleton and skin -----------------------------------------------------------------------------------------


def test_skeleton(asset):
    species, rig, _ = asset
    lo, hi = JOINT_COUNT_RANGE
    assert lo <= rig.joint_count <= hi
    assert len(set(rig.joint_names)) == rig.joint_count
    assert rig.parents[0] == -1 and np.all(rig.parents[1:] < np.arange(1, rig.joint_count))
    expected = {
        "quadruped": ["front_left_upper_leg", "hind_right_toes", "tail_3", "left_ear", "head"],
        "biped": ["left_thigh", "right_toes", "left_clavicle", "right_hand", "spine_3", "head"],
    }[species]
    assert set(expected) <= set(rig.joint_names)
    pos, _ = rig.rest_world_transforms()
    name = rig.joint_index
    # +X forward, +Y left, Z up
    assert pos[name("head"), 0] > pos[name("pelvis"), 0] - 0.05
    assert all(pos[j, 1] > 0.0 for j, n in enumerate(rig.joint_names) if "left" in n)
    assert all(pos[j, 1] < 0.0 for j, n in enumerate(rig.joint_names) if "right" in n)
    toes = name("left_toes" if species == "biped" else "front_left_toes")
    assert pos[toes, 0] > pos[rig.parents[toes], 0] - 0.02 and pos[name("head"), 2] > pos[name("pelvis"), 2]


def test_rest_pose_is_bind_pose(asset):
    _, rig, _ = asset
    np.testing.assert_allclose(
        rig.inverse_bind_matrices @ rig.rest_world_matrices(),
        np.broadcast_to(np.eye(4), (rig.joint_count, 4, 4)),
        atol=1e-12,
    )


def test_skin_is_one_closed_manifold(asset):
    _, rig, _ = asset
    assert len(rig.meshes) == 1
    mesh = rig.meshes[0]
    lo, hi = VERTEX_COUNT_RANGE
    assert lo <= mesh.vertex_count <= hi
    tm = trimesh.Trimesh(mesh.points, mesh.triangles, process=False)
    assert tm.is_watertight
    assert tm.is_winding_consistent
    assert tm.body_count == 1
    assert tm.euler_number == 2  # a sphere: no accidental handles where limbs touch the body
    assert tm.volume > 0.0  # counter-clockwise seen from outside
    # the normals point away from the body: the farthest vertex from the centroid has an outward normal
    normals = mesh.vertex_normals()
    far = np.argmax(np.linalg.norm(mesh.points - tm.center_mass, axis=1))
    assert normals[far] @ (mesh.points[far] - tm.center_mass) > 0.0


def test_skin_and_weights_are_mirror_symmetric(asset):
    # "the right side is the mirror image of the left": the marching-cubes grid was off-centre in y, so the skin
    # was not (y extent -0.5400 / +0.5373, one foot's sole 0.86 mm above the other's)
    species, rig, _ = asset
    mesh = rig.meshes[0]
    distance, partner = cKDTree(mesh.points).query(mesh.points * [1.0, -1.0, 1.0])
    assert distance.max() < 1e-9, f"a mirrored vertex lies {distance.max():.3g} m from every vertex"
    # and so do the triangles: each one's mirror image (through the vertices' partners) is a triangle too
    triangles = {tuple(t) for t in np.sort(mesh.triangles, axis=1)}
    assert {tuple(t) for t in np.sort(partner[mesh.triangles], axis=1)} == triangles
    dense = np.zeros((mesh.vertex_count, rig.joint_count))
    np.add.at(dense, (np.arange(mesh.vertex_count)[:, None], mesh.influence_joints), mesh.influence_weights)
    # weights mirror too, off the midline (on it a left and a right bone can tie for the last influence kept)
    side = np.abs(mesh.points[:, 1]) > 1e-9
    np.testing.assert_allclose(dense[partner][:, _mirror_joints(rig)][side], dense[side], atol=1e-9)
    dom = _dominant(mesh)
    for leg in LEGS[species]:
        if "left" not in leg:
            continue
        soles = [
            mesh.points[np.isin(dom, [rig.joint_index(f"{side}_foot"), rig.joint_index(f"{side}_toes")]), 2].min()
            for side in (leg, leg.replace("left", "right"))
        ]
        assert abs(soles[0] - soles[1]) < 1e-9, f"{leg} sole {soles[0]:.6f} m, its mirror twin's {soles[1]:.6f} m"


def test_size_and_ground(asset):
    species, rig, _ = asset
    lo, hi = HEIGHT_RANGE[species]
    assert lo <= rig.height() <= hi
    np.testing.assert_allclose(rig.meshes[0].points[:, 2].min(), 0.0, atol=1e-12)


def test_weights(asset):
    _, rig, _ = asset
    mesh = rig.meshes[0]
    assert mesh.influence_count <= 4
    assert np.all(mesh.influence_weights >= 0.0)
    np.testing.assert_allclose(mesh.influence_weights.sum(axis=1), 1.0, atol=1e-12)
    # each vertex is dominated by a bone it is near. The trunk is wide: a chest vertex can be nearer the
    # root segments of the limbs than the spine, yet must follow the spine, so trunk-dominated vertices are
    # ranked among the trunk bones only; everything else (limbs, tail, ears) among all bones.
    dist = _bone_distances(rig, mesh.points)
    dom = _dominant(mesh)
    trunk = np.array([n.startswith(TRUNK) for n in rig.joint_names])
    own = dist[np.arange(mesh.vertex_count), dom]
    rank_all = (dist < own[:, None]).sum(axis=1)
    rank_trunk = (np.where(trunk[None, :], dist, np.inf) < own[:, None]).sum(axis=1)
    rank = np.where(trunk[dom], rank_trunk, rank_all)
    bad = np.flatnonzero(rank >= 2)
    assert bad.size == 0, f"{bad.size} vertices dominated by a bone that is not among their 2 nearest"
    # smooth across joints: no edge hands most of a vertex's weight to other joints
    dense = np.zeros((mesh.vertex_count, rig.joint_count))
    np.add.at(dense, (np.arange(mesh.vertex_count)[:, None], mesh.influence_joints), mesh.influence_weights)
    edges = np.concatenate([mesh.triangles[:, [0, 1]], mesh.triangles[:, [1, 2]], mesh.triangles[:, [2, 0]]])
    jump = 0.5 * np.abs(dense[edges[:, 0]] - dense[edges[:, 1]]).sum(axis=1)
    assert jump.max() < MAX_EDGE_WEIGHT_JUMP
    # but joints do blend: some vertices share their weight
    assert (mesh.influence_weights[:, 0] < 0.9).mean() > 0.1


# -- walk ------------------------------------------------------------------------------------------------------


def test_walk_is_finite_and_grounded(walk_points):
    assert np.all(np.isfinite(walk_points))
    lowest = walk_points[..., 2].min(axis=1)
    np.testing.assert_allclose(lowest, 0.0, atol=GROUND_TOLERANCE)


def test_walk_contacts_do_not_slide(asset, walk_points):
    z = walk_points[..., 2]
    contact = (z[:-1] < CONTACT_HEIGHT) & (z[1:] < CONTACT_HEIGHT)
    assert contact.any(axis=1).all(), "some frame pair has no vertex in contact with the ground"
    slide = np.linalg.norm(walk_points[1:, :, :2] - walk_points[:-1, :, :2], axis=-1)
    assert np.where(contact, slide, 0.0).max() < MAX_CONTACT_SLIDE


def test_walk_feet_lift_and_land(asset, walk_points):
    species, rig, _ = asset
    mesh = rig.meshes[0]
    dom = _dominant(mesh)
    for leg in LEGS[species]:
        foot = f"{leg}_foot"
        on_foot = np.isin(dom, [rig.joint_index(foot), rig.joint_index(f"{leg}_toes")])
        low = walk_points[:, on_foot, 2].min(axis=1)
        assert low.min() > -GROUND_TOLERANCE, f"{foot} goes through the ground"
        assert (low < GROUND_TOLERANCE).mean() > 0.4, f"{foot} is rarely on the ground"
        assert low.max() > MIN_SWING_LIFT, f"{foot} never lifts"


MAX_SELF_INTERSECTION_DEPTH = 0.003
"""Deepest the skin may pass through itself in a default walk [m] (a grazing fold where a limb meets the body)."""


def test_walk_skin_stays_out_of_itself(asset, walk_points):
    # the quadruped's hind thighs went 13 mm into the belly in late swing (paw high and forward at once)
    from sim.mesh_intersection import MeshSelfIntersection

    _, rig, _ = asset
    mesh = rig.meshes[0]
    result = MeshSelfIntersection(mesh.triangles, mesh.points).motion(walk_points)
    assert result.max_depth_m < MAX_SELF_INTERSECTION_DEPTH, f"{result.max_depth_m * 1e3:.1f} mm deep"


def test_walk_loops_and_moves_at_constant_speed(asset):
    species, _, clips = asset
    walk = clips["walk"]
    config = characters.QuadrupedWalkConfig() if species == "quadruped" else characters.BipedWalkConfig()
    period_frames = config.cycle_frames
    period = period_frames / config.fps
    assert walk.frame_count == config.cycles * period_frames + 1
    np.testing.assert_allclose(walk.duration, config.cycles * period, atol=1e-12)
    for f in range(walk.frame_count - period_frames):
        delta = quat_multiply(quat_conjugate(walk.rotations[f]), walk.rotations[f + period_frames])
        np.testing.assert_allclose(np.abs(delta[:, 3]), 1.0, atol=LOOP_ATOL)
        np.testing.assert_allclose(
            walk.root_translations[f + period_frames] - walk.root_translations[f],
            [config.speed * period, 0.0, 0.0],
            atol=LOOP_ATOL,
        )
    np.testing.assert_allclose(np.diff(walk.root_translations[:, 0]), config.speed / config.fps, atol=LOOP_ATOL)
    # it is a walk, not a pose held still: the legs move
    assert np.abs(walk.rotations - walk.rotations[:1]).max() > 0.1


# -- idle ------------------------------------------------------------------------------------------------------


def test_idle_loops_with_planted_feet(asset):
    _, rig, clips = asset
    idle = clips["idle"]
    np.testing.assert_allclose(idle.rotations[-1], idle.rotations[0], atol=LOOP_ATOL)
    np.testing.assert_allclose(idle.root_translations[-1], idle.root_translations[0], atol=LOOP_ATOL)
    points, _ = sim.skin_motion(rig, idle)
    assert np.all(np.isfinite(points))
    np.testing.assert_allclose(points[..., 2].min(axis=1), 0.0, atol=GROUND_TOLERANCE)
    z = points[..., 2]
    contact = (z[:-1] < CONTACT_HEIGHT) & (z[1:] < CONTACT_HEIGHT)
    slide = np.linalg.norm(points[1:, :, :2] - points[:-1, :, :2], axis=-1)
    assert np.where(contact, slide, 0.0).max() < MAX_CONTACT_SLIDE
    assert np.abs(idle.rotations - idle.rotations[:1]).max() > 0.01  # it moves


# -- options ---------------------------------------------------------------------------------------------------


def test_height_option_scales_the_default_walk():
    rig, clips = characters.build("biped-walk", config=characters.BipedConfig(height=1.2, cells_per_height=50))
    np.testing.assert_allclose(rig.height(), 1.2, rtol=0.02)
    points, _ = sim.skin_motion(rig, clips["walk"])
    np.testing.assert_allclose(points[..., 2].min(axis=1), 0.0, atol=GROUND_TOLERANCE)
    z = points[..., 2]
    contact = (z[:-1] < CONTACT_HEIGHT) & (z[1:] < CONTACT_HEIGHT)
    slide = np.linalg.norm(points[1:, :, :2] - points[:-1, :, :2], axis=-1)
    assert np.where(contact, slide, 0.0).max() < MAX_CONTACT_SLIDE


STANCE_GROUND_TOLERANCE = 0.0005
"""A stance foot's sole lies within this of z = 0 [m]."""


@pytest.mark.parametrize("height", [1.75, 2.2])
def test_biped_stance_feet_rest_on_the_ground(height):
    # the sole's lowest vertex is partly skinned to the shin: bent knees lifted it up to 2.5 mm (3.1 mm at 2.2 m)
    rig, clips = characters.build("biped", config=characters.BipedConfig(height=height))
    mesh = rig.meshes[0]
    dom = _dominant(mesh)
    for name, motion in clips.items():
        points, _ = sim.skin_motion(rig, motion)
        # a biped always has a foot on the ground (duty factor >= 0.5; the idle stands on both)
        lowest = points[..., 2].min(axis=1)
        assert np.abs(lowest).max() < STANCE_GROUND_TOLERANCE, f"{name}: lowest vertex {lowest.max() * 1e3:.2f} mm"
        joints = _joint_positions(rig, motion)
        for side in LEGS["biped"]:
            toes = rig.joint_index(f"{side}_toes")
            on_foot = np.isin(dom, [rig.joint_index(f"{side}_foot"), toes])
            # stance: the toes stay put (horizontally) from two frames before to two after, which leaves out the
            # frames of swing in which the foot only lifts or sets down vertically
            still = np.linalg.norm(np.diff(joints[:, toes, :2], axis=0), axis=1) < 1e-9
            still = np.r_[False, False, still, False, False]
            planted = np.all([still[k : k + motion.frame_count] for k in range(4)], axis=0)
            assert planted.sum() > 0.4 * motion.frame_count
            sole = points[:, on_foot, 2].min(axis=1)[planted]
            assert np.abs(sole).max() < STANCE_GROUND_TOLERANCE, f"{name} {side}: sole {sole.max() * 1e3:.2f} mm up"
        z = points[..., 2]
        contact = (z[:-1] < CONTACT_HEIGHT) & (z[1:] < CONTACT_HEIGHT)
        slide = np.linalg.norm(points[1:, :, :2] - points[:-1, :, :2], axis=-1)
        assert np.where(contact, slide, 0.0).max() < 0.001


def test_unreachable_gait_is_refused():
    rig = characters.quadruped(characters.QuadrupedConfig(height=0.8, cells_per_height=30))
    np.testing.assert_allclose(rig.height(), 0.8, rtol=0.02)
    with pytest.raises(ValueError, match="cannot reach"):
        characters.quadruped_walk(rig, characters.QuadrupedWalkConfig(speed=3.0))
    with pytest.raises(sim.RigError, match="lacks the joints"):
        characters.biped_walk(rig)
