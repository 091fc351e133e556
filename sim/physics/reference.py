"""From a kinematic clip to the reference a physical character can track: scale, loop, root motion, ground."""

from __future__ import annotations

import itertools
import warnings
from dataclasses import dataclass

import numpy as np

from .._numbers import is_real
from ..kinematics import pose_motion, skin_motion
from ..motion import Motion
from ..rig import Rig, RigError, SkinnedMesh
from ..rotations import axis_angle_to_quat, quat_conjugate, quat_multiply, quat_rotate
from .config import ReferenceConfig

__all__ = [
    "PreparedReference",
    "ballistic_flight",
    "ground_offset",
    "ground_offsets",
    "loop_motion",
    "prepare_reference",
    "root_motion_from_contacts",
    "scale_motion",
    "scale_rig",
    "smooth_centroid_velocity",
]

CYCLIC_TOLERANCE = 1e-3
"""Max abs quaternion-component difference between the first and last frames of a cyclic clip."""
STATIC_TOLERANCE = 1e-9
"""A joint whose local transform varies less than this over a clip is static (see :func:`_motion_carrier`)."""
IN_PLACE_RATIO = 0.25
"""``root_motion="auto"``: a clip is in place when its root travels less than this fraction of its contact
vertices' sliding distance."""
CONTACT_HEIGHT_FRACTION = 0.005
"""Vertices within this fraction of the character height above their frame's lowest point are in ground
contact (root-motion extraction)."""
GROUND_SMOOTHING_S = 0.05
"""Standard deviation of the Gaussian that smooths per-frame ground shifts [s] (the lowest vertex jumps between
frames as feet roll; the body should not)."""
FLIGHT_HEIGHT_FRACTION = 0.05
"""Frames whose lowest point is more than this fraction of the height above the clip's lowest point are in
flight (no ground contact)."""


def scale_rig(rig: Rig, scale: float) -> Rig:
    """The rig uniformly scaled about the skeleton-space origin (rest pose, bind pose and meshes)."""
    ibm = rig.inverse_bind_matrices.copy()
    ibm[:, :3, 3] *= scale  # S @ IBM @ S^-1 keeps the 3x3 block and scales the translation
    meshes = [
        SkinnedMesh(m.name, m.points * scale, m.triangles, m.influence_joints, m.influence_weights) for m in rig.meshes
    ]
    return Rig(
        rig.joint_names, rig.parents, rig.rest_translations * scale, rig.rest_rotations, ibm, meshes, name=rig.name
    )


def scale_motion(motion: Motion, scale: float) -> Motion:
    """The motion with its translations uniformly scaled (rotations and times unchanged)."""
    trans = None if motion.translations is None else motion.translations * scale
    return Motion(
        motion.fps, motion.root_translations * scale, motion.rotations, trans, times=motion.times, name=motion.name
    )


_X = np.array([1.0, 0.0, 0.0])


def _heading(q: np.ndarray, axis: np.ndarray = _X) -> np.ndarray:
    """Heading [rad] of the rotations ``q`` (..., 4): the angle about Z of their local ``axis`` (3,) seen from
    above, in (-pi, pi], shape (...)."""
    fwd = quat_rotate(q, axis)
    return np.arctan2(fwd[..., 1], fwd[..., 0])


def _yaw_quat(q: np.ndarray, axis: np.ndarray = _X) -> np.ndarray:
    """The rotation about Z closest to ``q`` (its :func:`_heading`), as a quaternion."""
    return axis_angle_to_quat(_heading(q, axis)[..., None] * np.array([0.0, 0.0, 1.0]))


def _without_heading(q: np.ndarray, axis: np.ndarray = _X) -> np.ndarray:
    """``q`` with its heading (:func:`_yaw_quat`) taken off: yaw^-1 q."""
    return quat_multiply(quat_conjugate(_yaw_quat(q, axis)), q)


def _heading_axis(q: np.ndarray) -> np.ndarray:
    """The local axis (3,) whose heading measures the turn of a joint with world rotation ``q`` (4,): x, unless it
    is within 45 deg of vertical there (a bone pointing up), then the most horizontal of x, y, z."""
    up = np.abs(quat_rotate(q, np.eye(3))[:, 2])
    return _X if up[0] < np.sqrt(0.5) else np.eye(3)[int(np.argmin(up))]


