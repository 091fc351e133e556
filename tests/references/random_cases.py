"""Random test cases shared by the CPU and CUDA suites: a branching rig with a skinned mesh, random capsules."""

from __future__ import annotations

import warnings

import numpy as np

import sim
from sim.rotations import quat_normalize, transform_matrix

PARENTS = [-1, 0, 1, 1, 3, 0]
"""Parents of the random rig: a branching 6-joint tree."""


def make_rig(rng: np.random.Generator, vertex_count: int = 24, influences: int = 3, scale: float = 1.3) -> sim.Rig:
    """A branching 6-joint rig whose bind pose differs from its rest pose and whose IBMs carry a uniform scale.

    The mesh is a triangle fan over random points (well-defined normals), ``influences`` random joints per vertex.
    """
    count = len(PARENTS)
    rest_t, rest_q = rng.normal(size=(count, 3)), quat_normalize(rng.normal(size=(count, 4)))
    bind = transform_matrix(rng.normal(size=(count, 3)), quat_normalize(rng.normal(size=(count, 4))))
    ibm = np.diag([scale, scale, scale, 1.0]) @ np.linalg.inv(bind)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sim.RigWarning)
        points = rng.normal(size=(vertex_count, 3))
        tris = np.array([[0, i, i + 1] for i in range(1, vertex_count - 1)])
        joints = rng.integers(0, count, (vertex_count, influences))
        weights = rng.random((vertex_count, influences)) + 0.1
        mesh = sim.SkinnedMesh("m", points, tris, joints, weights, joint_count=count)
    return sim.Rig([f"j{i}" for i in range(count)], PARENTS, rest_t, rest_q, ibm, [mesh])


def random_capsules(rng: np.random.Generator, frames: int = 3, count: int = 7, spread: float = 0.25):
    """Random capsules: segment ends (frames, count, 3) [m], radii (count,) [m], every pair (P, 2) int32."""
    a = rng.normal(size=(frames, count, 3)) * spread
    b = a + rng.normal(size=(frames, count, 3)) * spread
    radii = rng.uniform(0.04, 0.2, count)
    pairs = np.array([(i, j) for i in range(count) for j in range(i + 1, count)], dtype=np.int32)
    return a, b, radii, pairs
