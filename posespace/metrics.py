"""Pose-set metrics: diversity (APD), fidelity and coverage (PRDC precision / coverage), path validity.

Poses are compared through their joint positions relative to the root, heading removed, divided by the rig's
height (the *pose features*), so every figure is unitless and comparable across characters.
"""

from __future__ import annotations

import numpy as np

__all__ = ["apd", "joint_positions", "pose_features", "prdc", "slerp_path"]


def joint_positions(pose_rig, poses: np.ndarray) -> np.ndarray:
    """World joint positions [m] of 6D poses (N, J, 6) with the root at the origin, shape (N, J, 3)."""
    import sim

    motion = pose_rig.decode(poses, on_ground=False)
    motion = sim.Motion(motion.fps, np.zeros((motion.frame_count, 3)), motion.rotations)
    pos, _ = sim.pose_motion(pose_rig.rig, motion)
    return pos


def pose_features(pose_rig, poses: np.ndarray) -> np.ndarray:
    """Flattened root-relative joint positions / height of the active joints, shape (N, 3 * active)."""
    pos = joint_positions(pose_rig, poses)[:, pose_rig.active]
    return pos.reshape(len(pos), -1) / pose_rig.height


def apd(pose_rig, poses: np.ndarray, max_poses: int = 300, seed: int = 0) -> float:
    """Average pairwise distance: mean over pose pairs of the mean joint-position distance, / height."""
    rng = np.random.default_rng(seed)
    if len(poses) > max_poses:
        poses = poses[rng.choice(len(poses), max_poses, replace=False)]
    pos = joint_positions(pose_rig, poses)[:, pose_rig.active] / pose_rig.height  # (N, A, 3)
    n = len(pos)
    if n < 2:
        return 0.0
    d = np.linalg.norm(pos[:, None] - pos[None], axis=-1).mean(-1)  # (N, N)
    return float(d.sum() / (n * (n - 1)))


def _pairwise(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Euclidean distances (N, M), from the differences: ``|a|^2 + |b|^2 - 2 a.b`` left 1e-7 between identical
    points, so a k-NN ball of duplicated poses (radius 0) held them."""
    from scipy.spatial.distance import cdist

    return cdist(a, b)


def prdc(real: np.ndarray, fake: np.ndarray, k: int = 5) -> dict[str, float]:
    """Precision, recall, density and coverage of ``fake`` against ``real`` (Naeem et al. 2020, k-NN balls).

    Args:
        real: real feature vectors, shape (N, D).
        fake: generated feature vectors, shape (M, D).
        k: neighbourhood size.

    Returns:
        ``precision`` (share of fakes inside some real k-NN ball), ``recall`` (share of reals inside some fake
        k-NN ball), ``density`` and ``coverage`` (share of real balls containing a fake).
    """
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:  # k = -1 took the farthest neighbour
        raise ValueError(f"prdc: k must be an integer >= 1, got {k!r}")
    real, fake = np.asarray(real, dtype=np.float64), np.asarray(fake, dtype=np.float64)
    if real.ndim != 2 or fake.ndim != 2 or real.shape[1] != fake.shape[1]:
        raise ValueError(f"prdc: real and fake must be feature arrays (N, D) and (M, D), got {real.shape} and"
                         f" {fake.shape}")  # fmt: skip
    if real.shape[1] == 0:
        raise ValueError("prdc: features of width 0 (nothing to compare)")
    for name, x in (("real", real), ("fake", fake)):  # one NaN fake set the coverage to 0
        if not np.isfinite(x).all():
            raise ValueError(f"prdc: {name} holds non-finite features (row {int(np.argmax(~np.isfinite(x).all(1)))})")
    if len(real) <= k or len(fake) <= k:
        raise ValueError(f"prdc: need more than k={k} real ({len(real)}) and fake ({len(fake)}) samples")
    rr = _pairwise(real, real)
    ff = _pairwise(fake, fake)
    rf = _pairwise(real, fake)  # (N, M)
    r_real = np.sort(rr, axis=1)[:, k]  # k-th neighbour (index 0 is the point itself)
    r_fake = np.sort(ff, axis=1)[:, k]
    # open balls, as Naeem et al.'s reference code: with closed ones duplicated poses (static frames) counted a
    # fake on a radius of 0 as covering them
    inside = rf < r_real[:, None]  # fake j in real ball i
    return {
        "precision": float(inside.any(axis=0).mean()),
        "recall": float((rf < r_fake[None, :]).any(axis=1).mean()),
        "density": float(inside.sum(axis=0).mean() / k),
        "coverage": float((rf.min(axis=1) < r_real).mean()),
    }


def slerp_path(pose_rig, a: np.ndarray, b: np.ndarray, steps: int) -> np.ndarray:
    """Per-joint slerp of canonical rotations from 6D pose ``a`` to ``b`` (J, 6), shape (steps, J, 6)."""
    from sim.rotations import quat_slerp, quat_to_rot6d, rot6d_to_quat

    qa, qb = rot6d_to_quat(a), rot6d_to_quat(b)
    u = np.linspace(0.0, 1.0, steps)
    return quat_to_rot6d(quat_slerp(qa[None], qb[None], u[:, None]))
