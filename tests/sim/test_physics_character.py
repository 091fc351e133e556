"""Physics character builder and reference preparation (NumPy only, no Newton)."""

from __future__ import annotations

import dataclasses
import re
import typing
import warnings

import numpy as np
import pytest
from physics_rigs import hold, table_quadruped, tuning_fork, walkish

import sim
from sim.physics import (
    CharacterConfig,
    ContactConfig,
    ProjectionConfig,
    ReferenceConfig,
    RootAssistConfig,
    SolverConfig,
    TrackingConfig,
    build_character,
    euler_xyz_to_quat,
    loop_motion,
    prepare_reference,
    quat_to_euler_xyz,
    root_motion_from_contacts,
    scale_motion,
    scale_rig,
)
from sim.physics._capsules import Capsule, capsule_mass_properties, fit_capsule
from sim.rotations import axis_angle_to_quat, quat_identity, quat_multiply, quat_normalize, quat_rotate

ROT_TOL = 1e-9
POS_TOL = 1e-9
MASS_RTOL = 1e-9
INERTIA_MC_RTOL = 0.02
"""Monte-Carlo inertia of a solid capsule (200k samples) vs the closed form."""


def _rot_close(a, b, atol=ROT_TOL):
    np.testing.assert_allclose(np.abs(np.sum(a * b, axis=-1)), 1.0, atol=atol)


def test_euler_roundtrip_and_convention(rng):
    e = rng.uniform(-1.2, 1.2, size=(50, 3))
    q = euler_xyz_to_quat(e)
    np.testing.assert_allclose(quat_to_euler_xyz(q), e, atol=1e-10)
    # R = Rx(a) Ry(b) Rz(c): compare with products of axis rotations
    rx = axis_angle_to_quat(e[:, :1] * [1.0, 0.0, 0.0])
    ry = axis_angle_to_quat(e[:, 1:2] * [0.0, 1.0, 0.0])
    rz = axis_angle_to_quat(e[:, 2:] * [0.0, 0.0, 1.0])
    _rot_close(q, quat_multiply(quat_multiply(rx, ry), rz))


def test_capsule_fit_bounds_points_and_mass_properties(rng):
    pts = rng.normal(size=(400, 3)) * [0.2, 0.05, 0.03]
    cap = fit_capsule(pts, 1.0, 1e-3)
    a, b = cap.endpoints
    t = np.clip((pts - a) @ (b - a) / max((b - a) @ (b - a), 1e-12), 0.0, 1.0)
    dist = np.linalg.norm(pts - (a + t[:, None] * (b - a)), axis=1)
    assert dist.max() <= cap.radius + 1e-9  # quantile 1 bounds every point
    assert abs(cap.axis[0]) > 0.95  # principal direction
    # closed-form mass and inertia vs Monte-Carlo integration of the solid capsule
    c = Capsule(np.array([0.1, 0.0, 0.0]), np.array([0.0, 0.0, 1.0]), 0.15, 0.05)
    m, com, inertia = capsule_mass_properties(c, 1000.0)
    np.testing.assert_allclose(m, 1000.0 * c.volume(), rtol=MASS_RTOL)
    np.testing.assert_allclose(com, c.center, atol=POS_TOL)
    s = rng.uniform([-0.05, -0.05, -0.2], [0.05, 0.05, 0.2], size=(200_000, 3))
    zc = np.clip(s[:, 2], -0.15, 0.15)
    inside = np.hypot(s[:, 0], s[:, 1]) ** 2 + (s[:, 2] - zc) ** 2 <= 0.05**2
    s = s[inside]
    sq = s**2
    mc = m / len(s) * np.array([sq[:, 1] + sq[:, 2], sq[:, 0] + sq[:, 2], sq[:, 0] + sq[:, 1]]).sum(axis=1)
    np.testing.assert_allclose(np.diag(inertia), mc, rtol=INERTIA_MC_RTOL)


def test_bodies_merge_leaf_bones_and_mass_from_density():
    rig = table_quadruped()
    ch = build_character(rig, cfg=CharacterConfig(density_kg_m3=900.0))
    names = ch.body_names
    assert "head_end" not in names and not any(n.endswith("_tip") for n in names)  # leaf bones merged
    assert names[0] == "torso" and ch.body_count == 13
    assert ch.joint_body[rig.joint_index("head_end")] == 0
    vol = sum(c.volume() for c in ch.capsules)
    np.testing.assert_allclose(ch.total_mass, 900.0 * vol, rtol=MASS_RTOL)
    ch2 = build_character(rig, cfg=CharacterConfig(total_mass_kg=12.0))
    np.testing.assert_allclose(ch2.total_mass, 12.0, rtol=MASS_RTOL)
    # the four feet are the ground-contact bodies; parent/child pairs never collide
    assert [names[b] for b in np.flatnonzero(ch.support_body)] == [f"leg{i}_foot" for i in range(4)]
    assert set(ch.adjacent_pairs()) <= set(ch.collision_filter_pairs)


def _skinned_box(extents, open_face: bool = False) -> sim.Rig:
    """A two-joint rig skinned to a closed box mesh (split at every face, as glTF splits UV seams; with
    ``open_face`` one face is missing), the joints at the box's x quarter points."""
    import trimesh

    box = trimesh.creation.box(extents)
    for _ in range(3):
        box = box.subdivide()
    faces = np.asarray(box.faces)
    if open_face:  # drop the +z face
        faces = faces[~np.all(box.vertices[faces][..., 2] > extents[2] / 2 - 1e-9, axis=1)]
    points = np.asarray(box.vertices)[faces].reshape(-1, 3)  # every triangle gets its own three vertices
    triangles = np.arange(len(points)).reshape(-1, 3)
    points = points + np.array([0.0, 0.0, extents[2] / 2])
    owner = (points[:, 0] > 0.0).astype(np.int64)
    mesh = sim.SkinnedMesh("box", points, triangles, owner[:, None], np.ones((len(points), 1)), joint_count=2)
    rest_t = np.array([[-extents[0] / 4, 0.0, extents[2] / 2], [extents[0] / 2, 0.0, 0.0]])
    return sim.Rig(["a", "b"], [-1, 0], rest_t, quat_identity((2,)), None, [mesh], name="box")


def test_a_ground_level_root_with_a_helper_branch_rides_on_the_pelvis_body():
    """A game-style rig (a root joint on the ground with the pelvis and a vertex-less IK helper as children) made the
    root a 0.4 g sphere on the floor, the floating base, with the torso hanging from it on a driven joint."""
    table = table_quadruped()
    world = table.rest_world_transforms()[0]
    names = ["root", *table.joint_names, "ik_foot_root"]
    parents = np.array([-1, *[p + 1 if p >= 0 else 0 for p in table.parents], 0])
    pos = np.concatenate([[[0.0, 0.0, 0.0]], world, [[0.0, 0.0, 0.0]]])
    rest_t = pos.copy()
    rest_t[1:] = pos[1:] - pos[parents[1:]]
    m = table.meshes[0]
    mesh = sim.SkinnedMesh("body", m.points, m.triangles, m.influence_joints + 1, m.influence_weights,
                           joint_count=len(names))  # fmt: skip
    rig = sim.Rig(names, parents, rest_t, quat_identity((len(names),)), None, [mesh], name="game_style")
    plain, branched = build_character(table, hold(table, 10)), build_character(rig, hold(rig, 10))
    assert branched.body_names == plain.body_names and branched.body_names[0] == "torso"
    np.testing.assert_allclose(branched.body_mass, plain.body_mass, rtol=1e-12)
    assert branched.joint_body[names.index("root")] == 0 and branched.joint_body[names.index("ik_foot_root")] == 0


