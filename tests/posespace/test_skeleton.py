"""Canonical frames, graph distances, symmetry, swing-twist and pose encoding of the pose space."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import sim
from posespace import PoseRig, graph_distances, rig_signature
from posespace._rotations import remove_twist_x, swing_twist_x, swing_twist_x_t
from sim.rotations import (
    axis_angle_to_quat,
    quat_multiply,
    quat_normalize,
    quat_rotate,
    quat_to_matrix,
)

EXACT = 1e-10
FK_TOL = 1e-9


def test_graph_distances_match_floyd_warshall(rng):
    parents = [-1, 0, 1, 1, 0, 4, 5, 2]
    ref = np.full((8, 8), 99)
    np.fill_diagonal(ref, 0)
    for j, p in enumerate(parents):
        if p >= 0:
            ref[j, p] = ref[p, j] = 1
    for k in range(8):
        ref = np.minimum(ref, ref[:, k : k + 1] + ref[k : k + 1, :])
    np.testing.assert_array_equal(graph_distances(np.array(parents)), ref)


def test_swing_twist_known_rotations():
    angle = 0.7
    swing, twist = swing_twist_x(axis_angle_to_quat(np.array([angle, 0.0, 0.0])))
    np.testing.assert_allclose(twist, angle, atol=EXACT)
    np.testing.assert_allclose(swing, [0.0, 0.0], atol=EXACT)
    swing, twist = swing_twist_x(axis_angle_to_quat(np.array([0.0, 0.0, -angle])))
    np.testing.assert_allclose(twist, 0.0, atol=EXACT)
    np.testing.assert_allclose(swing, [0.0, -angle], atol=EXACT)


def test_swing_twist_recomposes_and_matches_torch(rng):
    q = quat_normalize(rng.normal(size=(50, 4)))
    swing, twist = swing_twist_x(q)
    sv = np.concatenate([np.zeros((50, 1)), swing], axis=-1)  # swing axis lies in the y-z plane
    t = axis_angle_to_quat(twist[:, None] * np.array([1.0, 0.0, 0.0]))
    recomposed = quat_multiply(axis_angle_to_quat(sv), t)
    np.testing.assert_allclose(quat_to_matrix(recomposed), quat_to_matrix(q), atol=1e-9)
    st, tt = swing_twist_x_t(torch.as_tensor(q))
    np.testing.assert_allclose(st.numpy(), swing, atol=1e-6)
    np.testing.assert_allclose(tt.numpy(), twist, atol=1e-9)
    # heading removal leaves no twist about x
    _, rest = swing_twist_x(remove_twist_x(q))
    np.testing.assert_allclose(rest, 0.0, atol=1e-9)


def test_canonical_frames_point_along_bones(make_stick):
    rig = make_stick()
    pr = PoseRig(rig)
    pos, rot = rig.rest_world_transforms()
    axes = quat_rotate(pr.frames_world, np.array([1.0, 0.0, 0.0]))
    for child, parent in ((4, 3), (10, 9), (14, 13)):  # elbow <- shoulder, knee <- hip
        d = pos[child] - pos[parent]
        np.testing.assert_allclose(axes[parent], d / np.linalg.norm(d), atol=EXACT)
    np.testing.assert_allclose(axes[0], [0.0, 0.0, 1.0], atol=EXACT)  # root: up, so its twist is the heading
    # vertical bones take the character's left (+y) as second axis
    np.testing.assert_allclose(quat_rotate(pr.frames_world[9], np.array([0.0, 1.0, 0.0])), [0, 1, 0], atol=EXACT)
    # local frames are the world frames seen from each joint's rest frame
    np.testing.assert_allclose(quat_to_matrix(quat_multiply(rot, pr.frames_local)), quat_to_matrix(pr.frames_world),
                               atol=EXACT)  # fmt: skip


def test_character_frame_symmetry_and_signature(make_stick):
    rig = make_stick()
    pr = PoseRig(rig)
    assert pr.frame.symmetric
    np.testing.assert_allclose(pr.frame.left, [0.0, 1.0, 0.0], atol=EXACT)
    names = rig.joint_names
    assert names[pr.frame.mirror[names.index("left_knee")]] == "right_knee"
    assert pr.frame.mirror[0] == 0
    # a lopsided skeleton is not treated as symmetric
    t = rig.rest_translations.copy()
    t[4] *= 1.5
    lopsided = sim.Rig(names, rig.parents, t, rig.rest_rotations)
    assert not PoseRig(lopsided).frame.symmetric
    assert rig_signature(rig) == rig_signature(make_stick())
    assert rig_signature(rig) != rig_signature(lopsided)
    # rest rotations count (another rest shape); a quaternion and its negative are one rotation
    rot = rig.rest_rotations.copy()
    rot[4] = axis_angle_to_quat(np.array([0.3, 0.0, 0.0]))
    assert rig_signature(sim.Rig(names, rig.parents, rig.rest_translations, rot)) != rig_signature(rig)
    assert rig_signature(sim.Rig(names, rig.parents, rig.rest_translations, -rig.rest_rotations)) == rig_signature(rig)


def _root_relative(rig, motion):
    pos, _ = sim.pose_motion(rig, motion)
    return pos - pos[:, :1]


def test_encode_decode_keeps_the_pose_without_heading(rng, make_stick, make_walk):
    rig = make_stick()
    pr = PoseRig(rig)
    motion = make_walk(rig, 20)
    heading = axis_angle_to_quat(np.array([0.0, 0.0, 1.2]))
    rot = motion.rotations.copy()
    rot[:, 0] = quat_multiply(
        heading, quat_multiply(axis_angle_to_quat(rng.normal(scale=0.2, size=(20, 3))), rot[:, 0])
    )
    motion = sim.Motion(motion.fps, motion.root_translations, rot)
    poses = pr.encode(motion)
    assert poses.shape == (20, rig.joint_count, 6)
    # exact round trip when the heading is given back
    back = pr.decode(poses, like=motion)
    np.testing.assert_allclose(_root_relative(rig, back), _root_relative(rig, motion), atol=FK_TOL)
    # without it, the pose differs from the input by one rotation about up: pairwise distances and heights agree
    plain = _root_relative(rig, pr.decode(poses))
    ref = _root_relative(rig, motion)
    np.testing.assert_allclose(plain[..., 2], ref[..., 2], atol=FK_TOL)
    np.testing.assert_allclose(np.linalg.norm(plain[..., :2], axis=-1), np.linalg.norm(ref[..., :2], axis=-1),
                               atol=FK_TOL)  # fmt: skip


def test_mirror_reflects_joint_positions(make_stick, make_walk):
    rig = make_stick()
    pr = PoseRig(rig)
    poses = pr.encode(make_walk(rig, 12))
    mirrored = pr.mirror(poses)
    a = _root_relative(rig, pr.decode(poses))
    b = _root_relative(rig, pr.decode(mirrored))
    reflect = np.diag([1.0, -1.0, 1.0])
    np.testing.assert_allclose(b[:, pr.frame.mirror], a @ reflect, atol=FK_TOL)
    np.testing.assert_allclose(pr.mirror(mirrored), poses, atol=1e-12)


def test_features_are_finite_and_facing_invariant(make_stick):
    rig = make_stick()
    f = PoseRig(rig).features
    assert f.shape[0] == rig.joint_count and np.isfinite(f).all()
    # the same character turned 90 degrees about up has the same features
    turn = axis_angle_to_quat(np.array([0.0, 0.0, np.pi / 2]))
    rest_rot = rig.rest_rotations.copy()
    rest_rot[0] = quat_multiply(turn, rest_rot[0])
    trans = rig.rest_translations.copy()
    trans[0] = quat_rotate(turn, trans[0])
    turned = sim.Rig(rig.joint_names, rig.parents, trans, rest_rot)
    np.testing.assert_allclose(PoseRig(turned).features, f, atol=1e-6)


@pytest.mark.parametrize("source", ["procedural:quadruped", "procedural:biped"])
def test_procedural_characters_are_symmetric(source):
    from usd_io import load_asset

    pr = PoseRig(load_asset(source).rig)
    assert pr.frame.symmetric
    assert pr.body.proxy is False
    assert len(pr.body.sphere_center) > pr.joint_count // 2


def test_decoded_poses_stand_on_the_ground_on_a_bvh_like_rig(make_stick, make_walk, make_bvh_like, fk):
    """Without a motion to copy the root from, a decoded pose stands on z = 0 (its lowest joint there); a rig with
    the hips at the origin (BVH) used to have its feet ~1 m underground."""
    rig = make_bvh_like(make_stick())
    pr = PoseRig(rig)
    poses = pr.encode(make_walk(rig, 12))
    motion = pr.decode(poses)
    pos = fk(rig, motion)
    np.testing.assert_allclose(pos[..., 2].min(axis=1), 0.0, atol=FK_TOL)
    np.testing.assert_allclose(motion.root_translations[:, :2], 0.0, atol=FK_TOL)  # above the rest root's x, y
    assert (motion.root_translations[:, 2] > 0.8).all()  # the hips stand about a leg above the ground
    # the old placement stays available (root-relative measures skip the ground search)
    at_rest = pr.decode(poses, on_ground=False)
    np.testing.assert_allclose(at_rest.root_translations, 0.0, atol=FK_TOL)
    assert fk(rig, at_rest)[..., 2].min() < -0.8


def test_swing_twist_of_a_half_turn_swing_matches_numpy():
    """A half-turn swing (``q_x = q_w = 0``: the bone reversed) has no twist. NumPy falls back to identity twist
    and reports a swing of pi; the torch mirror normalized the zero twist to zero and read a swing of 0 (with a
    ~1e12 gradient). (Within 1e-6 of it, where the twist's direction is rounding noise, torch falls back too: the
    swing's direction may then differ from NumPy's, its length of ~pi does not.)"""
    q = np.array([[0.0, 1.0, 0.0, 0.0], [0.0, np.cos(0.4), np.sin(0.4), 0.0], [1e-9, 1.0, 0.0, 0.0]])
    q = quat_normalize(q)
    swing, twist = swing_twist_x(q)
    np.testing.assert_allclose(np.linalg.norm(swing, axis=-1), np.pi, atol=1e-8)
    qt = torch.tensor(q, requires_grad=True)
    st, tt = swing_twist_x_t(qt)
    np.testing.assert_allclose(st.detach().numpy()[:2], swing[:2], atol=1e-6)
    np.testing.assert_allclose(st.detach().norm(dim=-1).numpy(), np.pi, atol=1e-6)
    np.testing.assert_allclose(tt.detach().numpy()[:2], twist[:2], atol=1e-9)
    (st.norm(dim=-1).sum() + tt.sum()).backward()
    assert torch.isfinite(qt.grad).all() and qt.grad.abs().max() < 1e3


def test_mirror_is_the_identity_without_verified_symmetry(make_stick, rng):
    """``PoseRig.mirror`` is documented as the identity on rigs without verified symmetry; it reflected the poses
    about the default left axis there (changing them by up to ~1.7 in 6D)."""
    stick = make_stick()
    names = [n.replace("left_", "a_").replace("right_", "b_") for n in stick.joint_names]
    rig = sim.Rig(names, stick.parents, stick.rest_translations, stick.rest_rotations, name="nosides")
    pr = PoseRig(rig)
    assert not pr.frame.symmetric
    from sim.rotations import quat_to_rot6d

    x = quat_to_rot6d(axis_angle_to_quat(rng.normal(scale=0.5, size=(2, rig.joint_count, 3))))
    out = pr.mirror(x)
    np.testing.assert_array_equal(out, x)
    assert out is not x and not np.shares_memory(out, x)


def _chest_rig(offset_x: float) -> sim.Rig:
    """Pelvis, spine, chest, and two arms straight out from the chest, the left one ``offset_x`` [m] forward."""
    names = ["pelvis", "spine", "chest", "left_arm", "left_hand", "right_arm", "right_hand"]
    parents = [-1, 0, 1, 2, 3, 2, 5]
    pos = np.array([[0, 0, 1.0], [0, 0, 1.2], [0, 0, 1.4], [offset_x, 0.2, 1.4], [offset_x, 0.5, 1.4],
                    [0, -0.2, 1.4], [0, -0.5, 1.4]])  # fmt: skip
    trans = np.array([pos[j] - (pos[p] if p >= 0 else 0) for j, p in enumerate(parents)])
    return sim.Rig(names, parents, trans, np.broadcast_to([0.0, 0.0, 0.0, 1.0], (7, 4)).copy(), name="chest")


def test_near_cancelling_children_keep_the_incoming_bone_axis():
    """A chest whose only children are two opposite arms continues the spine (up). The "children cancel" test was
    absolute (1e-6 on a subtree-size-weighted sum): a 1e-5 m asymmetry turned the chest's axis forward, 90 deg
    away. It is relative to the children's weight now; a clear asymmetry still points the bone between them."""
    from posespace.skeleton import canonical_frames

    x = np.array([1.0, 0.0, 0.0])
    for offset in (0.0, 1e-7, 1e-5, 1e-3):
        world, _ = canonical_frames(_chest_rig(offset))
        np.testing.assert_allclose(quat_rotate(world[2], x), [0.0, 0.0, 1.0], atol=1e-6, err_msg=f"{offset}")
    world, _ = canonical_frames(_chest_rig(0.1))  # the left arm ~27 deg forward: the arms no longer cancel
    axis = quat_rotate(world[2], x)
    assert axis[0] > 0.9 and abs(axis[2]) < 1e-9


