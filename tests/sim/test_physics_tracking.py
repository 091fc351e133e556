"""Newton tracking: drop test, self-collision, determinism, blow-up detection, root assist, target filter, projection.

The first test to simulate pays the cold Warp/Newton compile (~30-60 s on an empty kernel cache).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from physics_rigs import hold, table_quadruped, tuning_fork, walkish

import sim
from sim.physics import (
    CharacterConfig,
    ContactConfig,
    ProjectionConfig,
    RootAssistConfig,
    SolverConfig,
    TrackingConfig,
    build_character,
    contact_summary,
    detect_blowup,
    project,
    reference_trajectory,
    self_penetration,
    track,
)
from sim.rotations import axis_angle_to_quat

SINK_TOL_M = 0.01
"""The issue's bound: a dropped character must not sink more than 1 cm."""
REST_SPEED_MPS = 0.05
"""Bodies slower than this have come to rest."""
SELF_PENETRATION_TOL_M = 0.005
"""Capsule overlap allowed between colliding bodies driven into each other."""


def _lowest_capsule_point(ch, pos, rot):
    a, b = ch.capsule_world(pos, rot)
    return (np.minimum(a[..., 2], b[..., 2]) - ch.capsule_radii).min(axis=-1)


@pytest.fixture(scope="module")
def table():
    return build_character(table_quadruped())


def test_drop_from_half_a_metre_comes_to_rest_without_sinking(table):
    rig = table.rig
    motion = hold(rig, 75, fps=30.0, root_offset=(0.0, 0.0, 0.5))  # 2.5 s, dropped from 0.5 m
    res = track(table, motion)
    assert res.blowup is None
    low = _lowest_capsule_point(table, res.body_pos, res.body_rot)
    assert low[0] > 0.45  # it did start in the air
    assert low.min() >= -SINK_TOL_M, f"sank {-low.min():.4f} m"
    speeds = np.linalg.norm(res.body_vel[-1, :, :3], axis=-1)
    assert speeds.max() < REST_SPEED_MPS, f"still moving at {speeds.max():.3f} m/s"
    # standing on its feet at its rest height (PD holds the pose under its weight)
    np.testing.assert_allclose(res.body_pos[-1, 0, 2], rig.rest_translations[0, 2], atol=0.02)
    # the skinned mesh does not sink either
    assert contact_summary(rig, res.motion)["max_ground_penetration_m"] <= SINK_TOL_M


def _fork_case(self_collision: bool):
    rig = tuning_fork()
    ch = build_character(rig, cfg=CharacterConfig(self_collision=self_collision, stiffness_hz=8.0))
    bent = np.repeat(rig.rest_rotations[None], 45, 0).copy()
    y = np.array([0.0, 1.0, 0.0])
    bent[:, rig.joint_index("left_arm")] = axis_angle_to_quat(np.radians(65.0) * y)
    bent[:, rig.joint_index("right_arm")] = axis_angle_to_quat(-np.radians(65.0) * y)
    target = sim.Motion(30.0, np.repeat(rig.rest_translations[:1], 45, 0), bent)
    ref = reference_trajectory(ch, hold(rig, 45))
    coords = ch.joint_coordinates(ch.body_transforms(target)[1])
    res = track(ch, ref, target_coords=coords)
    assert res.blowup is None
    pairs = [(ch.body_names.index("left_fore"), ch.body_names.index("right_fore"))]
    a, b = ch.capsule_world(res.body_pos, res.body_rot)
    depth, _ = sim.collision.capsule_penetration(a, b, ch.capsule_radii, pairs)
    return ch, res, depth.max()


def test_self_collision_keeps_limbs_apart():
    ch, res, depth = _fork_case(self_collision=True)
    assert (ch.body_names.index("left_fore"), ch.body_names.index("right_fore")) in map(tuple, ch.colliding_pairs())
    assert depth <= SELF_PENETRATION_TOL_M, f"forearms overlap by {depth:.4f} m"
    assert self_penetration(ch, res.body_pos, res.body_rot)["max_self_penetration_m"] <= SELF_PENETRATION_TOL_M
    # the check has teeth: without self-collision the same targets drive the forearms through each other
    _, _, free_depth = _fork_case(self_collision=False)
    assert free_depth > 0.03


