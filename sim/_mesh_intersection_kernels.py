"""Warp kernels for exact triangle-triangle intersection and distance (float64), BVH-accelerated or brute force.

Index conventions: ``i``, ``j`` are triangles (faces), ``k`` a slot in the output pair buffer. Triangle vertex
positions are float64 (``wp.vec3d``) for the exact tests; the ``wp.Mesh`` (float32) only proposes candidates
through ``wp.mesh_query_aabb`` with boxes padded by ``pad`` so float32 rounding never drops a pair.

Triangle pair test (:func:`tri_tri_segment`): for non-coplanar triangles A and B, the part of A on B's plane
is a segment (A's edges crossing the plane, or vertices on it); so is B's part on A's plane; both lie on the
planes' common line, and the triangles intersect exactly when the two segments overlap on it with positive
length. That overlap is the intersection segment; its length is returned. Coplanar or degenerate pairs are
reported as not intersecting.

Depth estimate of an intersecting pair: how far A's vertices reach behind B's plane (against B's outward
normal, counter-clockwise winding), likewise B behind A; the smaller of the two, i.e. the shorter push along
one face normal that separates the pair locally. It is exact for a flat face pushed into another by less than
the triangles' extent (e.g. two overlapping boxes) and otherwise bounded by the triangle size.

Penetration depth, resolution independent: a vertex is *inside* (:func:`inside_kernel`) when a point just outside
it along its normal is enclosed by the surface (winding number above 1/2, Warp's fast winding number on the BVH).
Its depth (:func:`penetration_depth_kernel`) is its distance to the nearest face it lies behind on the body it went
into, not on its own part: faces touching its *sheet* (the inside vertices connected to it through inside
vertices, i.e. the part of the surface that went in, up to the intersection contour) do not count, so the far
side of a limb never caps the depth of the limb's vertices, however thin the limb. Where one sheet holds both the
limb and the body it went into (their inside regions meet in the crease of a joint), a face on it counts when the
vertex did not lie behind it in the rest pose and has since moved relative to it by more than ``MOVED_RATIO``
times their distance: a limb's own faces move (nearly) with its vertices. :func:`exit_bracket_kernel` locates
where an edge from an inside to an outside vertex leaves the body (a bound on the depths near it).
"""

from __future__ import annotations

import warp as wp

wp.set_module_options({"enable_backward": False})

PLANE_EPS = 1e-12
"""Signed plane distances below this times the triangle scale count as on the plane."""
DEGENERATE_EPS = 1e-12
"""Triangles whose doubled area is below this times their longest edge squared are degenerate (never hit)."""


@wp.func
def _plane_interval(
    p0: wp.vec3d, p1: wp.vec3d, p2: wp.vec3d, d0: wp.float64, d1: wp.float64, d2: wp.float64, axis: wp.vec3d
) -> wp.vec3d:
    """Interval ``(lo, hi, valid)`` along ``axis`` of the part of a triangle on a plane, from its vertices'
    signed distances ``d`` to that plane (|d| <= 0 means on it); valid = 1 when the triangle reaches it."""
    lo = wp.float64(1.0e300)
    hi = wp.float64(-1.0e300)
    found = wp.float64(0.0)
    zero = wp.float64(0.0)
    # vertices on the plane
    if d0 == zero:
        s = wp.dot(p0, axis)
        lo = wp.min(lo, s)
        hi = wp.max(hi, s)
        found = wp.float64(1.0)
    if d1 == zero:
        s = wp.dot(p1, axis)
        lo = wp.min(lo, s)
        hi = wp.max(hi, s)
        found = wp.float64(1.0)
    if d2 == zero:
        s = wp.dot(p2, axis)
        lo = wp.min(lo, s)
        hi = wp.max(hi, s)
        found = wp.float64(1.0)
    # edges crossing the plane strictly
    if d0 * d1 < zero:
        s = wp.dot(p0 + (p1 - p0) * (d0 / (d0 - d1)), axis)
        lo = wp.min(lo, s)
        hi = wp.max(hi, s)
        found = wp.float64(1.0)
    if d1 * d2 < zero:
        s = wp.dot(p1 + (p2 - p1) * (d1 / (d1 - d2)), axis)
        lo = wp.min(lo, s)
        hi = wp.max(hi, s)
        found = wp.float64(1.0)
    if d2 * d0 < zero:
        s = wp.dot(p2 + (p0 - p2) * (d2 / (d2 - d0)), axis)
        lo = wp.min(lo, s)
        hi = wp.max(hi, s)
        found = wp.float64(1.0)
    return wp.vec3d(lo, hi, found)