def _with_joints(rig, extra):
    """``rig`` (identity rest rotations) plus joints ``(name, parent name, world rest position)``."""
    names, parents = list(rig.joint_names), list(rig.parents)
    pos, _ = rig.rest_world_transforms()
    pos = list(pos)
    for name, parent, p in extra:
        names.append(name)
        parents.append(names.index(parent))
        pos.append(np.array(p, dtype=float))
    pos = np.array(pos)
    trans = np.array([pos[j] - (pos[p] if p >= 0 else 0.0) for j, p in enumerate(parents)])
    return sim.Rig(names, parents, trans, np.tile([0.0, 0.0, 0.0, 1.0], (len(names), 1)), name=rig.name)


def _finger_chains(rig):
    """The stick with a Mixamo-style three-joint index finger per hand (``LeftHandIndex1..3``)."""
    extra = []
    for side, hand, y in (("Left", "left_hand", 0.2), ("Right", "right_hand", -0.2)):
        parent = hand
        for k, z in enumerate((0.85, 0.82, 0.79), start=1):
            extra.append((f"{side}HandIndex{k}", parent, (0.02, y, z)))
            parent = f"{side}HandIndex{k}"
    return _with_joints(rig, extra)


def test_numbered_chains_pair_by_full_name(make_stick):
    # numbered chains used to collapse onto one key once their digits were stripped (every LeftHandIndex* paired
    # with RightHandIndex3): the map was no involution and the whole rig was declared not symmetric
    rig = _finger_chains(make_stick())
    frame = PoseRig(rig).frame
    assert frame.symmetric
    np.testing.assert_allclose(frame.left, [0.0, 1.0, 0.0], atol=EXACT)
    names = rig.joint_names
    for k in (1, 2, 3):
        assert names[frame.mirror[names.index(f"LeftHandIndex{k}")]] == f"RightHandIndex{k}"
        assert names[frame.mirror[names.index(f"RightHandIndex{k}")]] == f"LeftHandIndex{k}"
    np.testing.assert_array_equal(frame.mirror[frame.mirror], np.arange(rig.joint_count))