def test_self_penetration_counts_filtered_pairs_beyond_their_allowance(table):
    from sim._collision_reference import segment_distance_reference

    ch = dataclasses.replace(table)
    torso, lower = ch.body_names.index("torso"), ch.body_names.index("leg0_lower")
    allowance = 0.01
    ch.collision_filter_pairs = sorted({*ch.collision_filter_pairs, (torso, lower)})
    ch.filter_overlap_m = {(torso, lower): allowance}
    pos = np.repeat(ch.reference_body_pos[None], 3, 0)
    rot = np.repeat(ch.reference_body_rot[None], 3, 0)
    for f, lift in ((1, 0.75), (2, 0.95)):  # the lower leg pushed up into the torso, deeper in frame 2
        pos[f, lower] += lift * (ch.reference_body_pos[torso] - ch.reference_body_pos[lower])
    a, b = ch.capsule_world(pos, rot)
    r = ch.capsule_radii

    def overlap(f):  # independent reference: radii minus the exact segment distance
        return r[torso] + r[lower] - segment_distance_reference(a[f, torso], b[f, torso], a[f, lower], b[f, lower])

    assert overlap(2) > overlap(1) > allowance
    colliding = [tuple(p) for p in ch.colliding_pairs()]
    assert (torso, lower) not in colliding
    others = self_penetration(dataclasses.replace(ch, filter_overlap_m={}), pos, rot)["max_self_penetration_m"]
    assert others < overlap(2) - allowance  # the pair below dominates
    sp = self_penetration(ch, pos, rot)
    assert sp["pair"] == ["torso", "leg0_lower"] and sp["filtered"] and sp["frame"] == 2
    np.testing.assert_allclose(sp["max_self_penetration_m"], overlap(2) - allowance, atol=1e-9)
    # against a reference that overlaps as deeply at the same frames, only the excess counts
    ref_pos = pos.copy()
    ref_pos[2] = pos[1]  # the reference goes only as deep as frame 1 in frame 2
    sp = self_penetration(ch, pos, rot, ref_pos, rot)
    np.testing.assert_allclose(sp["max_self_penetration_m"], max(overlap(2) - overlap(1), others), atol=1e-9)
    assert self_penetration(ch, pos, rot, pos, rot)["max_self_penetration_m"] == others


def test_self_penetration_cost_kernel_matches_the_metric(table):
    """The projection's cost term is the squared excess that ``self_penetration`` reports, per frame and world."""
    import warp as wp

    from sim.physics import _tracking_kernels as K
    from sim.physics.metrics import filtered_pair_allowance

    ch = dataclasses.replace(table)
    torso, lower = ch.body_names.index("torso"), ch.body_names.index("leg0_lower")
    ch.collision_filter_pairs = sorted({*ch.collision_filter_pairs, (torso, lower)})
    ch.filter_overlap_m = {(torso, lower): 0.01}
    ref_pos = np.repeat(ch.reference_body_pos[None], 2, 0)
    ref_rot = np.repeat(ch.reference_body_rot[None], 2, 0)
    pairs, allowance = filtered_pair_allowance(ch, 2, ref_pos, ref_rot)
    assert pairs.tolist() == [[torso, lower]] and np.all(allowance >= 0.01)
    worlds = []  # world 0 at the reference, worlds 1-2 with the lower leg pushed into the torso
    for lift in (0.0, 0.75, 0.95):
        pos = ch.reference_body_pos.copy()
        pos[lower] += lift * (pos[torso] - pos[lower])
        worlds.append(pos)
    B = ch.body_count
    body_q = np.concatenate([np.concatenate([p, ch.reference_body_rot], axis=1) for p in worlds]).astype(np.float32)
    caps = ch.capsules
    weight = 7.0
    for frame in (0, 1):
        cost = wp.zeros(3, dtype=wp.float32, device="cpu")
        wp.launch(
            K.self_penetration_cost_kernel, dim=3,
            inputs=[wp.array([frame * 2], dtype=wp.int32, device="cpu"), 2, 2,
                    wp.array(body_q, dtype=wp.transform, device="cpu"), B, 1.0 / ch.height,
                    wp.array(np.stack([c.endpoints[0] for c in caps]).astype(np.float32), dtype=wp.vec3),
                    wp.array(np.stack([c.endpoints[1] for c in caps]).astype(np.float32), dtype=wp.vec3),
                    wp.array(ch.capsule_radii.astype(np.float32), dtype=wp.float32),
                    wp.array(pairs, dtype=wp.int32), wp.array(allowance.astype(np.float32), dtype=wp.float32),
                    weight],
            outputs=[cost], device="cpu",
        )  # fmt: skip
        for w, pos in enumerate(worlds):
            sp = self_penetration(ch, pos[None], ch.reference_body_rot[None], ref_pos[frame : frame + 1], ref_rot)
            excess = sp["max_self_penetration_m"] if sp["filtered"] else 0.0
            want = weight * (excess / ch.height) ** 2
            np.testing.assert_allclose(cost.numpy()[w], want, rtol=1e-4, atol=1e-9)
    assert cost.numpy()[0] == 0.0 and cost.numpy()[2] > cost.numpy()[1] > 0.0


def test_tracking_is_deterministic(table):
    motion = walkish(table.rig)
    a = track(table, motion)
    b = track(table, motion)
    assert a.blowup is None
    np.testing.assert_array_equal(a.body_pos, b.body_pos)
    np.testing.assert_array_equal(a.body_rot, b.body_rot)


