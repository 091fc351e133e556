"""Validators: Warp kernels against slow references, gradients against finite differences, calibration."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import sim
from posespace import JointLimits, PoseRig, PoseValidators, RigCalibration, ValidatorConfig, calibrate
from posespace._rotations import swing_twist_x
from posespace.validators import plane_normals
from sim._reference import fk_reference
from sim.rotations import (
    axis_angle_to_quat,
    quat_conjugate,
    quat_multiply,
    quat_normalize,
    quat_to_rot6d,
    rot6d_to_quat,
)

FWD_TOL = 1e-9  # float64 kernels vs NumPy
GRAD_EPS = 1e-6
GRAD_ATOL = 1e-5
GRAD_RTOL = 1e-4


@pytest.fixture
def stick_setup(make_stick, make_walk):
    rig = make_stick()
    pr = PoseRig(rig)
    poses = pr.encode(make_walk(rig, 90))
    return rig, pr, poses


def _posed(rig, pr, poses, changes):
    """``poses[:1]`` with the local rotations of some joints replaced by rotation vectors [rad] (the stick rig's
    rest rotations are identity, so local axes are world axes)."""
    motion = pr.decode(poses[:1])
    rot = motion.rotations.copy()
    for name, aa in changes.items():
        rot[0, rig.joint_index(name)] = axis_angle_to_quat(np.asarray(aa, dtype=np.float64))
    return pr.encode(sim.Motion(30, motion.root_translations, rot))


def _random_poses(pr, rng, n, deg=40.0):
    q = axis_angle_to_quat(rng.normal(scale=np.radians(deg), size=(n, pr.joint_count, 3)))
    return quat_to_rot6d(q)


def test_joint_limit_kernel_matches_reference(stick_setup, rng):
    _, pr, poses = stick_setup
    cfg = ValidatorConfig()
    limits = JointLimits.fit(pr, rot6d_to_quat(poses), cfg)
    val = PoseValidators(pr, RigCalibration(limits), cfg, dtype=torch.float64)
    x = _random_poses(pr, rng, 16, deg=70.0)
    d = quat_normalize(rot6d_to_quat(x))
    d[:, ~pr.active] = [0, 0, 0, 1]
    swing, twist = val.joint_excess(torch.as_tensor(d))
    sv, tv = swing_twist_x(d)
    planes = np.einsum("njc,kc->njk", sv, plane_normals(cfg.swing_planes)) - limits.swing[None]
    ref_swing = np.maximum(planes.max(-1), 0.0) * limits.weight
    ref_twist = (np.maximum(tv - limits.twist_hi, 0) + np.maximum(limits.twist_lo - tv, 0)) * limits.weight
    np.testing.assert_allclose(swing.numpy(), ref_swing, atol=1e-6)
    np.testing.assert_allclose(twist.numpy(), ref_twist, atol=FWD_TOL)
    assert (ref_swing > 0).any() and (ref_twist > 0).any()  # the test exercises violations


def _sphere_centres_reference(rig, pr, local_rot):
    world = fk_reference(rig.parents, np.broadcast_to(rig.rest_translations, (*local_rot.shape[:2], 3)).copy()
                         * np.r_[0, np.ones(rig.joint_count - 1)][None, :, None], local_rot)  # fmt: skip
    body = pr.body
    skin = world[:, body.sphere_joint] @ rig.inverse_bind_matrices[body.sphere_joint]
    hom = np.concatenate([body.sphere_center, np.ones((len(body.sphere_center), 1))], axis=1)
    return np.einsum("nsab,sb->nsa", skin, hom)[..., :3], world


def test_penetration_and_collapse_match_reference(stick_setup, rng):
    rig, pr, _ = stick_setup
    val = PoseValidators(pr, dtype=torch.float64)
    x = _random_poses(pr, rng, 8, deg=60.0)
    _, local = pr.decode_torch(torch.as_tensor(x))
    world_t = val.world(local)
    pen = val.penetrations(world_t).numpy()
    ratio = val.collapse_ratios(world_t).numpy()
    centres, world = _sphere_centres_reference(rig, pr, local.numpy())
    a, b = val.pairs[:, 0], val.pairs[:, 1]
    r = pr.body.sphere_radius
    ref = np.maximum(r[a] + r[b] - np.linalg.norm(centres[:, a] - centres[:, b], axis=-1), 0.0)
    np.testing.assert_allclose(pen, ref, atol=1e-6)
    # collapse: relative twist about the pair's axis, LBS thickness |w_a + w_c e^{i theta}|
    from sim.rotations import matrix_to_quat

    wq = matrix_to_quat(world[..., :3, :3])
    rel_world = quat_multiply(wq, quat_conjugate(pr.body.bind_rotations))  # rotation since bind
    ja, jc = pr.body.blend_joints[:, 0], pr.body.blend_joints[:, 1]
    m = quat_multiply(quat_conjugate(rel_world[:, ja]), rel_world[:, jc])
    m = np.where(m[..., 3:4] < 0, -m, m)
    theta = 2 * np.arctan2(np.sum(m[..., :3] * pr.body.blend_axis, -1), m[..., 3])
    wa, wc = pr.body.blend_weights[:, 0], pr.body.blend_weights[:, 1]
    ref_ratio = np.abs(wa + wc * np.exp(1j * theta)) / (wa + wc)
    np.testing.assert_allclose(ratio, ref_ratio, atol=1e-6)
    # given pairs are checked once on the host (the Warp kernel itself reads them unchecked)
    sub = val.penetrations(world_t, pairs=val.pairs[:2]).numpy()
    np.testing.assert_allclose(sub, ref[:, :2], atol=1e-6)
    spheres = len(r)
    for bad in ([[0, spheres]], [[-1, 0]], [[0.0, 1.0]]):
        with pytest.raises(ValueError, match=rf"pairs: sphere indices must be integers in \[0, {spheres}\)"):
            val.penetrations(world_t, pairs=np.array(bad))


def test_validator_gradients_match_finite_differences(stick_setup, rng):
    rig, pr, poses = stick_setup
    cfg = ValidatorConfig()
    cal = calibrate(pr, poses, cfg)
    val = PoseValidators(pr, cal, cfg, dtype=torch.float64)
    # legs crossed, the left knee bent backwards, the left forearm twisted: every term is active
    x = _posed(rig, pr, poses, {"left_hip": [-0.45, 0.1, 0.0], "right_hip": [0.45, 0.0, 0.0],
                                "left_knee": [0.0, -0.9, 0.0], "left_elbow": [0.1, -0.2, -2.3]})  # fmt: skip
    x = torch.as_tensor(x).requires_grad_(True)
    m = val.measures(x)
    assert m["swing"].max() > 0 and m["twist"].max() > 0 and m["penetration"].max() > 0
    assert m["collapse"].min() < 1.0
    loss_fn = lambda y: val.loss(y).sum() + (1.0 - val.measures(y)["collapse"]).sum()  # noqa: E731
    (grad,) = torch.autograd.grad(loss_fn(x), x)
    joints = [rig.joint_index(n) for n in ("left_hip", "right_hip", "left_knee", "left_elbow")]
    fd = torch.zeros_like(x)
    with torch.no_grad():
        for idx in ((0, j, c) for j in joints for c in range(6)):
            xp, xm = x.detach().clone(), x.detach().clone()
            xp[idx] += GRAD_EPS
            xm[idx] -= GRAD_EPS
            fd[idx] = (loss_fn(xp) - loss_fn(xm)) / (2 * GRAD_EPS)
    torch.testing.assert_close(grad[0, joints], fd[0, joints], atol=GRAD_ATOL, rtol=GRAD_RTOL)
    assert fd[0, joints].abs().max() > 1e-2
    # second derivatives through the Warp kernels would treat their gradients as constants: refused, not wrong
    with pytest.raises(RuntimeError, match=r"second derivatives .* not supported"):
        torch.autograd.grad(loss_fn(x), x, create_graph=True)


def test_calibration_passes_its_data_and_catches_hyperextension(stick_setup):
    rig, pr, poses = stick_setup
    cal = calibrate(pr, poses)
    assert cal.pass_rates["valid"] == 1.0
    knee = rig.joint_index("left_knee")
    assert cal.limits.hinge[knee] and cal.limits.hinge[rig.joint_index("right_knee")]
    val = PoseValidators(pr, cal)
    bent = _posed(rig, pr, poses, {"left_knee": [0.0, -np.radians(45.0), 0.0]})  # the foot swings forward
    report = val.check(bent)
    assert not report.passed["hyperextension"].any()
    assert report.passed["self_intersection"].all() and report.passed["bone_twist"].all()
    forward = _posed(rig, pr, poses, {"left_knee": [0.0, np.radians(60.0), 0.0]})  # deeper flexion is fine
    assert val.check(forward).passed["hyperextension"].all()


def test_twist_collapse_threshold(stick_setup):
    """A 50/50 blend keeps cos(theta/2) of its thickness: 100 deg passes a 0.5 threshold, 140 deg fails."""
    rig, pr, _ = stick_setup
    val = PoseValidators(pr, config=ValidatorConfig(default_twist_deg=180.0))
    elbow = rig.joint_index("left_elbow")
    pair = np.flatnonzero(pr.body.blend_joints[:, 1] == elbow)[0]
    np.testing.assert_allclose(pr.body.blend_weights[pair], [0.5, 0.5], atol=1e-12)
    axis = pr.body.blend_axis[pair]
    for deg, passes in ((100.0, True), (140.0, False)):
        q = np.broadcast_to([0.0, 0.0, 0.0, 1.0], (1, rig.joint_count, 4)).copy()
        q[0, elbow] = axis_angle_to_quat(axis * np.radians(deg))  # rest rotations are identity here
        x = pr.encode(sim.Motion(30, rig.rest_translations[:1], q))
        report = val.check(x)
        np.testing.assert_allclose(report.bone_twist[0], np.cos(np.radians(deg) / 2), atol=1e-5)
        assert bool(report.passed["bone_twist"][0]) == passes


def test_self_intersection_detects_limbs_crossing(stick_setup):
    rig, pr, poses = stick_setup
    val = PoseValidators(pr, calibrate(pr, poses))
    # swing both legs 25 degrees towards each other (about -x for the left, +x for the right): they cross
    deg = np.radians(25.0)
    crossed = _posed(rig, pr, poses, {"left_hip": [-deg, 0, 0], "right_hip": [deg, 0, 0],
                                      "left_knee": [0, 0, 0], "right_knee": [0, 0, 0]})  # fmt: skip
    apart = _posed(rig, pr, poses, {"left_hip": [deg, 0, 0], "right_hip": [-deg, 0, 0]})
    assert val.check(apart).passed["self_intersection"][0]
    report = val.check(crossed)
    assert not report.passed["self_intersection"][0]
    assert report.passed["self_intersection"][0] == (report.self_intersection[0] <= val.config.penetration_tolerance)


def test_default_limits_for_unknown_skeletons(stick_setup):
    _, pr, _ = stick_setup
    limits = JointLimits.default(pr)
    assert limits.source == "default"
    np.testing.assert_allclose(limits.swing, np.radians(ValidatorConfig().default_swing_deg))
    assert PoseValidators(pr).check(pr.rest_pose(3)).valid.all()


def _folded(rig, pr, poses, degrees):
    """Stick poses with both arms swung in towards the midline by each angle [deg]: beyond ~12 deg the forearms
    reach the pelvis and each other."""
    return np.concatenate([_posed(rig, pr, poses, {"left_shoulder": [-np.radians(d), 0, 0],
                                                    "right_shoulder": [np.radians(d), 0, 0]})
                           for d in degrees])  # fmt: skip


def test_routinely_overlapping_parts_are_tested_beyond_their_allowance(stick_setup):
    """Part pairs whose proxies overlap in more than ``exclusion_rate`` of the calibration poses used to be
    excluded from the test, so an arm driven into the body passed (on the Fox: legs through the spine). They now
    get an allowance, the depth that ``exclusion_rate`` of the calibration poses exceed (checked against NumPy
    forward kinematics), and deeper overlaps fail."""
    rig, pr, poses = stick_setup
    cfg = ValidatorConfig()
    # a walk plus a tenth of frames with the arms folded in by 18-22 deg: forearms on the pelvis and each other
    data = np.concatenate([poses, _folded(rig, pr, poses, np.linspace(18.0, 22.0, 10))])
    cal = calibrate(pr, data, cfg)
    names = rig.joint_names
    assert cal.part_allowances and not cal.excluded_parts
    assert {frozenset((names[a], names[b])) for a, b in cal.part_allowances} == {
        frozenset(p) for p in (("pelvis", "left_elbow"), ("pelvis", "right_elbow"), ("left_elbow", "right_elbow"))
    }
    assert cal.pass_rates["valid"] >= 1.0 - cfg.exclusion_rate
    # the allowance is the (1 - exclusion_rate) quantile of the pair's deepest sphere overlap over the poses and
    # their mirror images, a pair and its mirror image sharing the larger one
    pooled = np.concatenate([data, pr.mirror(data)])
    _, local = pr.decode_torch(torch.as_tensor(pooled))
    centres, _ = _sphere_centres_reference(rig, pr, local.numpy())
    sj, r = pr.body.sphere_joint, pr.body.sphere_radius
    probe = PoseValidators(pr, RigCalibration(cal.limits), cfg)
    mirror = pr.frame.mirror

    def quantile(key):
        sel = [k for k, (a, b) in enumerate(probe.candidate_pairs) if (sj[a], sj[b]) == key]
        a, b = probe.candidate_pairs[sel, 0], probe.candidate_pairs[sel, 1]
        depth = np.maximum(r[a] + r[b] - np.linalg.norm(centres[:, a] - centres[:, b], axis=-1), 0.0).max(-1)
        return np.quantile(depth / pr.height, 1.0 - cfg.exclusion_rate)

    for (a, b), allowance in cal.part_allowances.items():
        twin = tuple(sorted((int(mirror[a]), int(mirror[b]))))
        np.testing.assert_allclose(allowance, max(quantile((a, b)), quantile(twin)), rtol=1e-6, atol=1e-9)
    val = PoseValidators(pr, cal, cfg)
    blind = PoseValidators(pr, RigCalibration(cal.limits, excluded_parts=list(cal.part_allowances)), cfg)
    untuned = PoseValidators(pr, RigCalibration(cal.limits), cfg)
    usual, deep = _folded(rig, pr, poses, [21.0]), _folded(rig, pr, poses, [24.0])
    assert not untuned.check(usual).passed["self_intersection"][0]  # overlaps beyond the bare tolerance ...
    assert val.check(usual).passed["self_intersection"][0]  # ... as the data routinely does: passes
    report = val.check(deep)
    assert not report.passed["self_intersection"][0]  # forearms pushed into the pelvis fail ...
    assert blind.check(deep).passed["self_intersection"][0]  # ... where the exclusion passed them
    # the measure is the depth beyond the pair's allowance, clamped at zero in the report
    depth = untuned.check(deep).self_intersection[0]
    assert depth - max(cal.part_allowances.values()) - 1e-6 <= report.self_intersection[0] < depth
    assert (val.check(poses[:5]).self_intersection == 0.0).all()
    # the allowances survive the checkpoint form
    again = RigCalibration.from_dict(cal.to_dict())
    assert again.part_allowances == cal.part_allowances and again.excluded_parts == []


def test_calibrations_from_before_allowances_keep_their_exclusions(stick_setup):
    """A calibration dict written before pair allowances (no ``part_allowances``) loads with its excluded pairs,
    which stay untested; allowance keys are sorted on load (a reversed pair used to match no sphere pair)."""
    rig, pr, poses = stick_setup
    cal = calibrate(pr, poses)
    data = cal.to_dict()
    del data["part_allowances"]
    left, right = rig.joint_index("left_knee"), rig.joint_index("right_knee")
    data["excluded_parts"] = [[left, right]]
    old = RigCalibration.from_dict(data)
    assert old.part_allowances == {} and old.excluded_parts == [(left, right)]
    sj = pr.body.sphere_joint
    tested = {(int(sj[a]), int(sj[b])) for a, b in PoseValidators(pr, old).pairs}
    assert (left, right) not in tested and (left, right) in {(int(sj[a]), int(sj[b]))
                                                             for a, b in PoseValidators(pr, cal).pairs}  # fmt: skip
    flipped = RigCalibration.from_dict({**cal.to_dict(), "part_allowances": [[right, left, 0.02]]})
    assert flipped.part_allowances == {(left, right): 0.02}
    assert flipped.allowance_names(rig.joint_names) == [("left_knee", "right_knee", 0.02)]
    val = PoseValidators(pr, flipped)
    at = [k for k, (a, b) in enumerate(val.pairs) if (sj[a], sj[b]) == (left, right)]
    assert at and (val.pair_allowance[at] == 0.02).all() and (np.delete(val.pair_allowance, at) == 0).all()


def test_calibration_of_a_rig_without_candidate_pairs():
    """A three-joint chain has no part pairs to test (torch.quantile refused the empty depth table)."""
    rig = sim.Rig(["root", "mid", "tip"], [-1, 0, 1], np.array([[0, 0, 1.0], [0, 0, 0.4], [0, 0, 0.4]]),
                  np.broadcast_to([0.0, 0.0, 0.0, 1.0], (3, 4)).copy(), name="chain")  # fmt: skip
    pr = PoseRig(rig)
    poses = pr.rest_pose(4)
    cal = calibrate(pr, poses)
    assert cal.part_allowances == {} and len(PoseValidators(pr, cal).pairs) == 0
    assert cal.pass_rates["valid"] == 1.0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_reversed_bone_exceeds_its_swing_limit(stick_setup, dtype):
    """A knee folded a full half-turn (bone reversed: ``q_x = q_w = 0``) swings pi. The kernel normalized the
    undefined twist to zero, so the swing read 0 (inside any limit, gradient ~3e12) and the pose passed; it falls
    back to identity twist now, as NumPy's swing_twist_x does."""
    rig, pr, _ = stick_setup
    val = PoseValidators(pr, dtype=dtype)
    knee = rig.joint_index("left_knee")
    assert val.calibration.limits.weight[knee] > 0
    d = np.broadcast_to([0.0, 0.0, 0.0, 1.0], (1, rig.joint_count, 4)).copy()
    d[0, knee] = [0.0, 1.0, 0.0, 0.0]  # half-turn about the canonical y axis
    x = quat_to_rot6d(d)
    dt, _ = pr.decode_torch(torch.as_tensor(x, dtype=dtype))
    dt = dt.detach().requires_grad_(True)
    swing, _ = val.joint_excess(dt, signed=True)
    sv, _ = swing_twist_x(dt.detach().double().numpy())
    np.testing.assert_allclose(np.linalg.norm(sv[0, knee]), np.pi, atol=1e-3)
    limit = val.calibration.limits.swing[knee]
    expected = (np.einsum("c,kc->k", sv[0, knee], plane_normals(len(limit))) - limit).max()
    assert expected > 0.9  # pi - 120 deg
    np.testing.assert_allclose(swing[0, knee].item(), expected, atol=1e-4)
    swing[0, knee].backward()
    assert torch.isfinite(dt.grad).all() and dt.grad.abs().max() < 1e3
    report = val.check(x)
    np.testing.assert_allclose(report.hyperextension[0], expected, atol=1e-4)
    assert not report.passed["hyperextension"][0]