def test_enclosed_volume_adds_closed_shells_of_either_winding():
    """Shells of opposite winding subtracted (a unit cube and an inside-out 0.5 m cube gave 0.875 m^3; two unit
    cubes of opposite windings cancelled to 'no volume', and the mass fell back to the colliders)."""
    import trimesh

    from sim.physics._mesh_volume import enclosed_volume

    cube = trimesh.creation.box((1.0, 1.0, 1.0))
    for size, expected in ((0.5, 1.125), (1.0, 2.0)):
        other = trimesh.creation.box((size, size, size))
        other.apply_translation((3.0, 0.0, 0.0))
        other.invert()
        both = trimesh.util.concatenate([cube, other])
        assert enclosed_volume(both.vertices, both.faces) == pytest.approx(expected, rel=1e-12)
    assert enclosed_volume(cube.vertices, cube.faces) == pytest.approx(1.0, rel=1e-12)


def test_mass_fills_the_skins_enclosed_volume():
    """The default mass is density x the volume the skin encloses (the box's exact volume, although its seams
    split every vertex), shared in proportion to the capsules; the capsules themselves, which overlap and bulge
    past the skin, hold more. An open skin falls back to the capsules' volume, with a note."""
    extents = (0.6, 0.1, 0.1)
    rig = _skinned_box(extents)
    ch = build_character(rig, cfg=CharacterConfig(density_kg_m3=900.0))
    np.testing.assert_allclose(ch.total_mass, 900.0 * np.prod(extents), rtol=MASS_RTOL)
    capsule_volume = np.array([c.volume() for c in ch.capsules])
    np.testing.assert_allclose(ch.body_mass / ch.total_mass, capsule_volume / capsule_volume.sum(), rtol=MASS_RTOL)
    assert any("enclosed volume" in n for n in ch.notes), ch.notes
    colliders = build_character(rig, cfg=CharacterConfig(density_kg_m3=900.0, mass_from="colliders"))
    np.testing.assert_allclose(colliders.total_mass, 900.0 * capsule_volume.sum(), rtol=MASS_RTOL)
    assert colliders.total_mass > 1.2 * ch.total_mass  # the capsules overstate the body's volume
    fixed = build_character(rig, cfg=CharacterConfig(total_mass_kg=3.0))  # a given total mass wins
    np.testing.assert_allclose(fixed.total_mass, 3.0, rtol=MASS_RTOL)
    open_skin = build_character(_skinned_box(extents, open_face=True), cfg=CharacterConfig(density_kg_m3=900.0))
    open_volume = sum(c.volume() for c in open_skin.capsules)
    np.testing.assert_allclose(open_skin.total_mass, 900.0 * open_volume, rtol=MASS_RTOL)
    assert any("not closed" in n for n in open_skin.notes), open_skin.notes
    # inverse bind matrices may carry a uniform scale (bind points in file units): the same skinned body, same mass
    ibm = rig.inverse_bind_matrices @ np.diag([0.01, 0.01, 0.01, 1.0])
    m = rig.meshes[0]
    cm_mesh = sim.SkinnedMesh("box", m.points * 100.0, m.triangles, m.influence_joints, m.influence_weights)
    cm = sim.Rig(rig.joint_names, rig.parents, rig.rest_translations, rig.rest_rotations, ibm, [cm_mesh], name="box")
    skinned = [sim.skin_motion(r, sim.Motion.rest(r))[0] for r in (cm, rig)]
    np.testing.assert_allclose(skinned[0], skinned[1], atol=POS_TOL)
    # its height is in metres too (it read the cm bind points: 100 times too tall, every bone 'too small' to be a
    # body, and the box built as one body)
    assert cm.height() == pytest.approx(rig.height(), rel=1e-9)
    scaled_ibm = build_character(cm, cfg=CharacterConfig(density_kg_m3=900.0))
    np.testing.assert_allclose(scaled_ibm.total_mass, ch.total_mass, rtol=1e-6)
    assert scaled_ibm.body_count == ch.body_count
    with pytest.raises(ValueError, match=r"CharacterConfig\.mass_from: must be 'mesh' or 'colliders'"):
        CharacterConfig(mass_from="skin").check()


def test_per_joint_settings_name_real_joints():
    """A joint limit for a joint the rig lacks is refused naming the setting; a density scale matching no body
    (a config shared between characters) is reported in the builder notes, and changes no mass."""
    rig = table_quadruped()
    with pytest.raises(ValueError, match=r"CharacterConfig\.joint_limits_deg\['knee'\]: rig 'table' has no joint"):
        build_character(rig, cfg=CharacterConfig(joint_limits_deg={"knee": (-10.0, 10.0)}))
    plain = build_character(rig)
    scaled = build_character(rig, cfg=CharacterConfig(density_scale={"wing": 0.5}))
    assert any("density_scale['wing']: matches no body" in n for n in scaled.notes), scaled.notes
    assert not any("density_scale" in n for n in plain.notes)
    np.testing.assert_array_equal(scaled.body_mass, plain.body_mass)


def test_fast_clips_are_resampled_to_the_frame_rate_cap():
    rig = table_quadruped()
    frames = 121  # 1 s at 120 fps
    t = np.arange(frames) / 120.0
    rot = np.repeat(rig.rest_rotations[None], frames, 0)
    rot[:, 1] = axis_angle_to_quat(np.outer(np.sin(2 * np.pi * t), [0.0, 0.4, 0.0]))
    motion = sim.Motion(120.0, np.repeat(rig.rest_translations[:1], frames, 0), rot)
    ref = prepare_reference(rig, motion, ReferenceConfig(root_motion="keep", ground="none"))
    assert ref.motion.fps == 30.0 and ref.motion.frame_count == 31  # same second, every 4th frame
    np.testing.assert_allclose(ref.motion.rotations[:, 1], rot[::4, 1], atol=1e-9)
    kept = prepare_reference(rig, motion, ReferenceConfig(root_motion="keep", ground="none", max_fps=200.0))
    assert kept.motion.fps == 120.0 and kept.motion.frame_count == frames
    explicit = prepare_reference(rig, motion, ReferenceConfig(root_motion="keep", ground="none", fps=60.0))
    assert explicit.motion.fps == 60.0


@pytest.mark.parametrize(("name", "feet"), [("biped", ["left_foot", "right_foot"]),  # alike: the skin is symmetric
                                            ("quadruped", ["front_left_toes", "hind_left_toes", "front_right_toes",
                                                           "hind_right_toes"])])  # fmt: skip