@wp.func
def _snap(d: wp.float64, eps: wp.float64) -> wp.float64:
    if wp.abs(d) <= eps:
        return wp.float64(0.0)
    return d


@wp.func
def _degenerate(cross_length: wp.float64, p0: wp.vec3d, p1: wp.vec3d, p2: wp.vec3d) -> bool:
    """Whether a triangle with ``|cross(p1 - p0, p2 - p0)| = cross_length`` has (near) zero area: relative to
    its longest edge squared, so round-off in a rotated collinear triangle is not taken for area."""
    edge = wp.max(wp.max(wp.length(p1 - p0), wp.length(p2 - p0)), wp.length(p2 - p1))
    return cross_length <= wp.float64(DEGENERATE_EPS) * edge * edge


@wp.func
def tri_tri_segment(a0: wp.vec3d, a1: wp.vec3d, a2: wp.vec3d, b0: wp.vec3d, b1: wp.vec3d, b2: wp.vec3d) -> wp.vec3d:
    """Exact intersection of triangles A and B: ``(length, depth, hit)`` with hit 1.0 when their intersection
    segment has positive length (see the module docstring for the depth estimate)."""
    zero = wp.float64(0.0)
    none = wp.vec3d(zero, zero, zero)
    na = wp.cross(a1 - a0, a2 - a0)
    nb = wp.cross(b1 - b0, b2 - b0)
    la = wp.length(na)
    lb = wp.length(nb)
    if _degenerate(la, a0, a1, a2) or _degenerate(lb, b0, b1, b2):
        return none
    na = na / la
    nb = nb / lb
    scale = wp.max(
        wp.max(wp.max(wp.length(a1 - a0), wp.length(a2 - a0)), wp.max(wp.length(b1 - b0), wp.length(b2 - b0))),
        wp.max(wp.length(a2 - a1), wp.length(b2 - b1)),
    )
    eps = wp.float64(PLANE_EPS) * scale
    # signed distances of A's vertices to B's plane and B's to A's
    da0 = _snap(wp.dot(a0 - b0, nb), eps)
    da1 = _snap(wp.dot(a1 - b0, nb), eps)
    da2 = _snap(wp.dot(a2 - b0, nb), eps)
    if (da0 > zero and da1 > zero and da2 > zero) or (da0 < zero and da1 < zero and da2 < zero):
        return none
    db0 = _snap(wp.dot(b0 - a0, na), eps)
    db1 = _snap(wp.dot(b1 - a0, na), eps)
    db2 = _snap(wp.dot(b2 - a0, na), eps)
    if (db0 > zero and db1 > zero and db2 > zero) or (db0 < zero and db1 < zero and db2 < zero):
        return none
    axis = wp.cross(na, nb)
    if wp.length(axis) <= wp.float64(1.0e-12):
        return none  # coplanar or parallel: measure-zero contact, not counted
    axis = wp.normalize(axis)
    ia = _plane_interval(a0, a1, a2, da0, da1, da2, axis)
    ib = _plane_interval(b0, b1, b2, db0, db1, db2, axis)
    if ia[2] == zero or ib[2] == zero:
        return none
    overlap = wp.min(ia[1], ib[1]) - wp.max(ia[0], ib[0])
    if overlap <= eps:
        return none
    depth_a = wp.max(wp.max(-da0, -da1), wp.max(-da2, zero))
    depth_b = wp.max(wp.max(-db0, -db1), wp.max(-db2, zero))
    return wp.vec3d(overlap, wp.min(depth_a, depth_b), wp.float64(1.0))


