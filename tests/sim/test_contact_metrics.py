"""Contact and kinematic metrics against hand-computed values on constructed trajectories; the physics metrics'
ground contact against the audit's and against constructed meshless and meshed rigs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from physics_rigs import hold, table_quadruped, walkish

import sim
from sim.audit import audit_motion
from sim.contact_metrics import (
    ContactConfig,
    JointLimits,
    bone_length_drift,
    character_size,
    frame_runs,
    ground_contact_metrics,
    jerk_magnitude,
    joint_limit_violations,
    joint_limits_from_motions,
    kinematic_metrics,
    root_chain,
    rotation_vectors,
)
from sim.physics import contact_summary
from sim.rotations import axis_angle_to_quat, quat_identity

EXACT = 1e-12
"""Tolerance for quantities computed in closed form from exact inputs."""
FD_TOL = 1e-9
"""Tolerance for finite-difference derivatives of polynomials they differentiate exactly."""

FPS = 30.0
SIZE = 1.0


def _feet(frame_count: int, spacing: float = 0.1) -> np.ndarray:
    """A 3x3 patch of points on the ground (z = 0) per frame, shape (F, 9, 3)."""
    g = np.stack(np.meshgrid(np.arange(3) * spacing, np.arange(3) * spacing, indexing="ij"), -1).reshape(-1, 2)
    pts = np.zeros((frame_count, 9, 3))
    pts[..., :2] = g
    return pts


def _with_head(feet: np.ndarray, height: float = 1.0) -> np.ndarray:
    """Adds a point high above the first foot point (a 'head') so the character has a size."""
    head = feet[:, :1].copy()
    head[..., 2] += height
    return np.concatenate([feet, head], axis=1)


def test_character_size_and_frame_runs():
    pts = np.array([[0, 0, 0], [0.2, -0.5, 1.7], [0.1, 0.3, 0.2]])
    assert character_size(pts) == pytest.approx(1.7, abs=EXACT)
    assert frame_runs(np.array([0, 1, 1, 0, 1, 0, 0, 1], bool)) == [(1, 3), (4, 5), (7, 8)]
    assert frame_runs(np.zeros(4, bool)) == []


def test_penetration_depth_frames_and_parts():
    F = 20
    pts = _with_head(_feet(F))
    pts[5:10, :9, 2] -= 0.03  # the whole patch sinks 3 cm on frames 5..9
    pts[12, 4, 2] = -0.05  # one point dips 5 cm on frame 12
    labels = np.array([0] * 9 + [1])
    m = ground_contact_metrics(pts, FPS, size=SIZE, labels=labels)
    expected = np.zeros(F)
    expected[5:10] = 0.03
    expected[12] = 0.05
    np.testing.assert_allclose(m.penetration_max, expected, atol=EXACT)
    np.testing.assert_allclose(m.penetration_mean[5:10], 0.03, atol=EXACT)
    np.testing.assert_allclose(m.penetration_mean[12], 0.05, atol=EXACT)
    np.testing.assert_array_equal(m.penetration_count[[4, 5, 12]], [0, 9, 1])
    assert m.penetration_label[12] == 0 and m.penetration_label[0] == -1
    np.testing.assert_allclose(m.part_penetration[:, 1], 0.0, atol=EXACT)
    assert m.max_penetration_m == pytest.approx(0.05, abs=EXACT)
    assert m.mean_penetration_m == pytest.approx((5 * 0.03 + 0.05) / F, abs=EXACT)
    np.testing.assert_allclose(m.lowest_height[5], -0.03, atol=EXACT)


def test_ground_plane_height_and_up_axis():
    # same trajectory expressed Y-up with the ground at y = 0.5
    F = 6
    pts = _with_head(_feet(F))
    pts[2, 0, 2] = -0.02
    y_up = pts[..., [0, 2, 1]] + np.array([0.0, 0.5, 0.0])
    m = ground_contact_metrics(y_up, FPS, ContactConfig(ground_height=0.5, up_axis="Y"), size=SIZE)
    np.testing.assert_allclose(m.penetration_max, [0, 0, 0.02, 0, 0, 0], atol=EXACT)


def test_sliding_speed_ratio_and_slide_distance():
    F = 11
    v = 0.5  # m/s, well above the 0.05 m/s threshold of a 1 m character
    pts = _with_head(_feet(F))
    pts[:, :9, 0] += v * np.arange(F)[:, None] / FPS  # the patch slides along x on the ground
    # the clip travels less than in_place_rel, so "auto" would call it in place: measure against a static ground
    m = ground_contact_metrics(pts, FPS, ContactConfig(ground_motion="static"), size=SIZE)
    np.testing.assert_allclose(m.skate_speed_max[1:], v, rtol=FD_TOL)
    np.testing.assert_allclose(m.skate_speed_mean[1:], v, rtol=FD_TOL)
    assert np.isnan(m.skate_speed_max[0]) and m.skate_contact_count[0] == 0
    np.testing.assert_array_equal(m.skate_contact_count[1:], 9)
    assert m.foot_skate_ratio == pytest.approx(1.0)
    assert m.skate_speed_threshold == pytest.approx(0.05 * SIZE)
    (slide,) = m.slides
    assert (slide.start, slide.stop) == (0, F)
    assert slide.distance_m == pytest.approx(v * (F - 1) / FPS, rel=FD_TOL)
    assert slide.duration_s == pytest.approx((F - 1) / FPS, rel=FD_TOL)


def test_slow_motion_below_threshold_does_not_slide():
    F = 11
    pts = _with_head(_feet(F))
    pts[:, :9, 0] += 0.02 * np.arange(F)[:, None] / FPS  # 2 cm/s < 5 cm/s
    m = ground_contact_metrics(pts, FPS, ContactConfig(ground_motion="static"), size=SIZE)
    assert m.foot_skate_ratio == 0.0
    np.testing.assert_allclose(m.skate_ratio, 0.0)


def test_treadmill_ground_absorbs_in_place_locomotion():
    # an in-place loop: the planted patch travels backwards at constant speed, the body stays put
    F = 11
    pts = _with_head(_feet(F))
    pts[:, :9, 1] -= 0.4 * np.arange(F)[:, None] / FPS
    auto = ground_contact_metrics(pts, FPS, size=SIZE)
    np.testing.assert_allclose(auto.ground_velocity, [0, -0.4, 0], rtol=FD_TOL, atol=EXACT)
    assert auto.foot_skate_ratio == 0.0
    assert auto.max_slide_m == pytest.approx(0.0, abs=FD_TOL)
    static = ground_contact_metrics(pts, FPS, ContactConfig(ground_motion="static"), size=SIZE)
    assert static.foot_skate_ratio == pytest.approx(1.0)


def test_auto_ground_measures_a_whole_body_glide_against_a_static_ground():
    """The whole character (feet and head) glides 0.2 m in 2 s, less than the in-place box: the feet move *with*
    the body, so it is not a treadmill. "auto" used to take the glide for the treadmill speed and remove it (foot
    skate 0, no slide); it now measures what "static" measures."""
    F = 61
    v = 0.1  # m/s, above the 0.05 m/s sliding threshold of a 1 m character
    pts = _with_head(_feet(F))
    pts[..., 0] += v * np.arange(F)[:, None] / FPS
    auto = ground_contact_metrics(pts, FPS, size=SIZE)
    static = ground_contact_metrics(pts, FPS, ContactConfig(ground_motion="static"), size=SIZE)
    np.testing.assert_allclose(auto.ground_velocity, 0.0, atol=EXACT)
    assert auto.foot_skate_ratio == pytest.approx(1.0)
    assert auto.max_slide_m == pytest.approx(v * (F - 1) / FPS, rel=FD_TOL)
    assert auto.summary() == static.summary()


def test_auto_treadmill_needs_planted_feet_faster_than_sliding():
    """Planted feet creeping backwards at 3 cm/s (below the 5 cm/s sliding threshold) under a still body: no
    locomotion for a treadmill to absorb, so the creep adds up into a 6 cm slide (it used to be removed as a
    treadmill); at 0.4 m/s (for 1/3 s, within the in-place box) it is an in-place loop."""
    for speed, F, treadmill in ((0.03, 61, False), (0.4, 11, True)):
        pts = _with_head(_feet(F))
        pts[:, :9, 1] -= speed * np.arange(F)[:, None] / FPS
        m = ground_contact_metrics(pts, FPS, size=SIZE)
        if treadmill:
            np.testing.assert_allclose(m.ground_velocity, [0.0, -speed, 0.0], rtol=FD_TOL, atol=EXACT)
            assert m.max_slide_m == pytest.approx(0.0, abs=FD_TOL)
        else:
            np.testing.assert_allclose(m.ground_velocity, 0.0, atol=EXACT)
            assert m.foot_skate_ratio == 0.0  # each step is below the threshold...
            assert m.max_slide_m == pytest.approx(speed * (F - 1) / FPS, rel=FD_TOL)  # ...the contact is not


def test_part_velocity_is_median_of_contact_points():
    F = 3
    pts = _with_head(_feet(F))
    pts[1:, 0, 0] += 0.3  # one outlier point jumps; the part's median stays still
    m = ground_contact_metrics(pts, FPS, ContactConfig(ground_motion="static"), size=SIZE)
    np.testing.assert_allclose(m.part_skate_speed[1:, 0], [0.0, 0.0], atol=EXACT)
    assert m.skate_sliding_count[1] == 1 and m.skate_sliding_count[2] == 0


def test_floating_hover_vs_ballistic_jump():
    F = 61  # 2 s
    t = np.arange(F) / FPS
    base = _with_head(_feet(F))
    band = ContactConfig().contact_height_rel * SIZE

    hover = base.copy()
    hover[20:40, :, 2] += 0.05  # hovers 5 cm for 0.67 s: motionless in the air
    m = ground_contact_metrics(hover, FPS, size=SIZE)
    np.testing.assert_array_equal(np.flatnonzero(m.floating), np.arange(20, 40))
    np.testing.assert_allclose(m.floating_height[20:40], 0.05, atol=EXACT)
    assert m.max_floating_m == pytest.approx(0.05, abs=EXACT)

    short = base.copy()  # a 0.33 s hover (shorter than max_flight_time_s): caught by the stillness rule
    short[10:20, :, 2] += 0.05
    m = ground_contact_metrics(short, FPS, size=SIZE)
    np.testing.assert_array_equal(np.flatnonzero(m.airborne), np.arange(10, 20))
    # frames 10 and 19 move (central differences span the take-off and landing); 11..18 are still
    np.testing.assert_array_equal(np.flatnonzero(m.floating), np.arange(11, 19))

    jump = base.copy()  # a 0.5 s ballistic flight: z = g/2 (t - t0)(t1 - t)
    t0, t1 = t[15], t[30]
    z = np.clip(0.5 * 9.81 * (t - t0) * (t1 - t), 0.0, None)
    jump[..., 2] += z[:, None]
    m = ground_contact_metrics(jump, FPS, size=SIZE)
    np.testing.assert_array_equal(m.airborne, z > band)
    assert not m.floating.any()

    drift_up = base.copy()  # rises at 0.1 m/s (not still) and stays airborne 2 s, longer than max_flight_time_s
    drift_up[..., 2] += 0.02 + 0.1 * t[:, None]
    m = ground_contact_metrics(drift_up, FPS, size=SIZE)
    assert m.airborne.all() and m.floating.all()


def test_input_validation():
    with pytest.raises(ValueError, match="points"):
        ground_contact_metrics(np.zeros((4, 3)), FPS)
    with pytest.raises(ValueError, match="times"):
        ground_contact_metrics(np.zeros((4, 2, 3)), np.array([0.0, 0.1, 0.1, 0.2]))
    with pytest.raises(ValueError, match="up_axis"):
        ground_contact_metrics(np.zeros((4, 2, 3)), FPS, ContactConfig(up_axis="W"), size=1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-finite"):
        ground_contact_metrics(np.full((4, 2, 3), np.nan), FPS)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"ground_height": float("nan")}, r"config\.ground_height: must be a finite number, got nan"),
        ({"contact_height_rel": -1.0}, r"config\.contact_height_rel: must be > 0, got -1"),
        ({"skate_speed_rel": float("nan")}, r"config\.skate_speed_rel: must be a finite number"),
        ({"max_flight_time_s": -0.1}, r"config\.max_flight_time_s: must be > 0"),
        ({"hover_time_s": float("nan")}, r"config\.hover_time_s: must be a finite number"),
        ({"in_place_rel": -0.5}, r"config\.in_place_rel: must be >= 0"),
        ({"ground_motion": "moving"}, r"config\.ground_motion: must be 'auto', 'static' or 'treadmill'"),
    ],
)
def test_bad_contact_settings_are_refused_naming_the_field(changes, message):
    """Points sliding 1 cm under the ground: a NaN ground height reported NaN penetration and no skate, a negative
    band or a NaN sliding speed reported no skate; every one was accepted."""
    t = np.arange(6) / FPS
    pts = np.stack([t * 0.5, np.zeros(6), np.full(6, -0.01)], axis=-1)[:, None, :]
    assert ground_contact_metrics(pts, FPS, ContactConfig(ground_motion="static"), size=1.0).foot_skate_ratio == 1.0
    with pytest.raises(ValueError, match=rf"^{message}"):
        ground_contact_metrics(pts, FPS, dataclasses.replace(ContactConfig(), **changes), size=1.0)


def test_bone_length_drift_and_root_chain():
    parents = np.array([-1, 0, 1, 2, 2])  # root -> hip -> (spine, leg)
    assert root_chain(parents).tolist() == [0, 1, 2]
    rest = np.array([[0, 0, 0], [0, 0, 1], [0, 0, 1.2], [0, 0, 1.7], [0, 0.1, 0.7]], float)
    rest_len = np.linalg.norm(rest - rest[np.maximum(parents, 0)], axis=-1) * (parents >= 0)
    pos = np.repeat(rest[None], 3, axis=0)
    pos[1, 3, 2] += 0.1  # spine stretched by 10 cm on frame 1
    pos[2, 1, 2] += 0.3  # hip moved by the root-motion bone on frame 2
    drift = bone_length_drift(pos, parents, rest_len)
    np.testing.assert_allclose(drift[1, 3], 0.1, atol=1e-12)
    np.testing.assert_allclose(drift[2, 1], 0.3, atol=1e-12)
    km = kinematic_metrics(pos, FPS, parents, rest_len)
    np.testing.assert_allclose(km.bone_drift_max, [0.0, 0.1, 0.0], atol=1e-12)  # root-chain bone ignored


def test_jerk_of_a_cubic():
    t = np.arange(12) / FPS
    a = np.array([0.5, -1.0, 2.0])
    pos = (a * t[:, None] ** 3)[:, None, :]
    j = jerk_magnitude(pos, t)
    np.testing.assert_allclose(j[3:-3, 0], 6 * np.linalg.norm(a), rtol=FD_TOL)
    # non-uniform times: np.gradient's second-order scheme still differentiates a quadratic exactly twice
    tn = np.cumsum(np.r_[0.0, np.linspace(0.02, 0.04, 11)])
    pos_q = (a * tn[:, None] ** 2)[:, None, :]
    np.testing.assert_allclose(jerk_magnitude(pos_q, tn)[4:-4, 0], 0.0, atol=1e-6)


def test_joint_limits_violation_angle():
    rest = np.tile([0.0, 0.0, 0.0, 1.0], (2, 1))
    angles = np.deg2rad([0.0, 20.0, 50.0])
    rot = np.tile(rest, (3, 1, 1))
    rot[:, 1] = axis_angle_to_quat(np.stack([angles, 0 * angles, 0 * angles], -1))
    limits = JointLimits(np.full((2, 3), -np.deg2rad(30)), np.full((2, 3), np.deg2rad(30)))
    v = joint_limit_violations(rest, rot, limits)
    np.testing.assert_allclose(v[:, 1], np.deg2rad([0.0, 0.0, 20.0]), atol=1e-12)
    np.testing.assert_allclose(v[:, 0], 0.0, atol=1e-12)
    derived = joint_limits_from_motions(rest, [rot[:2]], margin_deg=10.0)
    np.testing.assert_allclose(derived.upper[1, 0], np.deg2rad(30.0), atol=1e-12)
    np.testing.assert_allclose(joint_limit_violations(rest, rot, derived)[2, 1], np.deg2rad(20.0), atol=1e-12)
    with pytest.raises(ValueError, match="lower > upper"):
        JointLimits(np.ones((2, 3)), np.zeros((2, 3)))
    # NaN bounds made every comparison false: the audit passed every frame ("all joints within their limits")
    with pytest.raises(ValueError, match=r"NaN bounds \(use -inf / inf for a free axis\)"):
        JointLimits(np.full((2, 3), np.nan), np.zeros((2, 3)))
    JointLimits(np.full((2, 3), -np.inf), np.full((2, 3), np.inf))  # free axes


def test_derived_limits_are_the_envelope_of_each_clip():
    rest = np.tile([0.0, 0.0, 0.0, 1.0], (1, 1))
    ang = lambda deg: axis_angle_to_quat(np.deg2rad(np.asarray(deg, float))[:, None] * [[0.0, 0.0, 1.0]])[:, None]  # noqa: E731
    long_clip = ang(np.linspace(-10.0, 10.0, 100))  # 100 frames in [-10, 10] deg about z
    short_clip = ang([60.0, 60.0, 60.0, 60.0])  # 4 frames at 60 deg: pooled quantiles would drop them
    limits = joint_limits_from_motions(rest, [long_clip, short_clip], margin_deg=5.0, quantile=0.1)
    np.testing.assert_allclose(np.rad2deg(limits.upper[0, 2]), 65.0, atol=1e-9)
    np.testing.assert_allclose(np.rad2deg(limits.lower[0, 2]), -8.0 - 5.0, atol=0.05)  # 10% quantile of -10..10


def _twist_z(deg) -> np.ndarray:
    """Rotations about z by ``deg`` [deg] as one joint's local rotations, shape (F, 1, 4)."""
    return axis_angle_to_quat(np.deg2rad(np.asarray(deg, float))[:, None] * [[0.0, 0.0, 1.0]])[:, None]