def _motion_carrier(rig: Rig | None, motion: Motion) -> int:
    """The joint that carries the motion's travel and turn: the topmost joint (least depth, then lowest index)
    whose transform is animated, i.e. whose local rotation or translation varies over the clip by more than
    ``STATIC_TOLERANCE`` (quaternion components; translations relative to the clip's largest local translation).

    Its ancestors are static, so its world transform is the first to move: joint 0 for most rigs, the hip below
    static container joints for a glTF rig (the Fox's ``_rootJoint -> b_Root_00 -> b_Hip_01``). 0 when nothing
    moves or ``rig`` is None (without the rig's hierarchy only joint 0 is known).

    Raises:
        RigError: the motion does not fit the rig.
    """
    if rig is None:
        return 0
    motion.check_rig(rig)
    q, t = motion.rotations, motion.local_translations(rig)
    dq = np.minimum(np.abs(q - q[:1]).max(-1), np.abs(q + q[:1]).max(-1)).max(0)  # either quaternion sign, (J,)
    dt = np.abs(t - t[:1]).max(-1).max(0)
    size = float(np.abs(t).max()) or 1.0
    moving = np.flatnonzero((dq > STATIC_TOLERANCE) | (dt > STATIC_TOLERANCE * size))
    if not len(moving):
        return 0
    return int(moving[np.argmin(rig.depths()[moving])])  # argmin: the first (lowest index) of the least depth


def _check_loops(loops) -> None:
    """Raises ValueError unless ``loops`` is a positive integer (a float such as 2.0 is refused too)."""
    if isinstance(loops, (bool, np.bool_)) or not isinstance(loops, (int, np.integer)) or loops < 1:
        raise ValueError(f"loops: must be a positive integer, got {loops!r}")


