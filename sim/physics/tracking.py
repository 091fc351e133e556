"""PD tracking of a reference motion in Newton, with blow-up and fall detection.

No invisible hands by default: the root is driven only by contacts. The optional residual root assist
(``TrackingConfig.root_assist``) is reported in :attr:`TrackingResult.root_assist` whenever it is on.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..motion import Motion
from ..rotations import quat_conjugate, quat_rotate
from ._finite_differences import angular_velocity
from .character import GRAVITY, PhysicsCharacter, _nearest_euler_equivalent
from .config import TrackingConfig

__all__ = [
    "BlowUp",
    "ReferenceTrajectory",
    "TargetFilter",
    "TrackingResult",
    "apply_target_filter",
    "detect_blowup",
    "detect_fall",
    "reference_trajectory",
    "track",
]

TargetFilter = Callable[[Motion], Motion]
"""A pose-sequence filter (e.g. a pose prior's projection): receives the PD target sequence as a rig Motion and
returns a Motion of the same rig and frame count; the controller tracks what it returns. A filter may carry a
string attribute ``key`` naming what it does (``PoseSpace.target_filter`` sets one): projection checkpoints compare
it on resume; without one they compare a digest of the filter's output on the reference."""


@dataclass
class BlowUp:
    """A detected numerical blow-up.

    Attributes:
        frame: first motion frame at which it was detected.
        reason: what was seen (non-finite state, runaway speed, runaway distance).
    """

    frame: int
    reason: str

    def __str__(self) -> str:
        return f"simulation blew up at frame {self.frame}: {self.reason}"


@dataclass
class ReferenceTrajectory:
    """A reference motion seen by the character's bodies.

    Attributes:
        motion: the rig motion.
        body_pos: world body origins [m], shape (F, B, 3).
        body_rot: world body rotations [quat], shape (F, B, 4).
        com_vel: body centre-of-mass velocities [m/s], shape (F, B, 3).
        root_omega: root angular velocity [rad/s], shape (F, 3).
        coords: joint coordinates [rad], shape (F, B - 1, 3).
        coord_rates: their time derivatives [rad/s], shape (F, B - 1, 3).
    """

    motion: Motion
    body_pos: np.ndarray
    body_rot: np.ndarray
    com_vel: np.ndarray
    root_omega: np.ndarray
    coords: np.ndarray
    coord_rates: np.ndarray

    @property
    def frame_count(self) -> int:
        return self.body_pos.shape[0]

    @property
    def fps(self) -> float:
        return self.motion.fps


def _check_uniform(motion: Motion) -> None:
    """Raises ValueError (naming the motion) unless its frames lie ``1 / motion.fps`` apart.

    The controller steps one frame per ``1 / fps``: a clip whose ``times`` say otherwise (keyframes, or
    :meth:`Motion.sample` at other times while ``fps`` stays) would be played at another speed.
    """
    if not isinstance(motion, Motion):
        raise TypeError(f"reference: expected a Motion or ReferenceTrajectory, got {type(motion).__name__}")
    if not motion.is_uniform():
        steps = np.diff(motion.times)
        lo, hi = f"{steps.min():.4g}", f"{steps.max():.4g}"
        raise ValueError(
            f"motion {motion.name!r}: times are not uniformly sampled at its fps ({motion.fps:g}/s, frames "
            f"{1.0 / motion.fps:.4g} s apart; its frames are {lo if lo == hi else lo + '-' + hi} s apart): the "
            f"controller would play it at another speed. Resample it first: motion.resample(fps), or "
            f"sim.physics.prepare_reference(rig, motion) (resamples to ReferenceConfig.fps)"
        )


def check_frames(ref: ReferenceTrajectory) -> None:
    """Raises ValueError for a reference of fewer than two frames: nothing to simulate (a track of one frame stepped
    nothing and reported success)."""
    if ref.frame_count < 2:
        raise ValueError(f"reference {ref.motion.name!r}: {ref.frame_count} frame(s), nothing to simulate (a motion "
                         "to track needs at least two frames)")  # fmt: skip


def reference_trajectory(character: PhysicsCharacter, motion: Motion) -> ReferenceTrajectory:
    """Body frames, velocities and joint coordinates of a rig motion.

    Raises:
        ValueError: the motion is not uniformly sampled at ``motion.fps`` (``motion.is_uniform()`` is False).
    """
    _check_uniform(motion)
    pos, rot = character.body_transforms(motion)
    com = pos + quat_rotate(rot, character.body_com)
    dt = 1.0 / motion.fps
    vel = np.gradient(com, dt, axis=0) if motion.frame_count > 1 else np.zeros_like(com)
    coords = character.joint_coordinates(rot)
    rates = np.gradient(coords, dt, axis=0) if motion.frame_count > 1 else np.zeros_like(coords)
    omega = angular_velocity(rot[:, 0], motion.fps)
    return ReferenceTrajectory(motion, pos, rot, vel, omega, coords, rates)


def apply_target_filter(
    character: PhysicsCharacter, ref: ReferenceTrajectory, coords: np.ndarray, target_filter: TargetFilter
) -> np.ndarray:
    """Runs a target filter on a joint-coordinate target sequence (F, B - 1, 3) and returns the filtered one.

    The targets become a rig Motion (root from the reference, bodies from the coordinates, merged joints riding
    rigidly), the filter maps it to another Motion, and its bodies' joint coordinates are read back.
    """
    rot = character.body_rotations_from_coordinates(ref.body_rot[:, 0], coords)
    pos = character.body_positions_from_rotations(ref.body_pos[:, 0], rot)
    motion = character.motion_from_bodies(pos, rot, ref.fps, name="targets")
    out = target_filter(motion)
    if not isinstance(out, Motion):
        raise TypeError(f"target_filter must return a Motion, got {type(out).__name__}")
    if out.frame_count != motion.frame_count:
        raise ValueError(f"target_filter returned {out.frame_count} frames, expected {motion.frame_count}")
    out.check_rig(character.rig)
    _, frot = character.body_transforms(out)
    return _nearest_euler_equivalent(character.joint_coordinates(frot), coords)


def detect_blowup(
    character: PhysicsCharacter,
    body_pos: np.ndarray,
    body_vel: np.ndarray,
    ref_pos: np.ndarray,
    cfg: TrackingConfig,
    ref_travel: float = 0.0,
) -> str | None:
    """The reason a simulated frame is a blow-up, or None.

    Args:
        body_pos: body origins [m], (..., B, 3); ``ref_pos`` likewise.
        body_vel: body twists, (..., B, 6): centre-of-mass linear velocity [m/s], then angular velocity [rad/s]
            (world), as ``NewtonTracker.body_state`` returns them. A body spinning in place is runaway energy
            too: the speed tested is the fastest point of its collider, |v| + |omega| * (farthest collider point
            from the centre of mass).
        ref_travel: how far [m] the reference root has moved from where the simulation started: a character
            that fell and stayed behind is that far from its reference without having blown up, so the
            distance test allows it on top of ``blowup_distance_heights``.
    """
    body_vel = np.asarray(body_vel)
    if body_vel.shape[-1] != 6:
        raise ValueError(f"detect_blowup: body_vel must be twists (..., B, 6), got shape {body_vel.shape}")
    if not (np.all(np.isfinite(body_pos)) and np.all(np.isfinite(body_vel))):
        return "non-finite body state (NaN/inf)"
    h = character.height
    lin = np.linalg.norm(body_vel[..., :3], axis=-1)
    spin = np.linalg.norm(body_vel[..., 3:], axis=-1)
    point = lin + spin * character.collider_reach
    limit = cfg.blowup_speed_heights_per_s * h
    if float(point.max()) > limit:
        k = np.unravel_index(int(np.argmax(point)), point.shape)
        name = character.body_names[k[-1]]
        return (
            f"runaway energy: a point of body {name!r} moves at {float(point[k]):.3g} m/s (linear"
            f" {float(lin[k]):.3g} m/s, spin {float(spin[k]):.3g} rad/s; > {cfg.blowup_speed_heights_per_s:g}"
            " heights/s)"
        )
    dist = float(np.linalg.norm(body_pos - ref_pos, axis=-1).max())
    if dist > cfg.blowup_distance_heights * h + ref_travel:
        return (
            f"runaway: a body is {dist:.3g} m from its reference (> {cfg.blowup_distance_heights:g} heights"
            f" + {ref_travel:.3g} m travelled by the reference)"
        )
    return None


def detect_fall(
    body_pos: np.ndarray, body_rot: np.ndarray, ref: ReferenceTrajectory, cfg: TrackingConfig, ground: float = 0.0
) -> int | None:
    """First frame at which the simulated root has fallen (too low or tilted against the reference), or None.

    Args:
        body_pos, body_rot: simulated body frames (F, B, 3) / (F, B, 4).
    """
    n = body_pos.shape[0]
    h_sim = body_pos[:, 0, 2] - ground
    h_ref = ref.body_pos[:n, 0, 2] - ground
    low = h_sim < cfg.fall_height_fraction * h_ref
    up = np.array([0.0, 0.0, 1.0])
    # the root's reference-up direction: the world up seen in the root frame, mapped through the simulated root
    up_local = quat_rotate(quat_conjugate(ref.body_rot[:n, 0]), up)
    up_sim = quat_rotate(body_rot[:, 0], up_local)
    tilt = np.degrees(np.arccos(np.clip(up_sim[:, 2], -1.0, 1.0)))
    bad = low | (tilt > cfg.fall_tilt_deg)
    idx = np.flatnonzero(bad)
    return int(idx[0]) if len(idx) else None


@dataclass
class TrackingResult:
    """What a tracking (or projection) run produced.

    Attributes:
        motion: the simulated motion on the rig (body transforms -> root + local joint rotations); frames after a
            blow-up are not included.
        body_pos, body_rot: simulated body frames (F, B, 3) / (F, B, 4).
        body_vel: simulated body twists (F, B, 6) (COM linear, angular velocity; world).
        target_coords: the PD targets tracked [rad], shape (F, B - 1, 3).
        blowup: the blow-up, or None.
        fell_frame: first fallen frame, or None.
        wall_time_s: wall-clock time of the run [s] (projection: including the optimization).
        sim_time_s: simulated time [s].
        root_assist: None when off; otherwise the residual root force it applied: mean and max [N] and
            the same in units of body weight (projection with a blow-up: over the windows committed before the
            window that blew up; zeros when it was the first).
        info: method-specific details (projection statistics).
    """

    motion: Motion
    body_pos: np.ndarray
    body_rot: np.ndarray
    body_vel: np.ndarray
    target_coords: np.ndarray
    blowup: BlowUp | None
    fell_frame: int | None
    wall_time_s: float
    sim_time_s: float
    root_assist: dict[str, float] | None = None
    info: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """No blow-up and not fallen."""
        return self.blowup is None and self.fell_frame is None

    @property
    def realtime_factor(self) -> float:
        """Simulated seconds per wall-clock second: of the stepping after the first frame (kernel loading and graph
        capture excluded) for PD tracking, of the whole optimization for projection. A PD run that stepped a single
        frame (a two-frame clip, a blow-up in frame 1) has no steady part: its figure includes the warm-up."""
        steady = self.info.get("steady_realtime_factor")
        return float(steady) if steady else self.sim_time_s / max(self.wall_time_s, 1e-12)


def root_assist_report(character: PhysicsCharacter, force_sum_n: float, force_max_n: float, steps: int) -> dict:
    """What the residual root force did over ``steps`` physics steps: mean and max force [N] and the same in body
    weights (total mass x g), from the running sum and maximum of its magnitude."""
    weight = character.total_mass * GRAVITY
    mean = force_sum_n / max(steps, 1)
    return {
        "mean_force_n": mean,
        "max_force_n": force_max_n,
        "mean_force_body_weights": mean / weight,
        "max_force_body_weights": force_max_n / weight,
    }


def initial_state(ref: ReferenceTrajectory, frame: int = 0) -> dict[str, np.ndarray]:
    """The reference's state at ``frame`` as :meth:`CharacterSimulation.set_state` keyword arguments."""
    return {
        "root_pos": ref.body_pos[frame, 0],
        "root_rot": ref.body_rot[frame, 0],
        "coords": ref.coords[frame],
        "root_vel": ref.com_vel[frame, 0],
        "root_omega": ref.root_omega[frame],
        "coord_rates": ref.coord_rates[frame],
        "frame": frame,
    }


def track(
    character: PhysicsCharacter,
    reference: Motion | ReferenceTrajectory,
    cfg: TrackingConfig | None = None,
    *,
    target_coords: np.ndarray | None = None,
    target_filter: TargetFilter | None = None,
) -> TrackingResult:
    """Simulates the character following PD targets from the reference, starting in the reference's first frame.

    Args:
        character: the character.
        reference: the reference motion (uniformly sampled at its fps) or its trajectory.
        cfg: controller configuration.
        target_coords: PD targets [rad] (F, B - 1, 3), finite; default: the reference's joint coordinates.
        target_filter: optional pose-sequence filter applied to the targets before simulation.

    Returns:
        The result; ``result.blowup`` is set (and the motion truncated) when the simulation blew up.

    Raises:
        ValueError: a config value out of range, a non-uniformly sampled motion or one of a single frame, or
            ``target_coords`` of the wrong shape or not finite (each naming what is wrong), before any simulation.
    """
    from .newton_model import CharacterSimulation

    cfg = (cfg or TrackingConfig()).check()
    ref = reference if isinstance(reference, ReferenceTrajectory) else reference_trajectory(character, reference)
    check_frames(ref)
    F = ref.frame_count
    coords = ref.coords if target_coords is None else np.asarray(target_coords, dtype=np.float64)
    if coords.shape != ref.coords.shape:
        raise ValueError(f"target_coords: expected shape {ref.coords.shape}, got {coords.shape}")
    if not np.all(np.isfinite(coords)):
        f, b, k = np.argwhere(~np.isfinite(coords))[0]
        raise ValueError(
            f"target_coords: must be finite, got {coords[f, b, k]} at frame {f}, body {b + 1}"
            f" ({character.body_names[b + 1]!r}), coordinate {k}"
        )
    if target_filter is not None:
        coords = apply_target_filter(character, ref, coords, target_filter)
    rates = np.gradient(coords, 1.0 / ref.fps, axis=0) if (F > 1 and cfg.velocity_targets) else np.zeros_like(coords)
    sim = CharacterSimulation(
        character,
        ref.fps,
        F,
        1,
        cfg.solver,
        cfg.contact,
        root_assist=cfg.root_assist,
        root_reference=(ref.body_pos[:, 0], ref.body_rot[:, 0]),
    )
    sim.set_targets(coords.reshape(F, -1), rates.reshape(F, -1))
    t0 = time.perf_counter()
    sim.set_state(**initial_state(ref))
    pos, rot, vel = (np.zeros((F, character.body_count, k)) for k in (3, 4, 6))
    p, r, v = sim.body_state()
    pos[0], rot[0], vel[0] = p[0], r[0], v[0]
    blowup = None
    n = F
    t_steady = None  # after the first frame: kernel loading and graph capture happen there
    for f in range(1, F):
        sim.step_frame()
        if f == 1:
            t_steady = time.perf_counter()
        p, r, v = sim.body_state()
        pos[f], rot[f], vel[f] = p[0], r[0], v[0]
        travel = float(np.linalg.norm(ref.body_pos[f, 0] - ref.body_pos[0, 0]))
        reason = detect_blowup(character, p[0], v[0], ref.body_pos[f], cfg, travel)
        if reason is not None:
            blowup = BlowUp(f, reason)
            n = f
            break
    t_end = time.perf_counter()
    wall = t_end - t0
    stepped = n if blowup is not None else n - 1  # frames simulated (a blown-up frame was stepped, then dropped)
    timed = stepped - 1  # those after t_steady
    steady = timed / ref.fps / (t_end - t_steady) if (t_steady is not None and timed > 0 and t_end > t_steady) else None
    pos, rot, vel = pos[:n], rot[:n], vel[:n]
    fell = detect_fall(pos, rot, ref, cfg, cfg.contact.ground_height_m) if n else None
    assist = None
    if sim.root_assist is not None:
        fsum, fmax = float(sim.assist_force_sum.numpy()[0]), float(sim.assist_force_max.numpy()[0])
        assist = root_assist_report(character, fsum, fmax, max(stepped * sim.substeps, 1))
    motion = character.motion_from_bodies(pos, rot, ref.fps, name=ref.motion.name) if n else ref.motion.slice(0, 1)
    return TrackingResult(
        motion=motion,
        body_pos=pos,
        body_rot=rot,
        body_vel=vel,
        target_coords=coords,
        blowup=blowup,
        fell_frame=fell,
        wall_time_s=wall,
        sim_time_s=stepped / ref.fps,
        root_assist=assist,
        info={
            "substeps": sim.substeps,
            "dt_s": sim.dt,
            "solver": cfg.solver.solver,
            "steady_realtime_factor": steady,
            "warmup_s": (t_steady - t0) if t_steady is not None else None,
        },
    )