def test_features_of_numbered_chains_do_not_depend_on_facing(make_stick):
    rig = _finger_chains(make_stick())
    rot = rig.rest_rotations.copy()
    rot[0] = quat_multiply(axis_angle_to_quat(np.array([0.0, 0.0, np.pi / 2])), rot[0])  # the rig turned 90 deg
    turned = sim.Rig(rig.joint_names, rig.parents, rig.rest_translations, rot, name="turned")
    a, b = PoseRig(rig), PoseRig(turned)
    assert b.frame.symmetric
    np.testing.assert_allclose(b.frame.left, [-1.0, 0.0, 0.0], atol=EXACT)
    np.testing.assert_allclose(a.features, b.features, atol=1e-6)


def test_numeric_suffixes_pair_only_where_unambiguous(make_stick):
    from posespace.skeleton import _side_pairs

    # Fox-style: the numeric suffix differs between the sides, so the names pair without it
    rig = make_stick()
    renamed = [f"{n}_{10 + j:03d}" if n.startswith(("left_", "right_")) else n for j, n in enumerate(rig.joint_names)]
    fox_like = sim.Rig(renamed, rig.parents, rig.rest_translations, rig.rest_rotations)
    frame = PoseRig(fox_like).frame
    assert frame.symmetric
    np.testing.assert_array_equal(frame.mirror, PoseRig(rig).frame.mirror)
    # a suffix-less key shared by several joints of a side pairs none of them (they would collapse onto one)
    names = ["root", "left_toe_1", "left_toe_2", "right_toe_7", "right_toe_8", "left_heel_3", "right_heel_4"]
    keys = ["root", "left_toe", "left_toe", "right_toe", "right_toe", "left_heel", "right_heel"]
    assert _side_pairs(names, keys) == [(5, 6), (6, 5)]
    # a full-name pair wins over the suffix-less key
    names = ["root", "LeftArm1", "LeftArm", "RightArm1", "RightArm_2"]
    keys = ["root", "LeftArm", "LeftArm", "RightArm", "RightArm"]
    assert _side_pairs(names, keys) == [(1, 3), (2, 4), (3, 1), (4, 2)]
