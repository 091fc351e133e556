"""Clips made implausible on purpose, for the audit's acceptance tests and benchmark.

Each takes a clean clip and damages it over frames ``[start, stop)`` only, so the audit must name that range:

* :func:`sunk`: the whole character lowered by ``depth`` (e.g. 3 cm into the ground);
* :func:`sliding`: the root drifts forward at ``speed`` on top of the walk, so planted feet slide;
* :func:`limb_through_body`: a joint rotated by ``angle_deg`` about a world axis (an arm swung into the torso).
"""

from __future__ import annotations

import numpy as np

import sim
from sim.rotations import axis_angle_to_quat, quat_conjugate, quat_multiply


def _copy(motion: sim.Motion, root=None, rotations=None, name: str = "") -> sim.Motion:
    return sim.Motion(
        motion.fps,
        motion.root_translations if root is None else root,
        motion.rotations if rotations is None else rotations,
        motion.translations,
        times=motion.times,
        name=name or motion.name,
    )


def sunk(motion: sim.Motion, start: int, stop: int, depth: float, up: int = 2) -> sim.Motion:
    """The clip with the root lowered by ``depth`` [m] on frames ``[start, stop)``."""
    root = motion.root_translations.copy()
    root[start:stop, up] -= depth
    return _copy(motion, root=root, name=f"{motion.name}-sunk")


def sliding(motion: sim.Motion, start: int, stop: int, speed: float, axis: int = 0) -> sim.Motion:
    """The clip with an extra root drift of ``speed`` [m/s] along world ``axis`` during ``[start, stop)``
    (the offset reached at ``stop`` is kept afterwards, so only those frames slide)."""
    t = motion.times
    drift = speed * (np.clip(t, t[start], t[stop - 1]) - t[start])
    root = motion.root_translations.copy()
    root[:, axis] += drift
    return _copy(motion, root=root, name=f"{motion.name}-sliding")


def limb_through_body(
    rig: sim.Rig, motion: sim.Motion, joint: str, start: int, stop: int, angle_deg: float, axis=(1.0, 0.0, 0.0)
) -> sim.Motion:
    """The clip with ``joint`` turned by ``angle_deg`` about a world ``axis`` on frames ``[start, stop)``."""
    j = rig.joint_index(joint)
    parent = rig.parents[j]
    _, world_rot = sim.pose_motion(rig, motion)
    q = axis_angle_to_quat(np.deg2rad(angle_deg) * np.asarray(axis, dtype=float))
    pw = world_rot[start:stop, parent]
    local = quat_multiply(quat_multiply(quat_conjugate(pw), quat_multiply(np.broadcast_to(q, pw.shape), pw)),
                          motion.rotations[start:stop, j])  # fmt: skip
    rot = motion.rotations.copy()
    rot[start:stop, j] = local
    return _copy(motion, rotations=rot, name=f"{motion.name}-{joint}-through-body")