def test_legs_are_built_from_their_feet_up(name, feet):
    """A shin touching the ground above its foot was given a foot's sole collider: the biped's shin kept 13 of its
    42 cm and 0.5 kg (0.8% of the body); and the weight each leg carries in the gains was divided among every
    touching body (quadruped: 8 for 4 legs), not among the legs."""
    import sim.characters
    from sim.physics.character import support_feet

    rig, clips = sim.characters.build(name)
    ch = build_character(rig, clips["walk"])
    assert [ch.body_names[b] for b in np.flatnonzero(support_feet(ch.support_body, ch.body_parent))] == feet
    if name == "biped":
        for side in ("left", "right"):
            shin, foot = ch.body_names.index(f"{side}_shin"), ch.body_names.index(f"{side}_foot")
            assert ch.support_body[shin], "the shin does touch the ground band: only its collider was wrong"
            bone = np.linalg.norm(ch.reference_body_pos[foot] - ch.reference_body_pos[shin])
            cap = ch.capsules[shin]
            assert 2 * (cap.half_height + cap.radius) > 0.8 * bone
            assert ch.body_mass[shin] / ch.total_mass > 0.03  # de Leva: a shank is ~4.3%
    else:  # the load term of a hip: a quarter of the weight at the lever of its foot's contact
        unloaded = build_character(rig, clips["walk"], CharacterConfig(support_load=False))
        hip, toes = ch.body_names.index("hind_left_upper_leg"), ch.body_names.index("hind_left_toes")
        a, b = ch.capsule_world(ch.reference_body_pos, ch.reference_body_rot)
        low = a[toes] if a[toes, 2] < b[toes, 2] else b[toes]
        contact = low - np.array([0.0, 0.0, ch.capsule_radii[toes]])
        lever = np.linalg.norm(contact - ch.reference_body_pos[hip])
        omega = 2 * np.pi * ch.config.stiffness_hz
        added = (np.asarray(ch.stiffness[hip]) - np.asarray(unloaded.stiffness[hip])) / omega**2
        np.testing.assert_allclose(added, ch.total_mass * lever**2 / 4, rtol=1e-9)


def test_meshless_human_carries_its_mass_in_the_trunk():
    import sim.characters

    rig, _ = sim.characters.build("biped")
    bones = sim.Rig(rig.joint_names, rig.parents, rig.rest_translations, rig.rest_rotations, name="bones")
    ch = build_character(bones)
    assert "rig has no skinned mesh: colliders from bone capsules" in ch.notes
    mass = dict(zip(ch.body_names, ch.body_mass))
    legs = sum(m for n, m in mass.items() if any(k in n for k in ("leg", "foot", "thigh", "shin", "toe")))
    arms = sum(m for n, m in mass.items() if any(k in n for k in ("arm", "hand", "shoulder")))
    head = sum(m for n, m in mass.items() if "head" in n or "neck" in n)
    trunk = ch.total_mass - legs - arms - head
    # human segment shares (de Leva 1996): trunk 43%, legs 32%, arms 10%, head 7%; a capsule body is cruder,
    # but the trunk must dominate and the head must weigh something
    assert trunk / ch.total_mass > 0.35, mass
    assert head / ch.total_mass > 0.03, mass
    # at 1000 kg/m^3 a 1.76 m body of that build weighs tens of kilograms (length-scaled bones gave ~15 kg)
    assert 30.0 < ch.total_mass < 120.0, ch.total_mass


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: CharacterConfig(stiffness_hz=float("nan")), r"CharacterConfig\.stiffness_hz: must be a finite"),
        (lambda: CharacterConfig(total_mass_kg=-3.0), r"CharacterConfig\.total_mass_kg: must be > 0"),
        (lambda: CharacterConfig(collider_weight_threshold=1.5), r"collider_weight_threshold: must be in \[0, 1\]"),
        (lambda: CharacterConfig(density_scale={"ear": 0.0}), r"density_scale\['ear'\]: must be a positive"),
        (lambda: CharacterConfig(joint_limits_deg={"neck": (10.0, -10.0)}), r"joint_limits_deg\['neck'\]"),
        # an int key passed the check and failed in key.lower() while building (AttributeError)
        (lambda: CharacterConfig(density_scale={1: 2.0}), r"CharacterConfig\.density_scale: keys are .* got 1$"),
        (lambda: CharacterConfig(joint_limits_deg={3: (-1.0, 1.0)}), r"CharacterConfig\.joint_limits_deg: keys"),
    ],
)
def test_character_config_refuses_unusable_numbers(make, message):
    # NaN gains used to build a character whose first simulated frame blew up
    with pytest.raises(ValueError, match=message):
        build_character(table_quadruped(), cfg=make())


def test_reference_config_refuses_unusable_numbers():
    rig = table_quadruped()
    motion = hold(rig, 4)
    with pytest.raises(ValueError, match=r"ReferenceConfig\.fps: must be > 0"):
        prepare_reference(rig, motion, ReferenceConfig(fps=0.0))  # used to fall back to the clip's rate silently
    with pytest.raises(ValueError, match=r"ReferenceConfig\.centroid_velocity_smoothing_s: must be >= 0"):
        prepare_reference(rig, motion, ReferenceConfig(centroid_velocity_smoothing_s=-1.0))
    with pytest.raises(ValueError, match=r"target_height_m: must be a positive finite number, got nan"):
        prepare_reference(rig, motion, target_height_m=float("nan"))
    CharacterConfig(joint_limits_deg={"neck": (0.0, 0.0)}).check()  # equal limits lock a joint: allowed


CONFIG_CLASSES = (
    CharacterConfig,
    ContactConfig,
    SolverConfig,
    RootAssistConfig,
    TrackingConfig,
    ProjectionConfig,
    ReferenceConfig,
)


@pytest.mark.parametrize("cls", CONFIG_CLASSES, ids=lambda c: c.__name__)
def test_every_config_field_refuses_values_of_the_wrong_kind(cls):
    """Literal fields refuse values outside their choices, integer fields non-integers, flags non-booleans, number
    fields strings (the CLI's parser protected only the CLI: ``joint_limits="hard"`` built a character without
    limits, ``root_motion="yes"`` acted as "auto", ``iterations=2.5`` ran)."""
    cls().check()  # the defaults are valid
    hints = typing.get_type_hints(cls)
    tried = 0
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        optional = type(None) in typing.get_args(hint)
        base = next(a for a in typing.get_args(hint) if a is not type(None)) if optional else hint
        if typing.get_origin(base) is typing.Literal:
            choices = typing.get_args(base)
            for good in choices:
                dataclasses.replace(cls(), **{f.name: good}).check()
            bad, message = (
                "not-a-choice",
                "must be " + " or ".join([", ".join(map(repr, choices[:-1])), repr(choices[-1])]),
            )
            if len(choices) == 1:
                message = f"must be {choices[0]!r}"
        elif base is int:
            bad, message = 2.5, "must be an integer"
        elif base is bool:
            bad, message = "no", "must be True or False"
        elif base is float:
            bad, message = "0.5", "must be a number"
        else:
            continue
        with pytest.raises(ValueError, match=re.escape(f"{cls.__name__}.{f.name}: {message}, got {bad!r}")):
            dataclasses.replace(cls(), **{f.name: bad}).check()
        tried += 1
    assert tried >= 3