def test_a_non_finite_pose_fails_hyperextension(stick_setup):
    """``wp.normalize`` turned a NaN quaternion into zero, which read as the rest pose: a NaN knee passed the
    hyperextension test. The kernel now returns NaN for it, and the pose fails."""
    rig, pr, _ = stick_setup
    val = PoseValidators(pr)
    knee = rig.joint_index("left_knee")
    d = torch.zeros(1, rig.joint_count, 4)
    d[..., 3] = 1.0
    d[0, knee] = float("nan")
    swing, twist = val.joint_excess(d, signed=True)
    assert torch.isnan(swing[0, knee]) and torch.isnan(twist[0, knee])
    assert torch.isfinite(swing[0, :knee]).all() and torch.isfinite(twist[0, :knee]).all()
    x = pr.rest_pose(2)
    x[1, knee] = np.nan
    report = val.check(x)
    assert report.passed["hyperextension"].tolist() == [True, False] and report.valid.tolist() == [True, False]


def test_joint_limits_of_another_shape_are_refused(stick_setup):
    """Limits of another joint count were accepted and the kernel read them out of bounds (here: 5-joint limits
    for the 17-joint stick, joints 5..16 read as zero-width twist ranges); now ValueError names the field."""
    rig, pr, poses = stick_setup
    J = rig.joint_count
    lim = calibrate(pr, poses).limits
    cut = lambda **k: JointLimits(**{**dict(swing=lim.swing, twist_lo=lim.twist_lo, twist_hi=lim.twist_hi,  # noqa: E731
                                            weight=lim.weight), **k})  # fmt: skip
    nan = lim.twist_hi.copy()
    nan[3] = np.nan
    bad = {
        rf"JointLimits\.swing: must have shape \({J}, K\) with K >= 3 half-planes, got \(5, 32\)": cut(
            swing=lim.swing[:5], twist_lo=lim.twist_lo[:5], twist_hi=lim.twist_hi[:5], weight=lim.weight[:5]),
        r"JointLimits\.swing: must have shape .* got \(17, 2\)": cut(swing=lim.swing[:, :2]),
        rf"JointLimits\.twist_lo: must have shape \({J},\), got \(16,\)": cut(twist_lo=lim.twist_lo[1:]),
        rf"JointLimits\.weight: must have shape \({J},\), got \({J}, 1\)": cut(weight=lim.weight[:, None]),
        r"JointLimits\.twist_hi: must hold finite numbers": cut(twist_hi=nan),
    }  # fmt: skip
    for message, limits in bad.items():
        with pytest.raises(ValueError, match=message):
            PoseValidators(pr, RigCalibration(limits))
    # a checkpoint's limits are checked on load (their own consistency) and against the rig where used
    data = lim.to_dict()
    data["twist_hi"] = data["twist_hi"][:-1]
    with pytest.raises(ValueError, match=r"JointLimits\.twist_hi: must have shape \(17,\), got \(16,\)"):
        JointLimits.from_dict(data)
    small = JointLimits.from_dict({k: (v[:5] if isinstance(v, list) else v) for k, v in lim.to_dict().items()})
    with pytest.raises(ValueError, match=r"JointLimits\.swing: must have shape \(17, K\)"):
        PoseValidators(pr, RigCalibration(small))
    assert JointLimits.from_dict(lim.to_dict()).check(J) is not None