def test_rotation_vectors_near_picks_the_equivalent_nearest_the_center():
    from sim.contact_metrics import rotation_vectors_near  # added with the fix: imported here so the file collects

    z = np.array([0.0, 0.0, 1.0])
    rv = rotation_vectors(_twist_z([179.0, 181.0, 90.0, 0.0])[:, 0])  # 181 deg reads as -179 deg
    np.testing.assert_allclose(np.rad2deg(rv[:, 2]), [179.0, -179.0, 90.0, 0.0], atol=1e-9)
    near = rotation_vectors_near(rv, np.deg2rad(179.0) * z)
    np.testing.assert_allclose(np.rad2deg(near[:, 2]), [179.0, 181.0, 90.0, 0.0], atol=1e-9)
    np.testing.assert_allclose(rotation_vectors_near(rv, np.zeros(3)), rv, atol=EXACT)  # at rest: unchanged
    with pytest.raises(ValueError, match="center"):
        JointLimits(np.zeros((1, 3)), np.zeros((1, 3)), center=np.zeros((2, 3)))
    with pytest.raises(ValueError, match="center"):
        JointLimits(np.zeros((1, 3)), np.zeros((1, 3)), center=np.array([[4.0, 0.0, 0.0]]))


def test_derived_limits_unwrap_a_joint_posed_across_180_deg_from_rest():
    """A joint twisted 177 +- 3.02 deg from rest (a flipped bind orientation) crosses 180 deg smoothly, but its
    rotation vector jumped from +pi to -pi: the clip failed its own limits by ~330 deg (with quantile 0.05), and
    with quantile 0 the limits spanned [-pi, pi] and limited nothing. Unwrapped next to the clip's mean rotation,
    the range is the twist's own range."""
    rest = np.tile([0.0, 0.0, 0.0, 1.0], (1, 1))
    deg = 177.0 + 3.02 * np.sin(2 * np.pi * np.arange(121) / 120)
    clip = _twist_z(deg)
    limits = joint_limits_from_motions(rest, [clip], margin_deg=10.0, quantile=0.05)
    np.testing.assert_allclose(joint_limit_violations(rest, clip, limits), 0.0, atol=EXACT)
    np.testing.assert_allclose(np.rad2deg(limits.lower[0]), [-10.0, -10.0, np.quantile(deg, 0.05) - 10.0], atol=1e-9)
    np.testing.assert_allclose(np.rad2deg(limits.upper[0]), [10.0, 10.0, np.quantile(deg, 0.95) + 10.0], atol=1e-9)
    # the limits still limit: a twist of 150 deg lies below the range, one of 200 deg above it
    other = _twist_z([150.0, 200.0])
    expected = [np.quantile(deg, 0.05) - 10.0 - 150.0, 200.0 - np.quantile(deg, 0.95) - 10.0]
    np.testing.assert_allclose(np.rad2deg(joint_limit_violations(rest, other, limits)[:, 0]), expected, atol=1e-9)
    full = joint_limits_from_motions(rest, [clip], margin_deg=10.0)
    np.testing.assert_allclose(np.rad2deg(full.upper[0, 2]), deg.max() + 10.0, atol=1e-9)
    np.testing.assert_allclose(np.rad2deg(limits.center[0]), [0.0, 0.0, 177.0], atol=0.05)  # the mean twist


