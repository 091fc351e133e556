"""The audit on clean procedural clips and on clips damaged on purpose over a known frame range."""

from __future__ import annotations

import json

import numpy as np
import pytest
from audit_cases import limb_through_body, sliding, sunk

import sim
from sim import characters
from sim.audit import (
    CHECK_NAMES,
    AuditConfig,
    FrameRange,
    audit_motion,
    derived_joint_limits,
    plot_timeline,
    plot_worst_frame,
)

START, STOP = 20, 45
"""Frames the constructed defects cover."""
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def biped():
    rig, clips = characters.build("biped-walk")
    return rig, clips["walk"]


@pytest.fixture(scope="module")
def idle():
    rig, clips = characters.build("biped-idle")
    return rig, clips["idle"]


@pytest.fixture(scope="module")
def clean_report(biped):
    return audit_motion(*biped)


def _statuses(report) -> dict[str, str]:
    return {c.name: c.status for c in report.checks}


def test_clean_walk_passes_every_check(clean_report):
    assert [c.name for c in clean_report.checks] == list(CHECK_NAMES)
    assert clean_report.passed, clean_report.summary()
    assert clean_report.has_mesh
    assert clean_report.size_m == pytest.approx(1.756, abs=0.01)  # the biped's height is its largest extent


def test_sunk_3cm_fails_ground_penetration_on_exactly_those_frames(biped):
    rig, walk = biped
    report = audit_motion(rig, sunk(walk, START, STOP, 0.03))
    check = report.check("ground_penetration")
    assert check.status == "fail"
    assert check.frame_ranges == [FrameRange(START, STOP, walk.times[START], walk.times[STOP - 1])]
    assert check.value == pytest.approx(0.03, abs=0.002)  # the clean walk touches the ground within 0.1 mm
    assert any("foot" in p or "toes" in p for p in check.body_parts)
    assert f"frames {START}-{STOP - 1}" in check.message


def test_sliding_feet_fail_foot_skate_on_those_frames(biped):
    rig, walk = biped
    report = audit_motion(rig, sliding(walk, START, STOP, 0.8))
    check = report.check("foot_skate")
    assert check.status == "fail"
    failing = np.zeros(walk.frame_count, bool)
    for r in check.frame_ranges:
        failing[r.start : r.stop] = True
    # the named frames are those where a foot in contact moves: the drift, give or take the frame a velocity needs
    assert failing[START + 1 : STOP].all()
    assert not failing[:START].any() and not failing[STOP + 1 :].any()
    assert set(check.body_parts) & {"left_foot", "right_foot", "left_toes", "right_toes"}
    for name in ("ground_penetration", "self_intersection"):
        assert report.check(name).status == "pass"


def test_arm_through_torso_fails_self_intersection_on_exactly_those_frames(biped):
    rig, walk = biped
    report = audit_motion(rig, limb_through_body(rig, walk, "left_upper_arm", START, STOP, -45.0))
    check = report.check("self_intersection")
    assert check.status == "fail"
    assert [(r.start, r.stop) for r in check.frame_ranges] == [(START, STOP)]
    assert "left_upper_arm" in check.body_parts
    assert any("spine" in p for p in check.body_parts)
    assert _statuses(report)["ground_penetration"] == "pass"


def test_floating_and_pop_and_flip_are_caught(biped):
    rig, walk = biped
    root = walk.root_translations.copy()
    root[START:STOP, 2] += 0.1  # hovers 10 cm for 0.8 s
    floating = sim.Motion(walk.fps, root, walk.rotations, walk.translations, times=walk.times)
    check = audit_motion(rig, floating).check("floating")
    assert check.status == "fail"
    assert check.frame_ranges[0].start >= START and check.frame_ranges[-1].stop <= STOP

    rot = walk.rotations.copy()
    k = rig.joint_index("left_shin")
    rot[30:33, k] = sim.rotations.quat_multiply(rot[30:33, k], [1.0, 0.0, 0.0, 0.0])  # knee flipped 180 deg, 0.1 s
    flipped = sim.Motion(walk.fps, walk.root_translations, rot, walk.translations, times=walk.times)
    report = audit_motion(rig, flipped)
    limits = report.check("joint_limits")
    assert limits.status == "fail" and "left_shin" in limits.body_parts
    assert [(r.start, r.stop) for r in limits.frame_ranges] == [(30, 33)]
    jitter = report.check("jitter")
    assert jitter.status == "fail" and 27 <= jitter.worst_frame <= 35