def test_poses_of_another_shape_are_refused(stick_setup):
    """Poses of the wrong joint count broadcast against the rig's constants: (2, 1, 6) checked as two valid
    poses; a single (J, 6) pose failed with an unrelated Warp TypeError."""
    rig, pr, _ = stick_setup
    J = rig.joint_count
    val = PoseValidators(pr)
    for shape in [(2, 1, 6), (J, 6), (2, J, 4), (2, J + 1, 6)]:
        y = np.zeros(shape)
        message = rf"must have shape \(N, {J}, 6\).*, got {re.escape(str(shape))}$"
        with pytest.raises(ValueError, match=r"^poses: 6D poses of rig 'stick' " + message):
            val.check(y)
        with pytest.raises(ValueError, match=r"^x: 6D poses of rig 'stick' " + message):
            val.measures(torch.as_tensor(y, dtype=torch.float32))
        with pytest.raises(ValueError, match=r"^poses: 6D poses of rig 'stick' " + message):
            calibrate(pr, y)
    with pytest.raises(ValueError, match=rf"^poses: .* must have shape \(N, {J}, 6\), got \(1, 2, {J}, 6\)$"):
        val.check(np.zeros((1, 2, J, 6)))  # the report is one row per pose
    with pytest.raises(ValueError, match=rf"d: canonical pose quaternions must have shape \(N, {J}, 4\)"):
        val.joint_excess(torch.zeros(2, 1, 4))
    # more batch dimensions decode as before
    d, local = pr.decode_torch(torch.as_tensor(pr.rest_pose(6).reshape(2, 3, J, 6)))
    assert d.shape == local.shape == (2, 3, J, 4)