@wp.func
def _closest_point_triangle(p: wp.vec3d, a: wp.vec3d, b: wp.vec3d, c: wp.vec3d) -> wp.vec3d:
    """Closest point to ``p`` on triangle abc (Voronoi-region walk over vertices, edges and the face)."""
    zero = wp.float64(0.0)
    ab = b - a
    ac = c - a
    ap = p - a
    d1 = wp.dot(ab, ap)
    d2 = wp.dot(ac, ap)
    if d1 <= zero and d2 <= zero:
        return a
    bp = p - b
    d3 = wp.dot(ab, bp)
    d4 = wp.dot(ac, bp)
    if d3 >= zero and d4 <= d3:
        return b
    vc = d1 * d4 - d3 * d2
    if vc <= zero and d1 >= zero and d3 <= zero:
        return a + ab * (d1 / (d1 - d3))
    cp = p - c
    d5 = wp.dot(ab, cp)
    d6 = wp.dot(ac, cp)
    if d6 >= zero and d5 <= d6:
        return c
    vb = d5 * d2 - d1 * d6
    if vb <= zero and d2 >= zero and d6 <= zero:
        return a + ac * (d2 / (d2 - d6))
    va = d3 * d6 - d5 * d4
    if va <= zero and (d4 - d3) >= zero and (d5 - d6) >= zero:
        return b + (c - b) * ((d4 - d3) / ((d4 - d3) + (d5 - d6)))
    denom = wp.float64(1.0) / (va + vb + vc)
    return a + ab * (vb * denom) + ac * (vc * denom)


@wp.func
def _segment_distance(p1: wp.vec3d, q1: wp.vec3d, p2: wp.vec3d, q2: wp.vec3d) -> wp.float64:
    """Distance between segments [p1, q1] and [p2, q2] (clamped closest parameters)."""
    zero = wp.float64(0.0)
    one = wp.float64(1.0)
    d1 = q1 - p1
    d2 = q2 - p2
    r = p1 - p2
    a = wp.dot(d1, d1)
    e = wp.dot(d2, d2)
    f = wp.dot(d2, r)
    s = zero
    t = zero
    if a <= wp.float64(1.0e-300) and e <= wp.float64(1.0e-300):
        return wp.length(r)
    if a <= wp.float64(1.0e-300):
        t = wp.clamp(f / e, zero, one)
    else:
        c = wp.dot(d1, r)
        if e <= wp.float64(1.0e-300):
            s = wp.clamp(-c / a, zero, one)
        else:
            b = wp.dot(d1, d2)
            denom = a * e - b * b
            if denom > zero:
                s = wp.clamp((b * f - c * e) / denom, zero, one)
            t = (b * s + f) / e
            if t < zero:
                t = zero
                s = wp.clamp(-c / a, zero, one)
            elif t > one:
                t = one
                s = wp.clamp((b - c) / a, zero, one)
    return wp.length((p1 + d1 * s) - (p2 + d2 * t))


@wp.func
def tri_tri_distance(a0: wp.vec3d, a1: wp.vec3d, a2: wp.vec3d, b0: wp.vec3d, b1: wp.vec3d, b2: wp.vec3d) -> wp.float64:
    """Distance between two triangles that do not intersect: the least of the 6 vertex-face and 9 edge-edge
    distances (for intersecting ones this is an upper bound; test :func:`tri_tri_segment` first)."""
    d = wp.length(a0 - _closest_point_triangle(a0, b0, b1, b2))
    d = wp.min(d, wp.length(a1 - _closest_point_triangle(a1, b0, b1, b2)))
    d = wp.min(d, wp.length(a2 - _closest_point_triangle(a2, b0, b1, b2)))
    d = wp.min(d, wp.length(b0 - _closest_point_triangle(b0, a0, a1, a2)))
    d = wp.min(d, wp.length(b1 - _closest_point_triangle(b1, a0, a1, a2)))
    d = wp.min(d, wp.length(b2 - _closest_point_triangle(b2, a0, a1, a2)))
    d = wp.min(d, _segment_distance(a0, a1, b0, b1))
    d = wp.min(d, _segment_distance(a0, a1, b1, b2))
    d = wp.min(d, _segment_distance(a0, a1, b2, b0))
    d = wp.min(d, _segment_distance(a1, a2, b0, b1))
    d = wp.min(d, _segment_distance(a1, a2, b1, b2))
    d = wp.min(d, _segment_distance(a1, a2, b2, b0))
    d = wp.min(d, _segment_distance(a2, a0, b0, b1))
    d = wp.min(d, _segment_distance(a2, a0, b1, b2))
    d = wp.min(d, _segment_distance(a2, a0, b2, b0))
    return d