def loop_motion(motion: Motion, loops: int, rig: Rig | None = None) -> Motion:
    """Repeats a cyclic clip ``loops`` times; each repeat starts where the previous ended (heading and
    horizontal position accumulate, height does not).

    Works on the clip's own sample times (keyframed clips keep their keys): the period is ``times[-1] -
    times[0]`` for a closing clip (last frame == first frame up to the heading the cycle turns by, whose duplicate
    is dropped between repeats), one mean sample interval longer otherwise (with a warning: such a clip jumps at
    each seam; its travel and turn per repeat are extrapolated by that interval, the turn from the unwrapped
    per-frame heading, so a clip may cross +-pi or turn by more than pi).

    Travel and turn are those of the motion's carrier (:func:`_motion_carrier`, from ``rig``'s forward kinematics;
    joint 0 without ``rig``): each repeat is the previous one moved by the rigid ground-plane increment (a turn
    about +Z and a horizontal shift, applied to joint 0) that maps the carrier's first-frame heading and
    horizontal position onto its last frame's. The heading is that of the carrier's local x axis (of its most
    horizontal axis where x is within 45 deg of vertical). A turn carried by a child of static joints counts as
    closing too: the carrier's pose is compared with its heading removed.

    Args:
        motion: the clip (F frames of J joints).
        loops: repeats, a positive integer.
        rig: the clip's rig; without it joint 0 carries the motion (a static ``_rootJoint`` above the animated hip
            of a glTF rig would then never move, and each repeat would jump back).

    Raises:
        ValueError: ``loops`` is not a positive integer.
        RigError: the motion does not fit ``rig``.
    """
    _check_loops(loops)
    if loops == 1 or motion.frame_count < 2:
        return motion
    c = _motion_carrier(rig, motion)
    if c == 0:  # the motion's own arrays (bit-for-bit what a rig whose joint 0 moves always got)
        cpos, crot = motion.root_translations, motion.rotations[:, 0]
    else:  # world transform of the carrier (its ancestors are static)
        pos, rot = pose_motion(rig, motion)
        cpos, crot = pos[:, c], rot[:, c]
    axis = _heading_axis(crot[0])
    # closing: the last frame is the first pose again, up to the heading the cycle turns by (a turning walk)
    first, last = motion.rotations[0].copy(), motion.rotations[-1].copy()
    first[c], last[c] = _without_heading(crot[0], axis), _without_heading(crot[-1], axis)
    d = np.minimum(np.abs(first - last).max(-1), np.abs(first + last).max(-1))  # either quaternion sign
    closing = motion.frame_count > 2 and float(d.max()) < CYCLIC_TOLERANCE
    if not closing:
        why = ("has only two frames (a closing clip needs a frame between its first and its repeat)"
               if motion.frame_count == 2 else "first and last frames differ")  # fmt: skip
        warnings.warn(f"motion {motion.name!r}: {why}; looping anyway", stacklevel=2)
    body = motion.slice(0, motion.frame_count - 1) if closing else motion
    period = motion.duration if closing else motion.duration * motion.frame_count / (motion.frame_count - 1)
    # per-loop rigid increment in the ground plane: from the carrier's first frame to its closing frame
    q0, q1 = crot[0], crot[-1]
    dyaw = quat_multiply(_yaw_quat(q1, axis), quat_conjugate(_yaw_quat(q0, axis)))
    step = cpos[-1] - cpos[0]
    if not closing:  # one more sample interval of travel and turn, at the clip's mean rate
        stretch = motion.frame_count / (motion.frame_count - 1)
        step = step * stretch
        yaw = np.unwrap(_heading(crot, axis))  # the turn itself, not its angle mod 2 pi
        dyaw = axis_angle_to_quat(np.array([0.0, 0.0, (yaw[-1] - yaw[0]) * stretch]))
    step[2] = 0.0
    origin = cpos[0] * np.array([1.0, 1.0, 0.0])
    roots, rots, trans, times = [], [], [], []
    acc_q = np.array([0.0, 0.0, 0.0, 1.0])
    acc_t = np.zeros(3)

    def place(root, rot, tr):
        rr = rot.copy()
        rr[:, 0] = quat_multiply(acc_q, rr[:, 0])
        return quat_rotate(acc_q, root - origin) + origin + acc_t, rr, None if tr is None else tr.copy()

    for k in range(loops):
        r, q, t = place(body.root_translations, body.rotations, body.translations)
        roots.append(r)
        rots.append(q)
        trans.append(t)
        times.append(body.times + k * period)
        acc_t = acc_t + quat_rotate(acc_q, step)
        acc_q = quat_multiply(dyaw, acc_q)
    if closing:  # close the last repeat with the first frame, placed after it
        last = motion.slice(0, 1)
        r, q, t = place(last.root_translations, last.rotations, last.translations)
        roots.append(r)
        rots.append(q)
        trans.append(t)
        times.append(last.times + loops * period)
    root = np.concatenate(roots)
    tr = None
    if body.translations is not None:
        tr = np.concatenate(trans)
        tr[:, 0] = root
    return Motion(motion.fps, root, np.concatenate(rots), tr, times=np.concatenate(times), name=motion.name)


def _stance_frames(zmin: np.ndarray, height: float) -> np.ndarray:
    """Frames whose lowest vertex is within ``FLIGHT_HEIGHT_FRACTION x height`` of the clip's lowest point."""
    return zmin < zmin.min() + FLIGHT_HEIGHT_FRACTION * height


def _contact_points(rig: Rig, motion: Motion) -> np.ndarray:
    """Points whose ground contact is tracked: skinned vertices, or joint positions for meshless rigs, (F, N, 3)."""
    if rig.meshes and sum(m.vertex_count for m in rig.meshes):
        return skin_motion(rig, motion)[0]
    return pose_motion(rig, motion)[0]