def test_reversed_excluded_pairs_exclude_their_parts(stick_setup):
    """An excluded pair written larger index first ([14, 10]) matched no sorted sphere-pair key and excluded
    nothing; pairs are sorted on construction and load."""
    rig, pr, poses = stick_setup
    cal = calibrate(pr, poses)
    sj = pr.body.sphere_joint
    left, right = rig.joint_index("left_knee"), rig.joint_index("right_knee")
    assert (left, right) in {(int(sj[a]), int(sj[b])) for a, b in PoseValidators(pr, cal).pairs}
    data = {**cal.to_dict(), "part_allowances": [], "excluded_parts": [[right, left]]}
    for c in (RigCalibration.from_dict(data), RigCalibration(cal.limits, excluded_parts=[(right, left)])):
        assert c.excluded_parts == [(left, right)]
        tested = {(int(sj[a]), int(sj[b])) for a, b in PoseValidators(pr, c).pairs}
        assert (left, right) not in tested
    made = RigCalibration(cal.limits, part_allowances={(right, left): 0.02})
    assert made.part_allowances == {(left, right): 0.02}


def test_no_poses(stick_setup):
    """Zero poses crashed check() and calibrate() (torch.cat of an empty list). check() gives an empty report whose
    rates are 1.0; calibrate() works with given limits and names the missing poses without them."""
    rig, pr, _ = stick_setup
    empty = np.zeros((0, rig.joint_count, 6))
    report = PoseValidators(pr).check(empty)
    assert report.valid.shape == report.hyperextension.shape == report.self_intersection.shape == (0,)
    assert report.rates() == {"hyperextension": 1.0, "bone_twist": 1.0, "self_intersection": 1.0, "valid": 1.0}
    cal = calibrate(pr, empty, limits=JointLimits.default(pr))
    assert cal.part_allowances == {} and cal.pass_rates["valid"] == 1.0
    with pytest.raises(ValueError, match=r"poses: no poses to fit joint limits to \(give limits"):
        calibrate(pr, empty)