# --- the physics metrics measure ground contact as the audit does -----------------------------------------------

GROUND_KEYS = ("max_penetration_m", "mean_penetration_m", "foot_skate_ratio", "floating_ratio", "max_floating_m")
"""``sim.physics.contact_summary`` keys without their ``ground_`` infix (the audit's ``metrics["ground"]`` keys)."""


def _physics_ground(rig, motion) -> dict[str, float]:
    s = contact_summary(rig, motion)
    return {k: s[k.replace("max_pen", "max_ground_pen").replace("mean_pen", "mean_ground_pen")] for k in GROUND_KEYS}


def _stilts(foot_height: float) -> sim.Rig:
    """A meshless rig (like a BVH skeleton): hips 1 m up, two feet ``foot_height`` above the ground, 0.3 m apart."""
    rest = np.array([[0.0, 0.0, 1.0], [0.0, 0.15, foot_height - 1.0], [0.0, -0.15, foot_height - 1.0]])
    return sim.Rig(["hips", "foot_l", "foot_r"], [-1, 0, 0], rest, quat_identity((3,)), name="stilts")


def test_meshless_rigs_touch_the_ground_with_the_joint_band():
    """Foot joints sit a foot's thickness above the ground: 3 cm (3% of the 0.97 m size) is ground contact, as the
    audit's joint band (6%) says, not 1 s of floating as the skinned-vertex band (1%) said; feet dragged along at
    0.3 m/s (above the 0.05 sizes/s threshold) skate on every step instead of never."""
    rig = _stilts(0.03)
    frames = 31  # 1 s at 30 fps
    t = np.arange(frames) / FPS
    still = sim.Motion.rest(rig, frames)
    m = _physics_ground(rig, still)
    assert m["floating_ratio"] == 0.0 and m["max_floating_m"] == 0.0 and m["foot_skate_ratio"] == 0.0
    drag = sim.Motion(FPS, rig.rest_translations[0] + np.outer(t, [0.3, 0.0, 0.0]), still.rotations)
    m = _physics_ground(rig, drag)
    assert m["floating_ratio"] == 0.0
    assert m["foot_skate_ratio"] == pytest.approx(1.0, abs=EXACT)  # both feet slide on every step; hips never touch
    assert m["max_penetration_m"] == 0.0
    # feet 10 cm up (beyond 6% of the size) for the whole second: floating, that high
    high = _stilts(0.1)
    m = _physics_ground(high, sim.Motion.rest(high, frames))
    assert m["floating_ratio"] == 1.0
    assert m["max_floating_m"] == pytest.approx(0.1, abs=1e-12)