def test_blowup_is_detected_with_its_frame(table):
    ref = reference_trajectory(table, walkish(table.rig))
    coords = ref.coords.copy()
    coords[12] += 1.0e3  # a wild target (its rate, by central differences, already steps 10 -> 11)
    res = track(table, ref, target_coords=coords)
    assert res.blowup is not None and not res.ok
    assert 11 <= res.blowup.frame <= 13
    assert "non-finite" in res.blowup.reason or "runaway" in res.blowup.reason
    assert len(res.body_pos) == res.blowup.frame  # nothing from the blown-up frames is returned
    assert np.isfinite(res.body_pos).all()
    # runaway energy and runaway distance are recognized too
    cfg = TrackingConfig()
    pos = ref.body_pos[0]
    still = np.zeros((len(pos), 6))
    fast = still.copy()
    fast[3, :3] = [0.0, 0.0, 100.0]
    assert "runaway energy" in detect_blowup(table, pos, fast, pos, cfg)
    assert "runaway" in detect_blowup(table, pos + np.array([50.0, 0, 0]), still, pos, cfg)
    assert detect_blowup(table, pos, still, pos, cfg) is None
    # a body spinning in place (no linear velocity): its collider's far end moves at |omega| * reach
    reach = max(np.linalg.norm(e - table.body_com[3]) for e in table.capsules[3].endpoints) + table.capsules[3].radius
    limit = cfg.blowup_speed_heights_per_s * table.height
    spin = still.copy()
    spin[3, 3:] = [0.0, 1.5 * limit / reach, 0.0]
    reason = detect_blowup(table, pos, spin, pos, cfg)
    assert reason is not None and "runaway energy" in reason and table.body_names[3] in reason
    spin[3, 3:] = [0.0, 0.5 * limit / reach, 0.0]
    assert detect_blowup(table, pos, spin, pos, cfg) is None
    with pytest.raises(ValueError, match="twists"):
        detect_blowup(table, pos, still[:, :3], pos, cfg)


def test_non_finite_targets_are_refused_naming_target_coords(table):
    # a NaN target used to reach the solver: a Newton overflow warning, then a "runaway energy" blow-up
    ref = reference_trajectory(table, walkish(table.rig))
    coords = ref.coords.copy()
    coords[2, 3, 1] = np.nan
    where = rf"at frame 2, body 4 \({table.body_names[4]!r}\), coordinate 1"
    with pytest.raises(ValueError, match=r"target_coords: must be finite, got nan " + where):
        track(table, ref, target_coords=coords)
    coords[2, 3, 1] = np.inf
    with pytest.raises(ValueError, match=r"target_coords: must be finite, got inf"):
        track(table, ref, target_coords=coords)


def test_motions_not_sampled_at_their_fps_are_refused(table):
    """The controller plays one frame per 1 / fps: a clip whose times say otherwise used to run at another speed
    (13 samples over 0.8 s with fps 30 ran in 0.4 s)."""
    motion = walkish(table.rig, frames=25)  # 0.8 s at 30 fps
    half = motion.sample(np.linspace(0.0, motion.duration, 13))  # the same 0.8 s, frames 1/15 s apart, fps 30
    assert half.fps == 30.0 and not half.is_uniform()
    message = r"motion 'walkish': times are not uniformly sampled at its fps \(30/s.*motion\.resample\(fps\)"
    for run in (
        lambda m: reference_trajectory(table, m),
        lambda m: track(table, m),
        lambda m: project(table, m, None, ProjectionConfig(samples=2, iterations=1, passes=1, ilc_passes=0)),
    ):
        with pytest.raises(ValueError, match=message):
            run(half)
    # the remedy the message names: resampled at 15 fps the clip plays in its own 0.8 s
    res = track(table, half.resample(15.0))
    assert res.blowup is None
    np.testing.assert_allclose(res.sim_time_s, motion.duration, rtol=1e-12)
    # uniform clips that do not start at 0 s (a slice) are fine
    assert reference_trajectory(table, motion.slice(5, 9)).frame_count == 4


def test_a_single_frame_is_refused_not_reported_as_a_success(table):
    """One frame stepped nothing: the metrics said success with no simulated time."""
    one = walkish(table.rig, frames=25).slice(0, 1)
    for run in (
        lambda m: track(table, m),
        lambda m: project(table, m, None, ProjectionConfig(samples=2, iterations=1, passes=1, ilc_passes=0)),
    ):
        with pytest.raises(ValueError, match=r"^reference 'walkish': 1 frame\(s\), nothing to simulate"):
            run(one)