def test_joint_only_rig_skips_mesh_checks(biped):
    rig, walk = biped
    bare = sim.Rig(rig.joint_names, rig.parents, rig.rest_translations, rig.rest_rotations, name="bones")
    report = audit_motion(bare, walk)
    assert not report.has_mesh
    assert report.check("self_intersection").status == "skipped"
    assert report.check("ground_penetration").status in ("pass", "fail")


def test_report_json_and_figures(clean_report, biped, tmp_path):
    data = json.loads(clean_report.to_json())
    assert data["schema"] == "kinedistill.audit/1" and data["passed"] is True
    assert [c["name"] for c in data["checks"]] == list(CHECK_NAMES)
    assert len(data["series"]["penetration_m"]) == biped[1].frame_count
    assert data["config"]["penetration_rel"] == AuditConfig().penetration_rel
    plot_timeline(clean_report, tmp_path / "t.png")
    plot_worst_frame(clean_report, tmp_path / "w.png")
    for name in ("t.png", "w.png"):
        blob = (tmp_path / name).read_bytes()
        assert blob.startswith(PNG_MAGIC) and len(blob) > 10_000


def test_worst_frame_figure_refuses_a_frame_outside_the_clip(clean_report, biped, tmp_path):
    """frame=-1 drew the last frame titled 'frame -1' (with no failing check found for it); past the end, a bare
    IndexError."""
    count = biped[1].frame_count
    for bad in (-1, count):
        with pytest.raises(ValueError, match=rf"frame: must be in \[0, {count}\), got {bad}"):
            plot_worst_frame(clean_report, tmp_path / "w.png", frame=bad)
    plot_worst_frame(clean_report, tmp_path / "w.png", frame=count - 1)


def test_jitter_of_a_clip_too_short_to_measure_is_skipped_not_passed(biped):
    """A 3-frame clip has no third difference: its jitter read 'max jerk 0', a pass, even with a 5 m pop."""
    rig, walk = biped
    short = walk.slice(0, 3)
    trans = short.root_translations.copy()
    trans[1] += 5.0
    popped = sim.Motion(short.fps, trans, short.rotations)
    jitter = audit_motion(rig, popped).check("jitter")
    assert jitter.status == "skipped" and "needs at least 4" in jitter.message
    assert audit_motion(rig, walk.slice(0, 4)).check("jitter").status in ("pass", "fail")


def test_import_sim_audit_does_not_load_matplotlib():
    import subprocess
    import sys

    code = "import sys, sim, sim.audit; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("field", "value"),
    [("penetration_rel", float("nan")), ("slide_rel", 0.0), ("jerk_rel", float("inf")), ("limit_quantile", 0.5),
     ("min_event_s", -1.0), ("max_parts", 0)],
)  # fmt: skip
def test_unusable_threshold_is_refused(biped, field, value):
    # a NaN threshold used to pass every check silently (no comparison with NaN is true)
    rig, walk = biped
    cfg = AuditConfig(**{field: value})
    with pytest.raises(ValueError, match=rf"AuditConfig\.{field}: must be"):
        audit_motion(rig, walk, cfg)


