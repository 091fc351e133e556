"""Batched rotation helpers, a small pose builder, and analytic two-bone inverse kinematics (NumPy, float64).

All arrays are batched over frames: rotations are matrices of shape (F, 3, 3), positions (F, 3).
"""

from __future__ import annotations

import numpy as np

from ..rig import Rig, RigError
from ..rotations import matrix_to_quat

__all__ = ["PoseBuilder", "rot_x", "rot_y", "rot_z", "two_bone_ik"]


def _axis_rotation(angle, i: int, j: int) -> np.ndarray:
    angle = np.asarray(angle, dtype=np.float64)
    c, s = np.cos(angle), np.sin(angle)
    m = np.zeros((*angle.shape, 3, 3))
    k = 3 - i - j
    m[..., k, k] = 1.0
    m[..., i, i] = c
    m[..., j, j] = c
    m[..., i, j] = -s
    m[..., j, i] = s
    return m


def rot_x(angle) -> np.ndarray:
    """Rotations about +X by ``angle`` [rad] (right-hand rule), shape ``angle.shape + (3, 3)``."""
    return _axis_rotation(angle, 1, 2)


def rot_y(angle) -> np.ndarray:
    """Rotations about +Y by ``angle`` [rad]; positive angles turn +X towards -Z (forward points down)."""
    return _axis_rotation(angle, 2, 0)


def rot_z(angle) -> np.ndarray:
    """Rotations about +Z by ``angle`` [rad]; positive angles turn +X towards +Y (a left turn)."""
    return _axis_rotation(angle, 0, 1)


_DEGENERATE = 1e-9
"""Below this (relative) length a target direction or a projected bend normal is treated as undefined."""


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def _frame(direction: np.ndarray, normal: np.ndarray) -> np.ndarray:
    """Orthonormal frames with columns (direction, normal made orthogonal to it, their cross product)."""
    d = _unit(direction)
    n = _unit(normal - np.sum(normal * d, axis=-1, keepdims=True) * d)
    return np.stack([d, n, np.cross(d, n)], axis=-1)