@pytest.mark.parametrize(
    ("tracking", "projection", "message"),
    [
        (TrackingConfig(solver=SolverConfig(max_dt_s=0.0)), None, r"SolverConfig\.max_dt_s: must be > 0"),
        (TrackingConfig(contact=ContactConfig(friction=-1.0)), None, r"ContactConfig\.friction: must be >= 0"),
        (TrackingConfig(fall_height_fraction=float("nan")), None, r"TrackingConfig\.fall_height_fraction: must be a"),
        (None, ProjectionConfig(samples=1), r"ProjectionConfig\.samples: must be >= 2"),
        (None, ProjectionConfig(temperature=float("nan")), r"ProjectionConfig\.temperature: must be a finite"),
        # wrong types and choices used to run silently (2.5 iterations, a truthy string) or fail deep inside
        (TrackingConfig(solver=SolverConfig(iterations=2.5)), None, r"SolverConfig\.iterations: must be an integer"),
        (
            TrackingConfig(solver=SolverConfig(solver="mujoco")),
            None,
            r"SolverConfig\.solver: must be 'steel', 'featherstone' or 'xpbd', got 'mujoco'",
        ),
        (TrackingConfig(solver=SolverConfig(device="gpu")), None, r"SolverConfig\.device: must be 'cpu', 'cuda'"),
        (TrackingConfig(velocity_targets="no"), None, r"TrackingConfig\.velocity_targets: must be True or False"),
        (TrackingConfig(contact=ContactConfig(friction="1.0")), None, r"ContactConfig\.friction: must be a number"),
        (
            TrackingConfig(root_assist=RootAssistConfig(enabled="yes")),
            None,
            r"RootAssistConfig\.enabled: must be True or False, got 'yes'",
        ),
        (TrackingConfig(solver="steel"), None, r"TrackingConfig\.solver: must be a SolverConfig, got 'steel'"),
        (None, ProjectionConfig(samples=8.0), r"ProjectionConfig\.samples: must be an integer, got 8\.0"),
        (None, ProjectionConfig(seed=-1), r"ProjectionConfig\.seed: must be >= 0"),
        # from a review: 2**32 + 16 iterations ran as 16 (int32), a tilt of 180+ never detected a fall, a negative
        # ILC gain pushed the error the wrong way
        (
            TrackingConfig(solver=SolverConfig(iterations=2**32 + 16)),
            None,
            r"SolverConfig\.iterations: must be at most 2147483647, got 4294967312",
        ),
        (
            TrackingConfig(solver=SolverConfig(constraint_capacity=2**31)),
            None,
            r"SolverConfig\.constraint_capacity: must be at most 2147483647",
        ),
        (TrackingConfig(fall_tilt_deg=720.0), None, r"TrackingConfig\.fall_tilt_deg: must be < 180 deg, got 720"),
        (None, ProjectionConfig(ilc_gain=-1.0), r"ProjectionConfig\.ilc_gain: must be in \[0, 1\], got -1"),
        (None, ProjectionConfig(ilc_gain=5.0), r"ProjectionConfig\.ilc_gain: must be in \[0, 1\]"),
    ],
)
def test_unusable_settings_are_refused_before_simulating(table, tracking, projection, message):
    # max_dt_s 0 divided by zero, friction -1 and NaN temperatures ran silently, samples 1 became 2 silently
    motion = walkish(table.rig)
    with pytest.raises(ValueError, match=message):
        if projection is None:
            track(table, motion, tracking)
        else:
            project(table, motion, None, projection)


def test_root_assist_is_off_by_default_and_reports_its_force(table):
    motion = walkish(table.rig)
    assert track(table, motion).root_assist is None
    cfg = TrackingConfig()
    cfg.root_assist = dataclasses.replace(cfg.root_assist, enabled=True)
    lifted = sim.Motion(30.0, motion.root_translations + np.array([0.0, 0.0, 0.1]), motion.rotations)
    res = track(table, lifted, cfg)
    assist = res.root_assist
    assert assist is not None and assist["mean_force_n"] > 0
    assert assist["max_force_body_weights"] <= cfg.root_assist.max_force_body_weights + 1e-4


def test_projection_reports_the_root_assist_of_the_committed_frames():
    """Each window's rollout summed the assist over all its frames, and the projection added those sums up while
    dividing by the committed steps only: the mean came out ~window/commit times too large, above the max."""
    rig = table_quadruped()
    motion = walkish(rig, frames=25)
    lifted = sim.Motion(30.0, motion.root_translations + np.array([0.0, 0.0, 0.05]), motion.rotations)
    ch = build_character(rig, motion)
    ref = reference_trajectory(ch, lifted)
    tracking = TrackingConfig(root_assist=RootAssistConfig(enabled=True))
    one = dict(samples=4, iterations=1, ilc_passes=0, passes=1, rollout_batches=1, threads=1)
    a = project(ch, ref, tracking, ProjectionConfig(window_frames=12, commit_frames=4, **one)).root_assist
    assert 0.0 < a["mean_force_n"] <= a["max_force_n"]


@pytest.mark.parametrize("frame", [1, 20])
def test_projection_root_assist_leaves_out_the_window_that_blew_up(table, frame):
    """A committed window that blows up is cut at the blow-up frame, but its assist force (summed over all its
    committed frames) was added before the check: a blow-up at frame 1 reported a mean of 1.9 body weights against
    a cap (and max) of 0.5. The report covers the windows committed before it."""
    ref = reference_trajectory(table, walkish(table.rig))
    coords = ref.coords.copy()
    coords[frame:] += 20.0

    def wild(m: sim.Motion) -> sim.Motion:
        rot = table.body_rotations_from_coordinates(ref.body_rot[:, 0], coords)
        pos = table.body_positions_from_rotations(ref.body_pos[:, 0], rot)
        return table.motion_from_bodies(pos, rot, ref.fps, name="wild")

    tracking = TrackingConfig(root_assist=RootAssistConfig(enabled=True))
    cfg = ProjectionConfig(samples=2, iterations=1, passes=1, ilc_passes=0, threads=1, rollout_batches=1)
    pr = project(table, ref, tracking, cfg=cfg, target_filter=wild)
    assert pr.blowup is not None and pr.blowup.frame == frame
    a = pr.root_assist
    cap = tracking.root_assist.max_force_body_weights
    assert a["max_force_body_weights"] <= cap + 1e-4
    assert a["mean_force_body_weights"] <= a["max_force_body_weights"] + 1e-9
    if frame == 1:  # nothing was committed before the first window
        assert a["mean_force_n"] == 0.0 and a["max_force_n"] == 0.0
    else:
        assert a["mean_force_n"] > 0.0


