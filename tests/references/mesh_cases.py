"""Constructed meshes for the self-intersection tests (CPU and CUDA suites): boxes overlapping by a known amount,
and a tube folded back onto itself."""

from __future__ import annotations

import numpy as np


def box(lo, hi) -> tuple[np.ndarray, np.ndarray]:
    """Axis-aligned box: 8 vertices (index 4 ix + 2 iy + iz) and 12 outward counter-clockwise triangles."""
    v = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])], float)
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    tris = [t for a, b, c, d in quads for t in ((a, b, c), (a, c, d))]
    return v, np.array(tris)


def two_boxes(d: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Box A = [0,1]^3 and box B = [1-d, 2-d] x [.25,.75]^2 (overlapping by d along x): triangles (24, 3), rest
    points with B far away (16, 3), posed points (16, 3)."""
    va, ta = box((0, 0, 0), (1, 1, 1))
    vb, tb = box((1 - d, 0.25, 0.25), (2 - d, 0.75, 0.75))
    rest = np.concatenate([va, vb + np.array([5.0, 0.0, 0.0])])
    return np.concatenate([ta, tb + 8]), rest, np.concatenate([va, vb])


def tube(length: float, radius: float, rings: int, sides: int) -> tuple[np.ndarray, np.ndarray]:
    """Open tube along x: ring k at x = k * length / (rings - 1); points (rings * sides, 3), triangles
    counter-clockwise from outside."""
    x = np.linspace(0.0, length, rings)
    ang = 2 * np.pi * (np.arange(sides) + 0.5) / sides
    pts = np.stack(
        [np.repeat(x, sides), radius * np.tile(np.cos(ang), rings), radius * np.tile(np.sin(ang), rings)], -1
    )
    tris = []
    for k in range(rings - 1):
        for s in range(sides):
            a, b = k * sides + s, k * sides + (s + 1) % sides
            c, d = a + sides, b + sides
            tris += [(a, b, d), (a, d, c)]
    return pts, np.array(tris)


def fold(points: np.ndarray, length: float, radius: float) -> np.ndarray:
    """The tube of :func:`tube` with its far half (x > length / 2) turned 180 degrees about the z axis through
    (length / 2, radius / 2, 0): its axis lands at y = radius, parallel to the near half's, so the two halves
    overlap and their surfaces cross along two straight lines."""
    folded = points.copy()
    far = points[:, 0] > length / 2 + 1e-9
    folded[far, 0] = length - points[far, 0]
    folded[far, 1] = radius - points[far, 1]
    return folded
