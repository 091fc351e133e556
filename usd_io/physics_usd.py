"""A :class:`sim.physics.PhysicsCharacter` as a UsdPhysics stage that Omniverse/Isaac and Newton read back.

Layout (Z up, SI units, ``metersPerUnit``/``kilogramsPerUnit`` authored)::

    /<Character>                         Xform (defaultPrim, kind component): the referenceable character
      PhysicsMaterial                    UsdShade.Material + PhysicsMaterialAPI (friction, restitution;
                                         newton:contactStiffness/Damping/FrictionGain)
      <body>                             Xform at its pose + RigidBodyAPI + MassAPI (+ FilteredPairsAPI);
                                         the root body also carries ArticulationRootAPI (floating base)
        collider                         UsdGeom.Capsule (axis Z) + CollisionAPI, bound to the material
                                         (+ newton:contactGap, physxCollision:contactOffset/restOffset)
      joints/<body>_joint                UsdPhysics.Joint (generic D6) between the parent and child bodies:
                                         localPos/Rot0/1 = the joint frames; transX/Y/Z locked (LimitAPI
                                         low > high); rotX/Y/Z limited (LimitAPI, degrees) and driven
                                         (DriveAPI "force": stiffness/damping per degree, target 0);
                                         newton:armature and physxJoint:armature (PhysxJointAPI);
                                         newton:limitStiffness / newton:limitDamping (per degree; one value
                                         per joint: the mean of its three axes')
    /World                               Xform: the environment the character was simulated in (``/World_1``
                                         when the character itself is named ``World``)
      PhysicsScene                       UsdPhysics.Scene (gravity -Z, 9.81 m/s^2); with ``time_step_s`` its
                                         rate: physxScene:timeStepsPerSecond (PhysxSceneAPI)
      GroundMaterial                     the character's material values, for the ground
      GroundPlane                        UsdGeom.Plane (Z) + CollisionAPI (+ the contact gap)

Everything the character needs (its material included) lies under its prim, so a scene can reference the
character alone (``references = @physics.usda@``: the defaultPrim) and bring its own scene and ground; a
relationship to a prim outside a referenced prim is dropped by USD composition (the character's colliders would
lose their contact material). Opened as a stage, the file simulates as tracked: character, scene and ground.

Bodies are siblings (not nested), each joint frame's X/Y/Z are the character's joint coordinate axes, so a
Newton D6 joint imported from the stage has the character's coordinates, limits and gains
(``ModelBuilder.add_usd`` converts per-degree values back to per-radian). The joint coordinates are intrinsic
X-Y-Z Euler angles of the child's joint frame relative to the parent's (the middle angle kept within +-85 deg):
Newton's D6 joints use the same convention; PhysX's D6 joints measure twist and swing, so their limits agree with
these only for small swings. No joint state is authored: importers that start from zero joint positions (Newton)
and those that start from the authored body transforms (PhysX) agree only when the bodies are written at the
zero-coordinate pose, the character's reference pose -- which is what ``examples/track.py`` writes (placed at the
first simulated frame's root, raised so that its lowest collider point lies at the ground plus the contact gap).
Only stages in metres and kilograms (the defaults) read back through Newton, whose
importer does not convert units; other units are authored correctly for other readers.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np

from sim._numbers import is_finite_real

from ._gltf_skeleton import unique_names
from ._usd_paths import usd_output_path
from .atomic import atomic_output

__all__ = ["write_physics_stage"]

_LOCKED = (1.0, -1.0)  # UsdPhysics: a limit with low > high locks the axis


def _name(text: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_]", "_", text)
    return s if s and not s[0].isdigit() else f"_{s}"


def _quat(q):
    from pxr import Gf

    x, y, z, w = (float(v) for v in q)
    return Gf.Quatf(w, Gf.Vec3f(x, y, z))


def write_physics_stage(
    path: str | Path,
    character,
    body_pos: np.ndarray | None = None,
    body_rot: np.ndarray | None = None,
    *,
    friction: float = 1.0,
    restitution: float = 0.0,
    ground_height_m: float = 0.0,
    gravity: float = 9.81,
    meters_per_unit: float = 1.0,
    kilograms_per_unit: float = 1.0,
    contact=None,
    time_step_s: float | None = None,
) -> None:
    """Writes the character's articulation as a UsdPhysics stage, atomically.

    The character is the root prim ``/<rig name>`` and the stage's defaultPrim, self-contained (its contact
    material included), so a scene can reference it alone; the scene and ground it was simulated with are under
    ``/World`` (see the module docstring).

    Args:
        path: output file (``.usda``/``.usdc``/``.usd``).
        character: a :class:`sim.physics.PhysicsCharacter`.
        body_pos, body_rot: initial world body frames [m] (B, 3) and [quat xyzw] (B, 4); default: the
            reference pose with the root at the rig's rest position.
        friction, restitution: contact material of the colliders and (a copy) of the ground.
        ground_height_m: ground plane height [m].
        gravity: gravitational acceleration magnitude [m/s^2] (along -Z).
        meters_per_unit, kilograms_per_unit: stage units; lengths, masses and inertias are divided accordingly.
        contact: optional :class:`sim.physics.ContactMaterial` (``sim.physics.contact_material``): its gap is
            authored on every collider and the ground (``newton:contactGap``; for PhysX ``physxCollision:
            contactOffset`` with ``restOffset`` 0), its penalty stiffness, damping and friction gain on the
            material (``newton:contactStiffness`` ...), so Newton's ``add_usd`` builds the contacts the simulation
            used. Without it, readers use their own defaults (Newton's gap of 0.1 m lets a small character hover).
        time_step_s: the physics step the motion was simulated with [s] (``sim.physics.CharacterSimulation``'s
            ``dt``), authored on the scene as PhysX's steps per second (``physxScene:timeStepsPerSecond``,
            PhysxSceneAPI), which Omniverse / Isaac step at and Newton's ``add_usd`` reads with its PhysX schema
            resolver (``physics_dt``). Not as ``newton:timeStepsPerSecond``: without the newton-usd-schemas
            package Newton warns about any ``newton:`` attribute of the scene as an undeclared custom attribute.
            Without it, readers use their own defaults (Newton's 1000, PhysX's 60 steps per second).

    Raises:
        ValueError: bad shapes or units.
    """
    from pxr import Gf, Kind, Sdf, Usd, UsdGeom, UsdPhysics, UsdShade

    from sim.rotations import matrix_to_quat

    B = character.body_count
    if (body_pos is None) != (body_rot is None):  # one of them was dropped for the reference pose without a word
        raise ValueError("body_pos/body_rot: give both (the pose written) or neither (the reference pose)")
    if body_pos is None:
        body_pos, body_rot = character.reference_body_transforms()
    body_pos = np.asarray(body_pos, dtype=np.float64)
    body_rot = np.asarray(body_rot, dtype=np.float64)
    if body_pos.shape != (B, 3) or body_rot.shape != (B, 4):
        raise ValueError(f"body_pos/body_rot: expected shapes ({B}, 3)/({B}, 4), got {body_pos.shape}/{body_rot.shape}")
    for name, arr in (("body_pos", body_pos), ("body_rot", body_rot)):
        bad = np.flatnonzero(~np.isfinite(arr).all(axis=-1))
        if len(bad):
            k = int(bad[0])
            raise ValueError(f"{name}: body {k} ({character.body_names[k]}) is not finite: {arr[k]}")
    norms = np.linalg.norm(body_rot, axis=-1)
    bad = np.flatnonzero(np.abs(norms - 1.0) > 1e-3)
    if len(bad):
        k = int(bad[0])
        name = character.body_names[k]
        raise ValueError(f"body_rot: body {k} ({name}) is not a unit quaternion (norm {norms[k]:.4g})")
    body_rot = body_rot / norms[:, None]
    checks = {"meters_per_unit": (meters_per_unit, "> 0"), "kilograms_per_unit": (kilograms_per_unit, "> 0"),
              "friction": (friction, ">= 0"), "restitution": (restitution, "in [0, 1]"), "gravity": (gravity, ">= 0"),
              "ground_height_m": (ground_height_m, "")}  # fmt: skip
    if time_step_s is not None:
        checks["time_step_s"] = (time_step_s, "> 0")
    for name, (value, rule) in checks.items():  # inf units made every length 0 and were written as such
        number = is_finite_real(value)
        in_range = {"> 0": lambda v: v > 0, ">= 0": lambda v: v >= 0, "in [0, 1]": lambda v: 0 <= v <= 1}
        if not number or (rule and not in_range[rule](value)):
            raise ValueError(f"{name}: must be a finite number{' ' + rule if rule else ''}, got {value!r}")
    if time_step_s is not None:
        rate = 1.0 / float(time_step_s)  # written as a whole number of steps per second (an unsigned int)
        if not 1 <= round(rate) < 2**32:  # 3 s wrote 0 steps per second; 1e-12 s a raw pxr type error
            raise ValueError(
                f"time_step_s: {time_step_s!r} s is {rate:.6g} steps per second; PhysxSceneAPI stores a whole number "
                f"in [1, 2^32)"
            )
        if abs(round(rate) - rate) > 1e-6 * rate:
            warnings.warn(
                f"time_step_s: {rate:.6g} steps per second written as {round(rate)} (a whole number)", stacklevel=2
            )
    L = 1.0 / meters_per_unit
    M = 1.0 / kilograms_per_unit
    I_UNIT = M * L * L
    to_deg = 180.0 / np.pi

    path = usd_output_path(path)
    with atomic_output(path) as tmp:
        stage = Usd.Stage.CreateNew(str(tmp))
        UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
        UsdGeom.SetStageMetersPerUnit(stage, meters_per_unit)
        UsdPhysics.SetStageKilogramsPerUnit(stage, kilograms_per_unit)
        char_name, world_name = unique_names([_name(character.rig.name), "World"])
        root_path = f"/{char_name}"
        root = UsdGeom.Xform.Define(stage, root_path).GetPrim()
        Usd.ModelAPI(root).SetKind(Kind.Tokens.component)
        stage.SetDefaultPrim(root)  # a reference without a prim path brings the character alone
        world_path = f"/{world_name}"
        UsdGeom.Xform.Define(stage, world_path)

        scene = UsdPhysics.Scene.Define(stage, f"{world_path}/PhysicsScene")
        scene.CreateGravityDirectionAttr(Gf.Vec3f(0.0, 0.0, -1.0))
        scene.CreateGravityMagnitudeAttr(float(gravity * L))
        if time_step_s is not None:
            scene_prim = scene.GetPrim()
            scene_prim.AddAppliedSchema("PhysxSceneAPI")
            scene_prim.CreateAttribute("physxScene:timeStepsPerSecond", Sdf.ValueTypeNames.UInt).Set(round(rate))

        def define_material(material_path: str):
            material = UsdShade.Material.Define(stage, material_path)
            mat_api = UsdPhysics.MaterialAPI.Apply(material.GetPrim())
            mat_api.CreateStaticFrictionAttr(float(friction))
            mat_api.CreateDynamicFrictionAttr(float(friction))
            mat_api.CreateRestitutionAttr(float(restitution))
            if contact is not None:
                mprim = material.GetPrim()
                for attr, value in (("newton:contactStiffness", contact.stiffness * M),
                                    ("newton:contactDamping", contact.damping * M),
                                    ("newton:contactFrictionGain", contact.friction_gain * M)):  # fmt: skip
                    mprim.CreateAttribute(attr, Sdf.ValueTypeNames.Float).Set(float(value))
            return material

        def bind(prim, material):
            UsdShade.MaterialBindingAPI.Apply(prim).Bind(material, UsdShade.Tokens.weakerThanDescendants, "physics")
            if contact is not None:
                gap = float(contact.gap_m * L)
                prim.CreateAttribute("newton:contactGap", Sdf.ValueTypeNames.Float).Set(gap)
                prim.AddAppliedSchema("PhysxCollisionAPI")  # PhysX reads its offsets only where this is applied
                prim.CreateAttribute("physxCollision:contactOffset", Sdf.ValueTypeNames.Float).Set(gap)
                prim.CreateAttribute("physxCollision:restOffset", Sdf.ValueTypeNames.Float).Set(0.0)

        ground = UsdGeom.Plane.Define(stage, f"{world_path}/GroundPlane")
        ground.CreateAxisAttr(UsdGeom.Tokens.z)
        extent = 50.0 * character.height * L
        ground.CreateWidthAttr(extent)
        ground.CreateLengthAttr(extent)
        UsdGeom.XformCommonAPI(ground).SetTranslate(Gf.Vec3d(0.0, 0.0, ground_height_m * L))
        UsdPhysics.CollisionAPI.Apply(ground.GetPrim())
        bind(ground.GetPrim(), define_material(f"{world_path}/GroundMaterial"))

        # the character's own material lives under its prim: relationships that leave a referenced prim are dropped
        material = define_material(f"{root_path}/PhysicsMaterial")

        reserved = ["joints", "PhysicsMaterial"]  # the joints' Scope and the material are the bodies' siblings
        names = unique_names([*reserved, *(_name(n) for n in character.body_names)])[len(reserved) :]
        body_paths = [f"{root_path}/{n}" for n in names]
        for b in range(B):
            xf = UsdGeom.Xform.Define(stage, body_paths[b])
            xf.AddTranslateOp().Set(Gf.Vec3d(*(body_pos[b] * L)))
            xf.AddOrientOp().Set(_quat(body_rot[b]))
            prim = xf.GetPrim()
            UsdPhysics.RigidBodyAPI.Apply(prim)
            if b == 0:  # a floating articulation's root is its root body (UsdPhysics schema docs)
                UsdPhysics.ArticulationRootAPI.Apply(prim)
            mass = UsdPhysics.MassAPI.Apply(prim)
            mass.CreateMassAttr(float(character.body_mass[b] * M))
            mass.CreateCenterOfMassAttr(Gf.Vec3f(*(character.body_com[b] * L)))
            evals, evecs = np.linalg.eigh(character.body_inertia[b])
            if np.linalg.det(evecs) < 0:
                evecs[:, 2] *= -1.0

            mass.CreateDiagonalInertiaAttr(Gf.Vec3f(*(np.maximum(evals, 0.0) * I_UNIT)))
            mass.CreatePrincipalAxesAttr(_quat(matrix_to_quat(evecs)))

            cap = character.capsules[b]
            cp = UsdGeom.Capsule.Define(stage, f"{body_paths[b]}/collider")
            cp.CreateAxisAttr(UsdGeom.Tokens.z)
            cp.CreateRadiusAttr(float(cap.radius * L))
            cp.CreateHeightAttr(float(2.0 * cap.half_height * L))
            r = cap.radius * L
            h = cap.half_height * L
            cp.CreateExtentAttr([Gf.Vec3f(-r, -r, -h - r), Gf.Vec3f(r, r, h + r)])
            cp.AddTranslateOp().Set(Gf.Vec3d(*(cap.center * L)))
            cp.AddOrientOp().Set(_quat(cap.rotation()))
            UsdPhysics.CollisionAPI.Apply(cp.GetPrim())
            bind(cp.GetPrim(), material)

        # collision filtering: non-adjacent pairs the character excludes (adjacent pairs are jointed)
        adjacent = set(character.adjacent_pairs())
        filtered: dict[int, list[int]] = {}
        for i, j in character.collision_filter_pairs:
            if (i, j) not in adjacent:
                filtered.setdefault(i, []).append(j)
        if not character.config.self_collision:
            for i in range(B):
                filtered[i] = [j for j in range(i + 1, B) if (i, j) not in adjacent]
        for i, js in filtered.items():
            if js:
                fp = UsdPhysics.FilteredPairsAPI.Apply(stage.GetPrimAtPath(body_paths[i]))
                fp.CreateFilteredPairsRel().SetTargets([Sdf.Path(body_paths[j]) for j in js])

        stage.DefinePrim(f"{root_path}/joints", "Scope")
        for b in range(1, B):
            p = int(character.body_parent[b])
            joint = UsdPhysics.Joint.Define(stage, f"{root_path}/joints/{names[b]}_joint")
            joint.CreateBody0Rel().SetTargets([Sdf.Path(body_paths[p])])
            joint.CreateBody1Rel().SetTargets([Sdf.Path(body_paths[b])])
            joint.CreateLocalPos0Attr(Gf.Vec3f(*(character.parent_anchor_pos[b] * L)))
            joint.CreateLocalRot0Attr(_quat(character.parent_anchor_rot[b]))
            joint.CreateLocalPos1Attr(Gf.Vec3f(0.0, 0.0, 0.0))
            joint.CreateLocalRot1Attr(_quat(character.child_anchor_rot[b]))
            prim = joint.GetPrim()
            for axis in ("transX", "transY", "transZ"):
                lim = UsdPhysics.LimitAPI.Apply(prim, axis)
                lim.CreateLowAttr(_LOCKED[0])
                lim.CreateHighAttr(_LOCKED[1])
            for k, axis in enumerate(("rotX", "rotY", "rotZ")):
                lo, hi = character.limit_lower[b, k], character.limit_upper[b, k]
                lim = UsdPhysics.LimitAPI.Apply(prim, axis)  # an unlimited axis is authored as -inf..inf
                lim.CreateLowAttr(float(lo * to_deg) if np.isfinite(lo) else -np.inf)
                lim.CreateHighAttr(float(hi * to_deg) if np.isfinite(hi) else np.inf)
                drive = UsdPhysics.DriveAPI.Apply(prim, axis)
                drive.CreateTypeAttr(UsdPhysics.Tokens.force)
                drive.CreateStiffnessAttr(float(character.stiffness[b, k] * M * L * L / to_deg))
                drive.CreateDampingAttr(float(character.damping[b, k] * M * L * L / to_deg))
                drive.CreateTargetPositionAttr(0.0)
                drive.CreateTargetVelocityAttr(0.0)
            armature = float(character.armature[b].mean() * I_UNIT)
            prim.CreateAttribute("newton:armature", Sdf.ValueTypeNames.Float).Set(armature)
            prim.AddAppliedSchema("PhysxJointAPI")  # PhysX / Isaac read the rotor inertia here
            prim.CreateAttribute("physxJoint:armature", Sdf.ValueTypeNames.Float).Set(armature)
            # Featherstone's and XPBD's joint limits are springs of 4x the drive stiffness
            # (newton_model.build_newton_builder); Steel's are hard constraints and ignore these
            prim.CreateAttribute("newton:limitStiffness", Sdf.ValueTypeNames.Float).Set(
                float(4.0 * character.stiffness[b].mean() * M * L * L / to_deg)
            )
            prim.CreateAttribute("newton:limitDamping", Sdf.ValueTypeNames.Float).Set(
                float(character.damping[b].mean() * M * L * L / to_deg)
            )
        stage.GetRootLayer().Save()