def test_rollout_reports_a_blown_world_as_infinite_cost(table):
    """A world whose state went NaN got a finite cost (1e30 per frame): the planner's exclusion of blown rollouts
    never fired, and the huge cost flattened the sampling weights of all the others to uniform."""
    from sim.physics.newton_model import CharacterSimulation
    from sim.physics.tracking import initial_state

    ref = reference_trajectory(table, walkish(table.rig))
    F, C = ref.frame_count, table.dof_count
    sim_ = CharacterSimulation(table, ref.fps, F, 3, SolverConfig(capture=False),
                               cost_reference=(ref.body_pos, ref.body_rot, ref.com_vel))  # fmt: skip
    sim_.set_state(**initial_state(ref))
    q0, qd0 = sim_.joint_state()
    table_q = np.repeat(ref.coords.reshape(F, 1, C), 3, axis=1)
    clean = sim_.rollout(table_q, np.zeros_like(table_q), q0, qd0, 0, 8, 4)["cost"]
    bad = table_q.copy()
    bad[2, 1] = np.nan
    cost = sim_.rollout(bad, np.zeros_like(bad), q0, qd0, 0, 8, 4)["cost"]
    assert np.isfinite(clean).all() and cost[1] == np.inf
    np.testing.assert_array_equal(cost[[0, 2]], clean[[0, 2]])


def test_steady_realtime_factor_counts_the_frames_stepped_before_a_blowup(table, monkeypatch):
    """After a blow-up at frame f the frames 2..f were timed but f - 2 were counted (a 2/3 understatement at f = 4).
    A fake clock advancing 1 s per frame makes the factor exactly (1 / fps) / 1 s."""
    import types

    from sim.physics import newton_model, tracking

    clock = [0.0]
    step = newton_model.CharacterSimulation.step_frame

    def timed_step(self):
        step(self)
        clock[0] += 1.0

    monkeypatch.setattr(newton_model.CharacterSimulation, "step_frame", timed_step)
    monkeypatch.setattr(tracking, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))
    ref = reference_trajectory(table, walkish(table.rig))
    coords = ref.coords.copy()
    coords[5] += 1.0e3
    for target in (None, coords):
        res = track(table, ref, target_coords=target)
        assert (res.blowup is None) == (target is None)
        assert res.info["steady_realtime_factor"] == pytest.approx(1.0 / ref.fps, rel=1e-9)


def test_root_assist_damps_the_root_origin_velocity():
    """Newton's body_qd holds the centre of mass's linear velocity; the assist's reference velocity is the root
    origin's. A root spinning about its origin exactly as the reference does (origin at rest, centre of mass
    0.2 m off the origin on a circle) needs no wrench; comparing the COM velocity with the origin's pushed it with
    kd x |omega x r| (here 2 x 3 x 0.2 = 1.2 N)."""
    import warp as wp

    from sim.physics import _tracking_kernels as K

    wp.init()
    d = "cpu"
    omega, com_local, kd = np.array([0.0, 0.0, 3.0]), np.array([0.2, 0.0, 0.0]), 2.0
    vec = lambda a: wp.array(np.asarray(a, np.float32).reshape(-1, 3), dtype=wp.vec3, device=d)  # noqa: E731
    pose = wp.array([wp.transform(wp.vec3(0.0, 0.0, 1.0), wp.quat_identity())], dtype=wp.transform, device=d)
    v_com = np.cross(omega, com_local)
    twist = wp.array([wp.spatial_vector(*v_com, *omega)], dtype=wp.spatial_vector, device=d)
    ref_rot = wp.array([wp.quat_identity()] * 2, dtype=wp.quat, device=d)
    f_out = wp.zeros(1, dtype=wp.spatial_vector, device=d)
    f_sum, f_max = wp.zeros(1, dtype=wp.float32, device=d), wp.zeros(1, dtype=wp.float32, device=d)
    wp.launch(
        K.root_assist_kernel,
        dim=1,
        inputs=[wp.zeros(1, dtype=wp.int32, device=d), 1, 2, vec([[0, 0, 1.0]] * 2), ref_rot, vec(np.zeros((2, 3))),
                vec([omega] * 2), pose, twist, vec(com_local), 1, 10.0, kd, 1.0, 0.1, 1e3, 1e3],
        outputs=[f_out, f_sum, f_max],
        device=d,
    )  # fmt: skip
    np.testing.assert_allclose(f_out.numpy()[0], 0.0, atol=1e-6)
    assert f_max.numpy()[0] < 1e-6


def test_root_assist_reference_rates_are_centred_on_their_frame(table):
    """The assist damps towards the reference's root velocity and angular velocity at frame f: both central
    differences (the angular one was a forward difference, half a frame late: 1.5 rad/s off on a 9.4 rad/s yaw)."""
    from sim.physics import CharacterSimulation, RootAssistConfig

    fps, frames = 30.0, 31
    t = np.arange(frames) / fps
    yaw = np.sin(3 * np.pi * t)
    rot = axis_angle_to_quat(yaw[:, None] * [0.0, 0.0, 1.0])
    pos = np.stack([np.sin(3 * np.pi * t), 0 * t, 0.3 + 0 * t], axis=1)
    sim_ = CharacterSimulation(table, fps, frames, root_assist=RootAssistConfig(enabled=True),
                               root_reference=(pos, rot))  # fmt: skip
    vel, omega = sim_._assist_ref[2].numpy(), sim_._assist_ref[3].numpy()
    inner = slice(1, -1)
    true_rate = 3 * np.pi * np.cos(3 * np.pi * t)
    # central differences of a sine at 30 fps: within 2% of its amplitude (a half-frame lag is 15%)
    np.testing.assert_allclose(vel[inner, 0], true_rate[inner], atol=0.02 * 3 * np.pi)
    np.testing.assert_allclose(omega[inner, 2], true_rate[inner], atol=0.02 * 3 * np.pi)


