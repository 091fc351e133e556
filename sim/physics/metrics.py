"""Tracking metrics: body and joint errors against the reference, ground contact as the audit measures it (skinned
vertices, or joint centres with a wider band for meshless rigs; :mod:`sim.contact_metrics` through the audit's
contact points), capsule self-penetration (through :mod:`sim.collision`)."""

from __future__ import annotations

import numpy as np

from .._numbers import is_finite_real
from ..audit import AuditConfig
from ..audit.checks import contact_points
from ..collision import capsule_penetration
from ..contact_metrics import ContactConfig, ground_contact_metrics
from ..motion import Motion
from ..rotations import quat_conjugate, quat_multiply
from .character import PhysicsCharacter
from .feasibility import dynamic_feasibility
from .tracking import ReferenceTrajectory, TrackingResult

__all__ = ["contact_summary", "self_penetration", "tracking_metrics"]


def _angle(q: np.ndarray) -> np.ndarray:
    return 2.0 * np.arccos(np.clip(np.abs(q[..., 3]), 0.0, 1.0))


def contact_summary(rig, motion: Motion, ground_height: float = 0.0) -> dict[str, float]:
    """Ground contact of a rig motion, measured as the audit measures it (:func:`sim.audit.audit_motion`).

    The points are the audit's (:func:`sim.audit.checks.contact_points`): skinned vertices with the vertex contact
    band; for rigs without a mesh (e.g. BVH) joint centres with the audit's wider joint band
    (``AuditConfig.joint_contact_height_rel``: a foot joint sits a foot's thickness above the ground, so the
    vertex band called every frame of a CMU walk floating and none skating).

    Args:
        rig: the rig.
        motion: a motion of ``rig``.
        ground_height: height of the ground plane (Z) [m].

    Returns:
        ``max_ground_penetration_m``, ``mean_ground_penetration_m``, ``foot_skate_ratio``, ``floating_ratio``,
        ``max_floating_m`` as defined by :func:`sim.contact_metrics.ground_contact_metrics`; equal to the audit's
        ``metrics["ground"]`` figures of the same motion.
    """
    if not is_finite_real(ground_height):
        raise ValueError(f"ground_height: must be a finite number, got {ground_height!r}")
    cp = contact_points(rig, motion, AuditConfig(contact=ContactConfig(ground_height=float(ground_height))))
    m = ground_contact_metrics(
        cp.points, motion.times, cp.contact, size=cp.size, labels=cp.labels, label_count=rig.joint_count
    )
    return {
        "max_ground_penetration_m": m.max_penetration_m,
        "mean_ground_penetration_m": m.mean_penetration_m,
        "foot_skate_ratio": m.foot_skate_ratio,
        "floating_ratio": m.floating_ratio,
        "max_floating_m": m.max_floating_m,
    }


