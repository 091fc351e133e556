"""Ground-contact and kinematic plausibility metrics on point trajectories (skinned vertices or joint positions).

Everything here is NumPy on arrays the caller already has (e.g. from :func:`sim.skin_motion` or
:func:`sim.pose_motion`), so physics, distillation and the audit report the same numbers.

Ground model: a plane ``height(p) = p[up] - ground_height``; a point *penetrates* when its height is negative
and is *in contact* when its height is at most the contact band (penetrating points are in contact).
Every detection threshold scales with the character's *size* (the largest extent of its bind-pose bounding box,
:func:`character_size`), so one config serves a 0.5 m fox, a 1.7 m human and a 155-unit glTF fox alike.

Per-frame arrays have length ``frame_count``. Quantities that need two frames (sliding speeds) describe the step
from frame ``f - 1`` to frame ``f`` and are stored at index ``f``; index 0 holds no step (zero counts, NaN speeds).

Definitions (all per frame unless stated):

* ``penetration_max``: deepest point below the ground [m] (0 when none is below).
* ``penetration_mean``: mean depth of the points below the ground [m] (0 when none is below).
* ``clearance``: height of the lowest point above the ground [m] (0 when it touches or penetrates).
* ``airborne``: no point within the contact band.
* ``floating``: airborne frames that no ballistic flight explains: frames of an airborne stretch longer than
  ``max_flight_time_s``, or of a stretch of at least ``hover_time_s`` in which the lowest point barely moves
  (a body in free flight cannot hold still in the air). A sample is *still* when the lowest point's speed over
  each step it starts or ends (one-step differences to its neighbours) is below the sliding threshold: the
  central difference across a jump's apex, which averages the rise and the fall to zero, called the apex of a
  keyframed hop (keys at take-off, apex and landing) a hover.
* foot skate: a point in contact at both ends of a step *slides* when its horizontal speed relative to the
  ground exceeds ``skate_speed_rel * size`` per second (the ground is static, or moves like a treadmill under
  in-place locomotion loops: ``ContactConfig.ground_motion``) **and** its part (``labels``: the points that
  move together, e.g. the vertices of one joint) has no in-contact point slower than that in the step: the
  part's slowest in-contact point slides too. A part rolling over the ground (a heel lifting about the toes)
  pivots about a resting point, while its points higher in the contact band move at their height times the
  angular speed (a 1.7 cm band at 8 rad/s: 0.14 m/s, above the 0.085 m/s threshold of a 1.7 m human); a
  sliding part moves everywhere. Without ``labels`` each point is judged on its own (no pivot can be told from
  a slide without knowing which points move together), so rolling counts as sliding there. ``skate_ratio`` is
  the sliding share of the step's in-contact points; the summary ``foot_skate_ratio`` pools all steps (the
  share of in-contact vertex-frames sliding).
* contact slides (:class:`ContactSlide`): per part and contact phase, the net displacement of its in-contact
  points and the path length they slide (the integral of the speed of their median velocity: sliding back and
  forth adds up there, not in the net displacement).
* treadmill (``ground_motion="auto"``): the ground velocity ``g`` is the median horizontal velocity of the
  in-contact points, the body velocity ``b`` the net horizontal displacement over the clip of the centroid of the
  points that never touch the ground (all points if every one does), divided by its duration. An in-place loop
  has planted feet moving backwards *relative to the body* (``g`` far from ``b``, ``b`` near 0); a whole-body
  glide has the body moving *with* its feet (``g`` near ``b``). So the treadmill is used only when the clip is in
  place (``in_place_rel``) and ``|g - b| > max(|b|, skate speed)``: a treadmill under a body at rest explains the
  data better than a body gliding with its feet (``|b| < |g - b|``), and the feet move relative to the body fast
  enough to be locomotion (slower than the sliding threshold, a "treadmill" would only hide a slow creep that
  adds up over a contact).
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from ._numbers import is_finite_real, is_integer
from .rotations import quat_conjugate, quat_multiply, quat_normalize, quat_to_axis_angle

__all__ = [
    "UP_AXES",
    "ContactConfig",
    "ContactSlide",
    "GroundContactMetrics",
    "JointLimits",
    "KinematicMetrics",
    "bone_length_drift",
    "character_size",
    "frame_runs",
    "ground_contact_metrics",
    "horizontal_axes",
    "jerk_magnitude",
    "joint_limit_violations",
    "joint_limits_from_motions",
    "kinematic_metrics",
    "root_chain",
    "rotation_vectors",
    "rotation_vectors_near",
]

UpAxis = Literal["X", "Y", "Z"]
GroundMotion = Literal["auto", "static", "treadmill"]
UP_AXES: dict[str, int] = {"X": 0, "Y": 1, "Z": 2}
"""Index of each up-axis name."""


@dataclass(frozen=True)
class ContactConfig:
    """Ground plane and the size-relative thresholds of contact detection.

    Relative values are fractions of the character size (see :func:`character_size`).
    """

    ground_height: float = 0.0
    """Height of the ground plane along the up axis [m]."""
    up_axis: UpAxis = "Z"
    """World up axis (the toolkit's world is Z-up; importers convert)."""
    contact_height_rel: float = 0.01
    """Contact band: a point at most this far above the ground (x size) touches it [unitless]."""
    skate_speed_rel: float = 0.05
    """Horizontal speed above which an in-contact point slides [character sizes per second]."""
    max_flight_time_s: float = 0.6
    """Airborne stretches longer than this are floating (a standing human jump lasts ~0.5 s) [s]."""
    hover_time_s: float = 0.1
    """Airborne stretches whose lowest point stays below the sliding speed this long are floating [s]."""
    ground_motion: GroundMotion = "auto"
    """Ground velocity that sliding is measured against: ``"static"``; ``"treadmill"``, one constant horizontal
    velocity estimated as the median velocity of in-contact points (in-place locomotion loops, whose feet travel
    backwards while planted); ``"auto"``, treadmill when the clip is in place (see ``in_place_rel``) and its
    planted points move relative to the body, not with it (a whole-body glide stays measured against a static
    ground; the rule is in the module docstring)."""
    in_place_rel: float = 0.25
    """``"auto"`` ground motion: the clip is in place when the points' centroid stays within a horizontal box
    this size (x character size) over the whole clip [unitless]."""

    def check(self, name: str = "ContactConfig") -> ContactConfig:
        """Raises ValueError naming the field (as ``name.field``) of a value out of range: a NaN ground height hid
        penetration, a NaN sliding speed or a negative band reported points under the ground as sliding nowhere."""
        for f in ("ground_height", "contact_height_rel", "skate_speed_rel", "max_flight_time_s", "hover_time_s",
                  "in_place_rel"):  # fmt: skip
            value = getattr(self, f)
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
                raise ValueError(f"{name}.{f}: must be a finite number, got {value!r}")
        for f in ("contact_height_rel", "skate_speed_rel", "max_flight_time_s", "hover_time_s"):
            if not getattr(self, f) > 0:
                raise ValueError(f"{name}.{f}: must be > 0, got {getattr(self, f)!r}")
        if not self.in_place_rel >= 0:
            raise ValueError(f"{name}.in_place_rel: must be >= 0, got {self.in_place_rel!r}")
        if self.up_axis not in UP_AXES:
            raise ValueError(f"{name}.up_axis: must be one of {tuple(UP_AXES)}, got {self.up_axis!r}")
        if self.ground_motion not in ("auto", "static", "treadmill"):
            raise ValueError(f"{name}.ground_motion: must be 'auto', 'static' or 'treadmill', got "
                             f"{self.ground_motion!r}")  # fmt: skip
        return self


def character_size(points: np.ndarray) -> float:
    """Largest extent of the axis-aligned bounding box of ``points`` [m].

    Args:
        points: bind-pose vertices or rest joint positions [m], shape (N, 3).
    """
    points = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    if len(points) == 0:
        raise ValueError("points: need at least one point to measure a character size")
    return float(np.max(points.max(axis=0) - points.min(axis=0)))


def horizontal_axes(up_axis: UpAxis) -> tuple[int, int]:
    """The two world axes orthogonal to ``up_axis``."""
    if up_axis not in UP_AXES:
        raise ValueError(f"up_axis must be one of {tuple(UP_AXES)}, got {up_axis!r}")
    u = UP_AXES[up_axis]
    return tuple(a for a in range(3) if a != u)  # type: ignore[return-value]


def frame_runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """Maximal runs of True in a 1-D boolean mask as half-open ``[start, stop)`` frame ranges."""
    mask = np.asarray(mask, dtype=bool).ravel()
    if not mask.any():
        return []
    edges = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    return list(zip(np.flatnonzero(edges == 1).tolist(), np.flatnonzero(edges == -1).tolist()))


def _times(times, frame_count: int) -> np.ndarray:
    """Accepts sample times (F,) [s] or a frame rate [1/s].

    A frame rate is a finite real number > 0 (:func:`sim._numbers.is_finite_real`; a 0-d array holding one too):
    an infinite rate made every sample time 0 and every speed NaN, ``True`` ran at 1 fps. Sample times are finite
    real numbers (an infinite last time made its step's speed 0 and the contact's duration infinite).
    """
    if np.ndim(times) == 0:
        fps = times[()] if isinstance(times, np.ndarray) else times
        if not (is_finite_real(fps) and fps > 0):
            raise ValueError(f"times: a frame rate must be a finite number > 0 [1/s], got {times!r}")
        return np.arange(frame_count) / float(fps)
    raw = np.asarray(times)
    if raw.dtype == bool or not (np.issubdtype(raw.dtype, np.integer) or np.issubdtype(raw.dtype, np.floating)):
        raise ValueError(f"times: expected real sample times [s], got dtype {raw.dtype}")
    t = raw.astype(np.float64)
    if t.shape != (frame_count,):
        raise ValueError(f"times: expected shape ({frame_count},), got {t.shape}")
    if not np.all(np.isfinite(t)):
        raise ValueError("times: contains non-finite values")
    if frame_count > 1 and not np.all(np.diff(t) > 0):
        raise ValueError("times: must be strictly increasing")
    return t


@dataclass(frozen=True)
class ContactSlide:
    """One contact phase of one part: consecutive steps in which the part has points in contact.

    Attributes:
        part: part label (e.g. the dominant joint index).
        start: first frame of the phase (its points touch from frame ``start`` on).
        stop: one past the last frame of the phase.
        distance_m: net horizontal displacement of the part's contact points relative to the ground over the
            phase (the norm of the integral of their median velocity) [m].
        duration_s: phase duration [s].
        path_m: horizontal path length they slide over the phase (the integral of the speed of their median
            velocity; at least ``distance_m``): a foot sliding +-4 cm three times a second for 2 s slides ~0.9 m
            with no net displacement [m].
    """

    part: int
    start: int
    stop: int
    distance_m: float
    duration_s: float
    path_m: float = 0.0


@dataclass
class GroundContactMetrics:
    """Ground contact of a point trajectory: per-frame arrays (length F), per-part arrays (F, P), summaries.

    Attributes:
        size: character size the thresholds scale with [m].
        contact_height: contact band above the ground [m].
        skate_speed_threshold: sliding speed threshold [m/s].
        ground_velocity: horizontal velocity of the ground sliding is measured against [m/s], shape (3,)
            (non-zero only for treadmill ground motion).
        times: sample times [s], shape (F,).
        penetration_max: deepest penetration [m], shape (F,).
        penetration_mean: mean depth of penetrating points [m], shape (F,).
        penetration_count: number of points below the ground, shape (F,).
        penetration_label: part label of the deepest penetrating point (-1 when none), shape (F,).
        lowest_height: signed height of the lowest point above the ground [m], shape (F,).
        clearance: ``max(lowest_height, 0)`` [m], shape (F,).
        contact_count: points within the contact band, shape (F,).
        airborne: no point within the contact band, shape (F,).
        floating: airborne and not explained by a ballistic flight (module docstring), shape (F,).
        floating_height: clearance on floating frames, 0 elsewhere [m], shape (F,).
        skate_contact_count: points in contact at both ends of the step ``f-1 -> f``, shape (F,).
        skate_sliding_count: of those, points sliding (faster than the threshold, and so is their part's slowest
            in-contact point: module docstring), shape (F,).
        skate_ratio: sliding / in-contact points of the step (0 without contact), shape (F,).
        skate_speed_max: fastest horizontal speed of an in-contact point [m/s] (NaN without contact), shape (F,).
        skate_speed_mean: mean horizontal speed of in-contact points [m/s] (NaN without contact), shape (F,).
        part_penetration: deepest penetration per part [m], shape (F, P).
        part_skate_velocity: median horizontal velocity (relative to the ground) of each part's in-contact points
            [m/s] (NaN when the part has none), shape (F, P, 3).
        part_skate_speed: norm of ``part_skate_velocity`` [m/s], shape (F, P).
        part_contact_count: in-contact points per part and step, shape (F, P).
        part_slip_speed: horizontal speed (relative to the ground) of each part's slowest in-contact point
            [m/s] (NaN when the part has none), shape (F, P): the part slides in the step when it exceeds the
            threshold (0 for a part rolling about a resting point).
        slides: every contact phase of every part with its net slide and slide path (:class:`ContactSlide`), in
            part order.
        max_penetration_m: max over frames of ``penetration_max`` [m].
        mean_penetration_m: mean over frames of ``penetration_max`` [m].
        max_floating_m: max of ``floating_height`` [m].
        floating_ratio: share of frames that float.
        foot_skate_ratio: sliding share of all in-contact point-steps (0 when nothing touches).
        mean_skate_speed_mps: mean horizontal speed over all in-contact point-steps [m/s] (0 when none).
        max_skate_speed_mps: fastest in-contact horizontal speed [m/s] (0 when none).
        max_slide_m: longest net slide of a contact phase (``ContactSlide.distance_m``) [m] (0 when none).
        max_slide_path_m: longest slide path of a contact phase (``ContactSlide.path_m``) [m] (0 when none).
    """

    size: float
    contact_height: float
    skate_speed_threshold: float
    ground_velocity: np.ndarray
    times: np.ndarray
    penetration_max: np.ndarray
    penetration_mean: np.ndarray
    penetration_count: np.ndarray
    penetration_label: np.ndarray
    lowest_height: np.ndarray
    clearance: np.ndarray
    contact_count: np.ndarray
    airborne: np.ndarray
    floating: np.ndarray
    floating_height: np.ndarray
    skate_contact_count: np.ndarray
    skate_sliding_count: np.ndarray
    skate_ratio: np.ndarray
    skate_speed_max: np.ndarray
    skate_speed_mean: np.ndarray
    part_penetration: np.ndarray
    part_skate_velocity: np.ndarray
    part_skate_speed: np.ndarray
    part_contact_count: np.ndarray
    part_slip_speed: np.ndarray
    slides: list[ContactSlide]
    max_penetration_m: float = 0.0
    mean_penetration_m: float = 0.0
    max_floating_m: float = 0.0
    floating_ratio: float = 0.0
    foot_skate_ratio: float = 0.0
    mean_skate_speed_mps: float = 0.0
    max_skate_speed_mps: float = 0.0
    max_slide_m: float = 0.0
    max_slide_path_m: float = 0.0

    def summary(self) -> dict[str, float]:
        """The scalar metrics by name (JSON-ready floats)."""
        keys = (
            "max_penetration_m",
            "mean_penetration_m",
            "max_floating_m",
            "floating_ratio",
            "foot_skate_ratio",
            "mean_skate_speed_mps",
            "max_skate_speed_mps",
            "max_slide_m",
            "max_slide_path_m",
        )
        return {k: float(getattr(self, k)) for k in keys}


def ground_contact_metrics(
    points,
    times,
    config: ContactConfig | None = None,
    *,
    size: float | None = None,
    labels=None,
    label_count: int | None = None,
) -> GroundContactMetrics:
    """Ground penetration, floating and foot skate of a point trajectory.

    Args:
        points: world positions [m], shape (F, N, 3): skinned vertices, joint positions, collider points.
        times: sample times [s], shape (F,), or a frame rate [1/s] for uniform samples.
        config: ground plane and detection thresholds (default :class:`ContactConfig`).
        size: character size [m] the thresholds scale with; default :func:`character_size` of frame 0.
        labels: part index per point (e.g. the dominant joint of each vertex), shape (N,): the points that move
            together, whose slowest in-contact point tells a slide from a roll (module docstring). Default: one
            part for the per-part arrays and slides, and each point judged on its own for sliding.
        label_count: number of parts P (default ``labels.max() + 1``).

    Returns:
        The metrics; see :class:`GroundContactMetrics`.

    Raises:
        ValueError: wrong shapes, non-finite points, non-increasing times, bad config.
    """
    cfg = (config or ContactConfig()).check("config")
    pts = np.asarray(points, dtype=np.float64)
    if pts.ndim != 3 or pts.shape[2] != 3 or pts.shape[1] == 0:
        raise ValueError(f"points: expected shape (frame_count, point_count > 0, 3), got {pts.shape}")
    if not np.all(np.isfinite(pts)):
        raise ValueError("points: contains non-finite values")
    F, N, _ = pts.shape
    t = _times(times, F)
    up = UP_AXES[cfg.up_axis]
    hz = list(horizontal_axes(cfg.up_axis))
    if size is None:
        size = character_size(pts[0])
    elif not (is_finite_real(size) and size > 0):  # an infinite size made every point touch and nothing slide
        raise ValueError(f"size: must be a finite number > 0 [m], got {size!r}")
    if not size > 0:  # a flat frame 0 (every point at one place)
        raise ValueError(f"size: must be positive, got {size}")
    per_point = labels is None  # sliding judged point by point: no parts to pivot about
    if labels is None:
        labels = np.zeros(N, dtype=np.int64)
    raw = np.asarray(labels)
    if raw.dtype == bool or not np.issubdtype(raw.dtype, np.integer):  # 0.9 read as part 0, True as part 1
        raise ValueError(f"labels: expected an integer array of shape ({N},), got dtype {raw.dtype}")
    labels = raw.astype(np.int64)
    if labels.shape != (N,) or (N and labels.min() < 0):
        raise ValueError(f"labels: expected non-negative integers of shape ({N},), got {labels.shape}")
    if label_count is not None and not is_integer(label_count):
        raise ValueError(f"label_count: must be an integer, got {label_count!r}")
    P = int(label_count if label_count is not None else labels.max() + 1)
    if labels.max() >= P:
        raise ValueError(f"labels: value {labels.max()} >= label_count {P}")

    band = cfg.contact_height_rel * size
    v_slide = cfg.skate_speed_rel * size
    h = pts[..., up] - cfg.ground_height  # (F, N)
    depth = np.maximum(-h, 0.0)
    below = h < 0
    pen_max = depth.max(axis=1)
    pen_count = below.sum(axis=1)
    pen_mean = np.where(pen_count > 0, depth.sum(axis=1) / np.maximum(pen_count, 1), 0.0)
    deepest = depth.argmax(axis=1)
    pen_label = np.where(pen_count > 0, labels[deepest], -1)
    lowest_idx = h.argmin(axis=1)
    lowest = h[np.arange(F), lowest_idx]
    clearance = np.maximum(lowest, 0.0)
    contact = h <= band
    contact_count = contact.sum(axis=1)
    airborne = contact_count == 0

    # sliding: points in contact at both ends of a step
    dt = np.diff(t)
    vel = np.full((F, N, 3), np.nan)  # horizontal velocity relative to the ground of the step f-1 -> f
    both = np.zeros((F, N), dtype=bool)
    ground_v = np.zeros(3)
    if F > 1:
        vel[1:] = (pts[1:] - pts[:-1]) / dt[:, None, None]
        vel[..., up] = 0.0
        both[1:] = contact[1:] & contact[:-1]
        if both.any() and cfg.ground_motion != "static":
            treadmill_v = np.median(vel[both], axis=0)
            if cfg.ground_motion == "treadmill" or _is_treadmill(pts, t, hz, contact, treadmill_v, size, v_slide, cfg):
                ground_v = treadmill_v
                vel = vel - ground_v
    speed = np.linalg.norm(vel, axis=-1)
    contact_speed = np.where(both, speed, np.nan)
    sk_count = both.sum(axis=1)
    contact_vel = np.where(both[..., None], vel, np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows: frames without contact
        sk_max = np.nanmax(contact_speed, axis=1)
        sk_mean = np.nanmean(contact_speed, axis=1)
        part_vel = np.full((F, P, 3), np.nan)
        part_slip = np.full((F, P), np.nan)
        part_count = np.zeros((F, P), dtype=np.int64)
        part_pen = np.zeros((F, P))
        for p in np.unique(labels):
            m = labels == p
            part_vel[:, p] = np.nanmedian(contact_vel[:, m], axis=1)
            part_slip[:, p] = np.nanmin(contact_speed[:, m], axis=1)
            part_count[:, p] = both[:, m].sum(axis=1)
            part_pen[:, p] = depth[:, m].max(axis=1)
    # a point slides when it and its part's slowest in-contact point move faster than the threshold: a rolling
    # part pivots about a resting point (NaN part speeds, steps without contact, compare False)
    sliding = both & (speed > v_slide)
    if not per_point:
        sliding &= part_slip[:, labels] > v_slide
    sk_slide = sliding.sum(axis=1)
    slides = []
    for p in np.flatnonzero(part_count.sum(axis=0)):
        for s0, s1 in frame_runs(part_count[:, p] > 0):
            step = part_vel[s0:s1, p] * dt[s0 - 1 : s1 - 1, None]
            path, net = np.linalg.norm(step, axis=-1).sum(), np.linalg.norm(step.sum(axis=0))
            slides.append(ContactSlide(int(p), s0 - 1, s1, float(net), float(t[s1 - 1] - t[s0 - 1]), float(path)))
    sk_ratio = np.where(sk_count > 0, sk_slide / np.maximum(sk_count, 1), 0.0)

    floating = _floating_frames(pts, t, airborne, lowest_idx, v_slide, cfg)
    float_h = np.where(floating, clearance, 0.0)
    total_contact = int(sk_count.sum())
    return GroundContactMetrics(
        size=float(size),
        contact_height=float(band),
        skate_speed_threshold=float(v_slide),
        ground_velocity=ground_v,
        times=t,
        penetration_max=pen_max,
        penetration_mean=pen_mean,
        penetration_count=pen_count,
        penetration_label=pen_label,
        lowest_height=lowest,
        clearance=clearance,
        contact_count=contact_count,
        airborne=airborne,
        floating=floating,
        floating_height=float_h,
        skate_contact_count=sk_count,
        skate_sliding_count=sk_slide,
        skate_ratio=sk_ratio,
        skate_speed_max=sk_max,
        skate_speed_mean=sk_mean,
        part_penetration=part_pen,
        part_skate_velocity=part_vel,
        part_skate_speed=np.linalg.norm(part_vel, axis=-1),
        part_contact_count=part_count,
        part_slip_speed=part_slip,
        slides=slides,
        max_penetration_m=float(pen_max.max()),
        mean_penetration_m=float(pen_max.mean()),
        max_floating_m=float(float_h.max()),
        floating_ratio=float(floating.mean()),
        foot_skate_ratio=float(sk_slide.sum() / total_contact) if total_contact else 0.0,
        mean_skate_speed_mps=float(np.nansum(contact_speed) / total_contact) if total_contact else 0.0,
        max_skate_speed_mps=float(np.nanmax(sk_max)) if total_contact else 0.0,
        max_slide_m=max((sl.distance_m for sl in slides), default=0.0),
        max_slide_path_m=max((sl.path_m for sl in slides), default=0.0),
    )


def _is_treadmill(
    pts: np.ndarray,
    t: np.ndarray,
    hz: list[int],
    contact: np.ndarray,
    ground_v: np.ndarray,
    size: float,
    v_slide: float,
    cfg: ContactConfig,
) -> bool:
    """``"auto"`` ground motion: whether the in-contact points' median velocity ``ground_v`` is a treadmill.

    True when the clip is in place and the planted points move relative to the body's own mean velocity ``b``
    faster than both ``|b|`` and the sliding speed ``v_slide`` (module docstring). ``b`` is the net horizontal
    displacement over the clip of the centroid of the points that never touch the ground (the body, without the
    feet whose planted motion is under test; all points when every one touches at some time), over the duration.
    A whole-body glide (feet moving with the body, ``ground_v`` ~ ``b``) is not a treadmill.
    """
    centroid = pts[..., hz].mean(axis=1)
    if np.max(centroid.max(axis=0) - centroid.min(axis=0)) > cfg.in_place_rel * size:
        return False
    body = ~contact.any(axis=0)
    if body.any():
        centroid = pts[:, body][..., hz].mean(axis=1)
    body_v = np.zeros(3)
    body_v[hz] = (centroid[-1] - centroid[0]) / (t[-1] - t[0])
    relative = float(np.linalg.norm(ground_v - body_v))
    return relative > max(float(np.linalg.norm(body_v)), v_slide)


def _floating_frames(
    pts: np.ndarray, t: np.ndarray, airborne: np.ndarray, lowest_idx: np.ndarray, v_still: float, cfg: ContactConfig
) -> np.ndarray:
    """Airborne frames that a ballistic flight cannot explain (see the module docstring)."""
    F = len(t)
    floating = np.zeros(F, dtype=bool)
    for start, stop in frame_runs(airborne):
        # duration of the stretch: from the last supported sample before it to the first after it (clip ends
        # count as the stretch's own first/last sample)
        t0 = t[start - 1] if start > 0 else t[start]
        t1 = t[stop] if stop < F else t[stop - 1]
        if t1 - t0 > cfg.max_flight_time_s:
            floating[start:stop] = True
            continue
        # hovering: the lowest point (its own trajectory) nearly still for hover_time_s or longer; still over each
        # step to and from its neighbours (a central difference averages an apex's rise and fall to zero)
        still = np.zeros(stop - start, dtype=bool)
        for k, f in enumerate(range(start, stop)):
            i = lowest_idx[f]
            steps = [(a, b) for a, b in ((f - 1, f), (f, f + 1)) if a >= 0 and b < F]
            still[k] = bool(steps) and all(
                np.linalg.norm(pts[b, i] - pts[a, i]) / (t[b] - t[a]) < v_still for a, b in steps
            )
        for s, e in frame_runs(still):
            ts = t[start + s - 1] if start + s > 0 else t[start + s]
            te = t[start + e] if start + e < F else t[start + e - 1]
            if te - ts >= cfg.hover_time_s:
                floating[start + s : start + e] = True
    return floating


# -- skeleton metrics ------------------------------------------------------------------------------------


def bone_length_drift(joint_positions, parents, rest_lengths) -> np.ndarray:
    """Absolute change of each bone's length from its rest length [m].

    Args:
        joint_positions: world joint positions [m], shape (F, J, 3).
        parents: parent index per joint (-1 for the root), shape (J,).
        rest_lengths: rest distance from each joint to its parent [m], shape (J,) (see :meth:`sim.Rig.bone_lengths`).

    Returns:
        ``| |p_j - p_parent(j)| - rest_j |`` per frame and joint (0 for the root), shape (F, J).
    """
    pos = np.asarray(joint_positions, dtype=np.float64)
    parents = np.asarray(parents)
    rest = np.asarray(rest_lengths, dtype=np.float64)
    if pos.ndim != 3 or pos.shape[2] != 3 or parents.shape != (pos.shape[1],) or rest.shape != parents.shape:
        raise ValueError(
            f"joint_positions {pos.shape}, parents {parents.shape}, rest_lengths {rest.shape}: "
            "expected (F, J, 3), (J,), (J,)"
        )
    has_parent = parents >= 0
    par = np.where(has_parent, parents, 0)
    length = np.linalg.norm(pos - pos[:, par], axis=-1)
    return np.where(has_parent, np.abs(length - rest), 0.0)


def root_chain(parents) -> np.ndarray:
    """Joints from the root down to the first joint with several children (the body root, e.g. the hips).

    Their bones carry the body's global motion (root-motion bones, a hip joint translated under a root joint),
    so their lengths legitimately change; :func:`kinematic_metrics` leaves them out of the drift.
    """
    parents = np.asarray(parents)
    children = np.bincount(parents[parents >= 0], minlength=len(parents))
    chain, j = [0], 0
    while children[j] == 1:
        j = int(np.flatnonzero(parents == j)[0])
        chain.append(j)
    return np.array(chain, dtype=np.int64)


def jerk_magnitude(positions, times, *, step: int = 1, min_span_s: float = 0.0) -> np.ndarray:
    """Norm of the third time derivative of point trajectories [m/s^3], from third differences of the samples.

    Each window of four samples ``i, i + step, i + 2 step, i + 3 step`` gives ``6 x[t_i, ..., t_{i+3 step}]`` (six
    times the third divided difference: ``(x_3 - 3 x_2 + 3 x_1 - x_0) / dt^3`` on uniform samples), exact on
    cubics, uniform or not. Unlike three ``np.gradient`` passes (central differences, zero gain at the Nyquist
    frequency) it sees frame-to-frame jitter: an alternation ``+-a`` reads ``8 a / dt^3``, a one-sample pop of
    ``a`` ``3 a / dt^3``, a step (teleport) of ``a`` ``2 a / dt^3``.

    A frame reads the largest window whose middle interval (samples ``i + step`` to ``i + 2 step``) contains it;
    the first and last ``step`` frames, in no window's middle, read the window nearest them.

    Args:
        positions: trajectories [m], shape (F, N, 3).
        times: sample times [s] (F,) or a frame rate [1/s].
        step: samples between the window's samples (``step = 2`` on 60 fps samples: the jerk at 30 fps, of every
            sampling phase of the decimation at once).
        min_span_s: windows spanning less time (``t_{i+3 step} - t_i``) are measured as if they spanned this
            [s]: the value is scaled by ``(span / min_span_s)^3``, so that samples denser than ``3 / min_span_s``
            per second read frame-to-frame changes as jerk at that rate (the jerk of noise grows as fps^3); 0
            leaves every window as it is.

    Returns:
        Jerk magnitude per frame and point, shape (F, N); zeros when F < 3 step + 1.
    """
    pos = np.asarray(positions, dtype=np.float64)
    if pos.ndim != 3 or pos.shape[2] != 3:
        raise ValueError(f"positions: expected shape (F, N, 3), got {pos.shape}")
    if isinstance(step, bool) or not isinstance(step, int | np.integer) or step < 1:
        raise ValueError(f"step: must be an integer >= 1, got {step!r}")
    if not (np.isfinite(min_span_s) and min_span_s >= 0):
        raise ValueError(f"min_span_s: must be a finite number >= 0, got {min_span_s!r}")
    F = pos.shape[0]
    t = _times(times, F)
    step = int(step)
    W = F - 3 * step  # windows
    if W < 1:
        return np.zeros(pos.shape[:2])
    x = [pos[k * step : k * step + W] for k in range(4)]
    ts = [t[k * step : k * step + W, None, None] for k in range(4)]
    d1 = [(x[k + 1] - x[k]) / (ts[k + 1] - ts[k]) for k in range(3)]
    d2 = [(d1[k + 1] - d1[k]) / (ts[k + 2] - ts[k]) for k in range(2)]
    d3 = 6.0 * (d2[1] - d2[0]) / (ts[3] - ts[0])
    jerk = np.linalg.norm(d3, axis=-1)  # (W, N)
    if min_span_s > 0:
        span = t[3 * step : 3 * step + W] - t[:W]
        jerk *= np.minimum(span / min_span_s, 1.0)[:, None] ** 3
    # frame f lies in the middle of windows f - 2 step .. f - step (clamped to the windows that exist)
    f = np.arange(F)
    lo = np.clip(f - 2 * step, 0, W - 1)
    hi = np.clip(f - step, 0, W - 1)
    out = jerk[lo]
    for o in range(1, step + 1):
        out = np.maximum(out, jerk[np.minimum(lo + o, hi)])
    return out


def rotation_vectors(quats) -> np.ndarray:
    """Rotation vectors (axis * angle, angle in [0, pi]) of quaternions xyzw [rad], shape (..., 4) -> (..., 3)."""
    q = quat_normalize(np.asarray(quats, dtype=np.float64))
    return quat_to_axis_angle(np.where(q[..., 3:4] < 0, -q, q))


@dataclass(frozen=True)
class JointLimits:
    """Box limits on each joint's rotation relative to its rest rotation, as a rotation vector.

    A joint's local rotation ``q`` is compared through ``log(q_rest^-1 q)`` (axis * angle in the joint's rest
    frame); each of its three components must lie in ``[lower, upper]``.

    A rotation has many rotation vectors: ``(angle + 2 pi k) * axis`` for every integer ``k``. The one compared is
    the one nearest ``center`` (:func:`rotation_vectors_near`), so a joint that turns across 180 deg from its
    rest pose does not jump from ``+pi * axis`` to ``-pi * axis`` (its components, and the limits, may then exceed
    pi in magnitude). With ``center`` at rest (zero, the default) this is the usual vector of angle in [0, pi].

    Attributes:
        lower: lower bounds [rad], shape (J, 3).
        upper: upper bounds [rad], shape (J, 3).
        source: how they were made (e.g. ``"given"``, ``"derived from 3 clips, margin 20 deg"``).
        center: rest-relative rotation vector each joint's rotations are unwrapped next to [rad], shape (J, 3),
            norms at most pi; None is the rest rotation (zeros). :func:`joint_limits_from_motions` stores the
            sample motions' mean rotation here.
    """

    lower: np.ndarray
    upper: np.ndarray
    source: str = "given"
    center: np.ndarray | None = None

    def __post_init__(self):
        lo, hi = np.asarray(self.lower, dtype=np.float64), np.asarray(self.upper, dtype=np.float64)
        if lo.ndim != 2 or lo.shape[1] != 3 or lo.shape != hi.shape:
            raise ValueError(f"JointLimits: lower {lo.shape} and upper {hi.shape} must both be (J, 3)")
        if np.isnan(lo).any() or np.isnan(hi).any():  # every comparison with NaN is false: nothing ever failed
            raise ValueError("JointLimits: NaN bounds (use -inf / inf for a free axis)")
        if np.any(lo > hi):
            raise ValueError("JointLimits: lower > upper for some joint")
        if self.center is not None:
            c = np.asarray(self.center, dtype=np.float64)
            if c.shape != lo.shape:
                raise ValueError(f"JointLimits: center {c.shape} must match lower and upper {lo.shape}")
            if not np.all(np.isfinite(c)) or np.any(np.linalg.norm(c, axis=-1) > np.pi + 1e-9):
                raise ValueError("JointLimits: center must hold finite rotation vectors of angle at most pi")

    def center_or_rest(self) -> np.ndarray:
        """``center``, or zeros (the rest rotation) when None [rad], shape (J, 3)."""
        if self.center is None:
            return np.zeros(np.shape(self.lower))
        return np.asarray(self.center, dtype=np.float64)


def rotation_vectors_near(rotation_vectors_in, center) -> np.ndarray:
    """Of the rotation vectors ``(angle + 2 pi k) * axis`` of each rotation, the one nearest ``center`` [rad].

    Args:
        rotation_vectors_in: rotation vectors with angle in [0, pi] (:func:`rotation_vectors`), shape (..., 3).
        center: reference rotation vectors of angle at most pi, broadcastable to ``rotation_vectors_in``.

    Returns:
        The same rotations, shape (..., 3). With ``|center| <= pi`` only ``k = 0`` and ``k = -1`` (the vector
        ``-(2 pi - angle) * axis``) can be nearest; ties keep ``k = 0``.
    """
    rv = np.asarray(rotation_vectors_in, dtype=np.float64)
    c = np.broadcast_to(np.asarray(center, dtype=np.float64), rv.shape)
    angle = np.linalg.norm(rv, axis=-1, keepdims=True)
    alt = rv - 2.0 * np.pi * rv / np.maximum(angle, 1e-300)
    use = (angle > 1e-12) & (
        np.linalg.norm(alt - c, axis=-1, keepdims=True) < np.linalg.norm(rv - c, axis=-1, keepdims=True)
    )
    return np.where(use, alt, rv)


def _mean_rotation(quats: np.ndarray, iterations: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Sign-aligned normalized mean of unit quaternions over the first axis, shape (F, J, 4) -> (J, 4).

    ``q`` and ``-q`` are the same rotation: each is flipped onto the hemisphere of the current estimate (the first
    sample, then the mean) before averaging. Returns the mean and the norm of the unnormalized mean (in [0, 1]:
    near 0 when the rotations spread over all orientations and no mean is meaningful).
    """
    q = quat_normalize(np.asarray(quats, dtype=np.float64))
    ref = q[0]
    norm = np.ones(q.shape[1:-1])
    for _ in range(iterations):
        sign = np.where(np.sum(q * ref, axis=-1, keepdims=True) < 0, -1.0, 1.0)
        mean = (q * sign).mean(axis=0)
        norm = np.linalg.norm(mean, axis=-1)
        ref = np.where(norm[..., None] > 1e-9, mean / np.maximum(norm[..., None], 1e-300), ref)
    return ref, norm


def joint_limits_from_motions(
    rest_rotations,
    rotations: Sequence[np.ndarray],
    margin_deg: float = 20.0,
    quantile: float = 0.0,
    min_tail: int | Sequence[int] = 0,
    max_quantile: float = 0.11,
) -> JointLimits:
    """Data-derived limits: the range of each joint's rest-relative rotation vector over sample motions.

    Each motion's range (robust when ``quantile`` > 0 or ``min_tail`` > 0) is taken on its own and the limits are
    their envelope, so a short clip with extreme poses is not outvoted by a long one. A robust range leaves out
    the extreme samples of each component at each end: ``quantile`` of them, and at least ``min_tail`` (up to
    ``max_quantile`` of them). With the quantile alone a short clip leaves out a frame or two, and a glitch of a
    few frames (a leg turned 100 deg for 5 of 49 frames) drags the range it is then measured against; the cap
    keeps a short loop's brief extreme poses (the Fox's forepaws flick for 2-3 of the Walk's 18 frames) in its
    range. The rotation vectors are unwrapped next to
    the motions' mean rest-relative rotation (each motion's sign-aligned mean quaternion, the motions weighted
    equally), which the limits keep as ``center`` (see :class:`JointLimits`): a joint posed near 180 deg from rest
    gets one contiguous range instead of two ends at +-pi.

    Args:
        rest_rotations: rest local rotations [quat xyzw], shape (J, 4).
        rotations: local rotations of the sample motions, each shape (F_i, J, 4).
        margin_deg: widening on both sides [deg].
        quantile: robust range: use each motion's ``quantile`` and ``1 - quantile`` quantiles instead of its
            min and max.
        min_tail: robust range: samples left out at each end at least (an int, or one per motion): a motion
            of F samples uses the quantile ``max(quantile, min(min_tail / (F - 1), max_quantile))`` (with
            ``min_tail / (F - 1)``: its ``min_tail + 1``-th smallest and largest samples).
        max_quantile: the most ``min_tail`` raises the quantile to, in [0, 0.5).

    Returns:
        Limits on each joint's rotation vector.
    """
    if not rotations:
        raise ValueError("rotations: need at least one motion to derive limits from")
    if not 0.0 <= quantile < 0.5:
        raise ValueError(f"quantile must lie in [0, 0.5), got {quantile}")
    if not 0.0 <= max_quantile < 0.5:
        raise ValueError(f"max_quantile must lie in [0, 0.5), got {max_quantile}")
    tails = np.broadcast_to(np.asarray(min_tail), (len(rotations),))
    if not (np.issubdtype(tails.dtype, np.integer) and np.all(tails >= 0)):
        raise ValueError(f"min_tail must be integers >= 0 (one, or one per motion), got {min_tail!r}")
    relative = [_rest_relative_quats(rest_rotations, r) for r in rotations]
    clip_means = np.stack([_mean_rotation(r)[0] for r in relative])
    mean, norm = _mean_rotation(clip_means)
    # rotations spread over every orientation have no meaningful mean: unwrap next to rest then
    center = np.where(norm[:, None] > 1e-6, rotation_vectors(mean), 0.0)
    lows, highs = [], []
    for r, tail in zip(relative, tails):
        rv = rotation_vectors_near(rotation_vectors(r), center)
        q = quantile
        if tail > 0 and len(rv) > 1:
            q = max(q, min(int(tail) / (len(rv) - 1), max_quantile))
        lows.append(np.quantile(rv, q, axis=0) if q else rv.min(axis=0))
        highs.append(np.quantile(rv, 1 - q, axis=0) if q else rv.max(axis=0))
    m = np.deg2rad(margin_deg)
    src = f"derived from {len(rotations)} clip(s), quantile {quantile:g}, margin {margin_deg:g} deg"
    if np.any(tails > 0):
        counts = sorted(set(tails.tolist()))
        src += f", at least {'/'.join(map(str, counts))} frame(s) (at most {max_quantile:g}) left out at each end"
    return JointLimits(np.min(lows, axis=0) - m, np.max(highs, axis=0) + m, src, center)


def _rest_relative_quats(rest_rotations, rotations) -> np.ndarray:
    """``q_rest^-1 q`` per frame and joint [quat xyzw], shape (F, J, 4)."""
    rest = np.asarray(rest_rotations, dtype=np.float64)
    rot = np.asarray(rotations, dtype=np.float64)
    if rot.ndim != 3 or rot.shape[1:] != rest.shape or rest.shape[-1] != 4:
        raise ValueError(f"rotations {rot.shape} do not match rest_rotations {rest.shape} (expected (F, J, 4))")
    return quat_multiply(np.broadcast_to(quat_conjugate(rest), rot.shape), rot)


def joint_limit_violations(rest_rotations, rotations, limits: JointLimits) -> np.ndarray:
    """How far each joint's rest-relative rotation vector lies outside its limits [rad].

    The rotation vector of each frame is the one nearest ``limits.center`` (see :class:`JointLimits`).

    Args:
        rest_rotations: rest local rotations [quat xyzw], shape (J, 4).
        rotations: local rotations [quat xyzw], shape (F, J, 4).
        limits: the limits (J must match).

    Returns:
        Largest per-component excess per frame and joint (0 inside the limits) [rad], shape (F, J).
    """
    rel = _rest_relative_quats(rest_rotations, rotations)
    if np.shape(limits.lower) != (rel.shape[1], 3):
        raise ValueError(f"limits: shape {np.shape(limits.lower)} does not match {rel.shape[1]} joints")
    rv = rotation_vectors_near(rotation_vectors(rel), limits.center_or_rest())
    excess = np.maximum(np.maximum(limits.lower - rv, rv - limits.upper), 0.0)
    return excess.max(axis=-1)


@dataclass
class KinematicMetrics:
    """Skeleton-level plausibility of a motion: bone-length drift, jitter (jerk), joint-limit violations.

    Attributes:
        bone_drift: absolute bone-length change [m], shape (F, J).
        bone_drift_max: max over bones [m], shape (F,).
        jerk: joint jerk magnitude [m/s^3], shape (F, J).
        jerk_max: max over joints [m/s^3], shape (F,).
        limit_violation: joint-limit excess [rad], shape (F, J) (zeros when no limits were given).
        limit_violation_max: max over joints [rad], shape (F,).
        limits: the limits used, or None.
        max_bone_drift_m, max_jerk, mean_jerk, max_limit_violation_rad: summaries.
    """

    bone_drift: np.ndarray
    bone_drift_max: np.ndarray
    jerk: np.ndarray
    jerk_max: np.ndarray
    limit_violation: np.ndarray
    limit_violation_max: np.ndarray
    limits: JointLimits | None = None
    max_bone_drift_m: float = 0.0
    max_jerk: float = 0.0
    mean_jerk: float = 0.0
    max_limit_violation_rad: float = 0.0
    extra: dict = field(default_factory=dict)

    def summary(self) -> dict[str, float]:
        """The scalar metrics by name (JSON-ready floats)."""
        keys = ("max_bone_drift_m", "max_jerk", "mean_jerk", "max_limit_violation_rad")
        return {k: float(getattr(self, k)) for k in keys}


def kinematic_metrics(
    joint_positions,
    times,
    parents,
    rest_lengths,
    rest_rotations=None,
    rotations=None,
    limits: JointLimits | None = None,
    exclude_root_chain: bool = True,
) -> KinematicMetrics:
    """Bone-length drift, jerk and (when ``limits`` and rotations are given) joint-limit violations.

    Args:
        joint_positions: world joint positions [m], shape (F, J, 3) (e.g. from :func:`sim.pose_motion`).
        times: sample times [s] (F,) or a frame rate [1/s].
        parents: parent per joint, shape (J,).
        rest_lengths: rest bone lengths [m], shape (J,).
        rest_rotations: rest local rotations [quat xyzw], shape (J, 4) (for limits).
        rotations: local rotations [quat xyzw], shape (F, J, 4) (for limits).
        limits: joint limits; None skips the check (violations are zero).
        exclude_root_chain: leave the bones of :func:`root_chain` out of the drift (their drift is set to 0).
    """
    pos = np.asarray(joint_positions, dtype=np.float64)
    drift = bone_length_drift(pos, parents, rest_lengths)
    if exclude_root_chain:
        drift[:, root_chain(parents)] = 0.0
    jerk = jerk_magnitude(pos, times)
    if limits is not None:
        if rest_rotations is None or rotations is None:
            raise ValueError("limits given without rest_rotations and rotations")
        viol = joint_limit_violations(rest_rotations, rotations, limits)
    else:
        viol = np.zeros(pos.shape[:2])
    return KinematicMetrics(
        bone_drift=drift,
        bone_drift_max=drift.max(axis=1),
        jerk=jerk,
        jerk_max=jerk.max(axis=1),
        limit_violation=viol,
        limit_violation_max=viol.max(axis=1),
        limits=limits,
        max_bone_drift_m=float(drift.max()),
        max_jerk=float(jerk.max()),
        mean_jerk=float(jerk.mean()),
        max_limit_violation_rad=float(viol.max()),
    )