def test_bad_choices_are_refused_by_the_public_functions():
    rig = table_quadruped()
    motion = hold(rig, 4)
    for cfg, message in (
        (CharacterConfig(joint_limits="hard"), "CharacterConfig.joint_limits: must be 'motion' or 'none', got 'hard'"),
        (CharacterConfig(contact_colliders="box"), "CharacterConfig.contact_colliders: must be 'sole' or 'bounding'"),
        (CharacterConfig(mass_from="skin"), "CharacterConfig.mass_from: must be 'mesh' or 'colliders', got 'skin'"),
        (CharacterConfig(min_body_vertex_fraction="0.01"), "CharacterConfig.min_body_vertex_fraction: must be a"),
        (CharacterConfig(density_scale={"ear": "half"}), "CharacterConfig.density_scale['ear']: must be a positive"),
        (CharacterConfig(joint_limits_deg={"neck": 10.0}), "CharacterConfig.joint_limits_deg['neck']: need finite"),
    ):
        with pytest.raises(ValueError, match=re.escape(message)):
            build_character(rig, motion, cfg)
    for cfg, message in (
        (ReferenceConfig(root_motion="yes"), "ReferenceConfig.root_motion: must be 'auto', 'keep' or 'from_contacts'"),
        (ReferenceConfig(ground="floor"), "ReferenceConfig.ground: must be 'none', 'clip' or 'per_frame', got 'floor'"),
        (ReferenceConfig(ballistic_flight=1), "ReferenceConfig.ballistic_flight: must be True or False, got 1"),
    ):
        with pytest.raises(ValueError, match=re.escape(message)):
            prepare_reference(rig, motion, cfg)


