"""Exact self-intersection of a deforming triangle mesh (e.g. a skinned character), per frame, in Warp.

Which pairs count: two faces are tested unless they are *neighbours in the rest pose*:

* within ``ring_count`` rings of each other on the welded mesh (vertices at the same bind position are one
  vertex, so flat-shaded meshes whose faces share no indices still have a topology): ring 1 excludes faces
  sharing a vertex, ring 2 also faces sharing a vertex with those, and so on;
* or already touching or intersecting in the rest pose (closer than ``rest_clearance_rel`` x size), e.g. eyes
  in their sockets, layered clothing, separate parts that overlap by design.

Per frame the candidates come from a ``wp.Mesh`` BVH refitted to the frame's points (``wp.mesh_query_aabb``
per face); each candidate pair gets the exact float64 test of :mod:`sim._mesh_intersection_kernels`, which
also gives the length of the intersection segment and a per-pair depth estimate. ``method="brute_force"`` runs
the same test on all pairs without the BVH (the baseline the benchmark compares with).

Penetration depth: on frames with intersecting pairs, the vertices reachable from the intersecting faces through
inside vertices are tested for lying inside the body (the surface's winding number just outside the vertex;
vertices already inside in the rest pose are ignored); the search starts at the vertices of the intersecting faces,
so inside vertices not connected through inside vertices to an intersecting face are never found (creases closer
than the test offset, not penetrations); the connected ones form *sheets*, the parts of the surface that went in.
Limitation: a part whose surface lies entirely inside another's without crossing it (a separate shell moved fully
inside the body, or a fold whose crossing faces are all rest neighbours) has no intersecting pair, so such a frame
reports no pairs and no penetration at all (depth 0). An inside
vertex's depth is its distance to the nearest face it lies behind on the body it went into: faces touching its
own sheet (a penetrating limb's far side and the faces around the vertex) do not count, except, where one sheet
holds both the limb and the body it went into (through the crease of a joint), faces the vertex was not behind
at rest and has moved against since (see :func:`sim._mesh_intersection_kernels.penetration_depth_kernel`). So a
limb is measured to the surface of the body it is inside, whatever its thickness. The depth is bounded by the
distance to where the surface leaves the body: the intersection contour (which lies on the enclosing surface)
and the crossings on edges from inside to outside vertices (also folds whose crossing faces are rest neighbours,
which no pair records). Unlike the per-pair estimate, this does not depend on the triangle size: a limb pushed
10 cm into the torso has vertices 10 cm deep. A closed (watertight) surface gives exact inside tests; small holes
only blur them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import warp as wp

from . import _mesh_intersection_kernels as K
from ._warp_setup import init_warp
from .contact_metrics import character_size
from .rig import SkinnedMesh

_EXIT_STEPS = (4, 8)
"""Bisection steps locating where an edge leaves the body: on every edge, then on those that may bound a depth."""

__all__ = [
    "IntersectionFrame",
    "MeshSelfIntersection",
    "SelfIntersectionConfig",
    "SelfIntersectionMetrics",
    "face_labels",
    "intersection_segments",
]

Method = Literal["bvh", "brute_force"]


@dataclass(frozen=True)
class SelfIntersectionConfig:
    """Which face pairs count as rest-pose neighbours (never tested)."""

    ring_count: int = 2
    """Faces within this many rings of each other on the welded rest mesh are neighbours (0: none)."""
    rest_clearance_rel: float = 0.002
    """Faces closer than this (x character size) in the rest pose, or intersecting there, are neighbours."""
    weld_tolerance_rel: float = 1e-6
    """Vertices whose bind positions agree within this (x size) are one vertex of the topology."""
    inside_offset_rel: float = 1e-4
    """Inside test: distance (x size) outside a vertex, along its normal, at which the winding number is taken."""
    max_depth_rel: float = 0.25
    """Penetration depths are searched up to this (x size); deeper vertices report this value (face -1) unless the
    contour or exit bound is lower."""


@dataclass
class IntersectionFrame:
    """Intersections of one frame.

    Attributes:
        pairs: intersecting face pairs ``(i, j)`` with ``i < j``, sorted, shape (n, 2).
        lengths: length of each pair's intersection segment [m], shape (n,).
        depths: depth estimate of each pair [m] (see :mod:`sim._mesh_intersection_kernels`), shape (n,).
        face_hit: faces in at least one intersecting pair, shape (face_count,).
        inside_vertices: vertices inside the body (one per welded position), shape (m,).
        inside_depths: their penetration depths [m], shape (m,).
        inside_faces: for each, the nearest face it lies behind on the body it is inside (-1: none within
            ``max_depth_rel`` x size), shape (m,).
    """

    pairs: np.ndarray
    lengths: np.ndarray
    depths: np.ndarray
    face_hit: np.ndarray
    inside_vertices: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    inside_depths: np.ndarray = field(default_factory=lambda: np.zeros(0))
    inside_faces: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    @property
    def penetration_depth(self) -> float:
        """Deepest inside vertex [m] (0 when none)."""
        return float(self.inside_depths.max(initial=0.0))

    @property
    def face_share(self) -> float:
        """Share of faces that intersect another one."""
        return float(self.face_hit.mean()) if len(self.face_hit) else 0.0


@dataclass
class SelfIntersectionMetrics:
    """Self-intersection over a motion: per-frame arrays (length F) and summaries.

    Attributes:
        face_count: faces of the mesh.
        excluded_pair_count: rest-pose neighbour pairs left out (each counted once).
        size: character size [m].
        pair_count: intersecting pairs per frame, shape (F,).
        face_share: share of faces intersecting, shape (F,).
        length_m: total length of the intersection curves [m], shape (F,).
        depth_m: penetration depth (deepest inside vertex) [m], shape (F,).
        pair_depth_m: largest per-pair depth estimate [m], shape (F,).
        face_hit: intersecting faces per frame, shape (F, face_count).
        frames: the per-frame pair lists.
        max_face_share, max_depth_m, max_length_m: maxima over frames.
        intersecting_frames: number of frames with any intersection.
    """

    face_count: int
    excluded_pair_count: int
    size: float
    pair_count: np.ndarray
    face_share: np.ndarray
    length_m: np.ndarray
    depth_m: np.ndarray
    pair_depth_m: np.ndarray
    face_hit: np.ndarray
    frames: list[IntersectionFrame]
    max_face_share: float = 0.0
    max_depth_m: float = 0.0
    max_length_m: float = 0.0
    intersecting_frames: int = 0

    def summary(self) -> dict[str, float]:
        """The scalar metrics by name (JSON-ready)."""
        return {
            "max_face_share": float(self.max_face_share),
            "max_depth_m": float(self.max_depth_m),
            "max_length_m": float(self.max_length_m),
            "intersecting_frames": int(self.intersecting_frames),
        }


def face_labels(mesh: SkinnedMesh) -> np.ndarray:
    """Dominant joint of each face (largest influence weight summed over its three vertices), shape (T,)."""
    T = len(mesh.triangles)
    J = int(mesh.influence_joints.max()) + 1 if mesh.influence_joints.size else 1
    w = np.zeros((mesh.vertex_count, J))
    rows = np.repeat(np.arange(mesh.vertex_count), mesh.influence_count)
    np.add.at(w, (rows, mesh.influence_joints.ravel()), mesh.influence_weights.ravel())
    return w[mesh.triangles].sum(axis=1).argmax(axis=1) if T else np.zeros(0, dtype=np.int64)


def intersection_segments(points, triangles, pairs) -> np.ndarray:
    """End points of the intersection segment of each intersecting face pair [m], shape (n, 2, 3).

    NumPy version of the kernels' plane-interval construction, for the few pairs a frame has (contours for
    plots and depth bounds), with the kernels' on-plane tolerance. Meant for pairs that intersect (as
    :meth:`MeshSelfIntersection.frame` reports them); the pairs are not tested, and for others the result is a
    zero-length segment that need not lie on either face:

    * each face crosses the other's plane, but on disjoint intervals of the planes' common line: the point of that
      line where the later interval starts (on one face only, possibly far from the other);
    * a face does not reach the other's plane (parallel faces apart among them): the centroid of the first face;
    * coplanar faces (no common line): a vertex of the first face, even where they overlap (their overlap is an
      area, no segment).
    """
    P = np.asarray(points, dtype=np.float64)
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    if len(pairs) == 0:
        return np.zeros((0, 2, 3))
    A = P[np.asarray(triangles)[pairs[:, 0]]]
    B = P[np.asarray(triangles)[pairs[:, 1]]]
    unit = lambda v: v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-300)  # noqa: E731
    na = unit(np.cross(A[:, 1] - A[:, 0], A[:, 2] - A[:, 0]))
    nb = unit(np.cross(B[:, 1] - B[:, 0], B[:, 2] - B[:, 0]))
    axis = unit(np.cross(na, nb))
    # the kernel's snap: plane distances within PLANE_EPS x the pair's longest edge are on the plane
    edges = np.concatenate([X[:, [1, 2, 2]] - X[:, [0, 0, 1]] for X in (A, B)], axis=1)
    eps = K.PLANE_EPS * np.linalg.norm(edges, axis=-1).max(axis=1)

    def crossing(X, n, origin):
        d = np.einsum("nkc,nc->nk", X - origin[:, None], n)
        d = np.where(np.abs(d) <= eps[:, None], 0.0, d)
        lo = np.full(len(X), np.inf)
        hi = np.full(len(X), -np.inf)
        plo = np.zeros((len(X), 3))
        phi = np.zeros((len(X), 3))
        cands = [(X[:, k], d[:, k] == 0) for k in range(3)]
        for k in range(3):
            a, b = X[:, k], X[:, (k + 1) % 3]
            da, db = d[:, k], d[:, (k + 1) % 3]
            ok = da * db < 0
            t = np.where(ok, da / np.where(ok, da - db, 1.0), 0.0)
            cands.append((a + (b - a) * t[:, None], ok))
        for q, ok in cands:
            s = np.einsum("nc,nc->n", q, axis)
            low = ok & (s < lo)
            high = ok & (s > hi)
            lo, plo = np.where(low, s, lo), np.where(low[:, None], q, plo)
            hi, phi = np.where(high, s, hi), np.where(high[:, None], q, phi)
        return lo, hi, plo

    lo_a, hi_a, pa = crossing(A, nb, B[:, 0])
    lo_b, hi_b, _ = crossing(B, na, A[:, 0])
    s0, s1 = np.maximum(lo_a, lo_b), np.minimum(hi_a, hi_b)
    s1 = np.maximum(s1, s0)
    base = pa - axis * np.einsum("nc,nc->n", pa, axis)[:, None]
    seg = np.stack([base + axis * s0[:, None], base + axis * s1[:, None]], axis=1)
    # a pair without a crossing: a point of A (the origin could cap depths near it and drew a contour there)
    found = np.isfinite(seg).all(axis=(1, 2))
    return np.where(found[:, None, None], seg, A.mean(axis=1)[:, None])


def _point_segment_distance(p: np.ndarray, seg: np.ndarray) -> np.ndarray:
    """Distance from each point (m, 3) to the nearest of the segments (n, 2, 3), shape (m,)."""
    a, b = seg[None, :, 0], seg[None, :, 1]
    ab = b - a
    t = np.einsum("mnc,mnc->mn", p[:, None] - a, ab) / np.maximum(np.einsum("mnc,mnc->mn", ab, ab), 1e-300)
    c = a + ab * np.clip(t, 0.0, 1.0)[..., None]
    return np.linalg.norm(p[:, None] - c, axis=-1).min(axis=1)


def _csr(keys: np.ndarray, values: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR (offsets, values sorted by key then value) of (key, value) pairs; keys in [0, count)."""
    order = np.lexsort((values, keys))
    offsets = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=count), out=offsets[1:])
    return offsets, values[order]


