"""Pose transfer between humanoid skeletons: correspondence, exactness on one skeleton, knees and elbows on CMU."""

from __future__ import annotations

import numpy as np
import pytest

import sim
from posespace import PoseRig, PoseSet, load_clips, parse_clip_spec
from posespace.retarget import ALIGNED_ROLES, humanoid_map, retarget_motion
from sim import characters

EXACT = 1e-12
"""Same skeleton: quaternion products only (float64 round-off)."""
DIRECTION_TOL = 1e-9
TRAVEL_RTOL = 0.05
"""Root travel after retargeting between two rigs whose hip heights differ by a few percent."""
"""Aligned bones point exactly the source's way (unit vectors)."""
GROUND_TOL = 0.005
"""[m] lowest joint of a retargeted walk above or below the ground (the source's feet lift a few mm mid-stride)."""
FLEX_DEG = 10.0
"""Frames with a knee flexion above this [deg] count as bent."""

CMU = "bvh/131_01.bvh"
CMU_ROLES = {
    "pelvis": "Hips", "head": "Head", "torso": ["lowerback", "Chest", "Chest2"], "neck": ["lowerneck", "Neck"],
    "left_thigh": "LeftHip", "left_shin": "LeftKnee", "left_foot": "LeftAnkle", "left_toes": "LeftToe",
    "left_clavicle": "LeftCollar", "left_upper_arm": "LeftShoulder", "left_lower_arm": "LeftElbow",
    "left_hand": "LeftWrist", "right_thigh": "RightHip", "right_shin": "RightKnee", "right_foot": "RightAnkle",
    "right_toes": "RightToe", "right_clavicle": "RightCollar", "right_upper_arm": "RightShoulder",
    "right_lower_arm": "RightElbow", "right_hand": "RightWrist",
}  # fmt: skip
"""The CMU 131 skeleton's roles, read off its hierarchy by hand (LHipJoint, lhand, fingers have none)."""


@pytest.fixture(scope="module")
def biped():
    return characters.build("biped")


@pytest.fixture(scope="module")
def cmu(assets_dir):
    from usd_io import load_asset

    return load_asset(str(assets_dir / CMU))


def _canon(q: np.ndarray) -> np.ndarray:
    return np.where(q[..., 3:4] < 0, -q, q)


def test_same_skeleton_reproduces_local_rotations(biped):
    rig, clips = biped
    for motion in clips.values():
        out = retarget_motion(rig, motion, rig)
        np.testing.assert_allclose(_canon(out.rotations), _canon(motion.rotations), atol=EXACT)
        np.testing.assert_allclose(out.root_translations, motion.root_translations, atol=EXACT)


def test_cmu_correspondence_by_names_and_by_shape(cmu):
    rig = cmu.rig
    assert humanoid_map(rig).named(rig) == CMU_ROLES
    # without telling names (only the side prefixes kept) the limb roles come from the skeleton's shape
    bases = sorted(
        {n.removeprefix("Left").removeprefix("Right") for n in rig.joint_names if n.startswith(("Left", "Right"))}
    )
    code = {b: f"Part{chr(65 + i)}" for i, b in enumerate(bases)}
    renamed = [
        next((side + code[n[len(side) :]] for side in ("Left", "Right") if n.startswith(side)), n)
        for n in rig.joint_names
    ]
    assert "LeftKnee" not in renamed and "LeftPartA" in renamed
    anon = sim.Rig(renamed, rig.parents, rig.rest_translations, rig.rest_rotations, name="anon")
    m = humanoid_map(anon)
    assert {k: v for k, v in m.roles.items()} == {k: v for k, v in humanoid_map(rig).roles.items()}


@pytest.mark.parametrize("prefix", ["mixamorig:", "Armature|", "ns:sub:"])
def test_namespaced_joint_names_keep_their_roles(prefix):
    """FBX / Maya namespaces (``mixamorig:LeftLeg``) are not part of the name the role rules read: the Mixamo
    shin ``LeftLeg`` read as ``mixamorigleg`` and missed the ``^leg$`` rule."""
    from posespace.retarget import _SHIN_TOKENS, _base_name

    assert _base_name(prefix + "LeftLeg") == "leg" and _SHIN_TOKENS.search(_base_name(prefix + "LeftLeg"))
    assert _base_name(prefix + "RightForeArm") == "forearm"
    assert _base_name(prefix + "LeftUpLeg") == "upleg" and not _SHIN_TOKENS.search(_base_name(prefix + "LeftUpLeg"))


