"""Rotation conversions in NumPy (float64), batched over any leading dimensions.

Conventions (shared by the whole toolkit):

* quaternions are ``xyzw`` (Warp's order), shape ``(..., 4)``; functions that take one do not assume it is
  unit length unless they say so;
* rotation matrices act on column vectors, shape ``(..., 3, 3)``;
* axis-angle is a rotation vector ``axis * angle`` [rad], shape ``(..., 3)``;
* the 6D representation (Zhou et al. 2019) is the first two *columns* of the matrix, concatenated,
  shape ``(..., 6)``; it is mapped back by Gram-Schmidt.

The torch versions used by optimization code live in :mod:`sim.torch_ops`.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "axis_angle_to_quat",
    "euler_to_quat",
    "matrix_to_quat",
    "matrix_to_rot6d",
    "quat_conjugate",
    "quat_identity",
    "quat_multiply",
    "quat_normalize",
    "quat_rotate",
    "quat_slerp",
    "quat_to_axis_angle",
    "quat_to_matrix",
    "quat_to_rot6d",
    "rot6d_to_matrix",
    "rot6d_to_quat",
    "transform_matrix",
]


def _f64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def quat_identity(shape: tuple[int, ...] = ()) -> np.ndarray:
    """Identity quaternions [xyzw], shape ``shape + (4,)``."""
    q = np.zeros((*shape, 4))
    q[..., 3] = 1.0
    return q


def quat_normalize(q) -> np.ndarray:
    """Unit quaternions with a non-negative ``w`` (canonical hemisphere), shape ``(..., 4)``.

    Raises:
        ValueError: if any quaternion has zero or non-finite norm.
    """
    q = _f64(q)
    n = np.linalg.norm(q, axis=-1, keepdims=True)
    if not np.all(np.isfinite(n)) or np.any(n < 1e-12):
        raise ValueError("quaternion with zero or non-finite norm")
    q = q / n
    return np.where(q[..., 3:4] < 0.0, -q, q)


def quat_multiply(a, b) -> np.ndarray:
    """Hamilton product ``a * b`` (apply ``b`` first, then ``a``), shape ``(..., 4)``."""
    a, b = _f64(a), _f64(b)
    ax, ay, az, aw = np.moveaxis(a, -1, 0)
    bx, by, bz, bw = np.moveaxis(b, -1, 0)
    return np.stack(
        [
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
            aw * bw - ax * bx - ay * by - az * bz,
        ],
        axis=-1,
    )


def quat_conjugate(q) -> np.ndarray:
    """Conjugate (the inverse of a unit quaternion), shape ``(..., 4)``."""
    q = _f64(q).copy()
    q[..., :3] *= -1.0
    return q


def quat_rotate(q, v) -> np.ndarray:
    """Rotate vectors ``v`` (..., 3) by unit quaternions ``q`` (..., 4)."""
    q, v = _f64(q), _f64(v)
    u, w = q[..., :3], q[..., 3:4]
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


def quat_to_matrix(q) -> np.ndarray:
    """Rotation matrices from quaternions (normalized first), shape ``(..., 3, 3)``."""
    q = _f64(q)
    n = np.linalg.norm(q, axis=-1, keepdims=True)
    if np.any(n < 1e-12):  # was an all-NaN matrix; NaN inputs stay NaN
        raise ValueError("quat_to_matrix: quaternion with zero norm")
    q = q / n
    x, y, z, w = np.moveaxis(q, -1, 0)
    m = np.stack(
        [
            1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w),
            2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w),
            2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y),
        ],
        axis=-1,
    )  # fmt: skip
    return m.reshape(*q.shape[:-1], 3, 3)


def matrix_to_quat(m) -> np.ndarray:
    """Quaternions [xyzw, w >= 0] from rotation matrices (..., 3, 3).

    Uses the numerically stable branch selection (largest diagonal term). The input is not orthonormalized:
    pass a proper rotation.
    """
    m = _f64(m)
    shape = m.shape[:-2]
    m = m.reshape(-1, 3, 3)
    q = np.empty((m.shape[0], 4))
    tr = m[:, 0, 0] + m[:, 1, 1] + m[:, 2, 2]
    diag = np.stack([m[:, 0, 0], m[:, 1, 1], m[:, 2, 2]], axis=-1)
    case = np.where(tr > diag.max(axis=-1), 3, diag.argmax(axis=-1))
    for c in range(4):
        i = case == c
        if not np.any(i):
            continue
        r = m[i]
        if c == 3:
            s = np.sqrt(1.0 + tr[i]) * 2.0
            q[i] = np.stack(
                [(r[:, 2, 1] - r[:, 1, 2]) / s, (r[:, 0, 2] - r[:, 2, 0]) / s, (r[:, 1, 0] - r[:, 0, 1]) / s, s / 4],
                axis=-1,
            )
        else:
            a, b, d = c, (c + 1) % 3, (c + 2) % 3
            s = np.sqrt(1.0 + r[:, a, a] - r[:, b, b] - r[:, d, d]) * 2.0
            out = np.empty((r.shape[0], 4))
            out[:, a] = s / 4
            out[:, b] = (r[:, b, a] + r[:, a, b]) / s
            out[:, d] = (r[:, d, a] + r[:, a, d]) / s
            out[:, 3] = (r[:, d, b] - r[:, b, d]) / s
            q[i] = out
    return quat_normalize(q).reshape(*shape, 4)


def axis_angle_to_quat(aa) -> np.ndarray:
    """Quaternions from rotation vectors [rad], shape ``(..., 3)`` -> ``(..., 4)``."""
    aa = _f64(aa)
    angle = np.linalg.norm(aa, axis=-1, keepdims=True)
    half = 0.5 * angle
    # sin(half)/angle with its Taylor series near zero
    k = np.where(angle > 1e-8, np.sin(half) / np.maximum(angle, 1e-300), 0.5 - angle**2 / 48.0)
    return np.concatenate([aa * k, np.cos(half)], axis=-1)


def quat_to_axis_angle(q) -> np.ndarray:
    """Rotation vectors [rad] with angle in [0, pi] from quaternions, shape ``(..., 4)`` -> ``(..., 3)``."""
    q = quat_normalize(q)
    v = q[..., :3]
    s = np.linalg.norm(v, axis=-1, keepdims=True)
    angle = 2.0 * np.arctan2(s, q[..., 3:4])
    k = np.where(s > 1e-12, angle / np.maximum(s, 1e-300), 2.0)
    return v * k


def rot6d_to_matrix(d6) -> np.ndarray:
    """Rotation matrices from 6D vectors by Gram-Schmidt, shape ``(..., 6)`` -> ``(..., 3, 3)``.

    Raises:
        ValueError: a 6D vector whose first half is zero or whose halves are parallel (no rotation), or a
            non-finite one.
    """
    d6 = _f64(d6)
    a, b = d6[..., :3], d6[..., 3:]
    with np.errstate(invalid="ignore", divide="ignore"):  # bad vectors are refused just below
        na = np.linalg.norm(a, axis=-1, keepdims=True)
        c0 = a / np.where(na > 0, na, 1.0)
        b = b - np.sum(c0 * b, axis=-1, keepdims=True) * c0
        nb = np.linalg.norm(b, axis=-1, keepdims=True)
    bad = ~(np.isfinite(na) & np.isfinite(nb) & (na > 1e-12) & (nb > 1e-12 * np.maximum(na, 1.0)))
    if bad.any():
        at = tuple(int(i) for i in np.argwhere(bad[..., 0])[0])
        raise ValueError(f"6D rotation{list(at) if at else ''} {d6[at].tolist()}: its two 3-vectors must be finite,"
                         " non-zero and not parallel")  # fmt: skip
    c1 = b / nb
    c2 = np.cross(c0, c1)
    return np.stack([c0, c1, c2], axis=-1)


def matrix_to_rot6d(m) -> np.ndarray:
    """6D vectors (first two columns) from rotation matrices, shape ``(..., 3, 3)`` -> ``(..., 6)``."""
    m = _f64(m)
    return np.concatenate([m[..., :, 0], m[..., :, 1]], axis=-1)


def quat_to_rot6d(q) -> np.ndarray:
    """6D vectors from quaternions, shape ``(..., 4)`` -> ``(..., 6)``."""
    return matrix_to_rot6d(quat_to_matrix(q))


def rot6d_to_quat(d6) -> np.ndarray:
    """Quaternions from 6D vectors, shape ``(..., 6)`` -> ``(..., 4)``."""
    return matrix_to_quat(rot6d_to_matrix(d6))


_AXES = {"X": np.array([1.0, 0.0, 0.0]), "Y": np.array([0.0, 1.0, 0.0]), "Z": np.array([0.0, 0.0, 1.0])}


def euler_to_quat(angles, order: str) -> np.ndarray:
    """Quaternions from intrinsic Euler angles [rad] applied in ``order`` (e.g. ``"ZYX"``).

    ``R = R_order[0](angles[..., 0]) @ R_order[1](angles[..., 1]) @ ...`` -- the convention of BVH channel
    lists, where the first listed rotation is the outermost.

    Args:
        angles: shape ``(..., len(order))`` [rad].
        order: axis letters, any length, from ``"XYZ"``.
    """
    angles = _f64(angles)
    if angles.shape[-1] != len(order):
        raise ValueError(f"euler_to_quat: angles have {angles.shape[-1]} components for order {order!r}")
    q = quat_identity(angles.shape[:-1])
    for i, axis in enumerate(order):
        if axis not in _AXES:  # lower case is scipy's extrinsic convention: read as intrinsic it was wrong
            raise ValueError(f"euler_to_quat: unknown axis {axis!r} in order {order!r} (intrinsic axes are upper "
                             "case X, Y, Z)")  # fmt: skip
        q = quat_multiply(q, axis_angle_to_quat(angles[..., i : i + 1] * _AXES[axis]))
    return q


def quat_slerp(a, b, t) -> np.ndarray:
    """Spherical linear interpolation between unit quaternions, shortest arc; ``t`` broadcasts as ``(...,)``."""
    a, b = _f64(a), _f64(b)
    t = _f64(t)[..., None]
    d = np.sum(a * b, axis=-1, keepdims=True)
    b = np.where(d < 0.0, -b, b)
    d = np.abs(d)
    theta = np.arccos(np.clip(d, -1.0, 1.0))
    s = np.sin(theta)
    small = s < 1e-8
    wa = np.where(small, 1.0 - t, np.sin((1.0 - t) * theta) / np.where(small, 1.0, s))
    wb = np.where(small, t, np.sin(t * theta) / np.where(small, 1.0, s))
    out = wa * a + wb * b
    return out / np.linalg.norm(out, axis=-1, keepdims=True)


def transform_matrix(translation, quat, scale=None) -> np.ndarray:
    """4x4 matrices ``T @ R @ S`` (column vectors), shape ``(..., 4, 4)``.

    Args:
        translation: shape ``(..., 3)``.
        quat: shape ``(..., 4)`` [xyzw].
        scale: optional, shape ``(..., 3)``, ``(..., 1)`` or a scalar (uniform), broadcastable.
    """
    translation, quat = _f64(translation), _f64(quat)
    if scale is not None:  # a scalar or (..., 1) is uniform (a scalar raised IndexError)
        scale = _f64(scale)
        if scale.ndim == 0:
            scale = np.full(3, float(scale))
        elif scale.shape[-1] == 1:
            scale = np.repeat(scale, 3, axis=-1)
    shapes = [translation.shape[:-1], quat.shape[:-1]] + ([] if scale is None else [scale.shape[:-1]])
    shape = np.broadcast_shapes(*shapes)
    m = np.zeros((*shape, 4, 4))
    r = quat_to_matrix(quat)
    if scale is not None:
        r = r * scale[..., None, :]
    m[..., :3, :3] = r
    m[..., :3, 3] = translation
    m[..., 3, 3] = 1.0
    return m
