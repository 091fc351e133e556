"""UsdPhysics stage of a physics character: validator-clean, and Newton's add_usd reads back the same
bodies, masses, inertias, joints (frames, limits, drives, armature) and collision filters."""

from __future__ import annotations

import numpy as np
import pytest
from physics_rigs import table_quadruped

import sim
from sim.physics import build_character
from sim.rotations import axis_angle_to_quat, quat_multiply, quat_normalize
from usd_io import validate_stage
from usd_io.physics_usd import write_physics_stage

pytest.importorskip("pxr")
newton = pytest.importorskip("newton")

MASS_RTOL = 1e-6
"""float32 storage in USD and Newton."""
INERTIA_ATOL = 1e-7
"""[kg m^2]; inertias here are ~1e-4..1e-1."""
POS_ATOL = 1e-6
ANGLE_ATOL = 1e-5
"""[rad] limits round-trip through degrees in float32."""
GAIN_RTOL = 1e-5


def _motion(rig, rng, frames=8):
    rot = np.repeat(rig.rest_rotations[None], frames, 0)
    rot = quat_normalize(quat_multiply(rot, axis_angle_to_quat(rng.normal(size=(frames, rig.joint_count, 3)) * 0.3)))
    return sim.Motion(30.0, np.repeat(rig.rest_translations[:1], frames, 0), rot)


@pytest.fixture(scope="module")
def character():
    rig = table_quadruped()
    ch = build_character(rig, _motion(rig, np.random.default_rng(7)))
    ch.limit_lower[2] = -np.inf  # one unlimited joint: authored as -inf..inf, still three DOFs
    ch.limit_upper[2] = np.inf
    # one extra filtered non-adjacent pair travels as FilteredPairsAPI
    ch.collision_filter_pairs = sorted({*ch.collision_filter_pairs, (1, 4)})
    return ch


def _read_back(path):
    builder = newton.ModelBuilder(up_axis=newton.Axis.Z)
    builder.add_usd(str(path))
    return builder


def test_stage_is_validator_clean(tmp_path, character):
    path = tmp_path / "physics.usda"
    write_physics_stage(path, character)
    assert validate_stage(path, include_warnings=True) == []
    from pxr import Usd, UsdGeom, UsdPhysics

    stage = Usd.Stage.Open(str(path))
    assert UsdGeom.GetStageUpAxis(stage) == "Z"
    assert UsdGeom.GetStageMetersPerUnit(stage) == 1.0
    assert UsdPhysics.GetStageKilogramsPerUnit(stage) == 1.0
    # a floating articulation's root API sits on its root body, not on the character's Xform
    assert not stage.GetPrimAtPath("/table").HasAPI(UsdPhysics.ArticulationRootAPI)
    roots = [p.GetPath() for p in stage.Traverse() if p.HasAPI(UsdPhysics.ArticulationRootAPI)]
    assert roots == [f"/table/{character.body_names[0]}"]
    scene = UsdPhysics.Scene(stage.GetPrimAtPath("/World/PhysicsScene"))
    assert scene.GetGravityMagnitudeAttr().Get() == pytest.approx(9.81)
    assert list(scene.GetGravityDirectionAttr().Get()) == [0.0, 0.0, -1.0]


def test_non_usd_extension_is_refused(tmp_path, character):
    with pytest.raises(ValueError, match=r"physics\.txt: output: a USD stage must end in"):
        write_physics_stage(tmp_path / "physics.txt", character)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("meters_per_unit", float("inf"), r"meters_per_unit: must be a finite number > 0, got inf"),
        ("kilograms_per_unit", 0.0, r"kilograms_per_unit: must be a finite number > 0, got 0.0"),
        ("gravity", float("nan"), r"gravity: must be a finite number >= 0, got nan"),
        ("friction", -0.5, r"friction: must be a finite number >= 0, got -0.5"),
        ("restitution", 2.0, r"restitution: must be a finite number in \[0, 1\], got 2.0"),
        ("ground_height_m", float("-inf"), r"ground_height_m: must be a finite number, got -inf"),
        ("gravity", -9.81, r"gravity: must be a finite number >= 0, got -9.81"),  # a magnitude: < 0 read as Earth's
        ("time_step_s", 3.0, r"time_step_s: 3.0 s is 0.333333 steps per second"),  # was written as 0
        ("time_step_s", 1e-12, r"time_step_s: 1e-12 s is 1e\+12 steps per second"),  # was a raw pxr type error
    ],
)
def test_bad_physical_settings_are_refused_by_name(tmp_path, character, option, value, message):
    """meters_per_unit inf was accepted (every length written as 0, metersPerUnit inf); gravity, friction,
    restitution and the ground height were not checked at all."""
    with pytest.raises(ValueError, match=message):
        write_physics_stage(tmp_path / "physics.usda", character, **{option: value})
    assert list(tmp_path.iterdir()) == []


