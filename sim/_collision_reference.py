"""Slow, obviously-correct NumPy references for the collision penalties (tests compare the Warp kernels to these)."""

from __future__ import annotations

import numpy as np

__all__ = ["capsule_penetration_reference", "ground_penetration_reference", "segment_distance_reference"]


def ground_penetration_reference(points: np.ndarray, ground_height: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-point depth below the ground (F, V) and per-frame penalty sum(depth^2) (F,), by a plain loop."""
    points = np.asarray(points, dtype=np.float64)
    depth = np.zeros(points.shape[:2])
    for f in range(points.shape[0]):
        for v in range(points.shape[1]):
            depth[f, v] = max(0.0, ground_height - points[f, v, 2])
    return depth, (depth**2).sum(axis=1)


def segment_distance_reference(p0, p1, q0, q1) -> float:
    """Exact distance between two segments by enumerating the candidates of a convex quadratic on [0, 1]^2.

    ``|p(s) - q(t)|^2`` is convex in (s, t): its minimum is the unconstrained stationary point when that lies
    inside the square, else on one of the four edges, where the 1D minimum is a clamped stationary point.
    """
    p0, p1, q0, q1 = (np.asarray(x, dtype=np.float64) for x in (p0, p1, q0, q1))
    d1, d2 = p1 - p0, q1 - q0

    def dist(s, t):
        return float(np.linalg.norm(p0 + s * d1 - q0 - t * d2))

    cands = [(0.0, 0.0), (0.0, 1.0), (1.0, 0.0), (1.0, 1.0)]
    # edges: s fixed -> best t; t fixed -> best s
    for s in (0.0, 1.0):
        e = d2 @ d2
        if e > 0:
            cands.append((s, float(np.clip((p0 + s * d1 - q0) @ d2 / e, 0.0, 1.0))))
    for t in (0.0, 1.0):
        a = d1 @ d1
        if a > 0:
            cands.append((float(np.clip((q0 + t * d2 - p0) @ d1 / a, 0.0, 1.0)), t))
    # interior stationary point: [a -b; -b e] [s t]^T = [-c f]^T
    m = np.array([[d1 @ d1, -(d1 @ d2)], [-(d1 @ d2), d2 @ d2]])
    rhs = np.array([-(d1 @ (p0 - q0)), d2 @ (p0 - q0)])
    if abs(np.linalg.det(m)) > 1e-12 * m[0, 0] * m[1, 1]:  # relative: short segments are not parallel
        s, t = np.linalg.solve(m, rhs)
        if 0.0 <= s <= 1.0 and 0.0 <= t <= 1.0:
            cands.append((float(s), float(t)))
    return min(dist(s, t) for s, t in cands)


def capsule_penetration_reference(seg_a, seg_b, radii, pairs) -> tuple[np.ndarray, np.ndarray]:
    """Per-frame, per-pair capsule overlap (F, P) and per-frame penalty sum(overlap^2) (F,), by plain loops."""
    seg_a, seg_b = np.asarray(seg_a, dtype=np.float64), np.asarray(seg_b, dtype=np.float64)
    pairs = np.asarray(pairs).reshape(-1, 2)
    depth = np.zeros((seg_a.shape[0], len(pairs)))
    for f in range(seg_a.shape[0]):
        for k, (i, j) in enumerate(pairs):
            d = segment_distance_reference(seg_a[f, i], seg_b[f, i], seg_a[f, j], seg_b[f, j])
            depth[f, k] = max(0.0, radii[i] + radii[j] - d)
    return depth, (depth**2).sum(axis=1)