@wp.func
def is_excluded(i: int, j: int, offsets: wp.array[wp.int32], indices: wp.array[wp.int32]) -> bool:
    """Whether ``j`` is in triangle ``i``'s sorted exclusion list (binary search)."""
    lo = offsets[i]
    hi = offsets[i + 1]
    while lo < hi:
        mid = (lo + hi) // 2
        v = indices[mid]
        if v == j:
            return True
        if v < j:
            lo = mid + 1
        else:
            hi = mid
    return False


@wp.func
def _record(
    i: int,
    j: int,
    r: wp.vec3d,
    capacity: int,
    pair_count: wp.array[wp.int32],
    pairs: wp.array2d(dtype=wp.int32),
    lengths: wp.array[wp.float64],
    depths: wp.array[wp.float64],
    face_hit: wp.array[wp.int32],
):
    k = wp.atomic_add(pair_count, 0, 1)
    if k < capacity:
        pairs[k, 0] = i
        pairs[k, 1] = j
        lengths[k] = r[0]
        depths[k] = r[1]
    face_hit[i] = 1
    face_hit[j] = 1


@wp.kernel
def self_intersect_bvh_kernel(
    mesh_id: wp.uint64,
    points: wp.array[wp.vec3d],
    tris: wp.array2d(dtype=wp.int32),
    excl_offsets: wp.array[wp.int32],
    excl_indices: wp.array[wp.int32],
    pad: wp.float32,
    capacity: int,
    pair_count_out: wp.array[wp.int32],
    pairs_out: wp.array2d(dtype=wp.int32),
    lengths_out: wp.array[wp.float64],
    depths_out: wp.array[wp.float64],
    face_hit_out: wp.array[wp.int32],
):
    """Every intersecting non-excluded pair (i < j), candidates from the BVH. Launch dim (face_count,)."""
    i = wp.tid()
    a0 = points[tris[i, 0]]
    a1 = points[tris[i, 1]]
    a2 = points[tris[i, 2]]
    lo = wp.min(wp.min(a0, a1), a2)
    hi = wp.max(wp.max(a0, a1), a2)
    lo32 = wp.vec3(wp.float32(lo[0]), wp.float32(lo[1]), wp.float32(lo[2])) - wp.vec3(pad, pad, pad)
    hi32 = wp.vec3(wp.float32(hi[0]), wp.float32(hi[1]), wp.float32(hi[2])) + wp.vec3(pad, pad, pad)
    query = wp.mesh_query_aabb(mesh_id, lo32, hi32)
    j = int(0)  # noqa: UP018, RUF046 (a dynamic Warp variable the query writes)
    while wp.mesh_query_aabb_next(query, j):
        if j <= i:
            continue
        if is_excluded(i, j, excl_offsets, excl_indices):
            continue
        r = tri_tri_segment(a0, a1, a2, points[tris[j, 0]], points[tris[j, 1]], points[tris[j, 2]])
        if r[2] > wp.float64(0.0):
            _record(i, j, r, capacity, pair_count_out, pairs_out, lengths_out, depths_out, face_hit_out)