def _gather(offsets: np.ndarray, values: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each key its CSR row: (position of the key in ``keys``, value) for every entry."""
    counts = offsets[keys + 1] - offsets[keys]
    rep = np.repeat(np.arange(len(keys)), counts)
    within = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    return rep, values[np.repeat(offsets[keys], counts) + within]


def _unique_pairs(a: np.ndarray, b: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    code = np.unique(a.astype(np.int64) * n + b)
    return code // n, code % n


def ring_neighbour_pairs(tris_welded: np.ndarray, vertex_count: int, ring_count: int) -> np.ndarray:
    """Face pairs within ``ring_count`` rings on a (welded) mesh, as (n, 2) with i != j, both orders.

    Two faces are within r rings when some vertex of one is at most r - 1 edges from some vertex of the other.
    """
    T = len(tris_welded)
    if ring_count <= 0 or T == 0:
        return np.zeros((0, 2), dtype=np.int64)
    e = tris_welded[:, [0, 1, 1, 2, 2, 0]].reshape(-1, 2)
    e = np.concatenate([e, e[:, ::-1]])
    ea, eb = _unique_pairs(e[:, 0], e[:, 1], vertex_count)
    adj_off, adj = _csr(ea, eb, vertex_count)
    ft, fv = np.repeat(np.arange(T), 3), tris_welded.ravel()
    ft, fv = _unique_pairs(ft, fv, vertex_count)
    for _ in range(ring_count - 1):
        rep, nb = _gather(adj_off, adj, fv)
        ft, fv = _unique_pairs(np.concatenate([ft, ft[rep]]), np.concatenate([fv, nb]), vertex_count)
    vt_off, vt = _csr(tris_welded.ravel(), np.repeat(np.arange(T), 3), vertex_count)
    rep, t2 = _gather(vt_off, vt, fv)
    a, b = _unique_pairs(ft[rep], t2, T)
    keep = a != b
    return np.stack([a[keep], b[keep]], axis=1)


class MeshSelfIntersection:
    """A mesh's rest-pose neighbour exclusions and BVH, ready to test deformed frames.

    Attributes:
        triangles: faces, shape (T, 3).
        welded: welded vertex index of each vertex, shape (V,).
        size: character size [m] (largest extent of the rest points unless given).
        excluded: rest neighbour pairs ``(i, j)``, ``i < j``, shape (n, 2).
        device: Warp device.
    """

    def __init__(
        self,
        triangles,
        rest_points,
        config: SelfIntersectionConfig | None = None,
        *,
        size: float | None = None,
        device: str | None = None,
    ):
        """Welds the rest mesh, finds the neighbour pairs and builds the BVH.

        Args:
            triangles: vertex indices, shape (T, 3).
            rest_points: rest (bind) positions [m], shape (V, 3).
            config: exclusion settings.
            size: character size [m] the rest clearance scales with (default: extent of ``rest_points``).
            device: Warp device (default: Warp's default device).

        Raises:
            ValueError: bad shapes or indices, a size that is not a finite length > 0, or a weld tolerance not > 0.
        """
        init_warp()
        self.config = cfg = config or SelfIntersectionConfig()
        tris = np.asarray(triangles, dtype=np.int64)
        rest = np.asarray(rest_points, dtype=np.float64)
        if rest.ndim != 2 or rest.shape[1] != 3 or len(rest) == 0:
            raise ValueError(f"rest_points: expected shape (V > 0, 3), got {rest.shape}")
        if tris.ndim != 2 or tris.shape[1] != 3:
            raise ValueError(f"triangles: expected shape (T, 3), got {tris.shape}")
        if tris.size and (tris.min() < 0 or tris.max() >= len(rest)):
            raise ValueError(f"triangles: vertex index out of range [0, {len(rest)})")
        self.triangles = tris
        self.vertex_count = len(rest)
        self.size = float(size) if size is not None else character_size(rest)
        if not (np.isfinite(self.size) and self.size > 0):
            raise ValueError(f"size: must be a finite length > 0 [m], got {self.size!r}")
        w = cfg.weld_tolerance_rel
        if not (np.isfinite(w) and w > 0):  # 0 welded every vertex into one (int64 overflow): nothing was tested
            raise ValueError(f"SelfIntersectionConfig.weld_tolerance_rel: must be a finite number > 0, got {w!r}")
        self.device = str(wp.get_device(device))
        tol = w * self.size
        if np.abs(rest).max() / tol >= 2.0**62:
            raise ValueError(
                f"SelfIntersectionConfig.weld_tolerance_rel: {w!r} x size {self.size:.4g} m is too fine for points "
                f"{np.abs(rest).max():.4g} m from the origin (the weld grid overflows int64)"
            )
        _, welded = np.unique(np.round(rest / tol).astype(np.int64), axis=0, return_inverse=True)
        self.welded = welded.ravel()
        W = int(self.welded.max()) + 1
        T = len(tris)
        d = self.device
        self._tris = wp.array(tris.astype(np.int32), dtype=wp.int32, device=d)
        self._points64 = wp.zeros(self.vertex_count, dtype=wp.vec3d, device=d)
        self._points32 = wp.array(rest.astype(np.float32), dtype=wp.vec3, device=d)
        self._rest64 = wp.array(rest, dtype=wp.vec3d, device=d)
        # Warp's BVH build crashes the process on zero triangles; a mesh without faces has no intersections to find
        self._mesh = (
            wp.Mesh(
                points=self._points32,
                indices=wp.array(tris.ravel().astype(np.int32), device=d),
                support_winding_number=True,
            )
            if T
            else None
        )
        self._count = wp.zeros(1, dtype=wp.int32, device=d)
        self._face_hit = wp.zeros(max(T, 1), dtype=wp.int32, device=d)
        self._capacity = 0
        self._alloc(max(64, 4 * T))

        ring = ring_neighbour_pairs(self.welded[tris], W, cfg.ring_count)
        self._set_exclusions(ring)
        near = self._near_pairs(rest, cfg.rest_clearance_rel * self.size) if T else np.zeros((0, 2), np.int64)
        if len(near):
            self._set_exclusions(np.concatenate([ring, near, near[:, ::-1]]))
        ex = self._excl_pairs
        self.excluded = ex[ex[:, 0] < ex[:, 1]]

        # one representative vertex per welded position that some face uses, and one face incident to it
        used = np.zeros(W, dtype=bool)
        used[self.welded[tris.ravel()]] = True
        first = np.full(W, -1, dtype=np.int64)
        first[self.welded[::-1]] = np.arange(self.vertex_count)[::-1]
        self._w_tris = self.welded[tris]
        e = self._w_tris[:, [0, 1, 1, 2, 2, 0]].reshape(-1, 2)
        self._edges = np.concatenate([e, e[:, ::-1]])
        self._edge_faces = np.tile(np.repeat(np.arange(T), 3), 2)  # the face each row of _edges comes from
        self._rep = first[used]
        self._welded_tris = wp.array(self._w_tris.astype(np.int32), dtype=wp.int32, device=d)
        self._welded_wp = wp.array(self.welded.astype(np.int32), dtype=wp.int32, device=d)
        self._first = first
        self._rest_inside_w = np.zeros(W, dtype=bool)  # welded positions already inside the body at rest
        if T:
            self._upload(rest)
            self._rest_inside_w[self.welded[self._rep[self._inside(rest, self._rep)]]] = True

    @property
    def face_count(self) -> int:
        return len(self.triangles)

    def _set_exclusions(self, pairs: np.ndarray) -> None:
        T = self.face_count
        a, b = _unique_pairs(pairs[:, 0], pairs[:, 1], max(T, 1)) if len(pairs) else (pairs[:, 0], pairs[:, 1])
        self._excl_pairs = np.stack([a, b], axis=1)
        offsets, values = _csr(a, b, T)
        self._excl_off = wp.array(offsets.astype(np.int32), dtype=wp.int32, device=self.device)
        self._excl_idx = wp.array(np.append(values, 0).astype(np.int32), dtype=wp.int32, device=self.device)

    def _alloc(self, capacity: int) -> None:
        d = self.device
        self._capacity = int(capacity)
        self._pairs = wp.zeros((self._capacity, 2), dtype=wp.int32, device=d)
        self._lengths = wp.zeros(self._capacity, dtype=wp.float64, device=d)
        self._depths = wp.zeros(self._capacity, dtype=wp.float64, device=d)

    def _upload(self, points: np.ndarray) -> float:
        pts = np.asarray(points, dtype=np.float64)
        if pts.shape != (self.vertex_count, 3):
            raise ValueError(f"points: expected shape ({self.vertex_count}, 3), got {pts.shape}")
        if not np.all(np.isfinite(pts)):
            raise ValueError("points: contains non-finite values")
        self._points64.assign(pts)
        self._points32.assign(pts.astype(np.float32))
        if self._mesh is not None:
            self._mesh.refit()
        # float32 boxes: pad by a few ulps of the largest coordinate so rounding never drops a candidate
        return float(8 * np.finfo(np.float32).eps * max(np.abs(pts).max(), self.size) + 1e-7 * self.size)

    def _near_pairs(self, points: np.ndarray, clearance: float) -> np.ndarray:
        self._upload(points)
        while True:
            self._count.zero_()
            inputs = [self._mesh.id, self._points64, self._tris, self._excl_off, self._excl_idx]
            wp.launch(
                K.near_pairs_kernel,
                dim=self.face_count,
                inputs=[*inputs, float(clearance), self._capacity],
                outputs=[self._count, self._pairs],
                device=self.device,
            )
            n = int(self._count.numpy()[0])
            if n <= self._capacity:
                return self._pairs.numpy()[:n].astype(np.int64)
            self._alloc(n)

    def _normals(self, pts: np.ndarray) -> np.ndarray:
        """Area-weighted normals on the welded topology, per (original) vertex, shape (V, 3)."""
        W = int(self.welded.max()) + 1
        a, b, c = (pts[self.triangles[:, k]] for k in range(3))
        fn = np.cross(b - a, c - a)
        n = np.zeros((W, 3))
        for k in range(3):
            np.add.at(n, self._w_tris[:, k], fn)
        n = n[self.welded]
        length = np.linalg.norm(n, axis=1, keepdims=True)
        return n / np.maximum(length, 1e-300)

    def _inside(self, pts: np.ndarray, candidates: np.ndarray, normals=None) -> np.ndarray:
        """Which of ``candidates`` lie inside the body (points already uploaded), bool shape (n,)."""
        n = len(candidates)
        if n == 0:
            return np.zeros(0, dtype=bool)
        d = self.device
        if normals is None:
            normals = wp.array(self._normals(pts), dtype=wp.vec3d, device=d)
        inside = wp.zeros(n, dtype=wp.int32, device=d)
        cfg = self.config
        wp.launch(
            K.inside_kernel,
            dim=n,
            inputs=[
                self._mesh.id,
                self._points64,
                normals,
                wp.array(candidates.astype(np.int32), dtype=wp.int32, device=d),
                cfg.inside_offset_rel * self.size,
                4.0 * cfg.max_depth_rel * self.size,
            ],
            outputs=[inside],
            device=d,
        )
        return inside.numpy().astype(bool)

    def _depth_search(self, verts: np.ndarray, sheet: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Depths [m] of the inside vertices ``verts`` and the faces they lie behind (points already uploaded)."""
        d = self.device
        depth = wp.zeros(len(verts), dtype=wp.float64, device=d)
        face = wp.zeros(len(verts), dtype=wp.int32, device=d)
        cfg = self.config
        wp.launch(
            K.penetration_depth_kernel,
            dim=len(verts),
            inputs=[
                self._mesh.id,
                self._points64,
                self._rest64,
                self._tris,
                self._welded_tris,
                self._welded_wp,
                wp.array(sheet.astype(np.int32), dtype=wp.int32, device=d),
                wp.array(verts.astype(np.int32), dtype=wp.int32, device=d),
                0.02 * self.size,
                cfg.max_depth_rel * self.size,
                K.MOVED_RATIO,
            ],
            outputs=[depth, face],
            device=d,
        )
        return depth.numpy().copy(), face.numpy().astype(np.int64)

    def frame(self, points, method: Method = "bvh", penetration: bool = True) -> IntersectionFrame:
        """Intersecting non-neighbour face pairs of one deformed frame.

        Args:
            points: vertex positions [m], shape (V, 3).
            method: ``"bvh"`` (candidates from the refitted BVH) or ``"brute_force"`` (all pairs).
            penetration: on frames with intersecting pairs, also find the inside vertices and their depths.
        """
        if method not in ("bvh", "brute_force"):
            raise ValueError(f"method must be 'bvh' or 'brute_force', got {method!r}")
        pad = self._upload(points)
        T = self.face_count
        if T == 0:
            return IntersectionFrame(np.zeros((0, 2), np.int64), np.zeros(0), np.zeros(0), np.zeros(0, bool))
        while True:
            self._count.zero_()
            self._face_hit.zero_()
            excl = [self._excl_off, self._excl_idx]
            outputs = [self._count, self._pairs, self._lengths, self._depths, self._face_hit]
            if method == "bvh":
                inputs = [self._mesh.id, self._points64, self._tris, *excl, pad, self._capacity]
                kernel = K.self_intersect_bvh_kernel
            else:
                inputs = [self._points64, self._tris, *excl, self._capacity]
                kernel = K.self_intersect_brute_kernel
            wp.launch(kernel, dim=T, inputs=inputs, outputs=outputs, device=self.device)
            n = int(self._count.numpy()[0])
            if n <= self._capacity:
                break
            self._alloc(2 * n)
        pairs = self._pairs.numpy()[:n].astype(np.int64)
        order = np.lexsort((pairs[:, 1], pairs[:, 0]))
        result = IntersectionFrame(
            pairs[order],
            self._lengths.numpy()[:n][order].copy(),
            self._depths.numpy()[:n][order].copy(),
            self._face_hit.numpy()[:T].astype(bool),
        )
        if penetration and n:
            pts = np.asarray(points, dtype=np.float64)
            verts, depths, faces = self._inside_region(pts, result.pairs, np.flatnonzero(result.face_hit))
            result.inside_vertices, result.inside_depths, result.inside_faces = verts, depths, faces
        return result

    def _inside_region(self, pts: np.ndarray, pairs: np.ndarray, hit_faces: np.ndarray) -> tuple:
        """Inside vertices connected, through inside vertices, to a vertex of an intersecting face: (vertex ids,
        depths [m], faces they lie behind).

        The search grows from the intersecting faces through inside vertices only (cost follows the penetrating
        region, not the mesh), so inside spots not bounded by an intersection contour (creases closer than the
        test offset) are never reached, and neither is a part lying entirely inside another without its surface
        crossing it (a shell moved fully inside the body: no pair, no inside vertex; see the module docstring).
        The connected components of the inside vertices are the sheets the depth search treats apart. Depths
        are bounded by the distance to where the surface leaves the body: the intersection contour of
        ``pairs`` and the crossings on edges from inside to outside vertices.
        """
        from scipy.sparse import coo_matrix
        from scipy.sparse.csgraph import connected_components

        W = len(self._first)
        normals = wp.array(self._normals(pts), dtype=wp.vec3d, device=self.device)
        tested = self._rest_inside_w.copy()
        inside = np.zeros(W, dtype=bool)
        frontier = np.zeros(W, dtype=bool)
        frontier[self._w_tris[hit_faces].ravel()] = True
        a, b = self._edges[:, 0], self._edges[:, 1]
        while True:
            frontier &= ~tested
            if not frontier.any():
                break
            tested |= frontier
            found = np.zeros(W, dtype=bool)
            found[np.flatnonzero(frontier)[self._inside(pts, self._first[frontier], normals)]] = True
            inside |= found
            frontier = np.zeros(W, dtype=bool)
            frontier[b[found[a]]] = True
        verts = self._first[np.flatnonzero(inside)]
        if len(verts) == 0:
            return verts, np.zeros(0), np.zeros(0, np.int64)
        keep = inside[a] & inside[b]
        graph = coo_matrix((np.ones(int(keep.sum())), (a[keep], b[keep])), shape=(W, W))
        sheet = np.where(inside, connected_components(graph, directed=False)[1], -1)
        depths, faces = self._depth_search(verts, sheet)
        # the contour lies on the enclosing surface, so no inside point is deeper than its distance to it
        contour = intersection_segments(pts, self.triangles, pairs)
        depths = np.minimum(depths, _point_segment_distance(pts[verts], contour))
        # nor than its distance to where an edge from an inside to an outside vertex leaves the body where no pair
        # records it (the crossing face is a rest neighbour: folds); edges crossing a face that one of their faces
        # intersects leave it on the contour
        exit_edge = np.flatnonzero(inside[a] & tested[b] & ~inside[b] & ~self._rest_inside_w[b])
        code = a[exit_edge] * W + b[exit_edge]
        code = np.setdiff1d(code, code[self._crosses_partner(pts, exit_edge, pairs)])
        inner, outer = self._first[code // W], self._first[code % W]
        return verts, self._exit_bound(pts, verts, depths, inner, outer, normals), faces

    def _crosses_partner(self, pts: np.ndarray, rows: np.ndarray, pairs: np.ndarray) -> np.ndarray:
        """Whether each edge ``self._edges[rows]`` crosses a face its face (``self._edge_faces``) intersects in
        ``pairs`` (segment-triangle test, closed), bool shape (len(rows),)."""
        keys = np.concatenate([pairs[:, 0], pairs[:, 1]])
        offsets, partners = _csr(keys, np.concatenate([pairs[:, 1], pairs[:, 0]]), self.face_count)
        rep, face = _gather(offsets, partners, self._edge_faces[rows])
        p = pts[self._first[self._edges[rows[rep], 0]]]
        d = pts[self._first[self._edges[rows[rep], 1]]] - p
        A, B, C = (pts[self.triangles[face, k]] for k in range(3))
        e1, e2 = B - A, C - A
        h = np.cross(d, e2)
        det = np.einsum("nc,nc->n", e1, h)
        ok = np.abs(det) > 1e-300
        inv = np.where(ok, 1.0 / np.where(ok, det, 1.0), 0.0)
        s = p - A
        u = np.einsum("nc,nc->n", s, h) * inv
        qv = np.cross(s, e1)
        v = np.einsum("nc,nc->n", d, qv) * inv
        t = np.einsum("nc,nc->n", e2, qv) * inv
        hit = ok & (u >= 0) & (v >= 0) & (u + v <= 1) & (t >= 0) & (t <= 1)
        covered = np.zeros(len(rows), dtype=bool)
        covered[rep[hit]] = True
        return covered

    def _exit_bound(self, pts, verts, depths, inner, outer, normals) -> np.ndarray:
        """``depths`` of ``verts`` bounded by their distance to where the edges ``inner -> outer`` leave the body.

        Coarse bisection of every edge, then fine bisection of the edges whose bracket passes closer to some vertex
        than its bound so far (no other can lower one). The exit point taken is the outside end of the final
        bracket, so each bound is a distance to a point outside the body.
        """
        from scipy.spatial import cKDTree

        if len(inner) == 0:
            return depths
        d = self.device
        cfg = self.config
        coarse, fine = _EXIT_STEPS
        test = [cfg.inside_offset_rel * self.size, 4.0 * cfg.max_depth_rel * self.size]

        def bisect(edges: np.ndarray, start: np.ndarray, steps: int) -> np.ndarray:
            bracket = wp.array(start, dtype=wp.vec2d, device=d)
            ends = [wp.array(x[edges].astype(np.int32), dtype=wp.int32, device=d) for x in (inner, outer)]
            wp.launch(
                K.exit_bracket_kernel,
                dim=len(edges),
                inputs=[self._mesh.id, self._points64, normals, *ends, *test, steps],
                outputs=[bracket],
                device=d,
            )
            return bracket.numpy().copy()

        p, ab = pts[inner], pts[outer] - pts[inner]
        x = pts[verts]
        bracket = bisect(np.arange(len(inner)), np.tile([0.0, 1.0], (len(inner), 1)), coarse)
        bound = np.minimum(depths, cKDTree(p + ab * bracket[:, 1:]).query(x)[0])
        # edges whose bracket (the segment the exit point lies on) passes closer to some vertex than its bound
        lo, hi = p + ab * bracket[:, :1], p + ab * bracket[:, 1:]
        reach = 0.5 * float(np.linalg.norm(hi - lo, axis=1).max())
        near = cKDTree(0.5 * (lo + hi)).query_ball_point(x, bound + reach)
        rows = np.repeat(np.arange(len(verts)), [len(n) for n in near])
        cols = np.concatenate(near).astype(np.int64)
        seg = hi[cols] - lo[cols]
        t = np.einsum("nc,nc->n", x[rows] - lo[cols], seg) / np.maximum(np.einsum("nc,nc->n", seg, seg), 1e-300)
        gap = np.linalg.norm(x[rows] - lo[cols] - seg * np.clip(t, 0.0, 1.0)[:, None], axis=1)
        need = np.unique(cols[gap < bound[rows]])
        if len(need) == 0:
            return bound
        refined = bisect(need, bracket[need], fine)
        return np.minimum(bound, cKDTree(p[need] + ab[need] * refined[:, 1:]).query(x)[0])

    def motion(self, points, method: Method = "bvh", penetration: bool = True) -> SelfIntersectionMetrics:
        """Runs :meth:`frame` on every frame of ``points`` (F, V, 3) [m] and summarizes."""
        pts = np.asarray(points, dtype=np.float64)
        if pts.ndim != 3:
            raise ValueError(f"points: expected shape (F, {self.vertex_count}, 3), got {pts.shape}")
        return self.summarize([self.frame(p, method, penetration) for p in pts])

    def summarize(self, frames: list[IntersectionFrame]) -> SelfIntersectionMetrics:
        """The motion metrics of per-frame results of :meth:`frame` (e.g. picked from several samplings)."""
        pair_count = np.array([len(f.pairs) for f in frames], dtype=np.int64)
        share = np.array([f.face_share for f in frames])
        length = np.array([f.lengths.sum() for f in frames])
        depth = np.array([f.penetration_depth for f in frames])
        pair_depth = np.array([f.depths.max(initial=0.0) for f in frames])
        hit = np.stack([f.face_hit for f in frames]) if frames else np.zeros((0, self.face_count), bool)
        return SelfIntersectionMetrics(
            face_count=self.face_count,
            excluded_pair_count=len(self.excluded),
            size=self.size,
            pair_count=pair_count,
            face_share=share,
            length_m=length,
            depth_m=depth,
            pair_depth_m=pair_depth,
            face_hit=hit,
            frames=frames,
            max_face_share=float(share.max(initial=0.0)),
            max_depth_m=float(depth.max(initial=0.0)),
            max_length_m=float(length.max(initial=0.0)),
            intersecting_frames=int((pair_count > 0).sum()),
        )