def test_stick_correspondence(make_stick):
    rig = make_stick()
    m = humanoid_map(rig)
    named = m.named(rig)
    assert named["left_thigh"] == "left_hip" and named["left_shin"] == "left_knee"
    assert named["right_upper_arm"] == "right_shoulder" and named["right_lower_arm"] == "right_elbow"
    assert named["left_clavicle"] == "-" and named["torso"] == ["spine"] and named["neck"] == []


def test_a_head_that_ends_the_torso_turns_the_target_head_once(make_stick, make_walk, biped):
    """The stick's head role is its spine (the top of its torso chain): the spine's sway reached the biped's torso
    through the chain and its head a second time (0.197 rad against the source's 0.1)."""
    from sim.rotations import quat_conjugate, quat_multiply, quat_to_axis_angle

    stick = make_stick()
    walk = make_walk(stick, 60)
    src_map, (rig, _) = humanoid_map(stick), biped
    assert stick.joint_names[src_map.head] == "spine" and src_map.torso == (src_map.head,)
    out = retarget_motion(stick, walk, rig)
    tgt_map = humanoid_map(rig)

    def relative(r, motion, a, b):
        w = sim.pose_motion(r, motion)[1]
        return np.linalg.norm(quat_to_axis_angle(quat_multiply(quat_conjugate(w[:, a]), w[:, b])), axis=-1)

    source = relative(stick, walk, src_map.pelvis, src_map.head)  # the spine's sway about the pelvis
    target = relative(rig, out, tgt_map.pelvis, tgt_map.head)
    assert source.max() > 0.05
    np.testing.assert_allclose(target, source, atol=0.01 * source.max() + 2e-3)


def test_swapped_side_labels_are_refused(make_stick):
    """A stick whose left_* joints sit on its right passed as symmetric facing -x: retargeted walks bent its knees
    backwards and walked heel first. Its feet point +x, so the labels are swapped: refused, naming the feet."""
    src = make_stick()
    swap = {n: n.replace("left", "@").replace("right", "left").replace("@", "right") for n in src.joint_names}
    rig = sim.Rig([swap[n] for n in src.joint_names], src.parents, src.rest_translations, src.rest_rotations,
                  name="swapped")  # fmt: skip
    with pytest.raises(sim.RigError, match=r"rig 'swapped': .*the feet \('left_\w+'\) point backwards .*swapped\?"):
        humanoid_map(rig)
    assert humanoid_map(src).pelvis == 0  # the same bones, rightly labelled


def test_non_humanoid_is_rejected(assets_dir):
    quad, _ = characters.build("quadruped-idle")
    with pytest.raises(sim.RigError, match="no humanoid correspondence"):
        humanoid_map(quad)
    with pytest.raises(sim.RigError, match="no humanoid correspondence"):
        load_clips("gaits:biped*1@procedural:quadruped")
    with pytest.raises(sim.RigError, match="no humanoid correspondence"):
        load_clips(f"gaits:quadruped*1@{assets_dir / CMU}")


def _knee_forward_offset(pos: np.ndarray, frame, hip: int, knee: int, ankle: int) -> np.ndarray:
    """Forward distance of the knee from the hip-ankle line (character coordinates), shape (F,)."""
    h, k, a = pos[:, hip], pos[:, knee], pos[:, ankle]
    u = (a - h) / np.linalg.norm(a - h, axis=-1, keepdims=True)
    off = (k - h) - ((k - h) * u).sum(-1, keepdims=True) * u
    return off @ frame.forward