@pytest.mark.parametrize(
    ("part", "field", "value"),
    [("contact", "max_flight_time_s", -1.0), ("contact", "hover_time_s", 0.0), ("contact", "in_place_rel", -0.1),
     ("self_intersection", "ring_count", -2), ("self_intersection", "ring_count", 1.5),
     ("self_intersection", "max_depth_rel", -1.0), ("self_intersection", "rest_clearance_rel", -0.01),
     ("self_intersection", "weld_tolerance_rel", 0.0)],
)  # fmt: skip
def test_unusable_nested_threshold_is_refused(biped, part, field, value):
    """A negative ring count or flight time silently changed the verdicts (ring_count -2 reported a 29 m
    contour on the Fox Walk instead of 6 m); they are refused naming the field."""
    import dataclasses

    from sim.contact_metrics import ContactConfig
    from sim.mesh_intersection import SelfIntersectionConfig

    rig, walk = biped
    sub = {"contact": ContactConfig, "self_intersection": SelfIntersectionConfig}[part]()
    cfg = AuditConfig(**{part: dataclasses.replace(sub, **{field: value})})
    with pytest.raises(ValueError, match=rf"AuditConfig\.{part}\.{field}: must be"):
        audit_motion(rig, walk, cfg)


def test_configs_and_limits_of_same_named_classes_are_refused_naming_the_argument(biped):
    """sim.physics.ContactConfig and posespace.JointLimits share names with the audit's classes: passing them failed
    deep inside with AttributeError ('contact_height_rel', 'lower')."""
    import numpy as np

    import posespace
    from sim.physics import ContactConfig as PhysicsContact

    rig, walk = biped
    cases = [
        ({"config": AuditConfig(contact=PhysicsContact(ground_height_m=0.1))},
         "AuditConfig.contact: expected a sim.contact_metrics.ContactConfig, got a sim.physics.config.ContactConfig "
         "(another class of the same name)"),
        ({"config": AuditConfig(self_intersection=PhysicsContact())},
         "AuditConfig.self_intersection: expected a sim.mesh_intersection.SelfIntersectionConfig, got a "
         "sim.physics.config.ContactConfig"),
        ({"config": PhysicsContact()},
         "config: expected a sim.audit.AuditConfig, got a sim.physics.config.ContactConfig"),
        ({"limits": posespace.JointLimits(np.zeros((rig.joint_count, 8)), np.zeros(rig.joint_count),
                                          np.zeros(rig.joint_count), np.ones(rig.joint_count))},
         "limits: expected a sim.contact_metrics.JointLimits, got a posespace.validators.JointLimits (another class "
         "of the same name)"),
    ]  # fmt: skip
    for kwargs, message in cases:
        with pytest.raises(TypeError) as e:
            audit_motion(rig, walk, **kwargs)
        assert str(e.value) == message


def test_whole_body_glide_fails_foot_skate_with_auto_ground(idle):
    """An idle whose whole body glides 0.2 m/s for 2 s (0.4 m, inside the 0.44 m in-place box of a 1.76 m biped):
    the default "auto" ground took the glide for a treadmill and removed it (pass, slide 0); the feet move with
    the body, so it is measured against a static ground and fails as it does with ground_motion="static"."""
    rig, clip = idle
    clip = clip.slice(0, 61)
    root = clip.root_translations.copy()
    root[:, 0] += 0.2 * (clip.times - clip.times[0])
    glide = sim.Motion(clip.fps, root, clip.rotations, times=clip.times, name="glide")
    report = audit_motion(rig, glide)
    check = report.check("foot_skate")
    assert check.status == "fail", check.message
    assert check.value == pytest.approx(0.4, abs=0.01)
    assert report.metrics["ground"]["ground_velocity_mps"] == 0.0
    assert set(check.body_parts) & {"left_foot", "right_foot", "left_toes", "right_toes"}