def test_calibration_pass_rates_are_on_the_given_poses(stick_setup):
    """The pass rates a calibration reports were computed on the poses plus their mirror images (pool_mirror),
    though documented as on ``poses``: here the right knee's tight given limit fails only the mirror images."""
    rig, pr, poses = stick_setup
    limits = JointLimits.default(pr)
    limits.swing[rig.joint_index("right_knee")] = np.radians(5.0)
    bent = _posed(rig, pr, poses, {"left_knee": [0.0, np.radians(60.0), 0.0], "right_knee": [0.0, 0.0, 0.0]})
    bent = np.repeat(bent, 4, axis=0)
    assert PoseValidators(pr, RigCalibration(limits)).check(bent).passed["hyperextension"].all()
    assert not PoseValidators(pr, RigCalibration(limits)).check(pr.mirror(bent)).passed["hyperextension"].any()
    cal = calibrate(pr, bent, limits=limits)
    assert cal.pass_rates["hyperextension"] == 1.0


# a meshless biped whose chest and hips are BVH-style hubs: their children start at zero offset, so the hub joints
# have no proxy tube, and the tubes of the neck, the collars and the spine (hips, spine) meet at one point
HUB = [
    ("hips", -1, (0.0, 0.0, 1.0)),
    ("spine", 0, (0.0, 0.0, 1.0)),
    ("chest", 1, (0.0, 0.0, 1.4)),
    ("neck", 2, (0.0, 0.0, 1.4)),
    ("head", 3, (0.0, 0.0, 1.6)),
    ("head_end", 4, (0.0, 0.0, 1.75)),
    ("left_collar", 2, (0.0, 0.0, 1.4)),
    ("left_shoulder", 6, (0.0, 0.18, 1.42)),
    ("left_elbow", 7, (0.0, 0.18, 1.14)),
    ("left_hand", 8, (0.0, 0.18, 0.9)),
    ("right_collar", 2, (0.0, 0.0, 1.4)),
    ("right_shoulder", 10, (0.0, -0.18, 1.42)),
    ("right_elbow", 11, (0.0, -0.18, 1.14)),
    ("right_hand", 12, (0.0, -0.18, 0.9)),
    ("left_pelvis", 0, (0.0, 0.0, 1.0)),
    ("left_hip", 14, (0.0, 0.1, 0.95)),
    ("left_knee", 15, (0.0, 0.1, 0.5)),
    ("left_foot", 16, (0.0, 0.1, 0.05)),
    ("right_pelvis", 0, (0.0, 0.0, 1.0)),
    ("right_hip", 18, (0.0, -0.1, 0.95)),
    ("right_knee", 19, (0.0, -0.1, 0.5)),
    ("right_foot", 20, (0.0, -0.1, 0.05)),
]