def root_motion_from_contacts(
    rig: Rig, motion: Motion, *, force: bool = False, smoothing_s: float = 0.0
) -> tuple[Motion, bool]:
    """Gives a treadmill (in-place) clip the horizontal root motion that keeps its stance points planted.

    In every stance frame the points within ``CONTACT_HEIGHT_FRACTION x height`` of that frame's lowest point
    are in contact; the median horizontal velocity of the points in contact in two consecutive frames is
    subtracted from the root and integrated (flight frames keep the last stance velocity). A clip whose root
    already travels at least ``IN_PLACE_RATIO`` of that sliding distance is returned unchanged unless ``force``.
    ``smoothing_s`` low-passes the extracted velocity (Gaussian, standard deviation in seconds): stance feet of a
    stylized clip rarely agree on one body velocity, and its jumps would ask for more friction than exists.

    Returns:
        The (possibly) re-rooted motion and whether root motion was added.
    """
    if motion.frame_count < 2:
        return motion, False
    pts = _contact_points(rig, motion)
    height = rig.height()
    zmin = pts[..., 2].min(axis=1)
    stance = _stance_frames(zmin, height)
    contact = (pts[..., 2] < zmin[:, None] + CONTACT_HEIGHT_FRACTION * height) & stance[:, None]
    both = contact[1:] & contact[:-1]
    dt = np.diff(motion.times)
    vel = (pts[1:, :, :2] - pts[:-1, :, :2]) / dt[:, None, None]
    slide = np.zeros((motion.frame_count - 1, 2))
    last = np.zeros(2)
    for f in range(len(slide)):
        if both[f].any():
            last = np.median(vel[f][both[f]], axis=0)
        slide[f] = last
    slide_dist = float(np.sum(np.linalg.norm(slide, axis=1) * dt))
    root_dist = float(np.linalg.norm(motion.root_translations[-1, :2] - motion.root_translations[0, :2]))
    if not force and root_dist >= IN_PLACE_RATIO * slide_dist:
        return motion, False
    if smoothing_s > 0:
        slide = np.stack([_smooth(slide[:, k], smoothing_s * motion.fps) for k in range(2)], axis=1)
    offset = np.zeros((motion.frame_count, 3))
    offset[1:, :2] = -np.cumsum(slide * dt[:, None], axis=0)
    return _shift_root(motion, offset), True


def smooth_centroid_velocity(rig: Rig, motion: Motion, smoothing_s: float) -> Motion:
    """Low-passes the horizontal velocity of the contact points' centroid (a proxy of the centre of mass).

    The root is shifted horizontally so that the centroid follows its Gaussian-smoothed velocity (standard
    deviation ``smoothing_s`` seconds), integrated from its first position. Stance feet of a stylized treadmill
    clip sweep back at speeds that change several-fold within a stride; root motion extracted from them asks the
    body to accelerate faster than ground forces under its feet can push it without tipping it over.

    Returns:
        The motion with the shifted root.
    """
    if smoothing_s <= 0 or motion.frame_count < 3:
        return motion
    c = _contact_points(rig, motion)[..., :2].mean(axis=1)
    dt = np.diff(motion.times)
    v = np.diff(c, axis=0) / dt[:, None]
    vs = np.stack([_smooth(v[:, k], smoothing_s * motion.fps) for k in range(2)], axis=1)
    target = c[0] + np.concatenate([np.zeros((1, 2)), np.cumsum(vs * dt[:, None], axis=0)])
    offset = np.zeros((motion.frame_count, 3))
    offset[:, :2] = target - c
    return _shift_root(motion, offset)


def ballistic_flight(rig: Rig, motion: Motion, gravity: float = 9.81) -> tuple[Motion, int]:
    """Makes the vertical motion of flight phases ballistic.

    In a run of flight frames (see :func:`ground_offsets`) between two stance frames, the height of the points'
    centroid (a proxy of the centre of mass) is replaced by the parabola under ``gravity`` through its heights at
    take-off and touch-down; the root is shifted vertically by the difference, but never so far down that a flight
    frame's lowest point falls below the lower of the take-off's and touch-down's. Animated flight that floats
    (no downward acceleration) is not reproducible by any physical character.

    Returns:
        The motion and the number of flight frames changed.
    """
    pts = _contact_points(rig, motion)
    zmin = pts[..., 2].min(axis=1)
    stance = _stance_frames(zmin, rig.height())
    c = pts[..., 2].mean(axis=1)
    t = motion.times
    dz = np.zeros(motion.frame_count)
    changed = 0
    idx = np.flatnonzero(stance)
    for a, b in itertools.pairwise(idx):
        if b - a < 2:
            continue
        f = np.arange(a + 1, b)
        u = (t[f] - t[a]) / (t[b] - t[a])
        chord = c[a] + u * (c[b] - c[a])
        dz[f] = chord + 0.5 * gravity * (t[f] - t[a]) * (t[b] - t[f]) - c[f]
        # a hop crouched in stance and stretched in the air: the parabola lowered the stretched legs through the
        # floor; a flight frame's lowest point stays at the take-off's / touch-down's (grounded) height or above
        dz[f] = np.maximum(dz[f], min(zmin[a], zmin[b]) - zmin[f])
        changed += len(f)
    if not changed:
        return motion, 0
    return _shift_root(motion, dz[:, None] * np.array([0.0, 0.0, 1.0])), changed