def test_meshed_rigs_keep_the_skinned_vertex_band():
    """With a skin, the lowest vertex touches within 1% of the size: 0.5% up is contact, 3% up (within the joint
    band) is floating."""
    rig = table_quadruped()
    pts = np.concatenate([m.points for m in rig.meshes])
    size = float(np.max(pts.max(axis=0) - pts.min(axis=0)))
    lowest = float(pts[:, 2].min())
    for up, floating in ((0.005, 0.0), (0.03, 1.0)):
        motion = hold(rig, 31, root_offset=(0.0, 0.0, up * size - lowest))
        m = _physics_ground(rig, motion)
        assert m["floating_ratio"] == floating, up
        if floating:
            assert m["max_floating_m"] == pytest.approx(up * size, abs=1e-9)


def test_physics_contact_summary_equals_the_audit(assets_dir):
    """The physics metrics and the audit report the same figures on the same motion, with and without a mesh (CMU
    131_01 used to be 100% floating and 0% skating in the physics metrics, 0% / 70% in the audit)."""
    import usd_io

    bvh = usd_io.load_asset(str(assets_dir / "bvh" / "131_01.bvh"))
    quad = table_quadruped()
    for rig, motion in ((bvh.rig, bvh.clip().slice(0, 240)), (quad, walkish(quad))):
        audit = audit_motion(rig, motion).metrics["ground"]
        physics = _physics_ground(rig, motion)
        for key in GROUND_KEYS:
            np.testing.assert_allclose(physics[key], audit[key], rtol=0, atol=EXACT, err_msg=f"{rig.name} {key}")
        if rig is bvh.rig:  # the figures themselves: a walk's feet touch the ground and slide on some steps
            assert physics["floating_ratio"] == 0.0
            assert 0.0 < physics["foot_skate_ratio"] < 1.0


