"""A :class:`PhysicsCharacter` in Newton: model building and a captured, frame-stepped simulation of W worlds.

Newton (and its solvers) are imported on first use of this module, never by ``import sim``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import warp as wp

from .._numbers import is_finite_real
from .._warp_setup import init_warp
from . import _tracking_kernels as K
from ._finite_differences import angular_velocity
from .character import GRAVITY, PhysicsCharacter
from .config import ContactConfig, RootAssistConfig, SolverConfig

__all__ = ["CharacterSimulation", "build_newton_builder", "build_newton_model", "substeps_for"]


def _newton():
    init_warp()
    try:
        import newton
    except ImportError as e:  # pragma: no cover - newton is a declared dependency
        raise ImportError("sim.physics needs the 'newton' package (pip install newton)") from e
    return newton


def substeps_for(fps: float, max_dt: float) -> int:
    """Smallest even number of physics substeps per motion frame with a step no larger than ``max_dt``."""
    n = int(np.ceil(1.0 / (fps * max_dt) - 1e-9))
    return max(2, n + (n % 2))


def _transform(pos, rot):
    return wp.transform(wp.vec3(*[float(x) for x in pos]), wp.quat(*[float(x) for x in rot]))


@dataclass(frozen=True)
class ContactMaterial:
    """The contact parameters a character's shapes get in Newton (also authored on its UsdPhysics stage).

    Attributes:
        gap_m: contact detection gap [m] (``ModelBuilder.rigid_gap``; USD ``newton:contactGap``).
        stiffness: penalty contact stiffness [N/m] (penalty solvers only).
        damping: penalty contact damping [N s/m].
        friction_gain: penalty friction gain [N s/m].
    """

    gap_m: float
    stiffness: float
    damping: float
    friction_gain: float

    def __post_init__(self) -> None:
        # a NaN gap or a negative stiffness was authored on every collider of the stage (and given to Newton)
        for name in ("gap_m", "stiffness", "damping", "friction_gain"):
            v = getattr(self, name)
            if not (is_finite_real(v) and v >= 0):
                raise ValueError(f"ContactMaterial.{name}: must be a finite number >= 0, got {v!r}")


def contact_material(character: PhysicsCharacter, contact: ContactConfig) -> ContactMaterial:
    """The contact parameters of ``character`` under ``contact``: the gap scales with the height, the penalty
    stiffness with the total mass, damping and friction gain are critical for the median body mass."""
    contact = contact.check()
    ke = contact.penalty_stiffness_per_kg * character.total_mass
    light = float(np.median(character.body_mass))
    kd = 2.0 * float(np.sqrt(ke * light))
    return ContactMaterial(gap_m=contact.contact_gap_fraction * character.height, stiffness=ke, damping=kd,
                           friction_gain=kd)  # fmt: skip


def build_newton_builder(character: PhysicsCharacter, solver: SolverConfig, contact: ContactConfig):
    """A ``newton.ModelBuilder`` holding one copy of the character (no ground), bodies in character order.

    Each body gets one capsule shape (its mass properties are set explicitly from the character, the shapes
    carry no density), a free joint for the root and a D6 joint with three angular axes (X, Y, Z of the joint
    frame) for every other body, with the character's limits, PD gains and armature.
    """
    newton = _newton()
    b = newton.ModelBuilder(up_axis=newton.Axis.Z, gravity=(0.0, 0.0, -GRAVITY))
    material = contact_material(character, contact)
    b.rigid_gap = material.gap_m
    shape_cfg = newton.ModelBuilder.ShapeConfig(
        density=0.0,
        mu=contact.friction,
        restitution=contact.restitution,
        ke=material.stiffness,
        kd=material.damping,
        kf=material.friction_gain,
        collision_group=1 if character.config.self_collision else -1,
    )
    has_lower, has_upper = np.isfinite(character.limit_lower), np.isfinite(character.limit_upper)  # each on its own
    joints = []
    for k in range(character.body_count):
        parent = int(character.body_parent[k])
        link = b.add_link(
            mass=float(character.body_mass[k]),
            com=wp.vec3(*character.body_com[k]),
            inertia=wp.mat33(*character.body_inertia[k].ravel()),
            lock_inertia=True,
            label=character.body_names[k],
        )
        cap = character.capsules[k]
        b.add_shape_capsule(
            link,
            xform=_transform(cap.center, cap.rotation()),
            radius=float(cap.radius),
            half_height=float(cap.half_height),
            cfg=shape_cfg,
            label=f"{character.body_names[k]}_collider",
        )
        if parent < 0:
            joints.append(b.add_joint_free(link, label=f"{character.body_names[k]}_root"))
            continue
        axes = []
        for a in range(3):
            lo = float(character.limit_lower[k, a]) if has_lower[k, a] else -1e10
            hi = float(character.limit_upper[k, a]) if has_upper[k, a] else 1e10
            axes.append(
                newton.ModelBuilder.JointDofConfig(
                    axis=[(1, 0, 0), (0, 1, 0), (0, 0, 1)][a],
                    limit_lower=lo,
                    limit_upper=hi,
                    limit_ke=float(character.stiffness[k, a]) * 4.0,
                    limit_kd=float(character.damping[k, a]),
                    target_ke=float(character.stiffness[k, a]),
                    target_kd=float(character.damping[k, a]),
                    armature=float(character.armature[k, a]),
                    actuator_mode=newton.JointTargetMode.POSITION_VELOCITY,
                )
            )
        joints.append(
            b.add_joint_d6(
                parent,
                link,
                angular_axes=axes,
                parent_xform=_transform(character.parent_anchor_pos[k], character.parent_anchor_rot[k]),
                child_xform=_transform(np.zeros(3), character.child_anchor_rot[k]),
                label=f"{character.body_names[k]}_joint",
            )
        )
    b.add_articulation(joints, label=character.rig.name)
    for i, j in character.collision_filter_pairs:
        b.add_shape_collision_filter_pair(i, j)
    return b


def build_newton_model(
    character: PhysicsCharacter,
    world_count: int = 1,
    solver: SolverConfig | None = None,
    contact: ContactConfig | None = None,
):
    """A finalized ``newton.Model`` on ``solver.device``: ``world_count`` separate copies of the character on a ground
    plane."""
    newton = _newton()
    solver = (solver or SolverConfig()).check()
    contact = (contact or ContactConfig()).check()
    one = build_newton_builder(character, solver, contact)
    scene = newton.ModelBuilder(up_axis=newton.Axis.Z, gravity=(0.0, 0.0, -GRAVITY))
    scene.rigid_gap = one.rigid_gap
    scene.replicate(one, world_count)
    ground_cfg = newton.ModelBuilder.ShapeConfig(
        mu=contact.friction, restitution=contact.restitution, ke=one.shape_material_ke[0],
        kd=one.shape_material_kd[0], kf=one.shape_material_kf[0],
    )  # fmt: skip
    scene.add_ground_plane(height=contact.ground_height_m, cfg=ground_cfg)
    return scene.finalize(device=solver.device)


def _make_solver(model, cfg: SolverConfig, enable_limits: bool):
    newton = _newton()
    if cfg.solver == "steel":
        return newton.solvers.SolverSteel(
            model,
            iterations=cfg.iterations,
            enable_joint_limits=enable_limits,
            joint_limit_activation_gap=0.1,
            articulation_constraint_max=cfg.constraint_capacity,
            warn_constraint_overflow=True,
        )
    if cfg.solver == "featherstone":
        return newton.solvers.SolverFeatherstone(model, use_tile_gemm=False)
    if cfg.solver == "xpbd":
        return newton.solvers.SolverXPBD(model, iterations=cfg.iterations)
    raise ValueError(f"unknown solver {cfg.solver!r} (expected steel, featherstone or xpbd)")


class CharacterSimulation:
    """``world_count`` copies of a character stepped frame by frame, each world with its own PD target sequence.

    One call to :meth:`step_frame` advances every world by one motion frame (``substeps`` physics steps) with
    targets interpolated linearly between the frame's and the next frame's; with capture on, the frame is a
    recorded Warp graph replayed on the CPU.

    Attributes:
        character: the character.
        model: the Newton model.
        world_count, substeps, dt: batch size, substeps per frame, physics step [s].
        frame: index of the motion frame the state is at.
    """

    def __init__(
        self,
        character: PhysicsCharacter,
        fps: float,
        frame_count: int,
        world_count: int = 1,
        solver: SolverConfig | None = None,
        contact: ContactConfig | None = None,
        root_assist: RootAssistConfig | None = None,
        root_reference: tuple[np.ndarray, np.ndarray] | None = None,
        cost_reference: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
        cost_weights: dict[str, float] | None = None,
    ):
        """Builds the model, solver, collision pipeline and device tables.

        Args:
            character: the character.
            fps: motion frame rate [1/s].
            frame_count: length of the target tables [frames].
            world_count: parallel worlds.
            solver, contact: configuration.
            root_assist: optional residual root wrench (needs ``root_reference``).
            root_reference: reference root body frames: positions (F, 3) [m], rotations (F, 4).
            cost_reference: reference body origins (F, B, 3), rotations (F, B, 4) and COM velocities (F, B, 3)
                for the per-world rollout cost.
            cost_weights: keyword weights of :func:`rollout_cost_kernel` (position, root, rotation, velocity, skate)
                and ``self_penetration`` (:func:`self_penetration_cost_kernel`, 0: off).
        """
        newton = _newton()
        self.newton = newton
        self.character = character
        self.solver_cfg = (solver or SolverConfig()).check()
        self.contact_cfg = (contact or ContactConfig()).check()
        self.world_count = int(world_count)
        self.fps = float(fps)
        self.frame_count = int(frame_count)
        self.substeps = substeps_for(fps, self.solver_cfg.step_limit_s())
        self.dt = 1.0 / (fps * self.substeps)
        self.device = str(wp.get_device(self.solver_cfg.device))
        self.model = build_newton_model(character, world_count, self.solver_cfg, self.contact_cfg)
        # either bound alone is a limit (a joint with only an upper bound was once left free)
        bounds = np.concatenate([character.limit_lower[1:], character.limit_upper[1:]])
        enable_limits = bool(np.isfinite(bounds).any())
        self.solver = _make_solver(self.model, self.solver_cfg, enable_limits)
        self.state_0, self.state_1 = self.model.state(), self.model.state()
        self.control = self.model.control()
        # velocity-derived speculative contacts: fast limbs are caught before they pass through each other
        self.pipeline = newton.CollisionPipeline(
            self.model,
            broad_phase="explicit",
            speculative_contact_gap_max=self.contact_cfg.speculative_gap_fraction * character.height,
        )
        self.contacts = self.pipeline.contacts()
        self.B = character.body_count
        self.C = character.dof_count
        self.q_stride = self.model.joint_coord_count // self.world_count
        self.qd_stride = self.model.joint_dof_count // self.world_count
        self.step_index = wp.zeros(1, dtype=wp.int32, device=self.device)
        self.table_q = wp.zeros(
            (self.frame_count, self.world_count, max(self.C, 1)), dtype=wp.float32, device=self.device
        )
        self.table_qd = wp.zeros_like(self.table_q)
        self.cost = wp.zeros(self.world_count, dtype=wp.float32, device=self.device)
        self.assist_force_sum = wp.zeros(self.world_count, dtype=wp.float32, device=self.device)
        self.assist_force_max = wp.zeros(self.world_count, dtype=wp.float32, device=self.device)
        self._graph = None
        self.frame = 0
        self.root_assist = root_assist.check() if (root_assist is not None and root_assist.enabled) else None
        if self.root_assist is not None:
            if root_reference is None:
                raise ValueError("root_assist needs root_reference")
            self._setup_root_assist(root_reference)
        self._cost_ref = None
        if cost_reference is not None:
            pos, rot, vel = cost_reference
            self._cost_ref = (
                wp.array(pos.astype(np.float32), dtype=wp.vec3, device=self.device),
                wp.array(rot.astype(np.float32), dtype=wp.quat, device=self.device),
                wp.array(vel.astype(np.float32), dtype=wp.vec3, device=self.device),
            )
            w = {"position": 1.0, "root": 4.0, "rotation": 0.02, "velocity": 0.01, "skate": 0.0,
                 "self_penetration": 0.0}  # fmt: skip
            w.update(cost_weights or {})
            self._cost_w = w
            caps = character.capsules
            self._cost_caps = (
                wp.array(
                    np.stack([c.endpoints[0] for c in caps]).astype(np.float32), dtype=wp.vec3, device=self.device
                ),
                wp.array(
                    np.stack([c.endpoints[1] for c in caps]).astype(np.float32), dtype=wp.vec3, device=self.device
                ),
                wp.array(character.capsule_radii.astype(np.float32), dtype=wp.float32, device=self.device),
                wp.array(character.body_com.astype(np.float32), dtype=wp.vec3, device=self.device),
                wp.array(character.support_body.astype(np.int32), dtype=wp.int32, device=self.device),
            )
            self._contact_band = float(self.contact_cfg.ground_height_m + 0.01 * character.height)
            self._self_pen = None
            if w["self_penetration"] > 0.0 and character.filter_overlap_m:
                from .metrics import filtered_pair_allowance

                pairs, allowance = filtered_pair_allowance(character, self.frame_count, pos, rot)
                self._self_pen = (
                    wp.array(pairs, dtype=wp.int32, device=self.device),
                    wp.array(allowance.astype(np.float32), dtype=wp.float32, device=self.device),
                )

    # -- setup ----------------------------------------------------------------------------------------
    def _setup_root_assist(self, root_reference) -> None:
        pos, rot = root_reference
        fps = self.fps
        vel = np.gradient(pos, 1.0 / fps, axis=0)
        omega = angular_velocity(rot, fps)  # central differences, as vel (a forward one lagged half a frame)
        self._assist_ref = (
            wp.array(pos.astype(np.float32), dtype=wp.vec3, device=self.device),
            wp.array(rot.astype(np.float32), dtype=wp.quat, device=self.device),
            wp.array(vel.astype(np.float32), dtype=wp.vec3, device=self.device),
            wp.array(omega.astype(np.float32), dtype=wp.vec3, device=self.device),
        )
        m = self.character.total_mass
        w_lin = 2.0 * np.pi * self.root_assist.position_hz
        w_rot = 2.0 * np.pi * self.root_assist.rotation_hz
        i_char = m * (0.25 * self.character.height) ** 2
        z = self.root_assist.damping_ratio
        self._assist_gains = (m * w_lin**2, 2 * z * m * w_lin, i_char * w_rot**2, 2 * z * i_char * w_rot)
        self._assist_max = (
            self.root_assist.max_force_body_weights * m * GRAVITY,
            self.root_assist.max_force_body_weights * m * GRAVITY * 0.25 * self.character.height,
        )

    def set_targets(self, q: np.ndarray, qd: np.ndarray) -> None:
        """PD targets per frame and world: joint coordinates [rad] and their rates [rad/s], each (F, W, C).

        A (F, C) table is broadcast to every world.
        """
        q = np.asarray(q, dtype=np.float32)
        qd = np.asarray(qd, dtype=np.float32)
        if q.ndim == 2:
            q = np.broadcast_to(q[:, None], (q.shape[0], self.world_count, q.shape[1]))
            qd = np.broadcast_to(qd[:, None], (qd.shape[0], self.world_count, qd.shape[1]))
        want = (self.frame_count, self.world_count, self.C)
        if q.shape != want or qd.shape != want:
            raise ValueError(f"targets: expected shape {want}, got {q.shape} and {qd.shape}")
        if self.C:
            self.table_q.assign(np.ascontiguousarray(q))
            self.table_qd.assign(np.ascontiguousarray(qd))

    def set_state(self, root_pos, root_rot, coords, root_vel, root_omega, coord_rates, frame: int) -> None:
        """Sets every world's state: root frame, joint coordinates and their rates; arrays are (W, ...) or
        unbatched (broadcast). ``root_vel`` is the root's centre-of-mass velocity [m/s] (world)."""
        W = self.world_count
        q = np.zeros((W, self.q_stride), dtype=np.float32)
        qd = np.zeros((W, self.qd_stride), dtype=np.float32)
        q[:, 0:3] = np.broadcast_to(root_pos, (W, 3))
        q[:, 3:7] = np.broadcast_to(root_rot, (W, 4))
        q[:, 7:] = np.broadcast_to(np.asarray(coords).reshape(-1, self.C), (W, self.C))
        qd[:, 0:3] = np.broadcast_to(root_vel, (W, 3))
        qd[:, 3:6] = np.broadcast_to(root_omega, (W, 3))
        qd[:, 6:] = np.broadcast_to(np.asarray(coord_rates).reshape(-1, self.C), (W, self.C))
        self.set_joint_state(q, qd, frame)

    def set_joint_state(self, joint_q: np.ndarray, joint_qd: np.ndarray, frame: int) -> None:
        """Sets the generalized state of every world, (W, coords) and (W, dofs), and the frame counter."""
        s = self.state_0
        s.joint_q.assign(np.ascontiguousarray(joint_q, dtype=np.float32).ravel())
        s.joint_qd.assign(np.ascontiguousarray(joint_qd, dtype=np.float32).ravel())
        self.newton.eval_fk(self.model, s.joint_q, s.joint_qd, s)
        self.state_1.assign(s)
        if hasattr(self.solver, "reset"):
            self.solver.reset(s)
        self.frame = int(frame)
        self.step_index.assign(np.array([frame * self.substeps], dtype=np.int32))

    def joint_state(self) -> tuple[np.ndarray, np.ndarray]:
        """Copies of the generalized state, (W, coords) and (W, dofs).

        Steel and Featherstone integrate the generalized state; XPBD steps the bodies only and leaves
        ``joint_q`` / ``joint_qd`` where :meth:`set_joint_state` put them, so they are recovered from the bodies
        (``newton.eval_ik``) first: a projection window then starts where the previous one ended, not where the
        rollout began.
        """
        s = self.state_0
        if self.solver_cfg.solver not in ("steel", "featherstone"):
            self.newton.eval_ik(self.model, s, s.joint_q, s.joint_qd)
        return (
            s.joint_q.numpy().reshape(self.world_count, -1).copy(),
            s.joint_qd.numpy().reshape(self.world_count, -1).copy(),
        )

    def body_state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Copies of the body frames and velocities: origins (W, B, 3) [m], rotations (W, B, 4),
        twists (W, B, 6) (COM linear velocity, angular velocity; world)."""
        bq = self.state_0.body_q.numpy().reshape(self.world_count, self.B, 7)
        bqd = self.state_0.body_qd.numpy().reshape(self.world_count, self.B, 6)
        return bq[..., :3].astype(np.float64), bq[..., 3:].astype(np.float64), bqd.astype(np.float64)

    def reset_costs(self) -> None:
        self.cost.zero_()
        self.assist_force_sum.zero_()
        self.assist_force_max.zero_()

    @property
    def captured(self) -> bool:
        """Whether the frame graph has been recorded (or capture is off): stepping no longer records."""
        return self._graph is not None or not self.solver_cfg.capture

    def rollout(self, table_q, table_qd, joint_q, joint_qd, frame: int, frames: int, record: int) -> dict:
        """Plays ``frames`` frames of every world from a given state under given PD target tables.

        Args:
            table_q, table_qd: PD targets and rates per frame and world, (F, W, C) [rad], [rad/s].
            joint_q, joint_qd: generalized start state per world, (W, coords), (W, dofs).
            frame: motion frame of the start state.
            frames: frames to play.
            record: frames whose body states are returned (the first ones), 1 <= record <= frames.

        Returns:
            ``states`` (record, W, B, 13): body origin, rotation (xyzw) and twist per recorded frame; ``q``, ``qd``:
            the generalized state after ``record`` frames; ``cost`` (W,) accumulated rollout cost over the ``frames``
            frames (inf for a world whose state went non-finite); ``assist_sum``, ``assist_max`` (W,) root-assist
            force statistics over the ``record`` recorded frames (zeros when off).
        """
        self.set_targets(table_q, table_qd)
        self.set_joint_state(joint_q, joint_qd, frame)
        self.reset_costs()
        states = np.zeros((record, self.world_count, self.B, 13))
        on = self.root_assist is not None
        saved = assist = None
        for k in range(frames):
            self.step_frame()
            if k < record:
                p, r, v = self.body_state()
                states[k, ..., :3], states[k, ..., 3:7], states[k, ..., 7:] = p, r, v
                if k == record - 1:
                    saved = self.joint_state()
                    if on:  # the force of the recorded frames only: the rest is replayed by the next window
                        assist = (self.assist_force_sum.numpy().astype(np.float64),
                                  self.assist_force_max.numpy().astype(np.float64))  # fmt: skip
        zeros = np.zeros(self.world_count)
        cost = self.cost.numpy().astype(np.float64)
        cost[~(cost < K.BLOWN_COST)] = np.inf  # a world whose state went non-finite (the kernels' marker, or NaN)
        return {
            "states": states,
            "q": saved[0],
            "qd": saved[1],
            "cost": cost,
            "assist_sum": assist[0] if on else zeros,
            "assist_max": assist[1] if on else zeros,
        }

    # -- stepping ------------------------------------------------------------------------------------------
    def _substep(self) -> None:
        m, s0, s1 = self.model, self.state_0, self.state_1
        s0.clear_forces()
        if self.C:
            wp.launch(
                K.play_targets_kernel,
                dim=(self.world_count, self.C),
                inputs=[self.step_index, self.substeps, self.frame_count, self.table_q, self.table_qd,
                        self.q_stride, 7, self.qd_stride, 6],
                outputs=[self.control.joint_target_q, self.control.joint_target_qd],
                device=self.device,
            )  # fmt: skip
        if self.root_assist is not None:
            rp, rr, rv, ro = self._assist_ref
            kp, kd, kpr, kdr = self._assist_gains
            wp.launch(
                K.root_assist_kernel,
                dim=self.world_count,
                inputs=[self.step_index, self.substeps, self.frame_count, rp, rr, rv, ro, s0.body_q, s0.body_qd,
                        m.body_com, self.B, kp, kd, kpr, kdr, self._assist_max[0], self._assist_max[1]],
                outputs=[s0.body_f, self.assist_force_sum, self.assist_force_max],
                device=self.device,
            )  # fmt: skip
        self.pipeline.collide(s0, self.contacts, dt=self.dt)
        self.solver.step(s0, s1, self.control, self.contacts, self.dt)
        self.state_0, self.state_1 = s1, s0
        wp.launch(K.advance_step_kernel, dim=1, inputs=[self.step_index], device=self.device)

    def _frame(self) -> None:
        for _ in range(self.substeps):
            self._substep()
        if self._cost_ref is not None:
            pos, rot, vel = self._cost_ref
            w = self._cost_w
            wp.launch(
                K.rollout_cost_kernel,
                dim=self.world_count,
                inputs=[self.step_index, self.substeps, self.frame_count, self.state_0.body_q, self.state_0.body_qd,
                        pos, rot, vel, self.B, 1.0 / self.character.height, w["position"], w["root"], w["rotation"],
                        w["velocity"], *self._cost_caps, self._contact_band, w["skate"]],
                outputs=[self.cost],
                device=self.device,
            )  # fmt: skip
            if self._self_pen is not None:
                seg_a, seg_b, radius = self._cost_caps[:3]
                wp.launch(
                    K.self_penetration_cost_kernel,
                    dim=self.world_count,
                    inputs=[self.step_index, self.substeps, self.frame_count, self.state_0.body_q, self.B,
                            1.0 / self.character.height, seg_a, seg_b, radius, *self._self_pen,
                            w["self_penetration"]],
                    outputs=[self.cost],
                    device=self.device,
                )  # fmt: skip

    def step_frame(self) -> None:
        """Advances every world by one motion frame."""
        if self.solver_cfg.capture:
            if self._graph is None:
                # run the frame eagerly once (compiles kernels, allocates solver scratch), then record it;
                # a CPU or CUDA capture records without executing
                s0 = self.state_0
                self._frame()
                with wp.ScopedCapture(device=self.device) as cap:
                    self._frame()
                if self.state_0 is not s0:
                    raise RuntimeError("capture needs an even number of substeps per frame")
                self._graph = cap.graph
            else:
                wp.capture_launch(self._graph)
        else:
            self._frame()
        self.frame += 1