def test_numpy_numbers_are_numbers_and_a_bad_contact_material_is_refused(tmp_path, character):
    # np.int64(1) friction was refused as "not a finite number"; a NaN gap and a negative stiffness were written on
    # every collider
    from sim.physics import ContactMaterial

    write_physics_stage(tmp_path / "ok.usda", character, friction=np.int64(1), gravity=np.int32(10))
    assert (tmp_path / "ok.usda").is_file()
    for field, value in (("gap_m", float("nan")), ("stiffness", -1e4), ("damping", float("inf")), ("gap_m", True)):
        values = {"gap_m": 0.01, "stiffness": 1e4, "damping": 10.0, "friction_gain": 10.0, field: value}
        with pytest.raises(ValueError, match=rf"^ContactMaterial\.{field}: must be a finite number >= 0"):
            ContactMaterial(**values)


def test_bad_pose_is_refused_naming_the_body(tmp_path, character):
    """body_pos without body_rot was replaced by the reference pose without a word; a NaN position or a zero
    quaternion was written into the stage."""
    pos, rot = character.reference_body_transforms()
    out = tmp_path / "physics.usda"
    with pytest.raises(ValueError, match="body_pos/body_rot: give both"):
        write_physics_stage(out, character, body_pos=pos)
    bad = pos.copy()
    bad[1, 0] = float("nan")
    with pytest.raises(ValueError, match=rf"body_pos: body 1 \({character.body_names[1]}\) is not finite"):
        write_physics_stage(out, character, body_pos=bad, body_rot=rot)
    zero = rot.copy()
    zero[2] = 0.0
    with pytest.raises(ValueError, match=r"body_rot: body 2 .* is not a unit quaternion"):
        write_physics_stage(out, character, body_pos=pos, body_rot=zero)
    assert list(tmp_path.iterdir()) == []
    write_physics_stage(out, character, body_pos=pos, body_rot=rot)
    assert out.is_file()


def test_a_fractional_step_rate_is_written_whole_with_a_warning(tmp_path, character):
    """29.97 fps x 16 substeps is 479.52 steps per second: PhysxSceneAPI holds a whole number, so it is rounded,
    and said so."""
    from pxr import Usd

    with pytest.warns(UserWarning, match=r"479\.52 steps per second written as 480"):
        write_physics_stage(tmp_path / "p.usda", character, time_step_s=1.0 / (29.97 * 16))
    stage = Usd.Stage.Open(str(tmp_path / "p.usda"))
    scene = next(p for p in stage.Traverse() if p.GetTypeName() == "PhysicsScene")
    assert scene.GetAttribute("physxScene:timeStepsPerSecond").Get() == 480