def test_prepare_reference_refuses_bad_arguments_before_any_work():
    rig = table_quadruped()
    motion = hold(rig, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the looping warning came before the TypeError
        for loops in (2.5, 0, -1, "2", True):
            with pytest.raises(ValueError, match=re.escape(f"loops: must be a positive integer, got {loops!r}")):
                prepare_reference(rig, motion, loops=loops)
            with pytest.raises(ValueError, match=re.escape(f"loops: must be a positive integer, got {loops!r}")):
                loop_motion(motion, loops)
    with pytest.raises(ValueError, match=r"target_height_m: must be a positive finite number, got '0\.5'"):
        prepare_reference(rig, motion, target_height_m="0.5")  # was a NumPy ufunc TypeError
    with pytest.raises(ValueError, match=r"ground_height_m: must be a finite number, got nan"):
        prepare_reference(rig, motion, ground_height_m=float("nan"))
    assert prepare_reference(rig, motion, loops=np.int64(2), target_height_m=np.float32(0.5)).motion.frame_count > 4


def test_gains_scale_with_size():
    """One config serves any size: at scale s with equal density, inertias (and so gains) grow as s^5."""
    small = build_character(table_quadruped(0.5))
    big = build_character(table_quadruped(1.0))
    np.testing.assert_allclose(big.stiffness[1:], small.stiffness[1:] * 2.0**5, rtol=1e-6)
    np.testing.assert_allclose(big.body_mass, small.body_mass * 2.0**3, rtol=1e-9)
    assert np.all(small.stiffness[1:] > 0)


def _random_motion(rig, rng, frames=6, amplitude=0.4):
    rot = np.repeat(rig.rest_rotations[None], frames, 0)
    aa = rng.normal(size=(frames, rig.joint_count, 3)) * amplitude
    rot = quat_normalize(quat_multiply(rot, axis_angle_to_quat(aa)))
    root = rig.rest_translations[0] + rng.normal(size=(frames, 3)) * 0.05
    return sim.Motion(30.0, root, rot, name="random")


def test_coordinates_bodies_and_motion_roundtrip(rng):
    rig = table_quadruped()
    motion = _random_motion(rig, rng)
    ch = build_character(rig, motion)
    pos, rot = ch.body_transforms(motion)
    coords = ch.joint_coordinates(rot)
    _rot_close(ch.body_rotations_from_coordinates(rot[:, 0], coords), rot)
    # body joints are rigidly connected: positions follow from the root and the rotations
    np.testing.assert_allclose(ch.body_positions_from_rotations(pos[:, 0], rot), pos, atol=POS_TOL)
    # body transforms -> rig motion: the body joints' world frames come back exactly
    out = ch.motion_from_bodies(pos, rot, motion.fps)
    p2, r2 = sim.pose_motion(rig, out)
    np.testing.assert_allclose(p2[:, ch.body_joint], pos, atol=POS_TOL)
    _rot_close(r2[:, ch.body_joint], rot)
    # joint limits from the motion's range contain every frame's coordinates
    assert np.all(coords >= ch.limit_lower[None, 1:] - 1e-12)
    assert np.all(coords <= ch.limit_upper[None, 1:] + 1e-12)


def test_axis_frame_puts_least_used_axis_in_the_middle(rng):
    rig = table_quadruped()
    frames = 40
    rot = np.repeat(rig.rest_rotations[None], frames, 0).copy()
    j = rig.joint_index("leg0_upper")
    # swing about the world Y axis (large) and X (small): the middle coordinate must stay small
    t = np.linspace(0, 2 * np.pi, frames)
    aa = np.stack([0.1 * np.sin(t), 0.8 * np.sin(t + 0.3), np.zeros(frames)], axis=1)
    rot[:, j] = axis_angle_to_quat(aa)
    motion = sim.Motion(30.0, np.repeat(rig.rest_translations[:1], frames, 0), rot)
    ch = build_character(rig, motion)
    b = int(ch.joint_body[j])
    coords = ch.joint_coordinates(ch.body_transforms(motion)[1])[:, b - 1]
    ranges = coords.max(axis=0) - coords.min(axis=0)
    assert ranges[0] > 1.0 and ranges[1] < 0.02 * ranges[0]  # only Euler coupling leaks into the middle


def test_scale_rig_and_motion_keep_skinning(rng):
    rig = table_quadruped()
    motion = _random_motion(rig, rng, frames=3)
    p, _ = sim.skin_motion(rig, motion)
    p2, _ = sim.skin_motion(scale_rig(rig, 2.5), scale_motion(motion, 2.5))
    np.testing.assert_allclose(p2, 2.5 * p, atol=1e-9)
    ref = prepare_reference(rig, motion, ReferenceConfig(root_motion="keep", ground="none"), target_height_m=1.7)
    np.testing.assert_allclose(ref.rig.height(), 1.7, rtol=1e-12)


def test_loop_motion_accumulates_heading_and_position():
    rig = table_quadruped()
    frames = 11
    yaw = np.linspace(0.0, 0.5, frames)
    rot = np.repeat(rig.rest_rotations[None], frames, 0).copy()
    rot[:, 0] = axis_angle_to_quat(yaw[:, None] * [0.0, 0.0, 1.0])
    root = np.stack([np.linspace(0, 1.0, frames), np.zeros(frames), np.full(frames, 0.4)], axis=1)
    # closing in pose: the root rotation differs only by the heading the cycle turns by, other joints are equal
    # (a turning cycle was taken for an open one: each seam held the pose and heading for a frame)
    m = sim.Motion(10.0, root, rot)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        looped = loop_motion(m, 2)
    assert looped.frame_count == 2 * (frames - 1) + 1
    np.testing.assert_allclose(looped.times, np.arange(2 * frames - 1) / 10.0, atol=1e-12)
    yaw_step = 2 * np.arccos(np.clip(np.abs((looped.rotations[1:, 0] * looped.rotations[:-1, 0]).sum(-1)), 0, 1))
    np.testing.assert_allclose(yaw_step, 0.05, atol=1e-9)  # the heading turns on at the clip's rate
    travel = np.linalg.norm(np.diff(looped.root_translations[:, :2], axis=0), axis=1)
    assert travel.min() > 0.09, "no frame repeats at the seam"
    # an open turning cycle (a joint differs at the end): one more interval of travel and turn per repeat
    open_rot = rot.copy()
    open_rot[-1, 1] = axis_angle_to_quat(np.array([0.0, 0.3, 0.0]))
    with pytest.warns(UserWarning, match="differ"):
        looped = loop_motion(sim.Motion(10.0, root, open_rot), 2)
    assert looped.frame_count == 2 * frames
    np.testing.assert_allclose(looped.times, np.arange(2 * frames) / 10.0, atol=1e-12)
    yaw_step = 2 * np.arccos(np.clip(np.abs((looped.rotations[1:, 0] * looped.rotations[:-1, 0]).sum(-1)), 0, 1))
    np.testing.assert_allclose(yaw_step, 0.05, atol=1e-9)  # the extrapolated heading keeps the clip's rate
    # a closing clip: drop the duplicate frame between repeats
    rot2 = np.repeat(rig.rest_rotations[None], frames, 0)
    closing = sim.Motion(10.0, root, rot2)
    looped = loop_motion(closing, 3)
    assert looped.frame_count == 3 * (frames - 1) + 1
    np.testing.assert_allclose(looped.root_translations[-1, 0], 3.0, atol=1e-12)
    np.testing.assert_allclose(np.diff(looped.root_translations[:, 0]), 0.1, atol=1e-12)


def _rot_z(angle):
    """Rotation matrices about +Z, shape (..., 3, 3) (NumPy, independent of the quaternion code under test)."""
    c, s = np.cos(angle), np.sin(angle)
    z, o = np.zeros_like(c), np.ones_like(c)
    return np.stack([np.stack([c, -s, z], -1), np.stack([s, c, z], -1), np.stack([z, z, o], -1)], -2)


def _heading_x(q):
    """Unwrapped heading [rad] of the local x axes of world rotations ``q`` (F, 4), seen from above, shape (F,)."""
    from sim.rotations import quat_to_matrix

    fwd = quat_to_matrix(q)[..., :, 0]
    return np.unwrap(np.arctan2(fwd[:, 1], fwd[:, 0]))


@pytest.mark.parametrize(("start", "turn"), [(3.0, 0.3), (-3.0, -0.3), (0.0, 3.6)])
def test_loop_motion_extrapolates_an_open_turn_across_pi_and_past_half_a_turn(start, turn):
    """An open clip's turn per repeat is its unwrapped heading change (the angle of the yaw-quaternion difference
    read mod 2 pi gave a seam step of -0.598 rad for a 0.03 rad/frame turn crossing +-pi at 3.0, and -0.268 for a
    3.6 rad turn, instead of the clip's rate)."""
    rig = table_quadruped()
    frames = 11
    yaw = start + np.linspace(0.0, turn, frames)
    rot = np.repeat(rig.rest_rotations[None], frames, 0).copy()
    rot[:, 0] = axis_angle_to_quat(yaw[:, None] * [0.0, 0.0, 1.0])
    rot[-1, 1] = axis_angle_to_quat(np.array([0.0, 0.3, 0.0]))  # open: a joint differs at the end
    root = np.stack([np.linspace(0, 1.0, frames), np.zeros(frames), np.full(frames, 0.4)], axis=1)
    with pytest.warns(UserWarning, match="differ"):
        looped = loop_motion(sim.Motion(10.0, root, rot), 2)
    assert looped.frame_count == 2 * frames
    rate = turn / (frames - 1)
    np.testing.assert_allclose(np.diff(_heading_x(looped.rotations[:, 0])), rate, atol=1e-9)  # seam included
    # the second repeat: the first turned by the extrapolated turn about its first root, shifted by the travel
    stretch = frames / (frames - 1)
    origin = root[0] * [1.0, 1.0, 0.0]
    shift = (root[-1] - root[0]) * stretch * [1.0, 1.0, 0.0]
    expected = (_rot_z(turn * stretch) @ (root - origin).T).T + origin + shift
    np.testing.assert_allclose(looped.root_translations[frames:], expected, atol=1e-12)


def _container_rig():
    """A meshless rig whose joint 0 is a static container rotated +90 deg about X (a glTF ``_rootJoint``) above
    the hip (joint 1, world-aligned at 0.4 m), which has a head, a tail and a leg reaching the ground."""
    up = axis_angle_to_quat(np.array([np.pi / 2, 0.0, 0.0]))  # container local y -> world z
    down = axis_angle_to_quat(np.array([-np.pi / 2, 0.0, 0.0]))
    t = np.array([[0.0, 0.0, 0.0], [0.0, 0.4, 0.0], [0.3, 0.0, 0.1], [-0.2, 0.0, 0.0], [0.0, 0.0, -0.4]])
    rot = np.stack([up, down, quat_identity(), quat_identity(), quat_identity()])
    return sim.Rig(["container", "hip", "head", "tail", "leg"], [-1, 0, 1, 1, 1], t, rot, name="container")


@pytest.mark.parametrize("turn", [0.0, 0.5, -2.0])
def test_loop_motion_carries_on_from_a_child_of_static_joints(turn):
    """A rig whose joint 0 is static and whose hip (joint 1) carries the travel (its local translation) and the
    turn (its local rotation), like the Fox's: each repeat starts where the previous ended. Before, only joint
    0's transform was accumulated: the hip jumped back at every seam (the Fox Walk given 40 units of travel per
    cycle: 37.6 units backwards), and a turn on the hip made the clip count as open."""
    rig = _container_rig()
    frames, fps, speed = 11, 10.0, 0.1
    i = np.arange(frames)
    heading = turn * i / (frames - 1)
    hip = np.stack([speed * i, np.zeros(frames), np.full(frames, 0.4)], axis=1)  # world, straight along x
    to_container = axis_angle_to_quat(np.array([-np.pi / 2, 0.0, 0.0]))
    trans = np.repeat(rig.rest_translations[None], frames, 0).copy()
    trans[:, 1] = quat_rotate(to_container, hip)  # the container sits at the origin
    rot = np.repeat(rig.rest_rotations[None], frames, 0).copy()
    rot[:, 1] = quat_multiply(to_container, axis_angle_to_quat(heading[:, None] * [0.0, 0.0, 1.0]))
    rot[:, 4] = axis_angle_to_quat((0.3 * np.sin(2 * np.pi * i / (frames - 1)))[:, None] * [0.0, 1.0, 0.0])
    clip = sim.Motion(fps, trans[:, 0], rot, trans, name="hip_walk")
    world = sim.pose_motion(rig, clip)[0][:, 1]
    np.testing.assert_allclose(world, hip, atol=1e-12)  # the construction: the hip's world path
    # expected: repeat k is the clip turned by k * turn about the hip's first position, shifted by the
    # accumulated travel (each repeat's straight leg turned by the heading it starts with)
    loops = 3
    expected, start = [], hip[0].copy()
    for k in range(loops):
        r = _rot_z(np.array(k * turn))
        expected.append((r @ (hip - hip[0]).T).T + start)
        start = expected[-1][-1]
    expected = np.concatenate([e[:-1] for e in expected] + [expected[-1][-1:]])
    expected_heading = np.concatenate([heading[:-1] + k * turn for k in range(loops)] + [[loops * turn]])
    cfg = ReferenceConfig(root_motion="keep", ground="none", ballistic_flight=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # closing: the turn is the hip's, its pose is the first one again
        for looped in (loop_motion(clip, loops, rig), prepare_reference(rig, clip, cfg, loops=loops).motion):
            assert looped.frame_count == loops * (frames - 1) + 1
            pos, wrot = sim.pose_motion(rig, looped)
            np.testing.assert_allclose(pos[:, 1], expected, atol=1e-9)
            np.testing.assert_allclose(_heading_x(wrot[:, 1]), expected_heading, atol=1e-9)
            step = np.linalg.norm(np.diff(pos[:, 1, :2], axis=0), axis=1)
            np.testing.assert_allclose(step, speed, atol=1e-9)  # no jump at the seams


def test_float32_key_times_keep_the_closing_frame_when_looped():
    """A closing 18-frame 24 fps clip on float32 key times (as glTF stores them), looped 3 times: 52 frames over
    51/24 s. The looped times are off the grid by float32 rounding, so the clip is resampled, and the resampling
    dropped the closing frame (51 frames; the Fox Walk with --loops 3 ended one frame short)."""
    rig = table_quadruped()
    frames, fps = 18, 24.0
    still = hold(rig, frames, fps)
    times = (np.arange(frames) / fps).astype(np.float32).astype(np.float64)
    clip = sim.Motion(fps, still.root_translations, still.rotations, times=times)
    cfg = ReferenceConfig(root_motion="keep", ground="none", ballistic_flight=False)
    for loops in (1, 2, 3, 4):
        ref = prepare_reference(rig, clip, cfg, loops=loops).motion
        assert ref.frame_count == loops * (frames - 1) + 1
        np.testing.assert_allclose(ref.duration, loops * (frames - 1) / fps, atol=1e-12)


def test_root_motion_from_contacts_plants_treadmill_feet():
    """Feet sliding backwards at 0.5 m/s in every frame (a treadmill) get exactly the root motion that plants
    them; a clip whose root itself travels that far is left alone unless forced."""
    rig = table_quadruped()
    frames = 21
    still = hold(rig, frames, fps=20.0)
    back = np.outer(np.arange(frames) / 20.0, [0.5, 0.0, 0.0])
    treadmill = sim.Motion(20.0, still.root_translations - back, still.rotations)
    out, added = root_motion_from_contacts(rig, treadmill)
    assert not added  # its root channel travels as far as the feet slide: not in place
    out, added = root_motion_from_contacts(rig, treadmill, force=True)
    assert added
    np.testing.assert_allclose(out.root_translations, still.root_translations, atol=1e-9)
    out, _ = root_motion_from_contacts(rig, still, force=True)
    np.testing.assert_allclose(out.root_translations, still.root_translations, atol=1e-12)


def test_dynamic_feasibility_of_constructed_motions():
    """Standing still is feasible, hovering is not, free fall is; a body standing beyond its feet tips over."""
    from sim.physics import dynamic_feasibility

    rig = table_quadruped()
    ch = build_character(rig)
    frames, fps = 12, 30.0
    stand = hold(rig, frames, fps)
    pos, rot = ch.body_transforms(stand)
    assert dynamic_feasibility(ch, pos, rot, fps)["infeasible_ratio"] == 0.0
    hover_pos = pos + np.array([0.0, 0.0, 0.1])
    hover = dynamic_feasibility(ch, hover_pos, rot, fps)
    assert hover["infeasible_ratio"] == 1.0 and hover["unsupported_ratio"] == 1.0
    t = np.arange(frames) / fps
    fall_pos = hover_pos - 0.5 * 9.81 * (t**2)[:, None, None] * np.array([0.0, 0.0, 1.0])
    assert dynamic_feasibility(ch, fall_pos[:4], rot[:4], fps)["unsupported_ratio"] == 0.0
    # all four feet on the ground while the body accelerates sideways at 3 g: friction cannot provide it
    shove = pos + (0.5 * 30.0 * (t**2))[:, None, None] * np.array([1.0, 0.0, 0.0])
    assert dynamic_feasibility(ch, shove, rot, fps, friction=1.0)["friction_ratio"] > 0.5


def test_a_body_resting_on_a_long_capsule_is_supported_along_it():
    """The tuning fork lies still on its 0.6 m base bar (both ends on the ground, centre of mass between them):
    feasible. The support polygon took one end per touching capsule, so the centre of pressure, 0.3 m from that
    point, read as outside the support on every frame."""
    from sim.physics import dynamic_feasibility

    rig = tuning_fork()
    ch = build_character(rig)
    pos, rot = ch.body_transforms(hold(rig, 10, 30.0))
    a, b = ch.capsule_world(pos[0], rot[0])
    ground = np.array([a[0, 2], b[0, 2]]) - ch.capsule_radii[0]
    assert np.abs(ground).max() < 0.01 * ch.height and abs(a[0, 0] - b[0, 0]) > 0.5  # lying flat on its bar
    assert dynamic_feasibility(ch, pos, rot, 30.0)["infeasible_ratio"] == 0.0


def test_grounding_and_ballistic_flight():
    """A clip that hovers 1 cm is put on the ground; a flat 'flight' becomes a parabola under gravity."""
    from sim.physics import ballistic_flight, ground_offsets

    rig = table_quadruped()
    frames, fps = 31, 30.0
    still = hold(rig, frames, fps, root_offset=(0.0, 0.0, 0.01))
    shift = ground_offsets(rig, still, "per_frame")
    np.testing.assert_allclose(shift, -0.01, atol=1e-9)
    np.testing.assert_allclose(ground_offsets(rig, still, "clip"), -0.01, atol=1e-9)
    # frames 10-20 float 10 cm up on a flat path: flight
    lift = np.zeros(frames)
    lift[10:21] = 0.1
    hover = sim.Motion(fps, still.root_translations - [0.0, 0.0, 0.01] + lift[:, None] * [0.0, 0.0, 1.0],
                       still.rotations)  # fmt: skip
    out, changed = ballistic_flight(rig, hover)
    assert changed == 11
    z = out.root_translations[:, 2]
    accel = np.diff(z[9:22], 2) * fps**2
    np.testing.assert_allclose(accel, -9.81, atol=1e-6)  # free fall between take-off (9) and touch-down (21)
    np.testing.assert_allclose(z[:10], hover.root_translations[:10, 2], atol=1e-12)  # stance frames untouched


def test_centroid_velocity_smoothing_keeps_steady_travel_and_removes_surges():
    """A rigid clip travelling at a steady 0.5 m/s is left as it is; one whose speed alternates 0.2 / 0.8 m/s
    per frame (mean 0.5) gets a centroid speed within a few percent of the mean away from the clip's ends."""
    from sim.physics import smooth_centroid_velocity

    rig = table_quadruped()
    frames, fps = 41, 20.0
    still = hold(rig, frames, fps)
    steady = sim.Motion(fps, still.root_translations + np.outer(np.arange(frames) / fps, [0.5, 0.0, 0.0]),
                        still.rotations)  # fmt: skip
    out = smooth_centroid_velocity(rig, steady, 0.2)
    np.testing.assert_allclose(out.root_translations, steady.root_translations, atol=1e-9)
    step = np.where(np.arange(frames - 1) % 2 == 0, 0.2, 0.8) / fps
    x = np.concatenate([[0.0], np.cumsum(step)])
    surging = sim.Motion(fps, still.root_translations + np.outer(x, [1.0, 0.0, 0.0]), still.rotations)
    out = smooth_centroid_velocity(rig, surging, 0.2)
    speed = np.diff(out.root_translations[:, 0]) * fps
    inner = slice(10, frames - 11)
    np.testing.assert_allclose(speed[inner], 0.5, atol=0.02)
    np.testing.assert_allclose(out.root_translations[:, 1:], surging.root_translations[:, 1:], atol=1e-12)


def test_tail_density_scale_lightens_only_tail_bodies():
    """Tails are mostly fur: bodies whose joint is named *tail* get ``tail_density_scale`` times the density (so
    that mass), every other body keeps its mass; 1.0 restores uniform density."""
    from sim.characters import build

    rig, clips = build("quadruped-walk")
    motion = next(iter(clips.values()))
    uniform = build_character(rig, motion, CharacterConfig(tail_density_scale=1.0))
    light = build_character(rig, motion, CharacterConfig(tail_density_scale=0.2))
    tails = np.array(["tail" in n.lower() for n in uniform.body_names])
    assert tails.any() and not tails.all()
    assert light.body_names == uniform.body_names
    np.testing.assert_allclose(light.body_mass[tails], 0.2 * uniform.body_mass[tails], rtol=1e-12)
    np.testing.assert_allclose(light.body_mass[~tails], uniform.body_mass[~tails], rtol=1e-12)


def test_reference_pose_placed_at_a_root_frame(rng):
    """The zero-coordinate pose moved rigidly: the root lands on the given frame, every body keeps its pose
    relative to the root (distances to the root and relative rotations)."""
    from sim.rotations import quat_conjugate, quat_rotate

    ch = build_character(table_quadruped())
    pos0, rot0 = ch.reference_body_transforms()
    root_pos = rng.normal(size=3)
    root_rot = quat_normalize(rng.normal(size=4))
    pos, rot = ch.reference_body_transforms(root_pos, root_rot)
    np.testing.assert_allclose(pos[0], root_pos, atol=1e-12)
    np.testing.assert_allclose(np.abs((rot[0] * root_rot).sum()), 1.0, atol=1e-12)
    local0 = quat_rotate(quat_conjugate(rot0[0]), pos0 - pos0[0])  # bodies in the root's frame, before and after
    local = quat_rotate(quat_conjugate(rot[0]), pos - pos[0])
    np.testing.assert_allclose(local, local0, atol=1e-12)
    rel0, rel = quat_multiply(quat_conjugate(rot0[0]), rot0), quat_multiply(quat_conjugate(rot[0]), rot)
    np.testing.assert_allclose(np.abs((rel0 * rel).sum(-1)), 1.0, atol=1e-12)
    with pytest.raises(ValueError, match="both root_pos and root_rot"):
        ch.reference_body_transforms(root_pos, None)


def test_euler_angles_at_gimbal_lock_describe_the_rotation():
    """At Y = +-90 deg the X and Z entries are round-off: (0.3, 90, 0.2) deg... read back 61 deg off."""
    for b in (np.pi / 2, -np.pi / 2):
        e = np.array([[0.3, b, 0.2], [-1.0, b, 0.7]])
        q = euler_xyz_to_quat(e)
        _rot_close(euler_xyz_to_quat(quat_to_euler_xyz(q)), q)
        np.testing.assert_allclose(quat_to_euler_xyz(q)[:, 1], b, atol=1e-7)


def test_joint_coordinates_stay_on_one_euler_branch_through_ninety_degrees():
    """A Y swing from 80 to 100 deg: the principal branch (|Y| <= 90) flipped X and Z by 180 deg in one frame
    (targets and velocity targets jumped); the coordinates now continue on the branch of the previous frame."""
    rig = table_quadruped()
    ch = build_character(rig)
    F = 9
    e = np.zeros((F, ch.body_count - 1, 3))
    e[:, 0] = np.stack([np.full(F, 0.3), np.radians(np.linspace(80.0, 100.0, F)), np.full(F, 0.2)], axis=-1)
    root = np.tile(quat_identity(), (F, 1))
    rot = ch.body_rotations_from_coordinates(root, e)
    coords = ch.joint_coordinates(rot)
    np.testing.assert_allclose(coords, e, atol=1e-6)
    assert np.abs(np.diff(coords, axis=0)).max() < np.radians(5.0)
    # a batch without a frame axis is not unwrapped: each entry keeps its own principal value
    np.testing.assert_allclose(np.abs(ch.joint_coordinates(rot[0])[..., 1]).max(), np.radians(80.0), atol=1e-9)


def test_a_root_without_vertices_gets_a_bone_capsule_not_a_speck():
    """The torso's skin weighted to the hips (a hub pelvis): body 0 had no vertices and became a 4 mm sphere of
    0.4 g carrying the whole character, without a note."""
    rig = table_quadruped()
    hips = [rig.joint_index(f"leg{i}_upper") for i in range(4)]
    mesh = rig.meshes[0]
    joints = mesh.influence_joints.copy()
    torso = joints[:, 0] == 0
    joints[torso, 0] = np.array(hips)[np.arange(torso.sum()) % 4]
    skinned = sim.SkinnedMesh("body", mesh.points, mesh.triangles, joints, mesh.influence_weights,
                              joint_count=rig.joint_count)  # fmt: skip
    hub = sim.Rig(rig.joint_names, rig.parents, rig.rest_translations, rig.rest_rotations, None, [skinned],
                  name="hub")  # fmt: skip
    ch = build_character(hub)
    legs = ch.body_mass[1:].max()
    assert ch.body_mass[0] > 0.2 * legs, (ch.body_mass[0], legs)
    assert any("'torso' has no skinned vertices" in n for n in ch.notes), ch.notes


def test_degenerate_rigs_and_settings_are_refused_naming_the_cause():
    """A one-body rig built and then failed inside the simulation ('cannot reshape array of size 0'); a flat rig
    (height 0) built with zero gaps and radii; contact_frame_fraction 0 crashed the build in a reduction; limits
    on the root body were reported as a merged joint."""
    rig = table_quadruped()
    mesh = rig.meshes[0]
    one = sim.SkinnedMesh("body", mesh.points, mesh.triangles, np.zeros_like(mesh.influence_joints),
                          mesh.influence_weights, joint_count=rig.joint_count)  # fmt: skip
    lone = sim.Rig(rig.joint_names, rig.parents, rig.rest_translations, rig.rest_rotations, None, [one], name="lone")
    with pytest.raises(sim.RigError, match=r"only one rigid body \('torso'\)"):
        build_character(lone)
    flat_t = rig.rest_translations.copy()
    flat_t[:, 2] = 0.0
    flat = sim.Rig(rig.joint_names, rig.parents, flat_t * 0.0, rig.rest_rotations, name="flat")
    with pytest.raises(sim.RigError, match="has height 0 m"):
        build_character(flat)
    with pytest.raises(ValueError, match="contact_frame_fraction"):
        build_character(rig, cfg=CharacterConfig(contact_frame_fraction=0.0))
    with pytest.raises(sim.RigError, match=r"'torso' is the root body's \(a free joint\)"):
        build_character(rig, cfg=CharacterConfig(joint_limits_deg={"torso": (-30.0, 30.0)}))


@pytest.mark.parametrize("turn_deg", [250.0, 400.0])
def test_motion_limits_hold_a_joint_turning_past_half_a_turn(turn_deg):
    """A joint turning on past 180 deg about X (unwrapped coordinates beyond pi): the limits were clamped to +-180
    deg, holding it at the clamp; a range of a whole turn (with margins) leaves the axis unlimited."""
    rig = table_quadruped()
    ch0 = build_character(rig)
    F = 25
    e = np.zeros((F, ch0.body_count - 1, 3))
    e[:, 0, 0] = np.radians(np.linspace(0.0, turn_deg, F))
    root = np.tile(quat_identity(), (F, 1))
    rot = ch0.body_rotations_from_coordinates(root, e)
    pos = ch0.body_positions_from_rotations(np.zeros((F, 3)), rot)
    motion = ch0.motion_from_bodies(pos, rot, 30.0)
    ch = build_character(rig, motion)
    _, brot = ch.body_transforms(motion)
    coords = ch.joint_coordinates(brot)
    assert np.ptp(coords[:, 0, 0]) == pytest.approx(np.radians(turn_deg), abs=1e-6)  # unwrapped past pi
    assert np.all(coords >= ch.limit_lower[None, 1:] - 1e-12)
    assert np.all(coords <= ch.limit_upper[None, 1:] + 1e-12)
    margin = np.radians(CharacterConfig().joint_limit_margin_deg)
    if np.radians(turn_deg) + 2 * margin >= 2 * np.pi:
        assert np.isinf(ch.limit_lower[1, 0]) and np.isinf(ch.limit_upper[1, 0])
    else:
        assert np.isfinite(ch.limit_lower[1, 0]) and np.isfinite(ch.limit_upper[1, 0])
        np.testing.assert_allclose(ch.limit_upper[1, 0] - ch.limit_lower[1, 0], np.radians(turn_deg) + 2 * margin)
    assert np.isfinite(ch.limit_lower[1:, 1]).all()  # Y stays off the gimbal singularity


def test_ballistic_flight_never_lowers_a_flight_frame_through_the_floor():
    """A hop crouched in stance (knees bent 1.4 rad) with straight legs for two frames 4 cm in the air: the
    parabola of the centroid lowered the stretched legs 8 mm under the ground; the lowest point now stays at the
    take-off's height or above, and ``ground_shift_m`` includes the ballistic shift."""
    from sim.physics.reference import _contact_points

    rig = table_quadruped()
    F, fps = 40, 30.0
    flight = (np.arange(F) >= 15) & (np.arange(F) < 17)
    bend = np.where(flight, 0.0, 1.4)
    rot = np.repeat(rig.rest_rotations[None], F, 0).copy()
    for i in range(4):
        upper, lower = rig.joint_index(f"leg{i}_upper"), rig.joint_index(f"leg{i}_lower")
        rot[:, upper] = quat_multiply(rot[:, upper], axis_angle_to_quat(-0.5 * bend[:, None] * [0.0, 1.0, 0.0]))
        rot[:, lower] = quat_multiply(rot[:, lower], axis_angle_to_quat(bend[:, None] * [0.0, 1.0, 0.0]))
    root = np.repeat(rig.rest_translations[:1], F, 0).copy()
    root[:, 2] -= _contact_points(rig, sim.Motion(fps, root, rot))[..., 2].min(1)  # stance feet on the ground
    root[flight, 2] += 0.04
    hop = sim.Motion(fps, root, rot, name="hop")
    prepared = prepare_reference(rig, hop, ReferenceConfig(root_motion="keep"))
    assert prepared.ballistic_frames == 2
    lowest = _contact_points(prepared.rig, prepared.motion)[..., 2].min(1)
    assert lowest.min() > -1e-9
    applied = prepared.motion.root_translations[:, 2] - hop.root_translations[:, 2]
    np.testing.assert_allclose(prepared.ground_shift_m, applied, atol=1e-12)


def test_a_reference_of_one_frame_is_refused():
    """A 1.5 s walk at max_fps 0.5 became one frame, and tracking it stepped nothing and reported success."""
    rig = table_quadruped()
    walk = walkish(rig, 45)
    with pytest.raises(ValueError, match=r"^ReferenceConfig\.max_fps: 0\.5/s resamples motion .* to a single frame"):
        prepare_reference(rig, walk, ReferenceConfig(max_fps=0.5))
    with pytest.raises(ValueError, match=r"^ReferenceConfig\.fps: 0\.5/s resamples"):
        prepare_reference(rig, walk, ReferenceConfig(fps=0.5))
    with pytest.raises(ValueError, match=r"a single frame is a pose, not a motion to track"):
        prepare_reference(rig, walk.slice(0, 1), loops=3)


def test_a_two_frame_loop_says_why_it_is_not_closing():
    rig = table_quadruped()
    two = hold(rig, 2, 30.0)
    with pytest.warns(UserWarning, match=r"has only two frames \(a closing clip needs a frame between"):
        loop_motion(two, 2, rig)
