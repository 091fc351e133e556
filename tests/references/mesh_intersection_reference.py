"""Brute-force NumPy reference for mesh self-intersection, by a different algorithm than the Warp kernels.

Two non-coplanar triangles intersect along a segment whose end points lie on edges of one triangle or the
other, so the segment is the convex hull of the points where the 3 edges of each triangle cross the other
triangle (segment-triangle tests, Moller-Trumbore with closed boundaries). The pair intersects when those
points span a positive length; the length is their largest pairwise distance. Every pair of faces that is not
excluded is tested, vectorized in chunks.

For penetration depths: point-triangle distances (plane projection or nearest edge), exact winding numbers (solid
angles), and the distance from a vertex to the nearest point outside the body by sampling the faces around it.
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


def _point_triangle_distance_matrix(p: np.ndarray, A: np.ndarray, B: np.ndarray, C: np.ndarray) -> np.ndarray:
    """Distances (k, n) from points p (k, 3) to triangles ABC (n, 3 each)."""
    n = np.cross(B - A, C - A)
    n /= np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-300)
    p = p[:, None]
    h = np.einsum("knc,nc->kn", p - A, n)
    q = p - h[..., None] * n
    inside = np.ones(h.shape, dtype=bool)
    for X, Y in ((A, B), (B, C), (C, A)):
        inside &= np.einsum("knc,nc->kn", np.cross(Y - X, q - X), n) >= 0.0
    best = np.where(inside, np.abs(h), np.inf)
    for X, Y in ((A, B), (B, C), (C, A)):
        e = Y - X
        t = np.clip(np.einsum("knc,nc->kn", p - X, e) / np.einsum("nc,nc->n", e, e), 0.0, 1.0)
        best = np.minimum(best, np.linalg.norm(p - (X + t[..., None] * e), axis=-1))
    return best


def point_triangle_distances(points: np.ndarray, tri_points: np.ndarray, chunk: int = 2_000_000) -> np.ndarray:
    """Distance from each point (m, 3) to the nearest of the triangles (n, 3, 3), shape (m,).

    A point whose projection onto a triangle's plane falls inside it (edge-side signs) is at its plane distance;
    otherwise the nearest point is on one of the three edges (clamped segment projections).
    """
    P = np.asarray(points, dtype=np.float64)
    T = np.asarray(tri_points, dtype=np.float64)
    step = max(1, chunk // max(len(T), 1))
    parts = [_point_triangle_distance_matrix(P[s : s + step], T[:, 0], T[:, 1], T[:, 2]).min(axis=1)
             for s in range(0, len(P), step)]  # fmt: skip
    return np.concatenate(parts) if parts else np.zeros(0)


def winding_numbers(queries: np.ndarray, points: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    """Winding number of the closed surface at each query point (k, 3): the triangles' solid angles (Van Oosterom
    and Strackee) summed over 4 pi; 1 inside, 0 outside."""
    X = np.asarray(points, dtype=np.float64)[np.asarray(triangles)]
    Q = np.asarray(queries, dtype=np.float64)
    out = np.zeros(len(Q))
    for s in range(0, len(Q), 64):
        a, b, c = (X[None, :, k] - Q[s : s + 64, None] for k in range(3))
        la, lb, lc = (np.linalg.norm(v, axis=-1) for v in (a, b, c))
        num = np.einsum("kti,kti->kt", a, np.cross(b, c))
        den = la * lb * lc + np.einsum("kti,kti->kt", a, b) * lc + np.einsum("kti,kti->kt", b, c) * la
        den += np.einsum("kti,kti->kt", c, a) * lb
        out[s : s + 64] = (2.0 * np.arctan2(num, den)).sum(axis=1) / (4.0 * np.pi)
    return out


def distance_to_outside(points, triangles, vertex: int, radius: float, offset: float, samples: int = 25) -> float:
    """Distance from ``points[vertex]`` to the nearest point outside the body (winding number below 1/2) found by
    sampling every face within ``radius`` on a barycentric grid, ``offset`` off its outer side: an upper bound on
    the true distance, to within the grid spacing (inf when none is found)."""
    P = np.asarray(points, dtype=np.float64)
    X = P[np.asarray(triangles)]
    p = P[vertex]
    u, w = np.meshgrid(np.linspace(0, 1, samples), np.linspace(0, 1, samples))
    keep = u + w <= 1
    u, w = u[keep], w[keep]
    near = _point_triangle_distance_matrix(p[None], X[:, 0], X[:, 1], X[:, 2])[0] < radius
    best = np.inf
    for A, B, C in X[near]:
        n = np.cross(B - A, C - A)
        length = np.linalg.norm(n)
        if length == 0.0:
            continue
        S = A + np.outer(u, B - A) + np.outer(w, C - A)
        S = S[np.linalg.norm(S - p, axis=1) < min(best, radius)]
        if len(S) == 0:
            continue
        out = winding_numbers(S + offset * n / length, P, triangles) < 0.5
        if out.any():
            best = min(best, float(np.linalg.norm(S[out] - p, axis=1).min()))
    return best