# --- review fixes: jerk at the Nyquist frequency, rolling feet, back-and-forth slides, keyed hops, robust limits ----


def test_jerk_third_differences_see_frame_to_frame_jitter_pops_and_steps():
    """Three np.gradient passes have zero gain at the Nyquist frequency: a +-1 cm alternation read 0 m/s^3 and a
    1 cm one-frame pop 101 m/s^3. Third differences read 8 a fps^3, 3 a fps^3 and, for a step, 2 a fps^3."""
    F, a, fps = 40, 0.01, FPS
    t = np.arange(F) / fps
    zig = np.zeros((F, 1, 3))
    zig[:, 0, 0] = a * (-1.0) ** np.arange(F)
    np.testing.assert_allclose(jerk_magnitude(zig, t)[:, 0], 8 * a * fps**3, rtol=1e-9)
    pop = np.zeros((F, 1, 3))
    pop[20, 0, 1] = a
    j = jerk_magnitude(pop, t)[:, 0]
    np.testing.assert_allclose(j[19:22], 3 * a * fps**3, rtol=1e-9)  # the windows with the pop in their middle
    np.testing.assert_allclose(j[[18, 22]], a * fps**3, rtol=1e-9)
    np.testing.assert_allclose(j[:17], 0.0, atol=1e-6)
    step = np.zeros((F, 1, 3))
    step[20:, 0, 2] = a
    assert jerk_magnitude(step, t)[:, 0].max() == pytest.approx(2 * a * fps**3, rel=1e-9)
    # divided differences are exact on a cubic sampled at uneven times, to the clip ends
    tn = np.cumsum(np.r_[0.0, np.linspace(0.02, 0.05, 11)])
    c = np.array([0.5, -1.0, 2.0])
    cubic = (c * tn[:, None] ** 3 + 0.3 * tn[:, None] ** 2)[:, None, :]
    np.testing.assert_allclose(jerk_magnitude(cubic, tn)[:, 0], 6 * np.linalg.norm(c), rtol=1e-6)