def test_parts_meeting_at_a_hub_joint_are_not_tested_against_each_other():
    """On a BVH proxy the tubes of zero-offset children of a hub joint (CMU's Chest2: lowerneck and the collars;
    Hips; the wrists) start at one point, yet their parts were tested for self-intersection (graph distance 2, no
    shared triangle): a neck tilted sideways 'penetrated' its collar at the shared end (on CMU 131 a 60 deg
    lowerneck tilt failed). Parts whose tubes share an end point touch now; the neck still may not reach the
    shoulder."""
    names = [n for n, _, _ in HUB]
    parents = [p for _, p, _ in HUB]
    pos = np.array([q for *_, q in HUB])
    trans = np.array([pos[j] - (pos[p] if p >= 0 else 0.0) for j, p in enumerate(parents)])
    rig = sim.Rig(names, parents, trans, np.broadcast_to([0.0, 0.0, 0.0, 1.0], (len(names), 4)).copy(), name="hub")
    pr = PoseRig(rig)
    assert pr.body.proxy and pr.frame.symmetric
    val = PoseValidators(pr, dtype=torch.float64)
    # every part's tube end points (a tube parent -> child belongs to the parent's part)
    tiny = 1e-3 * rig.height()
    ends: dict[int, list[np.ndarray]] = {}
    for c in range(1, rig.joint_count):
        p = parents[c]
        if np.linalg.norm(pos[c] - pos[p]) >= tiny:
            ends.setdefault(p, []).extend([pos[p], pos[c]])
    sj = pr.body.sphere_joint
    tested = {(int(sj[a]), int(sj[b])) for a, b in val.pairs}
    assert tested
    shared = [(names[a], names[b]) for a, b in tested
              if min(np.linalg.norm(e - f) for e in ends.get(a, []) for f in ends.get(b, [])) < tiny]  # fmt: skip
    assert shared == []
    hub_pairs = {("neck", "left_collar"), ("left_collar", "right_collar"), ("spine", "neck"), ("spine", "left_pelvis")}
    for a, b in hub_pairs:
        assert tuple(sorted((names.index(a), names.index(b)))) in pr.body.touching
    neck = names.index("neck")
    for deg, passes in ((70.0, True), (90.0, False)):  # tilted towards a shoulder: by 90 deg the neck lies on it
        for side in (1.0, -1.0):
            q = np.broadcast_to([0.0, 0.0, 0.0, 1.0], (1, rig.joint_count, 4)).copy()
            q[0, neck] = axis_angle_to_quat(np.array([side * np.radians(deg), 0.0, 0.0]))  # rest rotations identity
            report = val.check(pr.encode(sim.Motion(30, rig.rest_translations[:1], q)))
            assert report.passed["hyperextension"][0] and report.passed["bone_twist"][0]
            assert bool(report.passed["self_intersection"][0]) == passes, (deg, side, report.self_intersection)