def test_joint_twisted_across_180_deg_from_rest_keeps_its_limits(idle):
    """A hand twisted 177 +- 3.02 deg from rest, smoothly (0.16 deg per frame): its rest-relative rotation vector
    jumped from +pi to -pi, and the clip failed its own derived limits by ~300 deg where it crossed."""
    rig, clip = idle
    clip = clip.slice(0, 61)
    j = rig.joint_index("left_hand")
    deg = 177.0 + 3.02 * np.sin(2 * np.pi * (clip.times - clip.times[0]) / clip.duration)
    rot = clip.rotations.copy()
    twist = sim.rotations.axis_angle_to_quat(np.deg2rad(deg)[:, None] * np.array([0.0, 0.0, 1.0]))
    rot[:, j] = sim.rotations.quat_multiply(rot[:, j], twist)
    report = audit_motion(rig, sim.Motion(clip.fps, clip.root_translations, rot, times=clip.times, name="twist"))
    check = report.check("joint_limits")
    assert check.status == "pass", check.message
    assert check.value == 0.0


def test_sustained_penetration_between_sparse_keys_fails(idle):
    """Keys every 0.5 s (nominal 30 fps, as glTF/USD keyframes keep their key times), the body sunk 4.5 cm at one
    key: the played clip stays deeper than the soft threshold for ~0.43 s (longer than min_event_s). Each key was
    credited 1/30 s, so it passed; the event is now timed on the clip resampled at 30 fps, as the resampled clip
    itself is, and reported on the key. A 2.7 cm dip, above the soft threshold only ~0.03 s as played, passes
    (crediting each key half its gaps would call it a 0.5 s event)."""
    rig, clip = idle
    keys = np.arange(0, clip.frame_count, 15)
    for sink, status in ((0.045, "fail"), (0.027, "pass")):
        root = clip.root_translations[keys].copy()
        root[4, 2] -= sink  # t = 2.0 s
        keyed = sim.Motion(30.0, root, clip.rotations[keys], times=clip.times[keys], name="keyed")
        assert not keyed.is_uniform()
        check = audit_motion(rig, keyed).check("ground_penetration")
        soft, hard = check.threshold, check.details["hard_threshold_m"]
        assert soft < sink < hard  # only the event's duration can fail it
        assert check.status == status, check.message
        assert check.details["resampled_fps"] == 30.0
        if status == "fail":
            assert [(r.start, r.stop) for r in check.frame_ranges] == [(4, 5)]
            assert check.worst_frame == 4
            played = audit_motion(rig, keyed.resample(30.0)).check("ground_penetration")
            assert played.status == "fail"
            assert check.value == pytest.approx(played.value, abs=1e-9)


def test_limb_passing_through_the_body_between_keys_fails_self_intersection(idle):
    """Two keys 1 s apart, the left arm held forward and turned 10 deg across the chest at the first, 170 deg (behind
    the back) at the second: both keys are clear, and the arm as played sweeps through the torso. The check ran on
    the keys only and passed; each key now reports the longest contour of the resampled samples it stands for."""
    rig, clip = idle
    two = sim.Motion(30.0, clip.root_translations[:2], clip.rotations[:2], name="two")
    forward = limb_through_body(rig, two, "left_upper_arm", 0, 2, -90.0, axis=(0.0, 1.0, 0.0))
    swing = limb_through_body(rig, forward, "left_upper_arm", 0, 1, -10.0, axis=(0.0, 0.0, 1.0))
    swing = limb_through_body(rig, swing, "left_upper_arm", 1, 2, -170.0, axis=(0.0, 0.0, 1.0))
    keyed = sim.Motion(30.0, swing.root_translations, swing.rotations, times=np.array([0.0, 1.0]), name="keyed")
    assert not keyed.is_uniform()
    assert audit_motion(rig, swing).check("self_intersection").status == "pass"  # the two poses alone
    played = audit_motion(rig, keyed.resample(30.0)).check("self_intersection")
    check = audit_motion(rig, keyed).check("self_intersection")
    assert played.status == "fail" and check.status == "fail", check.message
    assert check.value == pytest.approx(played.value, rel=1e-9)
    assert check.worst_frame == (0 if played.worst_frame <= 15 else 1)  # the key nearest the worst sample
    assert "left_upper_arm" in check.body_parts