def test_target_filter_hook(table):
    motion = walkish(table.rig)
    plain = track(table, motion)
    same = track(table, motion, target_filter=lambda m: m)
    np.testing.assert_allclose(same.target_coords, plain.target_coords, atol=1e-9)
    np.testing.assert_allclose(same.body_pos, plain.body_pos, atol=1e-6)
    rest = table.rig.rest_rotations

    def freeze(m: sim.Motion) -> sim.Motion:
        return sim.Motion(m.fps, m.root_translations, np.repeat(rest[None], m.frame_count, 0))

    frozen = track(table, motion, target_filter=freeze)
    rest_coords = table.joint_coordinates(table.body_transforms(freeze(motion))[1])
    np.testing.assert_allclose(frozen.target_coords, rest_coords, atol=1e-9)

    # the projection commits the filter's output too (its learning passes, sample bounds and offset penalty pulled
    # the targets back towards the reference: 13.6 of the 14.3 deg between reference and filter output)
    cfg = ProjectionConfig(samples=4, iterations=2, passes=1, threads=1)
    projected = project(table, motion, cfg=cfg, target_filter=freeze)
    np.testing.assert_allclose(projected.target_coords, rest_coords, atol=1e-9)
    assert np.abs(table.joint_coordinates(table.body_transforms(motion)[1]) - rest_coords).max() > np.radians(10)
    plain, same = project(table, motion, cfg=cfg), project(table, motion, cfg=cfg, target_filter=lambda m: m)
    np.testing.assert_allclose(same.target_coords, plain.target_coords, atol=1e-6)
    np.testing.assert_allclose(same.body_pos, plain.body_pos, atol=1e-5)


def test_projection_counts_simulated_time_like_track_on_a_blowup(table):
    """A blow-up at frame k: track reports k frames simulated (the blown-up one was stepped, then dropped), the
    projection reported k - 1."""
    ref = reference_trajectory(table, walkish(table.rig))
    coords = ref.coords.copy()
    coords[12] += 1.0e3

    def wild(m: sim.Motion) -> sim.Motion:  # the filter injects the wild target the projection's plan lacks
        rot = table.body_rotations_from_coordinates(ref.body_rot[:, 0], coords)
        pos = table.body_positions_from_rotations(ref.body_pos[:, 0], rot)
        return table.motion_from_bodies(pos, rot, ref.fps, name="wild")

    cfg = ProjectionConfig(samples=2, iterations=1, passes=1, ilc_passes=0, threads=1)
    pr = project(table, ref, cfg=cfg, target_filter=wild)
    pd = track(table, ref, target_coords=coords)
    assert pr.blowup is not None and pd.blowup is not None
    assert len(pr.body_pos) == pr.blowup.frame
    assert pr.sim_time_s == pytest.approx(pr.blowup.frame / ref.fps)
    assert pd.sim_time_s == pytest.approx(pd.blowup.frame / ref.fps)


def test_identity_filter_keeps_targets_beyond_ninety_degrees(table):
    """Coordinates read back from rotations land on |y| <= 90 deg: an identity filter turned a (0, 100, 0) deg
    target into (-180, 80, -180) deg, the same rotation, which the PD drives reach by swinging X and Z half a turn.
    Targets the filter leaves alone come back as they went in, whole turns and the Euler twin included."""
    from sim.physics.tracking import apply_target_filter

    ref = reference_trajectory(table, walkish(table.rig, frames=6))
    coords = ref.coords.copy()
    coords[:, 0, 1] = np.radians(100.0)
    coords[:, 1, 0] = np.radians(-170.0)
    coords[:, 2, 2] = np.radians(200.0)  # beyond a half turn
    out = apply_target_filter(table, ref, coords, lambda m: m)
    np.testing.assert_allclose(out, coords, atol=1e-9)
    # the filter's rotations are kept: the coordinates read back describe the same rotations as its output
    q_in = table.body_rotations_from_coordinates(ref.body_rot[:, 0], coords)
    q_out = table.body_rotations_from_coordinates(ref.body_rot[:, 0], out)
    np.testing.assert_allclose(np.abs((q_in * q_out).sum(-1)), 1.0, atol=1e-9)


def test_projection_beats_pd_on_body_error(table):
    rig = table.rig
    motion = walkish(rig, frames=24)
    # a lighter-gain character tracks poorly with plain PD: room for the projection to improve
    ch = build_character(rig, motion, CharacterConfig(stiffness_hz=4.0))
    ref = reference_trajectory(ch, motion)
    pd = track(ch, ref)
    cfg = ProjectionConfig(samples=8, iterations=2, window_frames=8, commit_frames=4, ilc_passes=0, passes=2)
    pr = project(ch, ref, TrackingConfig(), cfg)
    assert pr.ok and pd.blowup is None

    def err(r):
        return np.linalg.norm(r.body_pos - ref.body_pos[: len(r.body_pos)], axis=-1).mean()

    assert err(pr) < err(pd)
    assert pr.info["passes"] == 2
    assert pr.info["pass_fell_frames"] == [None, None]
    np.testing.assert_allclose(err(pr) / ch.height, min(pr.info["pass_errors"]), rtol=1e-9)  # the best sweep
    again = project(ch, ref, TrackingConfig(), cfg)
    np.testing.assert_array_equal(again.body_pos, pr.body_pos)  # seeded: reproducible