def two_bone_ik(
    root: np.ndarray,
    target: np.ndarray,
    rest_root: np.ndarray,
    rest_mid: np.ndarray,
    rest_end: np.ndarray,
    follow: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """World rotations of a two-bone chain (thigh/shin) that put its end (ankle) exactly on ``target``.

    The chain bends in the plane through ``root`` and ``target`` whose normal is closest to the rest bend-plane
    normal turned by ``follow`` (e.g. the pelvis's world rotation), towards the same side as in the rest pose
    (knees forward, dog elbows and hocks backward). Each rotation maps the bone's rest direction onto its posed
    direction and the rest bend-plane normal onto the posed one, so the bones do not twist. Targets out of reach
    are clamped (the end then misses the target), and the returned reach ratio says so. The result is finite for
    every finite input: a target on the root is approached along the chain's (followed) rest direction, a
    target along the bend normal bends the chain in the plane of that normal and the rest direction.

    Args:
        root: chain root (hip) positions [m], shape (F, 3).
        target: chain end (ankle) targets [m], shape (F, 3).
        rest_root, rest_mid, rest_end: rest positions of the root, middle and end joints [m], shape (3,).
        follow: world rotations (relative to rest) that the bend plane turns with, shape (F, 3, 3).

    Returns:
        world rotations of the upper and lower bones relative to the rest pose, shape (F, 3, 3) each, and the
        reach ratio |target - root| / (upper + lower length) per frame, shape (F,).

    Raises:
        RigError: the rest chain is straight.
        ValueError: non-finite ``root``, ``target`` or ``follow``.
    """
    u0, v0 = rest_mid - rest_root, rest_end - rest_mid
    l1, l2 = float(np.linalg.norm(u0)), float(np.linalg.norm(v0))
    n0 = np.cross(u0, v0)
    if np.linalg.norm(n0) < 1e-9 * l1 * l2:
        raise RigError("two_bone_ik: the rest chain is straight, so its bend direction is undefined")
    n0 = n0 / np.linalg.norm(n0)
    d0 = _unit(rest_end - rest_root)
    side = np.sign(np.dot(np.cross(n0, d0), u0))  # which side of the root-end line the middle joint lies on
    root, target, follow = (np.asarray(x, dtype=np.float64) for x in (root, target, follow))
    for label, x in (("root", root), ("target", target), ("follow", follow)):
        if not np.isfinite(x).all():
            raise ValueError(f"two_bone_ik: {label} has non-finite values")
    bend_normal = follow @ n0
    d = target - root
    dist = np.linalg.norm(d, axis=-1)
    reach = dist / (l1 + l2)
    dist_c = np.clip(dist, abs(l1 - l2) + 1e-9, (l1 + l2) * (1.0 - 1e-9))
    # a target on the root has no direction: reach the nearest reachable point along the rest direction instead
    at_root = dist <= _DEGENERATE * (l1 + l2)
    if at_root.any():
        d = np.where(at_root[:, None], follow @ d0, d)
        dist = np.where(at_root, 1.0, dist)
    dh = d / dist[:, None]
    n = bend_normal - np.sum(bend_normal * dh, axis=-1, keepdims=True) * dh
    # a target along the bend normal leaves the plane undefined: bend as if the rest chain had swung about its
    # in-plane perpendicular onto the target, which turns the rest normal onto minus the rest direction
    flat = np.linalg.norm(n, axis=-1) <= _DEGENERATE
    if flat.any():
        fallback = -(follow @ d0)
        fallback = fallback - np.sum(fallback * dh, axis=-1, keepdims=True) * dh
        n = np.where(flat[:, None], fallback, n)
    n = _unit(n)
    a = (l1 * l1 - l2 * l2 + dist_c * dist_c) / (2.0 * dist_c)
    h = np.sqrt(np.maximum(l1 * l1 - a * a, 0.0))
    mid = root + a[:, None] * dh + (side * h)[:, None] * np.cross(n, dh)
    rest_upper, rest_lower = _frame(u0, n0), _frame(v0, n0)
    upper = _frame(mid - root, n) @ rest_upper.T
    lower = _frame(target - mid, n) @ rest_lower.T
    return upper, lower, reach


class PoseBuilder:
    """Accumulates a batch of poses of a rig whose rest rotations are all the identity.

    Joints are posed parents-first, by local or world rotation; :meth:`world` runs forward kinematics through
    the joints posed so far. Such rigs (the procedural characters) have joint frames aligned with the world in
    the rest pose, so a world rotation here is the rotation *relative to the rest pose*.
    """

    def __init__(self, rig: Rig, frame_count: int):
        if not np.allclose(rig.rest_rotations, [0.0, 0.0, 0.0, 1.0], atol=1e-9):
            raise RigError(f"rig {rig.name!r}: procedural gaits need identity rest rotations (world-aligned joints)")
        self.rig = rig
        self.frame_count = frame_count
        self.local = np.broadcast_to(np.eye(3), (frame_count, rig.joint_count, 3, 3)).copy()
        self.root = np.broadcast_to(rig.rest_translations[0], (frame_count, 3)).copy()
        self.rest_positions = rig.rest_world_transforms()[0]

    def index(self, name: str) -> int:
        return self.rig.joint_index(name)

    def world(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """World positions (F, 3) and rotations (F, 3, 3) of joint ``name`` under the current local rotations."""
        chain = []
        j = self.index(name)
        while j >= 0:
            chain.append(j)
            j = int(self.rig.parents[j])
        pos, rot = self.root.copy(), np.broadcast_to(np.eye(3), (self.frame_count, 3, 3)).copy()
        for k, j in enumerate(reversed(chain)):
            if k > 0:
                pos = pos + np.einsum("fab,b->fa", rot, self.rig.rest_translations[j])
            rot = rot @ self.local[:, j]
        return pos, rot

    def set_local(self, name: str, rotation: np.ndarray) -> None:
        """Sets joint ``name``'s rotation relative to its parent, shape (F, 3, 3) or (3, 3)."""
        self.local[:, self.index(name)] = rotation

    def set_world(self, name: str, rotation: np.ndarray) -> None:
        """Sets joint ``name``'s world rotation (its parent must already be posed), shape (F, 3, 3)."""
        j = self.index(name)
        parent = self.rig.joint_names[int(self.rig.parents[j])]
        _, parent_rot = self.world(parent)
        self.local[:, j] = np.swapaxes(parent_rot, -1, -2) @ rotation

    def quaternions(self) -> np.ndarray:
        """Local rotations as unit quaternions [xyzw], shape (F, J, 4)."""
        return matrix_to_quat(self.local)