def _swung(pr, joint: int, degrees_z) -> np.ndarray:
    """Canonical pose quaternions (N, J, 4) at rest but ``joint`` swung about its canonical z axis [deg]."""
    d = np.broadcast_to([0.0, 0.0, 0.0, 1.0], (len(degrees_z), pr.joint_count, 4)).copy()
    d[:, joint] = axis_angle_to_quat(np.radians(np.asarray(degrees_z, dtype=np.float64))[:, None] * [0.0, 0.0, 1.0])
    return d


def test_a_joint_bent_at_rest_is_one_sided_on_its_seen_range(stick_setup):
    """A knee bent at rest (the Fox's hind knees, ~43 deg) straightens by part of its range and bends by the rest:
    seen from -17 to +61 deg about one axis, it bends back by 22% of its range. Judged against its forward reach
    (17 > 0.25 * 61) it was two-sided, so the 90 deg prior let it bend 47 deg past straight; judged on its range it
    is one-sided, and behind it only the scaled seen reach plus the margin passes."""
    rig, pr, _ = stick_setup
    cfg = ValidatorConfig()
    knee = rig.joint_index("left_knee")
    d = _swung(pr, knee, np.linspace(-17.0, 61.0, 40))
    limits = JointLimits.fit(pr, d, cfg)
    assert limits.hinge[knee]
    val = PoseValidators(pr, RigCalibration(limits), cfg, dtype=torch.float64)
    swing, _ = val.joint_excess(torch.as_tensor(_swung(pr, knee, [-47.0, -17.0, 61.0, 100.0])))
    back_limit = 17.0 * cfg.limit_scale + cfg.limit_margin_deg  # 40.5 deg
    np.testing.assert_allclose(np.degrees(swing[0, knee].item()), 47.0 - back_limit, atol=0.5)
    assert (swing[1:, knee] == 0).all()  # its seen range, and bending on past it, still pass


def test_a_joint_the_data_never_moves_is_held_near_its_pose(stick_setup):
    """A joint that no calibration pose moves (CMU's LHipJoint, collars, hands) is static: it stays within
    static_limit_deg of its seen pose (the 90 deg / 25 deg priors let an 80 deg swing of it pass)."""
    rig, pr, _ = stick_setup
    cfg = ValidatorConfig()
    knee, hip = rig.joint_index("left_knee"), rig.joint_index("left_hip")
    limits = JointLimits.fit(pr, _swung(pr, knee, np.linspace(0.0, 60.0, 30)), cfg)
    assert limits.static[hip] and not limits.static[knee]
    val = PoseValidators(pr, RigCalibration(limits), cfg, dtype=torch.float64)
    hold = cfg.static_limit_deg
    for deg, excess in ((80.0, 80.0 - hold), (hold + 15.0, 15.0), (hold - 10.0, 0.0)):
        swing, _ = val.joint_excess(torch.as_tensor(_swung(pr, hip, [deg])))
        np.testing.assert_allclose(np.degrees(swing[0, hip].item()), excess, atol=0.5)
    twist = axis_angle_to_quat(np.radians([[hold + 10.0, 0.0, 0.0]]))  # twist about the bone
    d = _swung(pr, hip, [0.0])
    d[0, hip] = twist[0]
    _, tw = val.joint_excess(torch.as_tensor(d))
    np.testing.assert_allclose(np.degrees(tw[0, hip].item()), 10.0, atol=1e-6)


def test_numpy_and_kernel_agree_on_the_twist_of_a_near_half_turn(stick_setup):
    """Near a half-turn swing (q_x^2 + q_w^2 = 9e-14, below the kernel's 1e-12) the kernel reads no twist; NumPy's
    threshold was on |(q_x, q_w)| instead and read a half-turn twist, so limits fitted in NumPy and checks in Warp
    disagreed by pi."""
    rig, pr, _ = stick_setup
    knee = rig.joint_index("left_knee")
    d = np.broadcast_to([0.0, 0.0, 0.0, 1.0], (1, rig.joint_count, 4)).copy()
    d[0, knee] = quat_normalize(np.array([3e-7, 1.0, 0.0, 0.0]))
    _, tv = swing_twist_x(d)
    limits = JointLimits.default(pr)
    limits.twist_lo[:], limits.twist_hi[:] = -0.1, 0.1
    val = PoseValidators(pr, RigCalibration(limits), dtype=torch.float64)
    _, tw = val.joint_excess(torch.as_tensor(d), signed=True)
    assert abs(tv[0, knee]) < 1e-6
    np.testing.assert_allclose(tw[0, knee].item(), -0.1, atol=1e-6)  # inside: the kernel read no twist either