def test_strided_jerk_covers_every_sampling_phase():
    """``step = 2`` on 60 fps samples is the jerk at 30 fps of both decimations: a one-frame pop reads 3 a 30^3
    whether it falls on an even or an odd frame (``motion.resample(30)`` kept the even frames only)."""
    F, a = 61, 0.02
    t = np.arange(F) / 60.0
    for frame in (30, 31):
        pos = np.zeros((F, 1, 3))
        pos[frame, 0, 0] = a
        j = jerk_magnitude(pos, t, step=2)[:, 0]
        assert j.max() == pytest.approx(3 * a * 30.0**3, rel=1e-9)
        assert abs(int(j.argmax()) - frame) <= 2
    # min_span_s: consecutive 60 fps frames read as if 1/30 s apart (a frame-to-frame change at 30 fps)
    zig = np.zeros((F, 1, 3))
    zig[:, 0, 0] = a * (-1.0) ** np.arange(F)
    np.testing.assert_allclose(jerk_magnitude(zig, t, min_span_s=0.1)[:, 0], 8 * a * 30.0**3, rtol=1e-9)
    assert jerk_magnitude(zig, t, step=2).max() == pytest.approx(0.0, abs=1e-6)  # aliased to a constant
    with pytest.raises(ValueError, match="step"):
        jerk_magnitude(zig, t, step=0)


def _rolling_foot(fps: float, omega: float, total_angle: float = np.pi / 3, length: float = 0.25):
    """A flat foot (26 x 3 points, heel x = 0 to toe x = ``length``) rolling heel-up about its toe edge at
    ``omega`` [rad/s] (the toe edge stays put: no slip), and a head point 1.7 m up; labels 0 (foot) and 1."""
    xs = np.linspace(0.0, length, 26)
    foot = np.stack(np.meshgrid(xs, np.linspace(0.0, 0.1, 3), [0.0]), -1).reshape(-1, 3)
    t = np.arange(int(np.round(total_angle / omega * fps)) + 1) / fps
    frames = []
    for angle in omega * t:
        p = foot.copy()
        r = length - p[:, 0]  # distance from the toe edge
        p[:, 0] = length - r * np.cos(angle)
        p[:, 2] = r * np.sin(angle)
        frames.append(np.concatenate([p, [[0.1, 0.05, 1.7]]]))
    return np.array(frames), t, np.r_[np.zeros(len(foot), int), 1]