def test_add_usd_reads_back_bodies_joints_masses_and_limits(tmp_path, character):
    path = tmp_path / "physics.usda"
    write_physics_stage(path, character)
    b = _read_back(path)
    ch = character
    B = ch.body_count
    assert b.body_count == B and b.joint_count == B
    labels = [lab.rsplit("/", 1)[-1] for lab in b.body_label]
    order = [labels.index(n) for n in ch.body_names]  # newton body index of each character body
    np.testing.assert_allclose(np.array(b.body_mass)[order], ch.body_mass, rtol=MASS_RTOL)
    np.testing.assert_allclose(np.array(b.body_com)[order], ch.body_com, atol=POS_ATOL)
    inertia = np.array(b.body_inertia).reshape(-1, 3, 3)[order]
    np.testing.assert_allclose(inertia, ch.body_inertia, atol=INERTIA_ATOL)

    jtypes = [int(t) for t in b.joint_type]
    qd_start = list(b.joint_qd_start)
    child_of = {int(c): j for j, c in enumerate(b.joint_child)}
    for k in range(B):
        j = child_of[order[k]]
        if k == 0:
            assert jtypes[j] == int(newton.JointType.FREE)
            continue
        assert jtypes[j] == int(newton.JointType.D6)
        assert int(b.joint_parent[j]) == order[int(ch.body_parent[k])]
        xp = np.array(b.joint_X_p[j], dtype=np.float64)
        xc = np.array(b.joint_X_c[j], dtype=np.float64)
        np.testing.assert_allclose(xp[:3], ch.parent_anchor_pos[k], atol=POS_ATOL)
        np.testing.assert_allclose(abs(xp[3:] @ ch.parent_anchor_rot[k]), 1.0, atol=1e-6)
        np.testing.assert_allclose(xc[:3], 0.0, atol=POS_ATOL)
        np.testing.assert_allclose(abs(xc[3:] @ ch.child_anchor_rot[k]), 1.0, atol=1e-6)
        dofs = slice(qd_start[j], qd_start[j] + 3)
        assert tuple(b.joint_dof_dim[j]) == (0, 3)  # three rotational coordinates, translations locked
        axes = np.array(b.joint_axis[dofs])
        np.testing.assert_allclose(axes, np.eye(3), atol=1e-7)
        lo, hi = np.array(b.joint_limit_lower[dofs]), np.array(b.joint_limit_upper[dofs])
        want_lo, want_hi = ch.limit_lower[k], ch.limit_upper[k]
        fin = np.isfinite(want_lo)
        np.testing.assert_allclose(lo[fin], want_lo[fin], atol=ANGLE_ATOL)
        np.testing.assert_allclose(hi[fin], want_hi[fin], atol=ANGLE_ATOL)
        assert np.all(np.abs(lo[~fin]) > 1e6) and np.all(hi[~fin] > 1e6)
        np.testing.assert_allclose(np.array(b.joint_target_ke[dofs]), ch.stiffness[k], rtol=GAIN_RTOL)
        np.testing.assert_allclose(np.array(b.joint_target_kd[dofs]), ch.damping[k], rtol=GAIN_RTOL)
        np.testing.assert_allclose(np.array(b.joint_armature[dofs]), ch.armature[k], rtol=GAIN_RTOL)
        # limit springs: one value per joint in USD, the mean of the simulation's per-axis 4 x drive stiffness
        np.testing.assert_allclose(np.array(b.joint_limit_ke[dofs]), 4.0 * ch.stiffness[k].mean(), rtol=GAIN_RTOL)
        np.testing.assert_allclose(np.array(b.joint_limit_kd[dofs]), ch.damping[k].mean(), rtol=GAIN_RTOL)

    # shapes: one capsule per body with the character's size; the extra filtered pair is filtered
    shape_body = np.array(b.shape_body)
    caps = [s for s in range(b.shape_count) if shape_body[s] >= 0]
    assert len(caps) == B
    for k in range(B):
        (s,) = [s for s in caps if shape_body[s] == order[k]]
        assert int(b.shape_type[s]) == int(newton.GeoType.CAPSULE)
        np.testing.assert_allclose(b.shape_scale[s][:2], [ch.capsules[k].radius, ch.capsules[k].half_height],
                                   atol=POS_ATOL)  # fmt: skip
    shape_of = {int(shape_body[s]): s for s in caps}
    filtered = {tuple(sorted(p)) for p in b.shape_collision_filter_pairs}
    a, c = shape_of[order[1]], shape_of[order[4]]
    assert tuple(sorted((a, c))) in filtered


def test_units_are_scaled(tmp_path, character):
    path = tmp_path / "cm.usda"
    write_physics_stage(path, character, meters_per_unit=0.01, kilograms_per_unit=0.001)
    from pxr import Usd, UsdPhysics

    stage = Usd.Stage.Open(str(path))
    name = character.body_names[0]
    mass = UsdPhysics.MassAPI(stage.GetPrimAtPath(f"/table/{name}")).GetMassAttr().Get()
    np.testing.assert_allclose(mass, character.body_mass[0] * 1000.0, rtol=MASS_RTOL)
    scene = UsdPhysics.Scene(stage.GetPrimAtPath("/World/PhysicsScene"))
    np.testing.assert_allclose(scene.GetGravityMagnitudeAttr().Get(), 981.0, rtol=1e-6)


def test_posed_stage_agrees_between_zero_joint_state_and_authored_bodies(tmp_path, character):
    """The stage carries no joint state: an importer that starts from zero joint positions (Newton) and one that
    starts from the authored body transforms (PhysX) agree when the bodies are written at the zero-coordinate pose
    placed anywhere, as examples/track.py writes them."""
    from sim.rotations import axis_angle_to_quat

    root_rot = axis_angle_to_quat(np.array([0.1, -0.2, 0.7]))
    pos, rot = character.reference_body_transforms(np.array([0.3, -0.2, 0.35]), root_rot)
    path = tmp_path / "posed.usda"
    write_physics_stage(path, character, pos, rot)
    b = _read_back(path)
    model = b.finalize(device="cpu")
    state = model.state()
    newton.eval_fk(model, model.joint_q, model.joint_qd, state)
    body_q = state.body_q.numpy()
    labels = [lab.rsplit("/", 1)[-1] for lab in b.body_label]
    order = [labels.index(n) for n in character.body_names]
    np.testing.assert_allclose(body_q[order, :3], pos, atol=1e-5)
    np.testing.assert_allclose(np.abs((body_q[order, 3:] * rot).sum(-1)), 1.0, atol=1e-5)


