"""Small synthetic skinned rigs for the physics tests (built here, independent of sim.characters)."""

from __future__ import annotations

import numpy as np

import sim
from sim.rotations import quat_identity


def _tube(a: np.ndarray, b: np.ndarray, radius: float, rings: int = 6, sides: int = 8) -> np.ndarray:
    """Points on a closed tube (with end caps) around the segment a -> b."""
    d = b - a
    length = float(np.linalg.norm(d))
    u = d / length
    t = np.cross(u, [1.0, 0.0, 0.0] if abs(u[0]) < 0.9 else [0.0, 1.0, 0.0])
    t /= np.linalg.norm(t)
    w = np.cross(u, t)
    ang = np.linspace(0.0, 2 * np.pi, sides, endpoint=False)
    ring = np.cos(ang)[:, None] * t + np.sin(ang)[:, None] * w
    pts = [a + s * d + radius * ring for s in np.linspace(0.0, 1.0, rings)]
    pts += [a - radius * u, b + radius * u]
    return np.concatenate([np.atleast_2d(p) for p in pts])


def _skinned(name: str, names, parents, pos: np.ndarray, parts) -> sim.Rig:
    """A rig with identity rest rotations at joint positions ``pos`` and a point cloud ``parts`` = [(joint,
    points)], each point rigidly skinned to its joint (one triangle keeps the mesh valid; the physics builder
    only reads points and weights)."""
    parents = np.asarray(parents)
    rest_t = pos.copy()
    rest_t[1:] = pos[1:] - pos[parents[1:]]
    points = np.concatenate([p for _, p in parts])
    owner = np.concatenate([np.full(len(p), j) for j, p in parts])
    mesh = sim.SkinnedMesh("body", points, [[0, 1, 2]], owner[:, None], np.ones((len(points), 1)),
                           joint_count=len(names))  # fmt: skip
    return sim.Rig(names, parents, rest_t, quat_identity((len(names),)), None, [mesh], name=name)


def table_quadruped(height: float = 0.5) -> sim.Rig:
    """A four-legged 'table': a horizontal torso on four two-segment legs with small feet, plus a leaf joint at
    each foot tip and at the head end (both carry no vertices, so the builder merges them). The feet's lowest
    points touch z = 0 in the rest pose."""
    s = height / 0.5
    leg = 0.17 * s
    foot_r = 0.02 * s
    torso_z = 2 * leg + 2 * foot_r
    names = ["torso", "head_end"]
    parents = [-1, 0]
    pos = [[0.0, 0.0, torso_z], [0.25 * s, 0.0, torso_z]]
    parts = [(0, _tube(np.array([-0.25 * s, 0.0, torso_z]), np.array([0.25 * s, 0.0, torso_z]), 0.06 * s))]
    for i, (x, y) in enumerate([(0.2, 0.1), (0.2, -0.1), (-0.2, 0.1), (-0.2, -0.1)]):
        hip = len(names)
        x, y = x * s, y * s
        names += [f"leg{i}_upper", f"leg{i}_lower", f"leg{i}_foot", f"leg{i}_tip"]
        parents += [0, hip, hip + 1, hip + 2]
        knee, ankle = torso_z - leg, torso_z - 2 * leg
        pos += [[x, y, torso_z], [x, y, knee], [x, y, ankle], [x + 0.03 * s, y, foot_r]]
        parts.append((hip, _tube(np.array([x, y, torso_z - 0.06 * s]), np.array([x, y, knee]), 0.025 * s)))
        parts.append((hip + 1, _tube(np.array([x, y, knee]), np.array([x, y, ankle + foot_r]), 0.022 * s)))
        parts.append((hip + 2, _tube(np.array([x - 0.02 * s, y, foot_r]), np.array([x + 0.03 * s, y, foot_r]),
                                     foot_r)))  # fmt: skip
    return _skinned("table", names, parents, np.array(pos), parts)


def tuning_fork(arm_length: float = 0.3, gap: float = 0.2) -> sim.Rig:
    """A heavy base bar lying along X on the ground with two upright two-segment arms at ``+-gap / 2``."""
    z0 = 0.05
    half = gap / 2
    names = ["base", "left_arm", "left_fore", "left_tip", "right_arm", "right_fore", "right_tip", "base_end"]
    parents = [-1, 0, 1, 2, 0, 4, 5, 0]
    pos = np.array([
        [0.0, 0.0, z0],
        [-half, 0.0, z0], [-half, 0.0, z0 + arm_length / 2], [-half, 0.0, z0 + arm_length],
        [half, 0.0, z0], [half, 0.0, z0 + arm_length / 2], [half, 0.0, z0 + arm_length],
        [0.3, 0.0, z0],
    ])  # fmt: skip
    parts = [(0, _tube(np.array([-0.3, 0.0, z0]), np.array([0.3, 0.0, z0]), 0.05))]
    for j, c in [(1, 2), (2, 3), (4, 5), (5, 6)]:
        parts.append((j, _tube(pos[j] + [0.0, 0.0, 0.07], pos[c], 0.03)))
    return _skinned("fork", names, parents, pos, parts)


def hold(rig: sim.Rig, frames: int, fps: float = 30.0, root_offset=(0.0, 0.0, 0.0), rotations=None) -> sim.Motion:
    """The rest pose (or given local rotations (J, 4)) held for ``frames`` frames, root shifted by ``root_offset``."""
    rot = rig.rest_rotations if rotations is None else np.asarray(rotations)
    root = rig.rest_translations[0] + np.asarray(root_offset, dtype=np.float64)
    return sim.Motion(fps, np.repeat(root[None], frames, 0), np.repeat(rot[None], frames, 0), name="hold")


def walkish(rig: sim.Rig, frames: int = 30, fps: float = 30.0) -> sim.Motion:
    """A table quadruped's legs (``leg0_upper`` .. ``leg3_upper``) swinging in antiphase at 6 rad/s while the root
    moves forward at 0.1 m/s."""
    from sim.rotations import axis_angle_to_quat, quat_multiply

    rot = np.repeat(rig.rest_rotations[None], frames, 0).copy()
    t = np.arange(frames) / fps
    for i in range(4):
        j = rig.joint_index(f"leg{i}_upper")
        swing = (0.25 * np.sin(6 * t + np.pi * (i % 2)))[:, None] * [0, 1.0, 0]
        rot[:, j] = quat_multiply(rot[:, j], axis_angle_to_quat(swing))
    root = rig.rest_translations[0] + np.outer(t, [0.1, 0.0, 0.0])
    return sim.Motion(fps, root, rot, name="walkish")
