"""Small synthetic skinned characters for the distill tests (closed meshes, a few hundred triangles at most)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import sim
from sim.rotations import axis_angle_to_quat


def tube_mesh(length: float, radius: float, segments: int, sides: int):
    """A closed tube along +x from 0 to ``length``: points (V, 3) and CCW-from-outside triangles (T, 3)."""
    rings = []
    for i in range(segments + 1):
        x = length * i / segments
        ang = 2 * np.pi * np.arange(sides) / sides
        rings.append(np.stack([np.full(sides, x), radius * np.cos(ang), radius * np.sin(ang)], -1))
    pts = np.concatenate([*rings, [[0.0, 0.0, 0.0], [length, 0.0, 0.0]]])
    tris = []
    for i in range(segments):
        for k in range(sides):
            a, b = i * sides + k, i * sides + (k + 1) % sides
            c, d = a + sides, b + sides
            tris += [[a, b, d], [a, d, c]]
    cap0, cap1 = len(pts) - 2, len(pts) - 1
    last = segments * sides
    for k in range(sides):
        tris.append([cap0, (k + 1) % sides, k])
        tris.append([cap1, last + k, last + (k + 1) % sides])
    return pts, np.array(tris)


def chain_rig(joint_count: int = 3, bone: float = 0.4, radius: float = 0.08, sides: int = 8, lift: float = 0.3):
    """A chain of ``joint_count`` joints along +x at height ``lift`` skinning one tube (linear weights)."""
    length = bone * joint_count
    pts, tris = tube_mesh(length, radius, segments=3 * joint_count, sides=sides)
    pts = pts + np.array([0.0, 0.0, lift])
    u = pts[:, 0] / bone - 0.5  # joint coordinate along the chain
    j0 = np.clip(np.floor(u), 0, joint_count - 1).astype(int)
    j1 = np.clip(j0 + 1, 0, joint_count - 1)
    w1 = np.clip(u - j0, 0.0, 1.0)
    w1 = np.where(j1 == j0, 0.0, w1)
    weights = np.stack([1 - w1, w1], -1)
    parents = [-1, *range(joint_count - 1)]
    rest_t = np.array([[0.0, 0.0, lift]] + [[bone, 0.0, 0.0]] * (joint_count - 1))
    rest_q = np.tile([0.0, 0.0, 0.0, 1.0], (joint_count, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sim.RigWarning)
        mesh = sim.SkinnedMesh("tube", pts, tris, np.stack([j0, j1], -1), weights, joint_count=joint_count)
    return sim.Rig([f"j{i}" for i in range(joint_count)], parents, rest_t, rest_q, None, [mesh], name="chain")


def bent_motion(rig: sim.Rig, frames: int, fps: float = 12.0, amplitude: float = 0.5, phase: float = 0.0):
    """A smooth motion: the chain bends up and down and the root drifts along +y."""
    t = np.arange(frames) / fps
    rot = np.tile(rig.rest_rotations, (frames, 1, 1))
    for j in range(1, rig.joint_count):
        ang = amplitude * np.sin(2 * np.pi * 0.8 * t + phase + j)
        rot[:, j] = axis_angle_to_quat(np.stack([np.zeros_like(t), ang, 0.3 * ang], -1))
    root = rig.rest_translations[0] + np.stack([0.05 * np.sin(3 * t), 0.2 * t, 0.02 * t], -1)
    return sim.Motion(fps, root, rot, name="bend")


@pytest.fixture
def chain():
    """A 3-joint tube character."""
    return chain_rig()


@pytest.fixture
def make_chain():
    """The :func:`chain_rig` builder."""
    return chain_rig


@pytest.fixture
def make_motion():
    """The :func:`bent_motion` builder."""
    return bent_motion


@pytest.fixture
def make_tube():
    """The :func:`tube_mesh` builder."""
    return tube_mesh
