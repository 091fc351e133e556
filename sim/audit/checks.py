"""The audit itself: skin the motion, measure everything, apply the thresholds of :class:`AuditConfig`."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from ..contact_metrics import (
    ContactConfig,
    GroundContactMetrics,
    JointLimits,
    character_size,
    frame_runs,
    ground_contact_metrics,
    jerk_magnitude,
    joint_limit_violations,
    joint_limits_from_motions,
    kinematic_metrics,
    root_chain,
)
from ..kinematics import pose_motion, skin_motion
from ..mesh_intersection import MeshSelfIntersection, SelfIntersectionMetrics, face_labels
from ..motion import Motion
from ..rig import Rig, RigError
from .config import AuditConfig, _type_error
from .report import AuditReport, CheckResult, FrameRange

__all__ = ["CHECK_NAMES", "ContactPoints", "audit_motion", "contact_points", "derived_joint_limits", "frame_ranges"]

CHECK_NAMES = (
    "ground_penetration",
    "floating",
    "foot_skate",
    "self_intersection",
    "joint_limits",
    "bone_length",
    "jitter",
)
"""The checks, in report order."""


def frame_ranges(mask: np.ndarray, times: np.ndarray) -> list[FrameRange]:
    """Runs of True frames as :class:`FrameRange` s."""
    return [FrameRange(s, e, float(times[s]), float(times[e - 1])) for s, e in frame_runs(mask)]


def _ranges_text(ranges: list[FrameRange], limit: int = 3) -> str:
    text = ", ".join(str(r) for r in ranges[:limit])
    return text + (f" and {len(ranges) - limit} more" if len(ranges) > limit else "")


def _cm(x: float, size: float) -> str:
    """A length in metres, with its share of the character size."""
    return f"{x:.4g} m ({100 * x / size:.2f}% of size)"


@dataclasses.dataclass
class ContactPoints:
    """The points the contact checks run on.

    Attributes:
        points: skinned vertices (or joint positions when the rig has no mesh) [m], shape (F, N, 3).
        joints: joint world positions [m], shape (F, J, 3).
        labels: joint index per point (dominant influence for vertices), shape (N,).
        size: character size [m].
        mesh: the merged skinned mesh, or None.
        contact: the contact config to use (the wider joint band when there is no mesh).
    """

    points: np.ndarray
    joints: np.ndarray
    labels: np.ndarray
    size: float
    mesh: object
    contact: ContactConfig


def contact_points(rig: Rig, motion: Motion, config: AuditConfig | None = None, device: str | None = None):
    """Skins ``motion`` (or poses it, for rigs without a mesh) and returns the points the checks use.

    Raises:
        TypeError: ``config`` is not an :class:`AuditConfig`.
    """
    cfg = AuditConfig.checked(config)
    motion.check_rig(rig)
    joints, _ = pose_motion(rig, motion, device)
    mesh = rig.merged_mesh() if rig.meshes and sum(len(m.triangles) for m in rig.meshes) else None
    if mesh is not None:
        points, _ = skin_motion(rig, motion, device, mesh=mesh)
        size = character_size(mesh.points)
        labels = mesh.influence_joints[np.arange(mesh.vertex_count), mesh.influence_weights.argmax(axis=1)]
        contact = cfg.contact
    else:
        points = joints
        size = character_size(rig.rest_world_transforms()[0])
        labels = np.arange(rig.joint_count)
        contact = dataclasses.replace(cfg.contact, contact_height_rel=cfg.joint_contact_height_rel)
    if not size > 0:
        raise RigError(
            f"rig {rig.name!r}: its bind-pose {'mesh' if mesh is not None else 'skeleton'} has no extent, so there is"
            " no size to scale the contact bands by"
        )
    return ContactPoints(points, joints, labels, size, mesh, contact)


def derived_joint_limits(rig: Rig, motions: Sequence[Motion], config: AuditConfig | None = None) -> JointLimits:
    """Joint limits the audit derives from clips of ``rig`` when none are given: each clip's robust range
    (``limit_quantile``, leaving out at least ``limit_min_tail_s`` of its frames at each end, up to
    ``limit_max_quantile``), their envelope, widened by ``limit_margin_deg``
    (:func:`sim.contact_metrics.joint_limits_from_motions`)."""
    cfg = AuditConfig.checked(config)
    return joint_limits_from_motions(
        rig.rest_rotations,
        [m.rotations for m in motions],
        cfg.limit_margin_deg,
        cfg.limit_quantile,
        min_tail=[cfg.limit_min_tail_frames(m) for m in motions],
        max_quantile=cfg.limit_max_quantile,
    )


def audit_motion(
    rig: Rig,
    motion: Motion,
    config: AuditConfig | None = None,
    *,
    limits: JointLimits | None = None,
    source: str = "",
    device: str | None = None,
) -> AuditReport:
    """Audits one clip: ground contact, foot skate, self-intersection, joint limits, bone lengths, jitter.

    With a skinned mesh the contact checks run on skinned vertices; without one (e.g. BVH) on joint positions
    (with the wider ``joint_contact_height_rel`` band) and the self-intersection check is skipped.

    Args:
        rig: the character.
        motion: the clip (its joint count must match the rig).
        config: thresholds (default :class:`AuditConfig`).
        limits: joint limits (a :class:`sim.contact_metrics.JointLimits`, not the pose space's); None derives them
            from the clip itself (robust range plus a margin, so only outlier frames such as flipped joints fail:
            the range leaves out ``limit_quantile`` of the frames at each end and at least ``limit_min_tail_s``
            of them, up to ``limit_max_quantile``, so that a glitch of a few frames cannot drag it).
        source: where the clip came from (for the report).
        device: Warp device.

    Returns:
        The report; ``report.passed`` is False when any check fails.

    Raises:
        TypeError: ``config`` or ``limits`` of another class (naming the argument and the class expected).
        ValueError: an unusable threshold (naming the config field).
    """
    cfg = AuditConfig.checked(config)
    if limits is not None and not isinstance(limits, JointLimits):
        raise _type_error("limits", JointLimits, limits)
    cp = contact_points(rig, motion, cfg, device)
    t = motion.times
    F, J = motion.frame_count, rig.joint_count
    points, joints, mesh, size, labels, contact_cfg = cp.points, cp.joints, cp.mesh, cp.size, cp.labels, cp.contact
    ground = ground_contact_metrics(points, t, contact_cfg, size=size, labels=labels, label_count=J)
    played = None
    if not motion.is_uniform():
        # keyframed clips keep their key times, far apart where the curves are smooth: sustained penetration,
        # floating and foot skate are judged on the clip as played, uniformly resampled at its frame rate (the
        # central difference across a hop's apex key was 0: a hover; a foot's path between keys is the played one)
        pm = motion.resample(motion.fps)
        pp = contact_points(rig, pm, cfg, device)
        played = ground_contact_metrics(pp.points, pm.times, contact_cfg, size=size, labels=labels, label_count=J)
    names = rig.joint_names
    series: dict[str, np.ndarray] = {"times_s": t}
    checks = [
        _check_penetration(ground, t, motion.fps, cfg, names, series, played),
        _check_floating(ground, t, motion.fps, names, series, played),
        _check_skate(ground, t, motion.fps, cfg, names, series, played),
    ]
    si = None
    if mesh is not None:
        checker = MeshSelfIntersection(mesh.triangles, mesh.points, cfg.self_intersection, size=size, device=device)
        si = checker.motion(points)
        if played is not None:
            # a keyframed clip's limbs can pass through each other between keys: each key frame stands for the
            # resampled samples nearest it, and reports the one (its own or theirs) with the longest contour
            sp = checker.motion(pp.points)
            frames = list(si.frames)
            for k, f in enumerate(_nearest(t, pm.times)):
                if sp.length_m[k] > frames[f].lengths.sum():
                    frames[f] = sp.frames[k]
            si = checker.summarize(frames)
        checks.append(_check_self_intersection(si, face_labels(mesh), t, cfg, names, series))
    else:
        checks.append(
            CheckResult("self_intersection", "skipped", 0.0, 0.0, "m", "skipped: the rig has no mesh (joints only)")
        )
        series["self_intersection_length_m"] = np.zeros(F)
    if limits is None:
        limits = derived_joint_limits(rig, [motion], cfg)
    kin = kinematic_metrics(joints, t, rig.parents, rig.bone_lengths())
    checks.append(_check_limits(rig, motion, limits, t, cfg, series))
    checks.append(_check_bones(kin.bone_drift, size, t, cfg, names, series))
    checks.append(_check_jitter(joints, motion, size, cfg, names, series))

    metrics = {"ground": ground.summary(), "kinematic": kin.summary()}
    metrics["ground"]["ground_velocity_mps"] = float(np.linalg.norm(ground.ground_velocity))
    if si is not None:
        metrics["self_intersection"] = si.summary() | {
            "excluded_pair_count": si.excluded_pair_count,
            "face_count": si.face_count,
            "max_penetration_depth_m": float(si.depth_m.max(initial=0.0)),
            "max_pair_depth_m": float(si.pair_depth_m.max(initial=0.0)),
        }
    report = AuditReport(
        rig_name=rig.name,
        clip_name=motion.name,
        source=str(source),
        frame_count=F,
        fps=motion.fps,
        duration_s=motion.duration,
        size_m=size,
        up_axis=contact_cfg.up_axis,
        ground_height_m=contact_cfg.ground_height,
        has_mesh=mesh is not None,
        checks=checks,
        metrics=metrics,
        series=series,
        config=dataclasses.asdict(cfg) | {"joint_limits": limits.source},
    )
    report.geometry = {
        "points": points,
        "joints": joints,
        "parents": rig.parents,
        "joint_names": names,
        "triangles": None if mesh is None else mesh.triangles,
        "self_intersection": si,
        "contact_height": ground.contact_height,
    }
    return report


def _parts(scores: np.ndarray, names: tuple[str, ...], limit: int) -> list[str]:
    """Names of the parts with positive score, highest first."""
    order = np.argsort(-scores, kind="stable")
    return [names[p] for p in order[:limit] if scores[p] > 0]


def _nearest(samples: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Index of the sample of ``samples`` (increasing times [s]) nearest each of ``times`` [s], shape like ``times``."""
    idx = np.clip(np.searchsorted(samples, times), 0, len(samples) - 1)
    prev = np.clip(idx - 1, 0, len(samples) - 1)
    return np.where(np.abs(samples[prev] - times) < np.abs(samples[idx] - times), prev, idx)


def _sustained(depth: np.ndarray, t: np.ndarray, fps: float, soft: float, min_event_s: float) -> np.ndarray:
    """Samples of runs deeper than ``soft`` lasting ``min_event_s`` or longer, each sample lasting ``1/fps``
    (so ``t`` must be uniform at ``fps``)."""
    out = np.zeros(len(depth), dtype=bool)
    for s, e in frame_runs(depth > soft):
        if t[e - 1] - t[s] + 1.0 / fps >= min_event_s - 1e-9:
            out[s:e] = True
    return out


def _check_penetration(
    ground: GroundContactMetrics,
    t,
    fps,
    cfg: AuditConfig,
    names,
    series,
    played: GroundContactMetrics | None = None,
) -> CheckResult:
    """Fails frames deeper than the hard threshold, and runs deeper than the soft one for ``min_event_s``.

    ``played``: for a clip whose samples are not uniform at ``fps`` (keyframes), the ground metrics of the clip
    uniformly resampled at ``fps``. Event durations are then measured on it (crediting each key ``1/fps``
    undercounts events between sparse keys) and each resampled sample is reported on the frame nearest in time:
    a frame's depth in the series is the deepest of its own and of the resampled samples it stands for.
    """
    size = ground.size
    depth = ground.penetration_max
    soft, hard = cfg.penetration_rel * size, cfg.penetration_hard_rel * size
    fail = depth > hard
    label = ground.penetration_label.copy()
    if played is None:
        fail |= _sustained(depth, t, fps, soft, cfg.min_event_s)
        part_depth = np.where(fail[:, None], ground.part_penetration, 0.0).max(axis=0)
    else:
        pd = played.penetration_max
        fail_p = (pd > hard) | _sustained(pd, played.times, fps, soft, cfg.min_event_s)
        frame = _nearest(t, played.times)
        fail[frame[fail_p]] = True
        deeper = np.zeros(len(depth))
        np.maximum.at(deeper, frame, pd)
        # a frame whose resampled samples go deeper than its own is labelled by the deepest of them
        k = np.flatnonzero(pd > depth[frame])
        k = k[np.argsort(-pd[k], kind="stable")]
        deep_frames, first = np.unique(frame[k], return_index=True)
        label[deep_frames] = played.penetration_label[k[first]]
        depth = np.maximum(depth, deeper)
        part_depth = np.maximum(
            np.where(fail[:, None], ground.part_penetration, 0.0).max(axis=0),
            np.where(fail_p[:, None], played.part_penetration, 0.0).max(axis=0),
        )
    series["penetration_m"] = depth
    worst = int(depth.argmax())
    ranges = frame_ranges(fail, t)
    parts = _parts(part_depth, names, cfg.max_parts)
    deepest = names[label[worst]] if label[worst] >= 0 else "-"
    played_text = f"; keys resampled at {fps:g} fps" if played is not None else ""
    if fail.any():
        msg = (
            f"ground penetration up to {_cm(depth.max(), size)} at frame {worst} ({deepest}); fails at "
            f"{_ranges_text(ranges)} (deeper than {soft:.3g} m for {cfg.min_event_s:g} s or {hard:.3g} m once)"
            f" in {', '.join(parts)}{played_text}"
        )
    else:
        msg = f"max penetration {_cm(depth.max(), size)} at frame {worst} ({deepest}){played_text}"
    details = {
        "hard_threshold_m": hard,
        "min_event_s": cfg.min_event_s,
        "mean_penetration_m": ground.mean_penetration_m,
    }
    if played is not None:
        details["resampled_fps"] = float(fps)
    return CheckResult(
        "ground_penetration",
        "fail" if fail.any() else "pass",
        float(depth.max()),
        soft,
        "m",
        msg,
        ranges,
        parts,
        worst,
        "penetration_m",
        details,
    )


def _on_frames(values: np.ndarray, frame: np.ndarray, frame_count: int) -> np.ndarray:
    """Per frame, the largest of the ``values`` (one per resampled sample) of the samples nearest it, 0 where none
    is, shape (frame_count, ...)."""
    out = np.zeros((frame_count, *values.shape[1:]))
    np.maximum.at(out, frame, np.maximum(values, 0.0))
    return out


def _check_floating(
    ground: GroundContactMetrics, t, fps, names, series, played: GroundContactMetrics | None = None
) -> CheckResult:
    """Fails floating frames (:func:`sim.contact_metrics.ground_contact_metrics`).

    ``played``: for a keyframed clip, the ground metrics of the clip resampled at ``fps``: floating is judged on it
    (keys far apart are no trajectory to time a flight or a hover on) and each resampled sample is reported on the
    frame nearest in time.
    """
    src = ground if played is None else played
    if played is None:
        floating, h = ground.floating, ground.floating_height
    else:
        frame = _nearest(t, played.times)
        floating = np.zeros(len(t), dtype=bool)
        floating[frame[played.floating]] = True
        h = _on_frames(played.floating_height, frame, len(t))
    series["floating_m"] = h
    ranges = frame_ranges(floating, t)
    worst = int(h.argmax()) if floating.any() else -1
    played_text = f"; keys resampled at {fps:g} fps" if played is not None else ""
    if floating.any():
        msg = f"floating up to {_cm(h.max(), ground.size)} above the ground at {_ranges_text(ranges)} (whole body)"
    else:
        airborne = int(src.airborne.sum())
        msg = f"no floating ({airborne} airborne frames, all explained by ballistic flight)"
    details = {"floating_ratio": src.floating_ratio, "airborne_frames": int(src.airborne.sum())}
    if played is not None:
        details["resampled_fps"] = float(fps)
    return CheckResult(
        "floating",
        "fail" if floating.any() else "pass",
        float(h.max()),
        ground.contact_height,
        "m",
        msg + played_text,
        ranges,
        ["whole body"] if floating.any() else [],
        worst,
        "floating_m",
        details,
    )


def _check_skate(
    ground: GroundContactMetrics, t, fps, cfg: AuditConfig, names, series, played: GroundContactMetrics | None = None
) -> CheckResult:
    """Fails contact phases whose net slide exceeds ``slide_rel`` x size or whose slide path (sliding back and forth
    adds up: :attr:`sim.contact_metrics.ContactSlide.path_m`) exceeds ``slide_path_rel`` x size, naming the frames
    where the part moves.

    The value is the most severe slide's net displacement or path, whichever is nearer its limit, and the threshold
    that limit.

    ``played``: for a keyframed clip, the ground metrics of the clip resampled at ``fps``: the slides are measured
    on it and reported on the frames nearest in time.
    """
    size = ground.size
    g = ground if played is None else played
    frame = np.arange(len(t)) if played is None else _nearest(t, played.times)
    speed = np.nan_to_num(np.nanmax(np.where(np.isnan(g.part_skate_speed), -1, g.part_skate_speed), 1))
    series["skate_speed_mps"] = _on_frames(speed, frame, len(t))
    net_limit, path_limit = cfg.slide_rel * size, cfg.slide_path_rel * size

    def severity(sl) -> tuple[float, float, float]:
        """(value / limit, value, limit) of the slide's more severe measure."""
        net = (sl.distance_m / net_limit, sl.distance_m, net_limit)
        return max(net, (sl.path_m / path_limit, sl.path_m, path_limit))

    bad = [s for s in g.slides if severity(s)[0] > 1.0]
    fail_g = np.zeros(len(g.times), dtype=bool)
    scores = np.zeros(len(names))
    for s in bad:
        # name the frames of the contact where the part actually moves, not the whole contact phase
        moving = g.part_skate_speed[s.start : s.stop, s.part] > g.skate_speed_threshold
        if moving.any():
            fail_g[s.start : s.stop] |= moving
        else:  # a slow creep that adds up over the contact: the whole contact is at fault
            fail_g[s.start : s.stop] = True
        scores[s.part] = max(scores[s.part], severity(s)[0])
    fail = np.zeros(len(t), dtype=bool)
    fail[frame[fail_g]] = True
    worst_slide = max(g.slides, key=lambda s: severity(s)[0], default=None)
    _, value, limit = severity(worst_slide) if worst_slide else (0.0, 0.0, net_limit)
    worst = -1
    if worst_slide is not None:
        seg = speed[worst_slide.start : worst_slide.stop]
        worst = int(frame[worst_slide.start + int(np.argmax(seg))])
    ranges = frame_ranges(fail, t)
    parts = _parts(scores, names, cfg.max_parts)

    def frames(sl) -> tuple[int, int]:
        return int(frame[sl.start]), int(frame[sl.stop - 1]) + 1

    where = ""
    if worst_slide:
        a, b = frames(worst_slide)
        where = f" ({names[worst_slide.part]}, frames {a}-{b - 1})"
        slide = f"{_cm(worst_slide.distance_m, size)} net, {_cm(worst_slide.path_m, size)} of path"
    else:
        slide = _cm(0.0, size)
    limits = f"limits {net_limit:.4g} m net, {path_limit:.4g} m of path"
    if bad:
        msg = f"feet slide up to {slide} in one contact{where}; fails at {_ranges_text(ranges)}"
        msg += f" in {', '.join(parts)} ({limits})"
    else:
        msg = f"longest slide in one contact {slide}{where}"
    msg += f"; foot_skate_ratio {g.foot_skate_ratio:.3f}"
    if played is not None:
        msg += f"; keys resampled at {fps:g} fps"
    details = {
        "foot_skate_ratio": g.foot_skate_ratio,
        "skate_speed_threshold_mps": g.skate_speed_threshold,
        "ground_velocity_mps": g.ground_velocity.tolist(),
        "net_threshold_m": net_limit,
        "path_threshold_m": path_limit,
        "max_slide_m": g.max_slide_m,
        "max_slide_path_m": g.max_slide_path_m,
        "slides": [
            {
                "part": names[s.part],
                "start": frames(s)[0],
                "stop": frames(s)[1],
                "distance_m": s.distance_m,
                "path_m": s.path_m,
            }
            for s in bad
        ],
    }
    if played is not None:
        details["resampled_fps"] = float(fps)
    return CheckResult(
        "foot_skate",
        "fail" if bad else "pass",
        float(value),
        float(limit),
        "m",
        msg,
        ranges,
        parts,
        worst,
        "skate_speed_mps",
        details,
    )


def _check_self_intersection(si: SelfIntersectionMetrics, flabels, t, cfg: AuditConfig, names, series) -> CheckResult:
    size = si.size
    length = si.length_m
    series["self_intersection_length_m"] = length
    series["self_intersection_face_share"] = si.face_share
    series["self_penetration_depth_m"] = si.depth_m
    limit = cfg.self_intersection_length_rel * size
    fail = length > limit
    worst = int(length.argmax()) if length.any() else -1
    pair_len: dict[tuple[str, str], float] = {}
    scores = np.zeros(len(names))
    for f in np.flatnonzero(fail if fail.any() else length == length.max()) if length.any() else []:
        fr = si.frames[f]
        for (i, j), ln in zip(fr.pairs, fr.lengths):
            a, b = sorted((names[flabels[i]], names[flabels[j]]))
            pair_len[(a, b)] = pair_len.get((a, b), 0.0) + float(ln)
            scores[flabels[i]] += ln
            scores[flabels[j]] += ln
    top = sorted(pair_len.items(), key=lambda kv: -kv[1])[: cfg.max_parts]
    parts = _parts(scores, names, cfg.max_parts)
    ranges = frame_ranges(fail, t)
    pairs_text = ", ".join(f"{a}/{b}" for (a, b), _ in top)
    if fail.any():
        msg = (
            f"self-intersection contour up to {_cm(length.max(), size)} at frame {worst}; fails at "
            f"{_ranges_text(ranges)} between {pairs_text}"
        )
    elif worst >= 0:
        msg = f"max contour {_cm(length.max(), size)} at frame {worst} ({pairs_text}), below the limit"
    else:
        msg = "no self-intersection"
    return CheckResult(
        "self_intersection",
        "fail" if fail.any() else "pass",
        float(length.max(initial=0.0)),
        limit,
        "m",
        msg,
        ranges,
        parts if fail.any() else [],
        worst,
        "self_intersection_length_m",
        {
            "max_face_share": si.max_face_share,
            "max_penetration_depth_m": float(si.depth_m.max(initial=0.0)),
            "intersecting_frames": si.intersecting_frames,
            "joint_pairs": [[a, b, ln] for (a, b), ln in top],
        },
    )


def _check_limits(rig: Rig, motion: Motion, limits: JointLimits, t, cfg: AuditConfig, series) -> CheckResult:
    excess = joint_limit_violations(rig.rest_rotations, motion.rotations, limits)
    excess[:, root_chain(rig.parents)] = 0.0  # the body's global orientation has no limit
    per_frame = np.rad2deg(excess.max(axis=1))
    series["joint_limit_excess_deg"] = per_frame
    fail = per_frame > 1e-6
    worst = int(per_frame.argmax()) if fail.any() else -1
    parts = _parts(np.rad2deg(excess.max(axis=0)), rig.joint_names, cfg.max_parts)
    ranges = frame_ranges(fail, t)
    if fail.any():
        msg = f"joints exceed their limits by up to {per_frame.max():.1f} deg at {_ranges_text(ranges)}"
        msg += f" in {', '.join(parts)}"
    else:
        msg = "all joints within their limits"
    msg += f" (limits {limits.source})"
    return CheckResult(
        "joint_limits",
        "fail" if fail.any() else "pass",
        float(per_frame.max(initial=0.0)),
        0.0,
        "deg",
        msg,
        ranges,
        parts,
        worst,
        "joint_limit_excess_deg",
        {"limits": limits.source, "severity_scale": max(cfg.limit_margin_deg, 1.0)},
    )


def _check_bones(drift: np.ndarray, size: float, t, cfg: AuditConfig, names, series) -> CheckResult:
    per_frame = drift.max(axis=1)
    series["bone_drift_m"] = per_frame
    limit = cfg.bone_drift_rel * size
    fail = per_frame > limit
    worst = int(per_frame.argmax())
    parts = _parts(np.where(drift.max(axis=0) > limit, drift.max(axis=0), 0.0), names, cfg.max_parts)
    ranges = frame_ranges(fail, t)
    if fail.any():
        msg = (
            f"bone lengths change by up to {_cm(per_frame.max(), size)} at {_ranges_text(ranges)} in {', '.join(parts)}"
        )
    else:
        msg = f"bone lengths kept (max change {_cm(per_frame.max(), size)})"
    return CheckResult(
        "bone_length",
        "fail" if fail.any() else "pass",
        float(per_frame.max()),
        limit,
        "m",
        msg,
        ranges,
        parts,
        worst,
        "bone_drift_m",
    )


def jitter_jerk(joints: np.ndarray, motion: Motion, jitter_fps: float) -> tuple[np.ndarray, float]:
    """Joint jerk as the jitter check measures it [m/s^3], shape (F, J), and the rate it is measured at [1/s].

    Third differences of the clip's own samples (:func:`sim.contact_metrics.jerk_magnitude`: unlike central
    differences they see frame-to-frame jitter), at a rate of at most ``jitter_fps`` (the jerk of noise grows as
    fps^3):

    * a uniform clip at ``fps <= jitter_fps``: consecutive frames;
    * a faster uniform clip at a whole multiple of ``jitter_fps``, ``k = fps / jitter_fps`` frames to a step
      (120 fps: ``k = 4``, 30 fps), the larger of two readings per frame. The jerk at ``fps / k``: the means of
      ``k`` consecutive frames (the anti-aliasing filter of the decimation: a toe striking the floor at 120 fps
      read 17% more without it), ``k`` apart, from every starting frame, i.e. every sampling phase of the
      decimation at once (decimating one phase, as ``motion.resample(30)`` did, never saw a glitch on a skipped
      frame). And consecutive frames read as if ``k`` frames apart (a change from one frame to the next counts as
      one at ``fps / k``): the filter and the decimation both remove a frame-to-frame alternation;
    * a faster uniform clip at another rate (31, 45 fps): the same at exactly ``jitter_fps``, the means taken over
      fractional windows (:func:`_fractional_jerk`);
    * a keyframed clip: consecutive keys (divided differences), keys closer than ``1 / jitter_fps`` read as if
      that far apart.

    Args:
        joints: joint world positions [m], shape (F, J, 3).
        motion: the clip (its times and frame rate).
        jitter_fps: the highest analysis rate [1/s].
    """
    t = motion.times
    if not motion.is_uniform():
        return jerk_magnitude(joints, t, min_span_s=3.0 / jitter_fps), min(motion.fps, jitter_fps)
    k = max(1, math.ceil(motion.fps / jitter_fps - 1e-6))
    if k == 1:
        return jerk_magnitude(joints, t), motion.fps
    if abs(motion.fps / jitter_fps - round(motion.fps / jitter_fps)) > 1e-6:
        return _fractional_jerk(joints, t, motion.fps, jitter_fps), jitter_fps
    F = len(t)
    jerk = jerk_magnitude(joints, t, min_span_s=3.0 * k / motion.fps)
    if F - k + 1 > 3 * k:
        # means of k consecutive frames, then third differences k means apart; frame f reads the mean of frames
        # f - (k - 1) // 2 ... (the one centred on it, within half a frame)
        c = np.cumsum(np.concatenate([np.zeros((1, *joints.shape[1:])), joints]), axis=0)
        means = (c[k:] - c[:-k]) / k
        mean_t = np.convolve(t, np.full(k, 1.0 / k), mode="valid")
        smooth = jerk_magnitude(means, mean_t, step=k)
        jerk = np.maximum(jerk, smooth[np.clip(np.arange(F) - (k - 1) // 2, 0, len(means) - 1)])
    return jerk, motion.fps / k


def _fractional_jerk(joints: np.ndarray, t: np.ndarray, fps: float, jitter_fps: float) -> np.ndarray:
    """Jerk (F, J) at exactly ``jitter_fps`` of a uniform clip whose rate is no whole multiple of it.

    Rounding the step up (31 fps measured at 15.5, 45 at 22.5) read a one-frame pop 7x lower than at 30 or 60
    fps (the jerk of a pop grows as rate^3): the same glitch passed at 31 and 45 fps and failed at 30 and 60. Here
    the clip (linear between its samples) is averaged over windows of ``1 / jitter_fps`` (the decimation's
    anti-aliasing filter at a fractional width, integrated exactly) and third differences are taken
    ``1 / jitter_fps`` apart around every frame; consecutive frames also read as if that far apart (as for whole
    multiples).
    """
    dt, w = 1.0 / fps, 1.0 / jitter_fps
    jerk = jerk_magnitude(joints, t, min_span_s=3.0 * w)
    F = len(t)
    if t[-1] - t[0] < 4.0 * w:  # no window of four means fits: the consecutive-frame reading alone
        return jerk
    x = joints.reshape(F, -1)
    slope = np.diff(x, axis=0) / dt
    integral = np.concatenate([np.zeros((1, x.shape[1])), np.cumsum(0.5 * (x[1:] + x[:-1]) * dt, axis=0)])

    def integral_at(tau: np.ndarray) -> np.ndarray:  # of the linear interpolant from t[0] to tau, (F, J * 3)
        i = np.clip(np.floor((tau - t[0]) / dt).astype(np.int64), 0, F - 2)
        s = (tau - t[i])[:, None]
        return integral[i] + x[i] * s + 0.5 * slope[i] * s * s

    centre = np.clip(t, t[0] + 2.0 * w, t[-1] - 2.0 * w)
    m = [
        (integral_at(centre + (o + 0.5) * w) - integral_at(centre + (o - 0.5) * w)) / w for o in (-1.5, -0.5, 0.5, 1.5)
    ]
    d3 = ((m[3] - 3.0 * m[2] + 3.0 * m[1] - m[0]) / w**3).reshape(F, -1, 3)
    return np.maximum(jerk, np.linalg.norm(d3, axis=-1))


def _check_jitter(joints: np.ndarray, motion: Motion, size: float, cfg: AuditConfig, names, series) -> CheckResult:
    t = motion.times
    if len(t) < 4:  # a third difference needs four samples: a 3-frame clip read as "max jerk 0", a pass
        series["jerk_mps3"] = np.zeros(len(t))
        return CheckResult(
            "jitter", "skipped", 0.0, cfg.jerk_rel * size, "m/s^3",
            f"skipped: {len(t)} frames, jerk needs at least 4",
        )  # fmt: skip
    per_joint, rate = jitter_jerk(joints, motion, cfg.jitter_fps)
    per_frame = per_joint.max(axis=1)
    series["jerk_mps3"] = per_frame
    limit = cfg.jerk_rel * size
    fail = per_frame > limit
    worst = int(per_frame.argmax())
    parts = _parts(np.where(per_joint.max(axis=0) > limit, per_joint.max(axis=0), 0.0), names, cfg.max_parts)
    ranges = frame_ranges(fail, t)
    rate_text = f"at {rate:g} fps" + (" from every frame" if rate < motion.fps * 0.999 else "")
    if fail.any():
        msg = f"jerk up to {per_frame.max():.4g} m/s^3 ({per_frame.max() / size:.0f} sizes/s^3 {rate_text})"
        msg += f" at {_ranges_text(ranges)} in {', '.join(parts)}"
    else:
        msg = f"max jerk {per_frame.max():.4g} m/s^3 ({per_frame.max() / size:.0f} sizes/s^3 {rate_text})"
    return CheckResult(
        "jitter",
        "fail" if fail.any() else "pass",
        float(per_frame.max()),
        limit,
        "m/s^3",
        msg,
        ranges,
        parts,
        worst,
        "jerk_mps3",
        {"analysis_fps": rate},
    )