def filtered_pair_allowance(
    character: PhysicsCharacter,
    frame_count: int,
    reference_pos: np.ndarray | None = None,
    reference_rot: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The body pairs the simulation does not collide although they are not parent and child
    (``character.filter_overlap_m``), shape (P, 2), and the capsule overlap allowed per frame [m], shape
    (frame_count, P): the pair's overlap in the reference pose and, when a reference motion is given (frames
    (F', B, 3) / (F', B, 4); frame f uses min(f, F' - 1)), at least its overlap there."""
    pairs = np.array(sorted(character.filter_overlap_m), dtype=np.int32).reshape(-1, 2)
    static = np.array([character.filter_overlap_m[tuple(p)] for p in pairs.tolist()], dtype=np.float64)
    allowance = np.repeat(static[None], frame_count, axis=0)
    if len(pairs) and reference_pos is not None and reference_rot is not None:
        frames = np.minimum(np.arange(frame_count), len(reference_pos) - 1)
        ends = character.capsule_world(np.asarray(reference_pos)[frames], np.asarray(reference_rot)[frames])
        depth, _ = capsule_penetration(*ends, character.capsule_radii, pairs)
        allowance = np.maximum(allowance, depth)
    return pairs, allowance


def measured_pairs(character: PhysicsCharacter) -> np.ndarray:
    """The body pairs the self-penetration metric counts whole, shape (P, 2): those the simulation collides, or,
    when the character is built without self-collision (``CharacterConfig.self_collision`` False), those it would
    collide with it (every pair neither parent and child nor filtered for overlapping in the reference pose).

    Without self-collision nothing collides, and the metric measured no pair at all: an arm driven 14 cm into the
    torso read 0.
    """
    if character.config.self_collision:
        return character.colliding_pairs()
    skip = set(character.collision_filter_pairs)
    B = character.body_count
    pairs = [(i, j) for i in range(B) for j in range(i + 1, B) if (i, j) not in skip]
    return np.array(pairs, dtype=np.int32).reshape(-1, 2)


def self_penetration(
    character: PhysicsCharacter,
    body_pos: np.ndarray,
    body_rot: np.ndarray,
    reference_pos: np.ndarray | None = None,
    reference_rot: np.ndarray | None = None,
) -> dict[str, object]:
    """Deepest capsule overlap between non-adjacent bodies over frames.

    Colliding pairs count with their whole overlap. Pairs the builder excluded from collision because their
    capsules already overlap in the reference pose (``character.filter_overlap_m``: a thigh's capsule reaching
    into the pelvis') count with the overlap beyond that allowance and, when a reference motion is given, beyond
    the pair's overlap in the reference at the same frame: an arm that the simulation drives into the torso is
    reported although the simulation does not collide the pair, while capsules sliding into each other at a joint
    as they do in the animation are not. A character built without self-collision is measured the same way on
    the pairs it would collide with it (:func:`measured_pairs`) and the filtered ones: nothing colliding does not
    make every overlap allowed.

    Args:
        character: the character.
        body_pos, body_rot: world body frames [m] (F, B, 3) and [quat xyzw] (F, B, 4).
        reference_pos, reference_rot: optional reference body frames, (F', B, 3) / (F', B, 4); frame f of the
            motion is compared with frame min(f, F' - 1).

    Returns:
        ``max_self_penetration_m`` [m], its ``frame`` and body ``pair`` names (None when nothing overlaps), and
        ``filtered`` (True when that pair is one excluded from collision for overlapping in the reference pose,
        counted beyond its allowance).
    """
    colliding = measured_pairs(character)
    filtered, allowance = filtered_pair_allowance(character, len(body_pos), reference_pos, reference_rot)
    pairs = np.concatenate([colliding, filtered]).astype(np.int32)
    none = {"max_self_penetration_m": 0.0, "frame": None, "pair": None, "filtered": False}
    if len(pairs) == 0:
        return none
    depth, _ = capsule_penetration(*character.capsule_world(body_pos, body_rot), character.capsule_radii, pairs)
    depth[:, len(colliding) :] -= allowance
    if depth.size == 0 or depth.max() <= 0.0:
        return none
    f, k = np.unravel_index(int(np.argmax(depth)), depth.shape)
    names = character.body_names
    return {
        "max_self_penetration_m": float(depth[f, k]),
        "frame": int(f),
        "pair": [names[pairs[k][0]], names[pairs[k][1]]],
        "filtered": bool(k >= len(colliding)),
    }


def tracking_metrics(
    character: PhysicsCharacter,
    reference: ReferenceTrajectory,
    result: TrackingResult,
    kinematic_input: Motion | None = None,
    ground_height: float = 0.0,
) -> dict[str, object]:
    """The metrics of a tracking or projection run (JSON-ready).

    Keys: ``body_pos_error_rel`` (mean body-origin position error / character height),
    ``body_pos_error_m``, ``root_pos_error_rel``, ``max_body_pos_error_rel`` and its frame
    (``max_body_pos_error_frame``), ``body_pos_error_rel_per_frame`` (per frame, the mean over bodies),
    ``joint_angle_error_deg`` (mean angle between simulated and reference parent-to-child body rotations),
    ``fell``, ``fell_frame``, ``blowup`` (None or frame and reason),
    ``success`` (no blow-up, not fallen), ``max_ground_penetration_m``, ``mean_ground_penetration_m``,
    ``foot_skate_ratio``, ``floating_ratio``, ``max_self_penetration_m``, ``realtime_factor``, the same contact
    metrics with a ``reference_`` prefix measured on the kinematic input (scaled and looped, unmodified) and
    with a ``target_`` prefix on the reference actually tracked (re-rooted, grounded), ``root_assist``, and the
    approximate centroidal feasibility (:func:`dynamic_feasibility`) of target and result
    (``target_dynamic_infeasible_ratio``, ``target_mean_zmp_excess_m``, ``dynamic_infeasible_ratio``, ...).
    """
    n = len(result.body_pos)
    h = character.height
    err = np.linalg.norm(result.body_pos - reference.body_pos[:n], axis=-1)
    parent = character.body_parent[1:]
    rel_sim = quat_multiply(quat_conjugate(result.body_rot[:, parent]), result.body_rot[:, 1:])
    rel_ref = quat_multiply(quat_conjugate(reference.body_rot[:n, parent]), reference.body_rot[:n, 1:])
    ang = np.degrees(_angle(quat_multiply(quat_conjugate(rel_ref), rel_sim)))
    out: dict[str, object] = {
        "frames": n,
        "reference_frames": reference.frame_count,
        "fps": reference.fps,
        "character_height_m": h,
        "character_mass_kg": character.total_mass,
        "body_count": character.body_count,
        "body_pos_error_rel": float(err.mean() / h) if n else float("nan"),
        "body_pos_error_m": float(err.mean()) if n else float("nan"),
        "root_pos_error_rel": float(err[:, 0].mean() / h) if n else float("nan"),
        "max_body_pos_error_rel": float(err.max() / h) if n else float("nan"),
        "max_body_pos_error_frame": int(np.argmax(err.max(axis=1))) if n else None,
        # where a run loses the reference: the mean body error of each frame / height
        "body_pos_error_rel_per_frame": [round(float(e), 6) for e in err.mean(axis=1) / h],
        "joint_angle_error_deg": float(ang.mean()) if ang.size else 0.0,
        "fell": result.fell_frame is not None,
        "fell_frame": result.fell_frame,
        "blowup": None if result.blowup is None else {"frame": result.blowup.frame, "reason": result.blowup.reason},
        "success": result.ok,
        "realtime_factor": result.realtime_factor,
        "wall_time_s": result.wall_time_s,
        "sim_time_s": result.sim_time_s,
        "root_assist": result.root_assist,
    }
    out.update(contact_summary(character.rig, result.motion, ground_height))
    sp = self_penetration(character, result.body_pos, result.body_rot, reference.body_pos, reference.body_rot)
    out["max_self_penetration_m"] = sp["max_self_penetration_m"]
    out["max_self_penetration_frame"] = sp["frame"]
    out["max_self_penetration_pair"] = sp["pair"]
    out["max_self_penetration_pair_filtered"] = sp["filtered"]
    # the reference actually tracked (bodies move rigidly, so its capsules are comparable)
    for k, v in contact_summary(character.rig, reference.motion, ground_height).items():
        out[f"target_{k}"] = v
    # (filtered pairs measured against the motion itself: only the pairs counted whole can count, those the
    # simulation collides or, without self-collision, would collide: measured_pairs)
    target = (reference.body_pos, reference.body_rot)
    out["target_max_self_penetration_m"] = self_penetration(character, *target, *target)["max_self_penetration_m"]
    # centroidal feasibility (approximate: finite differences) of the target and, for calibration, of the result
    if reference.frame_count >= 3:
        feas = dynamic_feasibility(character, reference.body_pos, reference.body_rot, reference.fps,
                                   ground_height=ground_height)  # fmt: skip
        out["target_dynamic_infeasible_ratio"] = feas["infeasible_ratio"]
        out["target_mean_zmp_excess_m"] = feas["mean_zmp_excess_m"]
    if n >= 3:
        feas = dynamic_feasibility(character, result.body_pos, result.body_rot, reference.fps,
                                   ground_height=ground_height)  # fmt: skip
        out["dynamic_infeasible_ratio"] = feas["infeasible_ratio"]
        out["mean_zmp_excess_m"] = feas["mean_zmp_excess_m"]
    if kinematic_input is not None:
        for k, v in contact_summary(character.rig, kinematic_input, ground_height).items():
            out[f"reference_{k}"] = v
        kp, kr = character.body_transforms(kinematic_input)
        out["reference_max_self_penetration_m"] = self_penetration(character, kp, kr, kp, kr)["max_self_penetration_m"]
    return out