@wp.kernel
def self_intersect_brute_kernel(
    points: wp.array[wp.vec3d],
    tris: wp.array2d(dtype=wp.int32),
    excl_offsets: wp.array[wp.int32],
    excl_indices: wp.array[wp.int32],
    capacity: int,
    pair_count_out: wp.array[wp.int32],
    pairs_out: wp.array2d(dtype=wp.int32),
    lengths_out: wp.array[wp.float64],
    depths_out: wp.array[wp.float64],
    face_hit_out: wp.array[wp.int32],
):
    """Same result as :func:`self_intersect_bvh_kernel` testing all pairs (the baseline). Launch dim (face_count,)."""
    i = wp.tid()
    a0 = points[tris[i, 0]]
    a1 = points[tris[i, 1]]
    a2 = points[tris[i, 2]]
    for j in range(i + 1, tris.shape[0]):
        if is_excluded(i, j, excl_offsets, excl_indices):
            continue
        r = tri_tri_segment(a0, a1, a2, points[tris[j, 0]], points[tris[j, 1]], points[tris[j, 2]])
        if r[2] > wp.float64(0.0):
            _record(i, j, r, capacity, pair_count_out, pairs_out, lengths_out, depths_out, face_hit_out)


@wp.kernel
def near_pairs_kernel(
    mesh_id: wp.uint64,
    points: wp.array[wp.vec3d],
    tris: wp.array2d(dtype=wp.int32),
    excl_offsets: wp.array[wp.int32],
    excl_indices: wp.array[wp.int32],
    clearance: wp.float64,
    capacity: int,
    pair_count_out: wp.array[wp.int32],
    pairs_out: wp.array2d(dtype=wp.int32),
):
    """Non-excluded pairs (i < j) that intersect or lie closer than ``clearance``. Launch dim (face_count,)."""
    i = wp.tid()
    a0 = points[tris[i, 0]]
    a1 = points[tris[i, 1]]
    a2 = points[tris[i, 2]]
    lo = wp.min(wp.min(a0, a1), a2)
    hi = wp.max(wp.max(a0, a1), a2)
    pad = wp.float32(clearance) * wp.float32(1.001) + wp.float32(1.0e-6) * wp.float32(wp.length(hi - lo))
    lo32 = wp.vec3(wp.float32(lo[0]), wp.float32(lo[1]), wp.float32(lo[2])) - wp.vec3(pad, pad, pad)
    hi32 = wp.vec3(wp.float32(hi[0]), wp.float32(hi[1]), wp.float32(hi[2])) + wp.vec3(pad, pad, pad)
    query = wp.mesh_query_aabb(mesh_id, lo32, hi32)
    j = int(0)  # noqa: UP018, RUF046 (a dynamic Warp variable the query writes)
    while wp.mesh_query_aabb_next(query, j):
        if j <= i:
            continue
        if is_excluded(i, j, excl_offsets, excl_indices):
            continue
        b0 = points[tris[j, 0]]
        b1 = points[tris[j, 1]]
        b2 = points[tris[j, 2]]
        near = tri_tri_segment(a0, a1, a2, b0, b1, b2)[2] > wp.float64(0.0)
        if not near:
            near = tri_tri_distance(a0, a1, a2, b0, b1, b2) < clearance
        if near:
            k = wp.atomic_add(pair_count_out, 0, 1)
            if k < capacity:
                pairs_out[k, 0] = i
                pairs_out[k, 1] = j


BEHIND_COS = 0.5
"""A face counts for a vertex's depth when the vertex lies behind it within this cosine of its inward normal."""


@wp.kernel
def inside_kernel(
    mesh_id: wp.uint64,
    points: wp.array[wp.vec3d],
    normals: wp.array[wp.vec3d],
    candidates: wp.array[wp.int32],
    offset: wp.float64,
    max_distance: wp.float32,
    inside_out: wp.array[wp.int32],
):
    """Whether each candidate vertex lies inside the body: the point ``offset`` outside it along its normal has a
    winding number above 1/2 (some other part of the surface encloses it). Launch dim (candidate_count,)."""
    k = wp.tid()
    v = candidates[k]
    q = points[v] + normals[v] * offset
    q32 = wp.vec3(wp.float32(q[0]), wp.float32(q[1]), wp.float32(q[2]))
    hit = wp.mesh_query_point_sign_winding_number(mesh_id, q32, max_distance, 2.0, 0.5)
    inside_out[k] = 0
    if hit.result and hit.sign < wp.float32(0.0):
        inside_out[k] = 1