def test_projection_returns_the_best_pass_that_stayed_up():
    """The lowest error alone returned a Fox Run pass that fell at frame 65 of 84 while another pass stayed up: a
    pass that fell is returned only when every pass fell, one that blew up only when every pass blew up."""
    from sim.physics.projection import _best_sweep

    assert _best_sweep([0.27, 0.28, 0.42], [False, False, False], [True, False, False]) == 1
    assert _best_sweep([0.27, 0.28, 0.42], [False, False, False], [False, False, False]) == 0
    assert _best_sweep([0.30, 0.28, 0.42], [False, False, False], [True, True, True]) == 1  # all fell
    assert _best_sweep([0.10, 0.28, 0.42], [True, False, False], [False, True, False]) == 2  # blew up: never chosen
    assert _best_sweep([0.10, 0.28, 0.42], [True, False, False], [False, True, True]) == 1  # fallen over blown up
    assert _best_sweep([0.10, 0.05], [True, True], [False, False]) == 1  # all blew up: lowest error


class _ScriptedRollouts:
    """A stand-in for the batched simulation whose rollouts are scripted: every world follows the reference at rest,
    costs ``cost`` (W,), and the worlds in ``runaway`` move their bodies at 1 km/s (a blow-up by speed). A rollout
    whose worlds all have the same targets (the projection re-simulating a target filter's output) turns NaN from
    frame ``filtered_nan_from`` on, when it is given."""

    def __init__(self, ref, cost, runaway=(), filtered_nan_from=None):
        self.ref, self.cost, self.runaway = ref, np.asarray(cost, dtype=np.float64), list(runaway)
        self.world_count, self.filtered_nan_from = len(self.cost), filtered_nan_from

    def rollout(self, table_q, table_qd, q0, qd0, f0, frames, record):
        ref, W = self.ref, self.world_count
        seg = slice(f0 + 1, f0 + record + 1)
        B = ref.body_pos.shape[1]
        calm = np.concatenate([ref.body_pos[seg], ref.body_rot[seg], np.zeros((record, B, 6))], axis=-1)
        states = np.repeat(calm[:, None], W, axis=1)
        cost = self.cost.copy()
        if self.filtered_nan_from is not None and np.all(table_q == table_q[:, :1]):
            states[self.filtered_nan_from - f0 - 1 :] = np.nan
            cost[:] = np.inf
        else:
            states[:, self.runaway, :, 7] = 1.0e3  # linear velocity x
        return {"states": states, "q": q0.copy(), "qd": qd0.copy(), "cost": cost,
                "assist_sum": np.zeros(W), "assist_max": np.zeros(W)}  # fmt: skip


def test_projection_commits_the_cheapest_sample_that_does_not_blow_up(table):
    """The cost does not see a blow-up by speed: when the cheapest sample of a window ran away the sweep ended there
    though another sample stayed calm. It now commits the cheapest calm one, and ends only when none is."""
    from sim.physics._checkpoint import Sweep
    from sim.physics.projection import _mppi_pass

    ref = reference_trajectory(table, walkish(table.rig, frames=9))
    F, B, C = ref.frame_count, ref.body_pos.shape[1], table.dof_count
    cfg = ProjectionConfig(samples=3, iterations=1, window_frames=F, commit_frames=F, ilc_passes=0, passes=1,
                           offset_weight=0.0)  # fmt: skip

    def sweep_with(rollouts, target_filter=None):
        sw = Sweep(0, ref.coords.reshape(F, C).copy(), np.zeros(C), np.zeros(C), np.zeros((F, B, 3)),
                   np.zeros((F, B, 4)), np.zeros((F, B, 6)))  # fmt: skip
        rng = np.random.default_rng(0)
        _mppi_pass(table, ref, rollouts, TrackingConfig(), cfg, sw, target_filter, rng, None, 0)
        return sw

    sw = sweep_with(_ScriptedRollouts(ref, [0.0, 2.0, 1.0], runaway=[0]))
    assert sw.blowup is None and sw.f0 == F - 1
    assert sw.window_costs == [1.0]  # world 2, the cheapest calm one
    np.testing.assert_allclose(sw.pos[1:], ref.body_pos[1:])
    sw = sweep_with(_ScriptedRollouts(ref, [0.0, 2.0, 1.0], runaway=[0, 1, 2]))
    assert sw.blowup is not None and sw.blowup[0] == 1 and "runaway energy" in sw.blowup[1]
    # the filtered targets' blow-up is reported at its first non-finite frame (it was the window's first, frame 1)
    sw = sweep_with(_ScriptedRollouts(ref, [0.0, 2.0, 1.0], filtered_nan_from=5), target_filter=lambda m: m)
    assert sw.blowup == (5, "the filtered targets of the window blew up")