def test_rolling_without_slip_is_not_foot_skate():
    """A foot rolling about its toe edge at 8 rad/s: its points higher in the 1.7 cm contact band move at their
    height times 8 rad/s (up to 0.14 m/s, above the 0.085 m/s threshold) while the toe edge rests, and 8-20% of
    the in-contact point-steps counted as sliding. The part's slowest in-contact point is at rest: no skate."""
    static = ContactConfig(ground_motion="static")
    for fps in (24.0, 60.0, 120.0):
        pts, t, labels = _rolling_foot(fps, 8.0)
        m = ground_contact_metrics(pts, t, static, labels=labels)
        assert m.max_skate_speed_mps > m.skate_speed_threshold  # points in the band do move that fast
        assert m.foot_skate_ratio == 0.0, fps
        np.testing.assert_allclose(m.part_slip_speed[1:, 0], 0.0, atol=1e-9)  # the toe edge
        # without labels each point is judged on its own (documented): rolling reads as sliding there
        assert ground_contact_metrics(pts, t, static).foot_skate_ratio > 0.0
    # the same foot translated at 0.3 m/s slides everywhere: every in-contact point-step slides
    pts, t, labels = _rolling_foot(60.0, 8.0)
    flat = np.repeat(pts[:1], len(t), axis=0)
    flat[:, :-1, 0] += 0.3 * t[:, None]
    m = ground_contact_metrics(flat, t, static, labels=labels)
    assert m.foot_skate_ratio == pytest.approx(1.0)
    np.testing.assert_allclose(m.part_slip_speed[1:, 0], 0.3, rtol=1e-9)


def test_slide_path_adds_up_back_and_forth_sliding():
    """A planted foot sliding +-4 cm three times a second for 2 s: 91 cm of path, no net displacement. The net
    slide (``distance_m``) read 0; ``path_m`` is the path."""
    foot = np.stack(np.meshgrid(np.linspace(0, 0.25, 11), np.linspace(0, 0.1, 3), [0.0]), -1).reshape(-1, 3)
    t = np.arange(61) / FPS
    offset = 0.04 * np.sin(2 * np.pi * 3 * t)
    pts = np.array([np.concatenate([foot + np.array([x, 0.0, 0.0]), [[0.1, 0.05, 1.7]]]) for x in offset])
    labels = np.r_[np.zeros(len(foot), int), 1]
    m = ground_contact_metrics(pts, t, labels=labels)
    np.testing.assert_allclose(m.ground_velocity, 0.0, atol=EXACT)
    (slide,) = m.slides
    assert slide.part == 0 and (slide.start, slide.stop) == (0, len(t))
    assert slide.path_m == pytest.approx(np.abs(np.diff(offset)).sum(), rel=1e-9)
    assert slide.path_m > 0.9
    assert slide.distance_m == pytest.approx(abs(offset[-1] - offset[0]), abs=1e-9)
    assert m.max_slide_path_m == slide.path_m and m.summary()["max_slide_path_m"] == slide.path_m


def test_keyframed_hop_apex_is_not_a_hover():
    """Keys at take-off (0.5 s), apex (0.7 s, 20 cm up) and landing (0.9 s): the central difference across the
    apex is 0, so the apex key read as hovering for 0.4 s. One-step differences (up 1 m/s, down 1 m/s) are not
    still; a body held 20 cm up on every key of 0.4 s still floats."""
    keys = np.array([0.0, 0.5, 0.7, 0.9, 1.4])
    hop = _with_head(_feet(len(keys)))
    hop[2, :, 2] += 0.2
    m = ground_contact_metrics(hop, keys, size=SIZE)
    np.testing.assert_array_equal(m.airborne, [False, False, True, False, False])
    assert not m.floating.any()
    held_keys = np.array([0.0, 0.5, 0.6, 0.7, 0.8, 0.9, 1.4])
    held = _with_head(_feet(len(held_keys)))
    held[2:5, :, 2] += 0.2
    m = ground_contact_metrics(held, held_keys, size=SIZE)
    np.testing.assert_array_equal(np.flatnonzero(m.floating), [3])  # keys 2 and 4 move towards their neighbours