@wp.func
def _behind(p: wp.vec3d, b0: wp.vec3d, b1: wp.vec3d, b2: wp.vec3d) -> wp.vec3d:
    """``(distance, behind, valid)`` of point ``p`` to triangle b: behind is 1 when the closest point sees ``p``
    within ``acos(BEHIND_COS)`` of the face's inward normal (a point on the face is behind it); valid is 0 for a
    degenerate face."""
    zero = wp.float64(0.0)
    n = wp.cross(b1 - b0, b2 - b0)
    ln = wp.length(n)
    if _degenerate(ln, b0, b1, b2):
        return wp.vec3d(zero, zero, zero)
    c = _closest_point_triangle(p, b0, b1, b2)
    d = wp.length(c - p)
    behind = zero
    if wp.dot(p - c, n / ln) <= -wp.float64(BEHIND_COS) * d:
        behind = wp.float64(1.0)
    return wp.vec3d(d, behind, wp.float64(1.0))


@wp.kernel
def exit_bracket_kernel(
    mesh_id: wp.uint64,
    points: wp.array[wp.vec3d],
    normals: wp.array[wp.vec3d],
    inner: wp.array[wp.int32],
    outer: wp.array[wp.int32],
    offset: wp.float64,
    max_distance: wp.float32,
    steps: int,
    bracket: wp.array[wp.vec2d],
):
    """Where each edge from an inside vertex ``inner[k]`` to an outside one ``outer[k]`` leaves the body: ``steps``
    halvings of ``bracket[k]`` (edge parameters, inside end first) on the inside test (winding number ``offset``
    outside the edge, along the interpolated normal). Launch dim (edge_count,)."""
    k = wp.tid()
    a = points[inner[k]]
    b = points[outer[k]]
    na = normals[inner[k]]
    nb = normals[outer[k]]
    lo = bracket[k][0]
    hi = bracket[k][1]
    for _step in range(steps):
        t = (lo + hi) * wp.float64(0.5)
        n = na + (nb - na) * t
        if wp.length(n) > wp.float64(0.0):
            n = wp.normalize(n)
        q = a + (b - a) * t + n * offset
        q32 = wp.vec3(wp.float32(q[0]), wp.float32(q[1]), wp.float32(q[2]))
        hit = wp.mesh_query_point_sign_winding_number(mesh_id, q32, max_distance, 2.0, 0.5)
        if hit.result and hit.sign < wp.float32(0.0):
            lo = t
        else:
            hi = t
    bracket[k] = wp.vec2d(lo, hi)


MOVED_RATIO = 2.0
"""A face on an inside vertex's own sheet counts for its depth only if the vertex moved, relative to the face, by
more than this times its distance to it since the rest pose (a limb's own faces near a joint stay below ~1.2 on the
built-in biped's shoulder; faces of the body a limb went into were above 5 on the quadruped's hip)."""


@wp.func
def _moved(
    p_rest: wp.vec3d, r0: wp.vec3d, r1: wp.vec3d, r2: wp.vec3d, p: wp.vec3d, b0: wp.vec3d, b1: wp.vec3d, b2: wp.vec3d
) -> wp.float64:
    """How far ``p`` moved relative to triangle b since the rest pose (``p_rest``, triangle r): its distance to
    where its rest coordinates in the triangle's affine frame (two edges and the unit normal) land now. Zero when
    the point and the triangle moved rigidly together."""
    e1 = r1 - r0
    e2 = r2 - r0
    n = wp.normalize(wp.cross(e1, e2))
    g11 = wp.dot(e1, e1)
    g12 = wp.dot(e1, e2)
    g22 = wp.dot(e2, e2)
    q = p_rest - r0
    h1 = wp.dot(q, e1)
    h2 = wp.dot(q, e2)
    det = g11 * g22 - g12 * g12
    alpha = (g22 * h1 - g12 * h2) / det
    beta = (g11 * h2 - g12 * h1) / det
    gamma = wp.dot(q, n)
    f1 = b1 - b0
    f2 = b2 - b0
    carried = b0 + f1 * alpha + f2 * beta + wp.normalize(wp.cross(f1, f2)) * gamma
    return wp.length(p - carried)