def test_mppi_weights_are_not_flattened_by_one_outlier():
    """The weights' cost unit was max - min: one sample that fell (cost 1e6 against 0..9) made the cheapest weigh
    about as much as the median, so the window's mean went wherever the noise averaged."""
    from sim.physics.projection import _mppi_weights

    cost = np.arange(10.0)
    plain = _mppi_weights(cost, 0.3)
    spoiled = _mppi_weights(np.append(cost, 1.0e6), 0.3)
    assert plain.sum() == pytest.approx(1.0) and spoiled.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(spoiled[:10], plain, rtol=1e-9)  # the outlier is left out of the spread
    assert spoiled[-1] < 1e-12 and np.all(np.diff(plain) < 0.0)
    w = _mppi_weights(np.array([np.inf, 1.0, 2.0]), 0.3)
    assert w[0] == 0.0 and w[1] > w[2] > 0.0 and w.sum() == pytest.approx(1.0)


def test_projection_results_do_not_depend_on_the_thread_count(table):
    """The rollout batches step in parallel threads; the floats depend on the batch split only."""
    rig = table.rig
    motion = walkish(rig, frames=16)
    ref = reference_trajectory(table, motion)
    runs = {}
    for threads in (1, 2, 3):
        cfg = ProjectionConfig(samples=7, iterations=2, window_frames=8, commit_frames=4, ilc_passes=0, passes=1,
                               rollout_batches=3, threads=threads)  # fmt: skip
        runs[threads] = project(table, ref, TrackingConfig(), cfg)
        assert runs[threads].info["rollout_batches"] == 3 and runs[threads].info["threads"] == threads
    for threads in (2, 3):
        np.testing.assert_array_equal(runs[threads].body_pos, runs[1].body_pos)
        np.testing.assert_array_equal(runs[threads].target_coords, runs[1].target_coords)


def test_simulation_building_blocks_check_their_settings():
    """The lower-level entry points (as the benchmarks use them) check their settings before building anything."""
    from sim.physics import CharacterSimulation, build_newton_model, contact_material

    ch = build_character(table_quadruped())
    with pytest.raises(ValueError, match=r"SolverConfig\.iterations"):
        CharacterSimulation(ch, 30.0, 2, solver=SolverConfig(iterations=2.5))
    with pytest.raises(ValueError, match=r"ContactConfig\.friction"):
        build_newton_model(ch, contact=ContactConfig(friction=-1.0))
    with pytest.raises(ValueError, match=r"ContactConfig\.penalty_stiffness_per_kg"):
        contact_material(ch, ContactConfig(penalty_stiffness_per_kg=float("nan")))


def _free_fall(ch, solver: SolverConfig, frames: int = 5):
    """``ch`` released 1 m up in its rest pose with zero targets: (joint state, body state) after ``frames``."""
    from sim.physics.newton_model import CharacterSimulation

    C = ch.dof_count
    sim_ = CharacterSimulation(ch, 30.0, frames + 1, 1, solver)
    sim_.set_state(np.array([0.0, 0.0, 1.0]), np.array([0.0, 0.0, 0.0, 1.0]), np.zeros(C), np.zeros(3), np.zeros(3),
                   np.zeros(C), 0)  # fmt: skip
    for _ in range(frames):
        sim_.step_frame()
    return sim_.joint_state(), sim_.body_state()


def test_xpbd_joint_state_follows_the_bodies(table):
    """XPBD steps the bodies only: joint_state() returned the state the rollout began in (root 1 m up, at rest after
    5 frames of free fall), so every projection window restarted from the previous window's start."""
    (q, qd), (pos, _, vel) = _free_fall(table, SolverConfig(solver="xpbd", capture=False))
    fall = 0.5 * 9.81 * (5 / 30.0) ** 2  # 0.136 m: nothing touches the ground yet
    assert pos[0, 0, 2] == pytest.approx(1.0 - fall, abs=0.01)
    assert q[0, 2] == pytest.approx(pos[0, 0, 2], abs=1e-5)
    assert qd[0, 2] == pytest.approx(vel[0, 0, 2], abs=1e-4) and qd[0, 2] < -1.5


def test_featherstone_default_step_is_stable(table):
    """Featherstone's explicit PD went NaN in the first frame of free fall at the common 1/120 s step (and at the
    field notes' 5e-4 s): its default step is 1e-4 s."""
    solver = SolverConfig(solver="featherstone", capture=False)
    assert solver.step_limit_s() == pytest.approx(1e-4)
    (q, _), (pos, _, _) = _free_fall(table, solver, frames=3)
    assert np.isfinite(q).all() and np.isfinite(pos).all()
    assert pos[0, 0, 2] == pytest.approx(1.0 - 0.5 * 9.81 * 0.1**2, abs=0.01)


def test_one_sided_joint_limit_reaches_the_model(table):
    """A joint axis with one finite bound lost it in the model (both had to be finite) while physics.usda kept it."""
    from sim.physics.newton_model import build_newton_model

    ch = dataclasses.replace(table, limit_lower=table.limit_lower.copy(), limit_upper=table.limit_upper.copy())
    ch.limit_lower[1, 0], ch.limit_upper[1, 0] = -np.inf, 0.1
    model = build_newton_model(ch, solver=SolverConfig(capture=False))
    lower, upper = model.joint_limit_lower.numpy(), model.joint_limit_upper.numpy()
    dof = 6  # the free root's 6 dofs come first, then body 1's three axes
    assert upper[dof] == pytest.approx(0.1) and lower[dof] <= -1e9