def test_walk_on_cmu_skeleton(biped, cmu):
    rig, clips = biped
    target = cmu.rig
    walk = clips["walk"]
    out = retarget_motion(rig, walk, target)
    assert out.frame_count == walk.frame_count and np.isfinite(out.rotations).all()
    out.check_rig(target)
    ps, _ = sim.pose_motion(rig, walk)
    pt, _ = sim.pose_motion(target, out)
    pr_s, pr_t = PoseRig(rig), PoseRig(target)
    m_s, m_t = humanoid_map(rig), humanoid_map(target)
    for side in ("left", "right"):
        # knees bend forward on both skeletons, in the same frames, by about the same amount
        hip_s, knee_s, ankle_s = (m_s.roles[f"{side}_{r}"] for r in ("thigh", "shin", "foot"))
        hip_t, knee_t, ankle_t = (m_t.roles[f"{side}_{r}"] for r in ("thigh", "shin", "foot"))
        leg_s = np.linalg.norm(ps[:, ankle_s] - ps[:, hip_s], axis=-1)
        leg_t = np.linalg.norm(pt[:, ankle_t] - pt[:, hip_t], axis=-1)
        rest_s = np.linalg.norm(ps[0, knee_s] - ps[0, hip_s]) + np.linalg.norm(ps[0, ankle_s] - ps[0, knee_s])
        rest_t = np.linalg.norm(pt[0, knee_t] - pt[0, hip_t]) + np.linalg.norm(pt[0, ankle_t] - pt[0, knee_t])
        shrink_s, shrink_t = leg_s / rest_s, leg_t / rest_t
        assert np.corrcoef(shrink_s, shrink_t)[0, 1] > 0.95
        np.testing.assert_allclose(shrink_t, shrink_s, atol=0.03)
        bent = np.degrees(np.arccos(np.clip(shrink_s, -1, 1))) > FLEX_DEG
        assert bent.sum() > 10
        assert (_knee_forward_offset(ps, pr_s.frame, hip_s, knee_s, ankle_s)[bent] > 0).all()
        assert (_knee_forward_offset(pt, pr_t.frame, hip_t, knee_t, ankle_t)[bent] > 0).all()
        # thighs and upper arms point the source's way in character coordinates
        for role in ALIGNED_ROLES:
            j_s, j_t = m_s.roles[f"{side}_{role}"], m_t.roles[f"{side}_{role}"]
            c_s = rig.children()[j_s][0]
            c_t = next(c for c in target.children()[j_t] if c in m_t.roles.values())
            d_s = (ps[:, c_s] - ps[:, j_s]) @ pr_s.frame.axes
            d_t = (pt[:, c_t] - pt[:, j_t]) @ pr_t.frame.axes
            d_s /= np.linalg.norm(d_s, axis=-1, keepdims=True)
            d_t /= np.linalg.norm(d_t, axis=-1, keepdims=True)
            np.testing.assert_allclose(d_t, d_s, atol=DIRECTION_TOL)


def test_elbows_bend_like_the_mocap(biped, cmu):
    """Both elbows of the retargeted walk flex the way the CMU subject's do (canonical frames of non-vertical
    bones differ between the sides and between rigs; the transfer reconciles them)."""
    from posespace._rotations import swing_twist_x
    from sim.rotations import rot6d_to_quat

    rig, clips = biped
    target = cmu.rig
    pr = PoseRig(target)
    m = humanoid_map(target)
    real = rot6d_to_quat(pr.encode(cmu.clips["131_01"]))
    moved = rot6d_to_quat(pr.encode(retarget_motion(rig, clips["walk"], target)))
    for side in ("left", "right"):
        j = m.roles[f"{side}_lower_arm"]
        s_real, _ = swing_twist_x(real[:, j])
        s_moved, _ = swing_twist_x(moved[:, j])
        assert np.degrees(np.linalg.norm(s_moved, axis=-1)).min() > 5.0
        cos = (s_moved @ np.median(s_real, axis=0)) / np.linalg.norm(s_moved, axis=-1)
        assert (cos > 0).all()


def test_gait_spec_on_a_file_skeleton(assets_dir):
    path = assets_dir / CMU
    spec = parse_clip_spec(f"gaits:biped-idle*2@{path}")
    assert (spec.source, spec.count, spec.target) == ("gaits:biped-idle", 2, str(path))
    assert str(spec) == f"gaits:biped-idle*2@{path}"
    ps = PoseSet.from_specs([str(path), f"gaits:biped*2@{path}", spec], fps=30.0)
    assert len(ps.rigs) == 1  # one skeleton: the retargeted clips join 131_01
    names = [n.split("#")[-1] for n in ps.rigs[0].clip_names]
    assert names == ["131_01", "gait_0", "gait_1", "idle_0", "idle_1"]
    assert np.isfinite(ps.rigs[0].poses).all()


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("gaits:biped*x", r"gaits:biped\*x: count: expected an integer after '\*', got 'x'"),
        ("gaits:biped*0", r"gaits:biped: count: must be an integer >= 1, got 0"),
        ("gaits:nope*3", r"gaits:nope: name: unknown character 'nope'; known: .*biped"),
        ("gaits:biped-run*2", r"gaits:biped-run: name: unknown clip kind 'run'"),
    ],
)
def test_malformed_gait_specs_name_the_spec(spec, message):
    from usd_io import InputError

    with pytest.raises(InputError, match=message):
        load_clips(spec)