def test_derived_limits_leave_out_at_least_min_tail_samples():
    """A joint swinging +-30 deg over 49 frames, turned +100 deg on 5 of them: the 5% quantile range (2.4 frames
    left out at each end) ends inside the glitch. With ``min_tail`` 6 its ends are the 7th smallest and largest
    samples; ``max_quantile`` caps what ``min_tail`` asks on a short clip."""
    rest = np.tile([0.0, 0.0, 0.0, 1.0], (1, 1))
    F = 49
    deg = 30.0 * np.sin(2 * np.pi * np.arange(F) / (F - 1))
    deg[10:15] += 100.0
    clip = _twist_z(deg)
    old = joint_limits_from_motions(rest, [clip], margin_deg=0.0, quantile=0.05)
    assert np.rad2deg(old.upper[0, 2]) > 100.0  # dragged into the glitch
    lim = joint_limits_from_motions(rest, [clip], margin_deg=0.0, quantile=0.05, min_tail=6, max_quantile=0.25)
    np.testing.assert_allclose(np.rad2deg(lim.upper[0, 2]), np.sort(deg)[-7], atol=1e-9)
    np.testing.assert_allclose(np.rad2deg(lim.lower[0, 2]), np.sort(deg)[6], atol=1e-9)
    assert np.rad2deg(joint_limit_violations(rest, clip, lim)[10:15, 0]).min() > 50.0
    capped = joint_limits_from_motions(rest, [clip], margin_deg=0.0, quantile=0.05, min_tail=6, max_quantile=0.11)
    np.testing.assert_allclose(np.rad2deg(capped.upper[0, 2]), np.quantile(deg, 0.89), atol=1e-9)
    # one count per motion; a long motion keeps its quantile
    long = _twist_z(np.linspace(-10.0, 10.0, 201))
    both = joint_limits_from_motions(rest, [long], margin_deg=0.0, quantile=0.05, min_tail=[6])
    np.testing.assert_allclose(np.rad2deg(both.upper[0, 2]), 9.0, atol=1e-9)
    with pytest.raises(ValueError, match="min_tail"):
        joint_limits_from_motions(rest, [clip], min_tail=-1)


def _segment_distance_sampled(a0, a1, b0, b1, n: int = 401) -> float:
    """Closest distance between two segments, by sampling both densely [m] (within ~|segment| / n)."""
    s = np.linspace(0.0, 1.0, n)[:, None]
    pa, pb = a0 + s * (a1 - a0), b0 + s * (b1 - b0)
    return float(np.min(np.linalg.norm(pa[:, None] - pb[None], axis=-1)))


def test_self_penetration_is_measured_without_self_collision():
    """With ``self_collision=False`` no pair collides, so nothing was measured: the biped's arm swung 45 deg into
    its torso read 0.0000 m (0.1417 m with self-collision on). Without self-collision the pairs it would collide
    count whole and the pairs filtered for overlapping in the reference pose count beyond that overlap, as with
    it; so do the ``reference_``/``target_`` versions (the motion measured against itself)."""
    from audit_cases import limb_through_body

    from sim import characters
    from sim.physics import CharacterConfig, build_character, self_penetration

    rig, clips = characters.build("biped-walk")
    walk = clips["walk"]
    bad = limb_through_body(rig, walk, "left_upper_arm", 20, 45, -45.0)
    ch = build_character(rig, walk, CharacterConfig(self_collision=False))
    assert len(ch.colliding_pairs()) == 0
    pos, rot = ch.body_transforms(bad)
    ref_pos, ref_rot = ch.body_transforms(walk)
    r = ch.capsule_radii

    def overlap(body_pos, body_rot, f, i, j) -> float:
        a, b = ch.capsule_world(body_pos[f], body_rot[f])
        return r[i] + r[j] - _segment_distance_sampled(a[i], b[i], a[j], b[j])

    # against the reference: the arm in the torso, a pair filtered for overlapping in the reference pose, beyond
    # the larger of that overlap and the pair's overlap in the reference at the same frame
    sp = self_penetration(ch, pos, rot, ref_pos, ref_rot)
    assert sp["pair"][1] == "left_lower_arm" and sp["pair"][0] in ("spine_1", "spine_2") and sp["filtered"]  # torso
    i, j = (ch.body_names.index(n) for n in sp["pair"])
    f = sp["frame"]
    allowance = max(ch.filter_overlap_m[(i, j)], overlap(ref_pos, ref_rot, f, i, j))
    assert sp["max_self_penetration_m"] == pytest.approx(overlap(pos, rot, f, i, j) - allowance, abs=2e-3)
    assert sp["max_self_penetration_m"] > 0.1
    # against itself (metrics.json's reference_ / target_): the filtered pairs allow their own overlap, the hand
    # crossing to the other forearm (a pair self-collision collides) counts whole
    own = self_penetration(ch, pos, rot, pos, rot)
    assert not own["filtered"] and "left_hand" in own["pair"]
    i, j = (ch.body_names.index(n) for n in own["pair"])
    assert own["max_self_penetration_m"] == pytest.approx(overlap(pos, rot, own["frame"], i, j), abs=2e-3)
    assert own["max_self_penetration_m"] > 0.05
    # with self-collision on, the same figures
    on = build_character(rig, walk, CharacterConfig(self_collision=True))
    for got, ref in ((sp, (ref_pos, ref_rot)), (own, (pos, rot))):
        again = self_penetration(on, pos, rot, *ref)
        assert again["max_self_penetration_m"] == pytest.approx(got["max_self_penetration_m"], abs=1e-12)