@wp.kernel
def penetration_depth_kernel(
    mesh_id: wp.uint64,
    points: wp.array[wp.vec3d],
    rest_points: wp.array[wp.vec3d],
    tris: wp.array2d(dtype=wp.int32),
    welded_tris: wp.array2d(dtype=wp.int32),
    welded: wp.array[wp.int32],
    sheet: wp.array[wp.int32],
    candidates: wp.array[wp.int32],
    start_radius: wp.float64,
    max_radius: wp.float64,
    moved_ratio: wp.float64,
    depth_out: wp.array[wp.float64],
    face_out: wp.array[wp.int32],
):
    """Penetration depth of each inside vertex. Launch dim (candidate_count,).

    ``sheet``: the sheet of each welded vertex (connected inside vertices; -1 for the others). Depth: distance to
    the nearest face (not containing the vertex) that the vertex lies behind (see :func:`_behind`) and that touches
    no vertex of the vertex's sheet, or touches it but had the vertex not behind it in the rest pose
    (``rest_points``) and moved relative to it by more than ``moved_ratio`` times their distance since (see
    :func:`_moved`). Searched in boxes of doubling radius from ``min(start_radius, max_radius)``, the last one
    exactly ``max_radius``; deeper vertices report ``max_radius`` and face -1.
    """
    k = wp.tid()
    v = candidates[k]
    wv = welded[v]
    own = sheet[wv]
    p = points[v]
    p_rest = rest_points[v]
    p32 = wp.vec3(wp.float32(p[0]), wp.float32(p[1]), wp.float32(p[2]))
    depth_out[k] = max_radius
    face_out[k] = -1
    radius = wp.min(start_radius, max_radius)
    while radius > wp.float64(0.0):
        r32 = wp.float32(radius)
        query = wp.mesh_query_aabb(mesh_id, p32 - wp.vec3(r32, r32, r32), p32 + wp.vec3(r32, r32, r32))
        j = int(0)  # noqa: UP018, RUF046 (a dynamic Warp variable the query writes)
        best = wp.float64(1.0e300)
        best_face = int(-1)  # noqa: UP018, RUF046 (dynamic)
        while wp.mesh_query_aabb_next(query, j):
            if welded_tris[j, 0] == wv or welded_tris[j, 1] == wv or welded_tris[j, 2] == wv:
                continue
            b0 = points[tris[j, 0]]
            b1 = points[tris[j, 1]]
            b2 = points[tris[j, 2]]
            now = _behind(p, b0, b1, b2)
            if now[1] == wp.float64(0.0) or now[0] >= best:
                continue
            if sheet[welded_tris[j, 0]] == own or sheet[welded_tris[j, 1]] == own or sheet[welded_tris[j, 2]] == own:
                r0 = rest_points[tris[j, 0]]
                r1 = rest_points[tris[j, 1]]
                r2 = rest_points[tris[j, 2]]
                rest = _behind(p_rest, r0, r1, r2)
                if rest[1] != wp.float64(0.0) or rest[2] == wp.float64(0.0):
                    continue
                if _moved(p_rest, r0, r1, r2, p, b0, b1, b2) <= moved_ratio * now[0]:
                    continue
            best = now[0]
            best_face = j
        if best <= radius:
            depth_out[k] = best
            face_out[k] = best_face
            return
        if radius >= max_radius:
            return
        radius = wp.min(radius * wp.float64(2.0), max_radius)