def test_gaits_retargeted_onto_a_non_humanoid_name_the_spec():
    with pytest.raises(sim.RigError, match=r"^gaits:biped\*1@procedural:quadruped: .*no humanoid correspondence"):
        load_clips("gaits:biped*1@procedural:quadruped")


def test_root_travel_on_a_ground_rooted_rig(biped):
    # a rig rooted on the ground below its hips: the hip height is the pelvis', and the root's displacement (not
    # its absolute position) is transferred (the root used to be scaled by ~1e-9 one way and ~1e9 the other)
    rig, clips = biped
    walk = clips["walk"]
    names = ["Root", *rig.joint_names]
    parents = np.concatenate([[-1], np.where(rig.parents < 0, 0, rig.parents + 1)])
    ground = sim.Rig(names, parents, np.vstack([[0.0, 0.0, 0.0], rig.rest_translations]),
                     np.vstack([[0.0, 0.0, 0.0, 1.0], rig.rest_rotations]), name="ground_rooted")  # fmt: skip
    assert ground.joint_names[humanoid_map(ground).pelvis] == "pelvis"
    travel = walk.root_translations[-1] - walk.root_translations[0]
    assert np.linalg.norm(travel) > 1.0  # the walk goes somewhere
    out = retarget_motion(rig, walk, ground)
    np.testing.assert_allclose(out.root_translations[-1] - out.root_translations[0], travel,
                               rtol=TRAVEL_RTOL, atol=TRAVEL_RTOL * np.linalg.norm(travel))  # fmt: skip
    # and back: the ground root travelling with the pelvis carries the walk's travel to the biped
    rot = np.concatenate([np.tile([0.0, 0.0, 0.0, 1.0], (walk.frame_count, 1, 1)), walk.rotations], axis=1)
    moving = sim.Motion(walk.fps, walk.root_translations - rig.rest_translations[0], rot, times=walk.times)
    back = retarget_motion(ground, moving, rig)
    np.testing.assert_allclose(back.root_translations[-1] - back.root_translations[0], travel,
                               rtol=TRAVEL_RTOL, atol=TRAVEL_RTOL * np.linalg.norm(travel))  # fmt: skip


def test_a_ground_locator_root_is_not_the_lowest_joint(make_stick, make_walk, fk):
    """A locator root on the ground above the pelvis counted as the rig's lowest joint: the hip height (and so
    the travel) came out 2% short and the target's feet were pinned at the locator's height every frame (the
    pelvis bobbing 7 cm the source does not). The same body with or without the locator now retargets exactly."""
    src = make_stick()
    walk = make_walk(src, 60)
    names = ["Root", *src.joint_names]
    parents = np.concatenate([[-1], np.where(src.parents < 0, 0, src.parents + 1)])
    ground = sim.Rig(names, parents, np.vstack([[0.0, 0.0, 0.0], src.rest_translations]),
                     np.vstack([[0.0, 0.0, 0.0, 1.0], src.rest_rotations]), name="ground_rooted")  # fmt: skip
    rot = np.concatenate([np.tile([0.0, 0.0, 0.0, 1.0], (walk.frame_count, 1, 1)), walk.rotations], axis=1)
    moving = sim.Motion(walk.fps, walk.root_translations - src.rest_translations[0], rot, times=walk.times)
    np.testing.assert_allclose(fk(ground, moving)[:, 1:], fk(src, walk), atol=1e-12)  # one body, two rigs
    back = retarget_motion(ground, moving, src)
    np.testing.assert_allclose(fk(src, back), fk(src, walk), atol=1e-9)


def test_retargeted_walk_stands_on_the_ground_on_cmu(assets_dir, biped, fk):
    """CMU's rest pose has the hips at the origin: the retargeted root used to keep that height (feet ~0.9 m under
    the ground). Now the target's lowest joint sits as high above the ground as the source walk's (scaled)."""
    rig, clips = load_clips(f"gaits:biped*2@{assets_dir / CMU}")
    source, _ = biped
    source_clearance = fk(source, characters.build("biped")[1]["walk"])[..., 2].min()  # the biped's toes, ~2 cm
    assert 0.0 < source_clearance < 0.05
    for motion in clips.values():
        lowest = fk(rig, motion)[..., 2].min(axis=1)
        np.testing.assert_allclose(lowest, 0.0, atol=GROUND_TOL)  # CMU's end sites are at the soles