def test_measures_and_loss_of_no_poses(stick_setup):
    """An empty batch (N = 0) of the differentiable measures crashed in Warp (an empty tensor cannot be wrapped);
    it gives empty measures and a loss that back-propagates."""
    rig, pr, _ = stick_setup
    val = PoseValidators(pr, dtype=torch.float64)
    x = torch.zeros(0, rig.joint_count, 6, dtype=torch.float64, requires_grad=True)
    m = val.measures(x)
    assert m["swing"].shape == m["twist"].shape == (0, rig.joint_count)
    assert m["collapse"].shape[0] == m["penetration"].shape[0] == 0
    loss = val.loss(x)
    assert loss.shape == (0,)
    loss.sum().backward()
    assert x.grad.shape == x.shape


def test_the_loss_screens_sphere_pairs_without_changing_value_or_gradient(stick_setup, rng):
    """The loss evaluates the differentiable penetration kernel only on pairs some pose of the batch brings near
    the loss's threshold: the same loss and gradient as over every tested pair, with fewer pairs computed."""
    _, pr, _ = stick_setup
    val = PoseValidators(pr, dtype=torch.float64)
    x = torch.as_tensor(_random_poses(pr, rng, 24, deg=70.0), dtype=torch.float64).requires_grad_()
    every = val.measures(x)
    screened = val._loss_measures(x)
    assert 0 < screened["penetration"].shape[1] < every["penetration"].shape[1]
    full = val.loss(x, every)
    assert (val.config.loss_weights[2] * (every["penetration"] > 0.25 * val.config.penetration_tolerance)).any()
    (g_full,) = torch.autograd.grad(full.sum(), x)
    loss = val.loss(x)
    (g,) = torch.autograd.grad(loss.sum(), x)
    np.testing.assert_allclose(loss.detach(), full.detach(), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(g, g_full, rtol=1e-10, atol=1e-13)


def test_leaf_twist_collapse_matches_skinned_ring_when_bind_differs_from_rest():
    """A leaf bound with a rotation its rest pose lacks (a 90-degree yaw: its bone still runs along x): twisting
    it about its bone collapses the 50/50 ring as much as the bone-twist validator says, measured on the actually
    skinned tube (the axis once turned with the leaf's own bind rotation, and the validator saw no twist)."""
    names, parents = ["root", "a", "b"], [-1, 0, 1]
    pos = np.array([[0.0, 0.0, 1.0], [0.3, 0.0, 1.0], [0.8, 0.0, 1.0]])
    rest_t = np.array([pos[0], pos[1] - pos[0], pos[2] - pos[1]])
    rest_q = np.tile([0.0, 0.0, 0.0, 1.0], (3, 1))
    bind_q = rest_q.copy()
    bind_q[2] = axis_angle_to_quat(np.array([0.0, 0.0, np.pi / 2]))
    ibm = np.linalg.inv(sim.rotations.transform_matrix(pos, bind_q))
    ring, xs = 8, np.linspace(0.3, 1.1, 17)  # a tube along x, driven by a, blended into b around x = 0.8
    ang = 2 * np.pi * np.arange(ring) / ring
    pts, joints, weights, tris = [], [], [], []
    for k, x in enumerate(xs):
        wb = np.clip((x - 0.7) / 0.2, 0.0, 1.0)
        for i in range(ring):
            pts.append([x, 0.05 * np.cos(ang[i]), 1.0 + 0.05 * np.sin(ang[i])])
            joints.append([1, 2])
            weights.append([1 - wb, wb])
        if k:
            r0, r1 = (k - 1) * ring, k * ring
            for i in range(ring):
                i2 = (i + 1) % ring
                tris += [[r0 + i, r0 + i2, r1 + i2], [r0 + i, r1 + i2, r1 + i]]
    mesh = sim.SkinnedMesh("tube", np.array(pts), np.array(tris), np.array(joints), np.array(weights), joint_count=3)
    rig = sim.Rig(names, parents, rest_t, rest_q, ibm, [mesh], name="leafbind")
    pr = PoseRig(rig)
    pair = [tuple(p) for p in pr.body.blend_joints].index((1, 2))
    np.testing.assert_allclose(pr.body.blend_axis[pair], [1.0, 0.0, 0.0], atol=1e-9)
    val = PoseValidators(pr, config=ValidatorConfig(default_twist_deg=180.0), dtype=torch.float64)
    middle = 10 * ring  # the ring at x = 0.8, blended 50/50
    for deg in (90.0, 150.0):
        local = rest_q.copy()
        local[2] = quat_multiply(axis_angle_to_quat(np.array([np.radians(deg), 0.0, 0.0])), bind_q[2])
        motion = sim.Motion(30, pos[:1], local[None])
        skinned, _ = sim.skin_motion(rig, motion)
        rim = skinned[0, middle : middle + ring]
        thickness = np.linalg.norm(rim - rim.mean(0), axis=-1).mean() / 0.05
        report = val.check(pr.encode(motion))
        assert report.bone_twist[0] == pytest.approx(thickness, abs=1e-6)
        assert thickness < 0.75
