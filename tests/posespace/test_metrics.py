"""Pose-set metrics against hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

import sim
from posespace import PoseRig, apd, end_effectors, prdc, slerp_path
from sim.rotations import axis_angle_to_quat, quat_to_axis_angle, rot6d_to_quat

EXACT = 1e-12


def test_prdc_hand_computed():
    real = np.arange(10.0)[:, None]  # k = 1: every real ball has radius 1
    fake = np.array([[0.5], [20.0], [100.0]])
    out = prdc(real, fake, k=1)
    assert out["precision"] == pytest.approx(1 / 3)  # only 0.5 lies in a real ball
    assert out["coverage"] == pytest.approx(2 / 10)  # the balls of 0 and 1 contain 0.5
    assert out["recall"] == pytest.approx(1.0)  # the fake ball of 0.5 (radius 19.5) holds every real
    assert out["density"] == pytest.approx(2 / 3)  # 0.5 is in two real balls, k = 1, three fakes
    same = prdc(real, real + 1e-9, k=2)
    assert same["precision"] == 1.0 and same["coverage"] == 1.0
    with pytest.raises(ValueError, match="more than k"):
        prdc(real[:2], fake, k=2)


def test_apd_of_two_poses(make_stick):
    rig = make_stick()
    pr = PoseRig(rig)
    a = pr.rest_pose(1)[0]
    motion = pr.decode(pr.rest_pose(1))
    rot = motion.rotations.copy()
    rot[0, rig.joint_index("left_shoulder")] = axis_angle_to_quat(np.array([0.0, 0.5, 0.0]))
    b = pr.encode(sim.Motion(30, motion.root_translations, rot))[0]
    pa, _ = sim.pose_motion(rig, sim.Motion(30, np.zeros((1, 3)), motion.rotations))
    pb, _ = sim.pose_motion(rig, sim.Motion(30, np.zeros((1, 3)), rot))
    ref = np.linalg.norm(pa - pb, axis=-1)[0, pr.active].mean() / pr.height
    assert ref > 0
    np.testing.assert_allclose(apd(pr, np.stack([a, b])), ref, rtol=1e-9)
    np.testing.assert_allclose(apd(pr, np.stack([a, a])), 0.0, atol=EXACT)


def test_slerp_path(make_stick, rng):
    pr = PoseRig(make_stick())
    a = pr.rest_pose(1)[0]
    b = pr.encode(pr.decode(pr.rest_pose(1)))[0]
    q = axis_angle_to_quat(np.array([0.0, 0.8, 0.0]))
    from sim.rotations import quat_to_rot6d

    b[4] = quat_to_rot6d(q)
    path = slerp_path(pr, a, b, 5)
    np.testing.assert_allclose(path[0], a, atol=EXACT)
    np.testing.assert_allclose(path[-1], b, atol=1e-9)
    np.testing.assert_allclose(quat_to_axis_angle(rot6d_to_quat(path[2, 4])), [0.0, 0.4, 0.0], atol=1e-9)


def test_end_effectors(make_stick):
    pr = PoseRig(make_stick())
    names = [pr.rig.joint_names[j] for j in end_effectors(pr)]
    assert sorted(names) == sorted(["head", "left_hand", "right_hand", "left_toe", "right_toe"])


def test_prdc_refuses_unusable_k_and_uses_open_balls():
    """k = -1 took the farthest neighbour as the radius (precision 0.72 for a 3x wider fake set), k = 0 gave NaN
    density; duplicated real poses (radius 0) counted a fake on them as covering them with closed balls."""
    rng = np.random.default_rng(0)
    real, fake = rng.normal(size=(50, 3)), 3.0 * rng.normal(size=(50, 3))
    for k in (-1, 0, 5.0, True):
        with pytest.raises(ValueError, match="prdc: k must be an integer >= 1"):
            prdc(real, fake, k)
    with pytest.raises(ValueError, match=r"prdc: real and fake must be feature arrays"):
        prdc(real[:, 0], fake[:, 0], 5)
    dup_real = np.concatenate([np.zeros((8, 3)), rng.normal(size=(20, 3))])
    dup_fake = np.concatenate([np.zeros((1, 3)), 100.0 + rng.normal(size=(19, 3))])
    out = prdc(dup_real, dup_fake, 5)
    assert out["coverage"] == 0.0 and out["precision"] == 0.0  # Naeem et al.'s strict inequalities


def test_prdc_balls_of_duplicates_are_empty_at_any_offset_and_bad_features_are_refused():
    """Distances from |a|^2 + |b|^2 - 2 a.b left ~1e-7 between identical points away from the origin: a k-NN ball
    of duplicated poses (radius 0) then held the fake equal to them (precision 0.02 where it is 0). One NaN fake set
    the coverage to 0; features of width 0 gave all zeros."""
    rng = np.random.default_rng(1)
    hits = 0
    for _ in range(200):
        d = int(rng.integers(9, 120))
        base = rng.normal(size=(1, d)) + rng.normal()
        real = np.concatenate([rng.normal(size=(int(rng.integers(10, 60)), d)), np.repeat(base, 8, 0)])
        fake = np.concatenate([rng.normal(size=(30, d)) + 10.0, base])
        hits += prdc(real, fake, 5)["precision"] > 0
    assert hits == 0
    real, fake = rng.normal(size=(20, 3)), rng.normal(size=(20, 3))
    fake[0, 0] = np.nan
    with pytest.raises(ValueError, match=r"prdc: fake holds non-finite features \(row 0\)"):
        prdc(real, fake, 5)
    with pytest.raises(ValueError, match=r"prdc: features of width 0"):
        prdc(np.zeros((10, 0)), np.zeros((10, 0)), 3)