def test_contact_material_reads_back_as_simulated(tmp_path, character):
    from pxr import Usd, UsdPhysics

    from sim.physics import ContactConfig, build_newton_builder, contact_material

    contact = ContactConfig(contact_gap_fraction=0.02, penalty_stiffness_per_kg=3.0e3)
    material = contact_material(character, contact)
    path = tmp_path / "physics.usda"
    write_physics_stage(path, character, contact=material)
    b = _read_back(path)
    simulated = build_newton_builder(character, sim.physics.SolverConfig(), contact)  # what tracking builds
    np.testing.assert_allclose(np.array(b.shape_gap), simulated.rigid_gap, rtol=GAIN_RTOL)  # colliders and ground
    for name in ("shape_material_ke", "shape_material_kd", "shape_material_kf"):
        np.testing.assert_allclose(np.array(getattr(b, name)), getattr(simulated, name)[0], rtol=GAIN_RTOL)
    # PhysX reads the same gap as contactOffset - restOffset, on every collider and the ground, where its
    # PhysxCollisionAPI is applied (without the schema the offsets are ignored)
    stage = Usd.Stage.Open(str(path))
    collider = next(p for p in stage.Traverse() if p.GetName() == "collider")
    colliders = [p for p in stage.Traverse() if p.HasAPI(UsdPhysics.CollisionAPI)]
    assert [p for p in stage.Traverse() if p.HasAttribute("physxCollision:contactOffset")] == colliders
    for prim in colliders:
        assert "PhysxCollisionAPI" in prim.GetMetadata("apiSchemas").GetAddedOrExplicitItems(), prim.GetPath()
    offset = collider.GetAttribute("physxCollision:contactOffset").Get()
    assert offset - collider.GetAttribute("physxCollision:restOffset").Get() == pytest.approx(material.gap_m)
    assert validate_stage(path, include_warnings=True) == []
    # without a contact material Newton falls back to its own default gap, not the simulated one
    write_physics_stage(tmp_path / "bare.usda", character)
    assert not np.allclose(np.array(_read_back(tmp_path / "bare.usda").shape_gap), simulated.rigid_gap)