def _shift_root(motion: Motion, offset: np.ndarray) -> Motion:
    root = motion.root_translations + offset
    trans = None
    if motion.translations is not None:
        trans = motion.translations.copy()
        trans[:, 0] = root
    return Motion(motion.fps, root, motion.rotations, trans, times=motion.times, name=motion.name)


def ground_offsets(rig: Rig, motion: Motion, mode: str = "per_frame", ground_height: float = 0.0) -> np.ndarray:
    """Vertical root shift per frame [m] that grounds the clip, shape (F,).

    ``clip``: one shift putting the clip's lowest point on the ground. ``per_frame``: every stance frame's lowest
    point on the ground, the shift interpolated linearly across flight frames (see :func:`root_motion_from_contacts`).
    """
    zmin = _contact_points(rig, motion)[..., 2].min(axis=1)
    if mode == "clip":
        return np.full(motion.frame_count, ground_height - zmin.min())
    if mode != "per_frame":
        raise ValueError(f"ground mode must be 'clip' or 'per_frame', got {mode!r}")
    stance = _stance_frames(zmin, rig.height())
    idx = np.flatnonzero(stance)
    shift = np.interp(np.arange(motion.frame_count), idx, ground_height - zmin[idx])
    return _smooth(shift, GROUND_SMOOTHING_S * motion.fps)


def _smooth(x: np.ndarray, sigma_frames: float) -> np.ndarray:
    """Gaussian low-pass along axis 0 with edge padding (no shift, no shrink at the ends)."""
    if sigma_frames <= 0 or len(x) < 3:
        return x
    r = int(np.ceil(3 * sigma_frames))
    k = np.exp(-0.5 * (np.arange(-r, r + 1) / sigma_frames) ** 2)
    k /= k.sum()
    pad = np.pad(x, (r, r), mode="edge")
    return np.convolve(pad, k, mode="valid")


def ground_offset(rig: Rig, motion: Motion, ground_height: float = 0.0) -> float:
    """Vertical shift [m] that puts the clip's lowest skinned vertex (joint when meshless) on the ground."""
    return float(ground_offsets(rig, motion, "clip", ground_height)[0])


@dataclass
class PreparedReference:
    """A scaled rig and the reference motion it tracks.

    Attributes:
        rig: the (scaled) rig.
        motion: the reference: scaled, resampled, looped, re-rooted and grounded as configured.
        kinematic_input: the input clip scaled, resampled and looped only (reference metrics are measured on it);
            where the reference is grounded, raised by the ground height (the clip's own ground is z = 0).
        scale: the uniform scale applied to the source rig [unitless].
        root_motion_added: whether root motion was extracted from contacts.
        ground_shift_m: vertical root shift applied to each reference frame [m] by the grounding and the
            ballistic flight, shape (F,).
        ballistic_frames: flight frames whose vertical motion was made ballistic.
    """

    rig: Rig
    motion: Motion
    kinematic_input: Motion
    scale: float
    root_motion_added: bool
    ground_shift_m: np.ndarray
    ballistic_frames: int = 0