def test_worst_frame_figure_can_show_a_joint_limit_failure(quadruped):
    """Joint limits fail any excess (threshold 0), so their value/threshold ratio read 0 and the worst-frame figure
    never showed them beside another failing check: a hind leg swung 100 deg forward (some 59 deg past the limits
    of the clean walk, more than a whole margin) lost to a foot skate 2.1 times its threshold. A failing check
    without a threshold now ranks 1 + value / severity_scale (the limits' margin)."""
    rig, walk = quadruped
    j = rig.joint_index("hind_left_upper_leg")
    f = np.arange(walk.frame_count)
    angle = np.where((f >= 2) & (f <= 26), np.sin(np.pi * (f - 2) / 24) ** 2, 0.0) * np.deg2rad(100.0)
    q = sim.rotations.axis_angle_to_quat(np.stack([0.0 * angle, angle, 0.0 * angle], axis=-1))
    rot = walk.rotations.copy()
    rot[:, j] = sim.rotations.quat_multiply(q, rot[:, j])
    swung = sim.Motion(walk.fps, walk.root_translations, rot, walk.translations, name="swung")
    limits = derived_joint_limits(rig, [walk], AuditConfig())
    report = audit_motion(rig, sunk(swung, 34, 44, 0.016), limits=limits)
    check = report.check("joint_limits")
    assert check.failed and check.details["severity_scale"] == AuditConfig().limit_margin_deg
    others = [c for c in report.failed_checks if c.name != "joint_limits"]
    assert others and max(c.value / c.threshold for c in others) < 1.0 + check.value / 45.0
    assert report.worst_frame() == check.worst_frame
    assert check.frame_ranges[0].start <= check.worst_frame < check.frame_ranges[0].stop


def test_jitter_of_a_constant_acceleration_is_zero_to_the_clip_ends(biped):
    """The whole body accelerating at 20 m/s^2 (zero jerk): three np.gradient passes leave one-sided errors in
    three frames at each end, and the third (a * fps / 8 = 75 m/s^3) was not masked."""
    rig, _ = biped
    frames, fps, accel = 12, 30.0, 20.0
    t = np.arange(frames) / fps
    rest = sim.Motion.rest(rig, frames, fps)
    motion = sim.Motion(fps, rig.rest_translations[0] + np.outer(0.5 * accel * t**2, [1.0, 0.0, 0.0]), rest.rotations)
    report = audit_motion(rig, motion)
    np.testing.assert_allclose(report.series["jerk_mps3"], 0.0, atol=1e-6)
    assert report.check("jitter").status == "pass"


# --- review fixes: jitter at every frame, back-and-forth skate, keyed hops, limits a few frames cannot drag ---------


@pytest.fixture(scope="module")
def quadruped():
    rig, clips = characters.build("quadruped-walk")
    return rig, clips["walk"]


def _with_root(motion: sim.Motion, root: np.ndarray, name: str = "damaged") -> sim.Motion:
    return sim.Motion(motion.fps, root, motion.rotations, motion.translations, times=motion.times, name=name)


