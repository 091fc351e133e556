"""Swing-twist decomposition and the small quaternion helpers the pose space needs (NumPy and torch).

Convention: quaternions are xyzw; the *twist axis* of a canonical joint frame is its local x axis (the bone
direction, see :mod:`posespace.skeleton`). A rotation ``q`` splits as ``q = swing * twist`` where ``twist`` turns
about x and ``swing`` turns about an axis in the y-z plane. The twist quaternion is the normalized projection
``(q_x, 0, 0, q_w)`` whichever side the twist is applied on, so ``twist_angle`` serves both splits.

The swing is reported as a 2D rotation vector ``(s_y, s_z)`` [rad]: its direction ``atan2(s_z, s_y)`` says which
way the bone bends, its length by how much.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = [
    "quat_conjugate_t",
    "remove_twist_x",
    "swing_twist_x",
    "swing_twist_x_t",
    "twist_quat_x",
]


# -- NumPy ------------------------------------------------------------------------------------------------
TWIST_EPS = 1e-12
"""Below ``q_x^2 + q_w^2 = TWIST_EPS`` (a half-turn swing) a rotation's twist about x is identity (NumPy, torch and
the Warp validator kernel alike)."""


def _canonical(q: np.ndarray) -> np.ndarray:
    q = np.asarray(q, dtype=np.float64)
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    return np.where(q[..., 3:4] < 0.0, -q, q)


def twist_quat_x(q) -> np.ndarray:
    """The twist part about local x of unit quaternions, shape (..., 4) -> (..., 4).

    Where the rotation is a half-turn swing (``q_x = q_w = 0``) the twist is undefined; identity is returned below
    ``q_x^2 + q_w^2 = TWIST_EPS``, the validator kernel's threshold (so both read the same swing there).
    """
    q = _canonical(q)
    t = np.zeros_like(q)
    t[..., 0], t[..., 3] = q[..., 0], q[..., 3]
    n2 = np.sum(t * t, axis=-1, keepdims=True)
    ident = np.zeros_like(q)
    ident[..., 3] = 1.0
    return np.where(n2 > TWIST_EPS, t / np.sqrt(np.maximum(n2, 1e-300)), ident)


def swing_twist_x(q) -> tuple[np.ndarray, np.ndarray]:
    """Swing rotation vector and twist angle of ``q = swing * twist`` about local x.

    Args:
        q: quaternions [xyzw], shape (..., 4) (normalized here).

    Returns:
        swing: ``(s_y, s_z)`` rotation vector of the swing [rad], shape (..., 2).
        twist: twist angle about x [rad] in ``[-pi, pi]``, shape (...,).
    """
    from sim.rotations import quat_conjugate, quat_multiply

    q = _canonical(q)
    t = twist_quat_x(q)
    twist = 2.0 * np.arctan2(t[..., 0], t[..., 3])
    s = quat_multiply(q, quat_conjugate(t))
    s = np.where(s[..., 3:4] < 0.0, -s, s)
    v = s[..., 1:3]
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    angle = 2.0 * np.arctan2(n, s[..., 3:4])
    swing = np.where(n > 1e-12, v / np.maximum(n, 1e-300) * angle, 0.0)
    return swing, twist


def remove_twist_x(q) -> np.ndarray:
    """``twist^-1 * q``: the rotation with its twist about x (applied last) removed, shape (..., 4).

    Used for the root, whose canonical x axis is world up: this removes the heading (yaw) and keeps the tilt.
    """
    from sim.rotations import quat_conjugate, quat_multiply

    q = _canonical(q)
    return _canonical(quat_multiply(quat_conjugate(twist_quat_x(q)), q))


# -- torch ------------------------------------------------------------------------------------------------
def quat_conjugate_t(q: torch.Tensor) -> torch.Tensor:
    """Conjugate of quaternions [xyzw], shape (..., 4)."""
    return torch.cat([-q[..., :3], q[..., 3:]], dim=-1)


def swing_twist_x_t(q: torch.Tensor, eps: float = 1e-12) -> tuple[torch.Tensor, torch.Tensor]:
    """Torch mirror of :func:`swing_twist_x` (slow reference for the Warp validator kernel; differentiable).

    Args:
        q: quaternions [xyzw], shape (..., 4).
        eps: regularizer of the square roots at zero swing or twist; below ``q_x^2 + q_w^2 = eps`` (a half-turn
            swing) the twist is identity, as in :func:`twist_quat_x` (the swing then reads pi, gradients finite).

    Returns:
        swing (..., 2) [rad] and twist (...,) [rad].
    """
    from sim.torch_ops import quat_multiply

    q = q / q.norm(dim=-1, keepdim=True)
    q = torch.where(q[..., 3:4] < 0, -q, q)
    n2 = q[..., 0] ** 2 + q[..., 3] ** 2
    ok = n2 > eps
    # masked inputs keep the discarded branch's gradient finite (torch.where multiplies it by 0, NaN stays NaN)
    qx, qw = torch.where(ok, q[..., 0], 0.0), torch.where(ok, q[..., 3], 1.0)
    tn = torch.sqrt(qx**2 + qw**2 + eps)
    twist = torch.where(ok, 2.0 * torch.atan2(qx, qw), 0.0)
    zero = torch.zeros_like(tn)
    t = torch.stack([torch.where(ok, qx / tn, 0.0), zero, zero, torch.where(ok, qw / tn, 1.0)], dim=-1)
    s = quat_multiply(q, quat_conjugate_t(t))
    vn = torch.sqrt(s[..., 1] ** 2 + s[..., 2] ** 2 + eps)
    angle = 2.0 * torch.atan2(vn, s[..., 3])
    swing = s[..., 1:3] / vn[..., None] * angle[..., None]
    return swing, twist