def test_referenced_character_keeps_its_contact_material(tmp_path, character, capfd):
    """A user's scene (its own PhysicsScene and ground) references the character twice, once through the
    defaultPrim and once by prim path: every collider's physics material resolves inside the reference with the
    authored values, and Newton builds the simulated contacts (a binding to a material outside a referenced prim is
    dropped by composition, and Newton then falls back to its default stiffness)."""
    from pxr import Gf, Usd, UsdGeom, UsdPhysics, UsdShade

    from sim.physics import ContactConfig, build_newton_builder, contact_material

    contact = ContactConfig(contact_gap_fraction=0.02, penalty_stiffness_per_kg=3.0e3)
    material = contact_material(character, contact)
    friction, restitution = 0.6, 0.2
    src = tmp_path / "physics.usda"
    write_physics_stage(src, character, contact=material, friction=friction, restitution=restitution)
    source = Usd.Stage.Open(str(src))
    char_prim = source.GetDefaultPrim()
    # the defaultPrim is the character: a root prim (the only kind every USD version accepts) holding the bodies
    assert char_prim.GetPath().IsRootPrimPath()
    assert sum(p.HasAPI(UsdPhysics.RigidBodyAPI) for p in Usd.PrimRange(char_prim)) == character.body_count
    assert not any(p.IsA(UsdPhysics.Scene) or p.IsA(UsdGeom.Plane) for p in Usd.PrimRange(char_prim))

    scene_path = tmp_path / "scene.usda"
    stage = Usd.Stage.CreateNew(str(scene_path))
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    world = UsdGeom.Xform.Define(stage, "/World")
    stage.SetDefaultPrim(world.GetPrim())
    UsdPhysics.Scene.Define(stage, "/World/physicsScene")
    ground = UsdGeom.Plane.Define(stage, "/World/ground")
    ground.CreateAxisAttr(UsdGeom.Tokens.z)
    UsdPhysics.CollisionAPI.Apply(ground.GetPrim())
    holders = ["/World/fox0/char", "/World/fox1/char"]
    for i, holder in enumerate(holders):
        UsdGeom.Xform.Define(stage, holder.rsplit("/", 1)[0]).AddTranslateOp().Set(Gf.Vec3d(2.0 * i, 0.0, 0.0))
        refs = stage.DefinePrim(holder).GetReferences()
        refs.AddReference(str(src)) if i == 0 else refs.AddReference(str(src), char_prim.GetPath())
    stage.GetRootLayer().Save()

    composed = Usd.Stage.Open(str(scene_path))
    assert "outside the scope of the reference" not in capfd.readouterr().err
    assert [p.GetPath() for p in composed.Traverse() if p.IsA(UsdPhysics.Scene)] == ["/World/physicsScene"]
    colliders = [p for p in composed.Traverse() if p.HasAPI(UsdPhysics.CollisionAPI) and p.GetPath() != "/World/ground"]
    assert len(colliders) == 2 * character.body_count
    for prim in colliders:
        bound, _ = UsdShade.MaterialBindingAPI(prim).ComputeBoundMaterial("physics")
        assert bound, prim.GetPath()
        holder = next(h for h in holders if prim.GetPath().HasPrefix(h))
        assert bound.GetPath().HasPrefix(holder)  # the material came with the character
        phys = UsdPhysics.MaterialAPI(bound.GetPrim())
        assert phys.GetStaticFrictionAttr().Get() == pytest.approx(friction)
        assert phys.GetDynamicFrictionAttr().Get() == pytest.approx(friction)
        assert phys.GetRestitutionAttr().Get() == pytest.approx(restitution)
        for attr, want in (("newton:contactStiffness", material.stiffness), ("newton:contactDamping", material.damping),
                           ("newton:contactFrictionGain", material.friction_gain)):  # fmt: skip
            np.testing.assert_allclose(bound.GetPrim().GetAttribute(attr).Get(), want, rtol=GAIN_RTOL)
        np.testing.assert_allclose(prim.GetAttribute("newton:contactGap").Get(), material.gap_m, rtol=GAIN_RTOL)

    b = _read_back(scene_path)
    simulated = build_newton_builder(character, sim.physics.SolverConfig(), contact)  # what tracking builds
    assert b.body_count == 2 * character.body_count
    caps = np.flatnonzero(np.array(b.shape_body) >= 0)
    assert len(caps) == 2 * character.body_count
    np.testing.assert_allclose(np.array(b.shape_gap)[caps], simulated.rigid_gap, rtol=GAIN_RTOL)
    for name in ("shape_material_ke", "shape_material_kd", "shape_material_kf"):
        np.testing.assert_allclose(np.array(getattr(b, name))[caps], getattr(simulated, name)[0], rtol=GAIN_RTOL)
    np.testing.assert_allclose(np.array(b.shape_material_mu)[caps], friction, rtol=GAIN_RTOL)
    np.testing.assert_allclose(np.array(b.shape_material_restitution)[caps], restitution, rtol=GAIN_RTOL)


def test_physics_scene_carries_the_simulation_step(tmp_path, character):
    """The stage held no time step: readers stepped it at their defaults (Newton's add_usd 1000 Hz, PhysX 60 Hz), not at
    the tracked rate. With ``time_step_s`` the scene holds PhysX's rate, which Newton's PhysX resolver reads too."""
    import newton
    from pxr import Usd

    bare, timed = tmp_path / "bare.usda", tmp_path / "timed.usda"
    write_physics_stage(bare, character)
    write_physics_stage(timed, character, time_step_s=1.0 / 120.0)

    def physics_dt(path):
        resolvers = [newton.usd.SchemaResolverNewton(), newton.usd.SchemaResolverPhysx()]
        return newton.ModelBuilder().add_usd(str(path), schema_resolvers=resolvers)["physics_dt"]

    assert physics_dt(bare) == pytest.approx(1e-3)
    assert physics_dt(timed) == pytest.approx(1.0 / 120.0)
    stage = Usd.Stage.Open(str(timed))
    scene = stage.GetPrimAtPath("/World/PhysicsScene")
    assert "PhysxSceneAPI" in scene.GetMetadata("apiSchemas").GetAddedOrExplicitItems()
    assert scene.GetAttribute("physxScene:timeStepsPerSecond").Get() == 120
    assert validate_stage(timed, include_warnings=True) == []
    with pytest.raises(ValueError, match="time_step_s: must be a finite number > 0"):
        write_physics_stage(tmp_path / "bad.usda", character, time_step_s=0.0)