def test_jitter_fails_frame_to_frame_zigzag_pop_and_teleport(quadruped):
    """Three np.gradient passes have no gain at the Nyquist frequency: a +-3 cm root zig-zag on every frame passed
    the whole audit (jerk 603 m/s^3, the clean walk's), a one-frame 0.3 m pop read 3/8 of its jerk and passed.
    Third differences read 8 a fps^3, 3 a fps^3 and 2 a fps^3 on every joint the root carries."""
    rig, walk = quadruped
    fps = walk.fps
    clean = audit_motion(rig, walk).check("jitter")
    assert clean.status == "pass"
    root = walk.root_translations
    zig = root.copy()
    zig[:, 1] += 0.03 * (-1.0) ** np.arange(len(root))
    pop = root.copy()
    pop[20, 1] += 0.3
    jump = root.copy()
    jump[20:, 1] += 0.3
    for damaged, added in ((zig, 8 * 0.03), (pop, 3 * 0.3), (jump, 2 * 0.3)):
        check = audit_motion(rig, _with_root(walk, damaged)).check("jitter")
        assert check.status == "fail", check.message
        # the root's own jerk adds to the walk's: within the clean walk's worst of it
        assert abs(check.value - added * fps**3) <= clean.value + 1e-6
    check = audit_motion(rig, _with_root(walk, pop)).check("jitter")
    assert 19 <= check.worst_frame <= 21
    # frames 19-21 read 3 a fps^3, frames 18 and 22 (the pop at a window's end) a fps^3 = 8100 m/s^3, also failing
    assert 0.3 * fps**3 > check.threshold
    assert [(r.start, r.stop) for r in check.frame_ranges] == [(18, 23)]


def test_jitter_of_a_fast_clip_sees_a_glitch_on_any_frame(quadruped):
    """A 60 fps clip was resampled to 30 fps first, keeping even frames: a 1 m pop on frame 41 vanished (pass).
    Measured on the original frames (every sampling phase, and frame-to-frame changes), a pop on frame 40 or 41
    fails there, and so does a +-3 cm frame-to-frame zig-zag (which every 30 fps decimation aliases away)."""
    rig, walk = quadruped
    w60 = walk.resample(60.0)
    assert audit_motion(rig, w60).check("jitter").status == "pass"
    for frame in (40, 41):
        root = w60.root_translations.copy()
        root[frame, 1] += 1.0
        check = audit_motion(rig, _with_root(w60, root)).check("jitter")
        assert check.status == "fail", (frame, check.message)
        assert abs(check.worst_frame - frame) <= 2
        assert check.value >= 3 * 1.0 * 30.0**3 * 0.9  # a one-frame pop of 1 m at the 30 fps analysis rate
        assert check.details["analysis_fps"] == 30.0
    root = w60.root_translations.copy()
    root[:, 1] += 0.03 * (-1.0) ** np.arange(len(root))
    assert audit_motion(rig, _with_root(w60, root)).check("jitter").status == "fail"