def prepare_reference(
    rig: Rig,
    motion: Motion,
    cfg: ReferenceConfig | None = None,
    *,
    loops: int = 1,
    target_height_m: float | None = None,
    ground_height_m: float = 0.0,
) -> PreparedReference:
    """Scales the rig and clip, resamples, loops, extracts root motion from contacts and grounds the clip.

    Args:
        rig: the source rig.
        motion: a clip of ``rig``.
        cfg: reference options.
        loops: repeat a cyclic clip this many times (see :func:`loop_motion`).
        target_height_m: when given, the scale that makes the rig this tall (Z extent of its bind pose) [m].
        ground_height_m: the ground plane's height [m].

    Raises:
        ValueError: a setting out of range (naming it: ``ReferenceConfig.field``, ``loops``, ``target_height_m``,
            ``ground_height_m``), checked before any work.
        RigError: the motion does not fit the rig.
    """
    cfg = (cfg or ReferenceConfig()).check()
    _check_loops(loops)
    if target_height_m is not None and not (
        is_real(target_height_m) and np.isfinite(target_height_m) and target_height_m > 0
    ):
        raise ValueError(f"target_height_m: must be a positive finite number, got {target_height_m!r}")
    if not (is_real(ground_height_m) and np.isfinite(ground_height_m)):
        raise ValueError(f"ground_height_m: must be a finite number, got {ground_height_m!r}")
    motion.check_rig(rig)
    height = rig.height()
    if not height > 0:  # every size of the physical character scales with it (NaN fails too)
        meshes = bool(rig.meshes and sum(m.vertex_count for m in rig.meshes))
        extent = f"the bind-pose {'meshes have' if meshes else 'skeleton has'} no extent along the up axis" + (
            "" if meshes else " (its joint offsets are all zero or horizontal)"
        )
        raise RigError(
            f"rig {rig.name!r}: no height to scale to target_height_m ({extent})"
            if target_height_m is not None
            else f"rig {rig.name!r}: {extent}, so there is no height to build a physical character of"
        )
    scale = 1.0
    if target_height_m is not None:
        scale = float(target_height_m) / height
        rig, motion = scale_rig(rig, scale), scale_motion(motion, scale)
    motion = looped = loop_motion(motion, loops, rig)
    fps = cfg.fps or min(motion.fps, cfg.max_fps)
    if not motion.is_uniform() or abs(fps - motion.fps) > 1e-9 or abs(motion.times[0]) > 1e-12:
        motion = motion.resample(fps)
    motion = Motion(fps, motion.root_translations, motion.rotations, motion.translations, name=motion.name)
    if motion.frame_count < 2:  # a track of it stepped no frame and reported success
        if looped.frame_count < 2:
            raise ValueError(f"motion {motion.name!r}: a single frame is a pose, not a motion to track")
        name, rate = ("fps", cfg.fps) if cfg.fps else ("max_fps", cfg.max_fps)
        raise ValueError(f"ReferenceConfig.{name}: {rate:g}/s resamples motion {motion.name!r} ({looped.duration:g} "
                         "s) to a single frame; raise the rate")  # fmt: skip
    kinematic = motion
    if cfg.ground != "none" and ground_height_m != 0.0:  # authored on z = 0, it stands on the raised ground too
        kinematic = _shift_root(motion, np.array([0.0, 0.0, float(ground_height_m)]))
    added = False
    if cfg.root_motion != "keep":
        motion, added = root_motion_from_contacts(
            rig, motion, force=cfg.root_motion == "from_contacts", smoothing_s=cfg.root_velocity_smoothing_s
        )
        if added:
            motion = smooth_centroid_velocity(rig, motion, cfg.centroid_velocity_smoothing_s)
    shift = np.zeros(motion.frame_count)
    if cfg.ground != "none":
        shift = ground_offsets(rig, motion, cfg.ground, ground_height_m)
        motion = _shift_root(motion, shift[:, None] * np.array([0.0, 0.0, 1.0]))
    flight = 0
    if cfg.ballistic_flight:
        before = motion.root_translations[:, 2]
        motion, flight = ballistic_flight(rig, motion)
        shift = shift + (motion.root_translations[:, 2] - before)
    return PreparedReference(rig, motion, kinematic, scale, added, shift, flight)
