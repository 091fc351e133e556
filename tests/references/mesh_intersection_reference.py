"""Brute-force NumPy reference for mesh self-intersection, by a different algorithm than the Warp kernels.

Two non-coplanar triangles intersect along a segment whose end points lie on edges of one triangle or the
other, so the segment is the convex hull of the points where the 3 edges of each triangle cross the other
triangle (segment-triangle tests, Moller-Trumbore with closed boundaries). The pair intersects when those
points span a positive length; the length is their largest pairwise distance. Every pair of faces that is not
excluded is tested, vectorized in chunks.
"""

from __future__ import annotations

import numpy as np

PARALLEL_EPS = 1e-12
"""Segment-triangle tests with |det| below this (x edge scale^2) treat the edge as parallel (no point)."""
BARY_EPS = 1e-12
"""Barycentric slack so a crossing exactly on a triangle edge counts as inside."""


def _segment_triangle_points(p, q, a, b, c):
    """Crossing point of segments p->q with triangles abc, vectorized over the leading axis.

    Returns (points (n, 3), valid (n,)).
    """
    d = q - p
    e1, e2 = b - a, c - a
    h = np.cross(d, e2)
    det = np.einsum("ij,ij->i", e1, h)
    scale = np.maximum(np.linalg.norm(d, axis=1) * np.linalg.norm(e1, axis=1) * np.linalg.norm(e2, axis=1), 1e-300)
    ok = np.abs(det) > PARALLEL_EPS * scale
    inv = np.where(ok, 1.0 / np.where(ok, det, 1.0), 0.0)
    s = p - a
    u = np.einsum("ij,ij->i", s, h) * inv
    qv = np.cross(s, e1)
    v = np.einsum("ij,ij->i", d, qv) * inv
    t = np.einsum("ij,ij->i", e2, qv) * inv
    ok &= (u >= -BARY_EPS) & (v >= -BARY_EPS) & (u + v <= 1 + BARY_EPS) & (t >= -BARY_EPS) & (t <= 1 + BARY_EPS)
    return p + d * t[:, None], ok


def tri_pair_segments(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Intersection segment length of triangle pairs A[i], B[i] (each (n, 3, 3)); 0 when they do not cross."""
    n = len(A)
    pts, valid = [], []
    for X, Y in ((A, B), (B, A)):
        for k in range(3):
            p, ok = _segment_triangle_points(X[:, k], X[:, (k + 1) % 3], Y[:, 0], Y[:, 1], Y[:, 2])
            pts.append(p)
            valid.append(ok)
    P = np.stack(pts, axis=1)  # (n, 6, 3)
    V = np.stack(valid, axis=1)  # (n, 6)
    diff = np.linalg.norm(P[:, :, None] - P[:, None, :], axis=-1)
    diff = np.where(V[:, :, None] & V[:, None, :], diff, 0.0)
    return diff.reshape(n, -1).max(axis=1) if n else np.zeros(0)


def self_intersections_reference(
    triangles: np.ndarray, points: np.ndarray, excluded: np.ndarray, chunk: int = 200_000, min_length: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """All intersecting face pairs (i < j) not in ``excluded`` and their segment lengths.

    Args:
        triangles: (T, 3) vertex indices.
        points: (V, 3) positions.
        excluded: (n, 2) excluded pairs with i < j.
        min_length: pairs whose segment is not longer than this are not intersecting.

    Returns:
        pairs (m, 2) sorted, lengths (m,).
    """
    T = len(triangles)
    X = points[triangles]  # (T, 3, 3)
    ii, jj = np.triu_indices(T, k=1)
    code = ii.astype(np.int64) * T + jj
    if len(excluded):
        keep = ~np.isin(code, excluded[:, 0].astype(np.int64) * T + excluded[:, 1])
        ii, jj = ii[keep], jj[keep]
    lo, hi = X.min(axis=1), X.max(axis=1)
    out_p, out_l = [], []
    for s in range(0, len(ii), chunk):
        a, b = ii[s : s + chunk], jj[s : s + chunk]
        box = np.all((lo[a] <= hi[b]) & (lo[b] <= hi[a]), axis=1)  # exact prefilter: disjoint boxes cannot meet
        a, b = a[box], b[box]
        length = tri_pair_segments(X[a], X[b])
        hit = length > min_length
        out_p.append(np.stack([a[hit], b[hit]], axis=1))
        out_l.append(length[hit])
    pairs = np.concatenate(out_p) if out_p else np.zeros((0, 2), np.int64)
    lengths = np.concatenate(out_l) if out_l else np.zeros(0)
    order = np.lexsort((pairs[:, 1], pairs[:, 0]))
    return pairs[order], lengths[order]
