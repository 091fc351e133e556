"""Finite-difference rates of sampled rotations (NumPy only)."""

from __future__ import annotations

import numpy as np

from ..rotations import quat_conjugate, quat_multiply, quat_to_axis_angle


def angular_velocity(rot: np.ndarray, fps: float) -> np.ndarray:
    """World angular velocity [rad/s] from world rotations [xyzw] (F, ..., 4) sampled at ``fps``: central
    differences inside, one-sided at the ends; shape (F, ..., 3)."""
    if rot.shape[0] < 2:
        return np.zeros((*rot.shape[:-1], 3))
    d = quat_to_axis_angle(quat_multiply(rot[1:], quat_conjugate(rot[:-1]))) * fps
    out = np.empty((*rot.shape[:-1], 3))
    out[0], out[-1] = d[0], d[-1]
    out[1:-1] = 0.5 * (d[1:] + d[:-1])
    return out