@pytest.mark.parametrize("fps", [31.0, 45.0, 75.0])
def test_jitter_reads_a_pop_alike_at_rates_that_are_no_multiple_of_the_analysis_rate(quadruped, fps):
    """31 fps was measured at 15.5 fps and 45 at 22.5 (the step rounded up): a one-frame pop read 7x lower than
    at 30 or 60 fps and passed. Now every faster clip is measured at 30 fps, the pop fails as it does at 30 and 60
    fps, and the clean clip reads about as it does there."""
    rig, walk = quadruped
    clean = {r: audit_motion(rig, walk.resample(r)).check("jitter") for r in (30.0, 60.0, fps)}
    assert clean[fps].status == "pass" and clean[fps].details["analysis_fps"] == 30.0
    assert clean[fps].value < 1.5 * max(clean[30.0].value, clean[60.0].value)
    popped = {}
    for r in (30.0, 60.0, fps):
        m = walk.resample(r)
        root = m.root_translations.copy()
        root[m.frame_count // 2, 1] += 0.1
        popped[r] = audit_motion(rig, _with_root(m, root)).check("jitter")
    assert all(c.status == "fail" for c in popped.values()), {r: c.message for r, c in popped.items()}
    ratio = popped[fps].value / popped[30.0].value
    assert 0.8 < ratio < 1.25, ratio  # the pop's jerk at the 30 fps analysis rate, whatever the clip's rate


def test_feet_sliding_back_and_forth_fail_foot_skate(idle):
    """The idle's whole body sliding +-4 cm three times a second for 2 s: its planted feet slide ~0.9 m with no net
    displacement, which the net slide (the old measure) passed. The slide path fails."""
    rig, clip = idle
    clip = clip.slice(0, 61)
    offset = 0.04 * np.sin(2 * np.pi * 3 * (clip.times - clip.times[0]))
    root = clip.root_translations.copy()
    root[:, 0] += offset
    report = audit_motion(rig, _with_root(clip, root, "shuffle"))
    check = report.check("foot_skate")
    assert check.status == "fail", check.message
    path = np.abs(np.diff(offset)).sum()
    assert path > check.details["path_threshold_m"] > check.details["net_threshold_m"]
    assert check.value == pytest.approx(path, abs=0.01)  # the feet move with the root
    assert check.threshold == check.details["path_threshold_m"]
    assert all(s["distance_m"] < check.details["net_threshold_m"] for s in check.details["slides"])
    assert set(check.body_parts) & {"left_foot", "right_foot", "left_toes", "right_toes"}


def test_keyframed_hop_does_not_float_and_a_keyed_hover_does(idle):
    """A 0.4 s hop keyed at take-off, apex (20 cm up) and landing: the central difference across the apex key is 0
    and the key read as hovering (fail), while the clip as played (resampled at 30 fps) is a ballistic hop. Keys
    holding the body 20 cm up for 0.4 s float, reported on those keys."""
    rig, clip = idle
    keys = np.array([0.0, 0.5, 0.7, 0.9, 1.4])
    m = clip.sample(keys)
    root = m.root_translations.copy()
    root[2, 2] += 9.81 * 0.4**2 / 8
    hop = sim.Motion(30.0, root, m.rotations, times=keys, name="hop")
    assert not hop.is_uniform()
    report = audit_motion(rig, hop)
    check = report.check("floating")
    assert check.status == "pass", check.message
    assert check.details["resampled_fps"] == 30.0
    assert report.check("foot_skate").details["resampled_fps"] == 30.0
    keys = np.array([0.0, 0.5, 0.6, 0.7, 0.8, 0.9, 1.4])
    m = clip.sample(keys)
    root = m.root_translations.copy()
    root[2:5, 2] += 0.2
    check = audit_motion(rig, sim.Motion(30.0, root, m.rotations, times=keys, name="hover")).check("floating")
    assert check.status == "fail", check.message
    failing = {f for r in check.frame_ranges for f in range(r.start, r.stop)}
    assert failing <= {1, 2, 3, 4, 5} and 3 in failing
    assert check.value == pytest.approx(0.2, abs=0.01)


def test_derived_limits_catch_a_joint_glitch_of_a_few_frames(quadruped):
    """A hind leg turned +100 deg for 5 of the walk's 49 frames: limits derived from the clip itself (5%
    quantiles: 2.4 frames left out at each end) were dragged by the glitch and it passed every check. The range
    now leaves out at least 0.2 s of frames at each end."""
    rig, walk = quadruped
    j = rig.joint_index("hind_left_upper_leg")
    q = sim.rotations.axis_angle_to_quat(np.array([0.0, np.deg2rad(100.0), 0.0]))
    for n in (1, 3, 5):
        rot = walk.rotations.copy()
        rot[10 : 10 + n, j] = sim.rotations.quat_multiply(
            np.broadcast_to(q, rot[10 : 10 + n, j].shape), rot[10 : 10 + n, j]
        )
        check = audit_motion(rig, sim.Motion(walk.fps, walk.root_translations, rot, walk.translations)).check(
            "joint_limits"
        )
        assert check.status == "fail", (n, check.message)
        assert check.body_parts[0] == "hind_left_upper_leg"
        assert [(r.start, r.stop) for r in check.frame_ranges] == [(10, 10 + n)]
        assert check.value > 30.0


def test_a_one_frame_range_reads_as_one_time():
    # "frame 21 (0.70-0.70 s)": a zero-length range for one frame
    assert str(FrameRange(21, 22, 0.7, 0.7)) == "frame 21 (0.70 s)"
    assert str(FrameRange(3, 6, 0.1, 0.1667)) == "frames 3-5 (0.10-0.17 s)"
