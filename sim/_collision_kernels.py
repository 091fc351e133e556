"""Warp kernels for differentiable contact penalties: ground penetration of points, capsule-capsule overlap.

All kernels are float64 (the public API converts); inputs come before outputs; penalties are summed per frame
with atomics (differentiable in Warp). Index conventions: ``f`` a frame, ``v`` a point, ``k`` a capsule pair.
"""

from __future__ import annotations

import warp as wp

DISTANCE_EPS = wp.constant(wp.float64(1.0e-18))
"""Squared segment distance [m^2] below which the closest points count as coincident: the distance is then measured
along a fixed normal of the segments (:func:`contact_normal`), so its gradient is a unit vector instead of the
``delta / |delta|`` that is undefined (and was 0 with a regularized square root) where two capsules' axes meet:
the deepest overlap a pose can have got no gradient to undo it."""

PARALLEL_EPS = wp.constant(wp.float64(1.0e-12))
"""Relative threshold on ``|d1 x d2|^2 / (|d1|^2 |d2|^2)`` (sin^2 of the angle) below which two segments are
treated as parallel. An absolute threshold [m^4] treated every pair of sub-millimetre segments as parallel."""


@wp.func
def segment_closest_params(p0: wp.vec3d, p1: wp.vec3d, q0: wp.vec3d, q1: wp.vec3d) -> wp.vec2d:
    """Parameters (s, t) in [0, 1]^2 of the closest points of segments [p0, p1] and [q0, q1] (clamped solution)."""
    zero = wp.float64(0.0)
    one = wp.float64(1.0)
    eps = wp.float64(1.0e-14)
    d1 = p1 - p0
    d2 = q1 - q0
    r = p0 - q0
    a = wp.dot(d1, d1)
    e = wp.dot(d2, d2)
    f = wp.dot(d2, r)
    s = zero
    t = zero
    if a <= eps and e <= eps:
        return wp.vec2d(zero, zero)
    if a <= eps:
        t = wp.clamp(f / e, zero, one)
        return wp.vec2d(zero, t)
    c = wp.dot(d1, r)
    if e <= eps:
        s = wp.clamp(-c / a, zero, one)
        return wp.vec2d(s, zero)
    b = wp.dot(d1, d2)
    denom = a * e - b * b
    if denom > PARALLEL_EPS * a * e:
        s = wp.clamp((b * f - c * e) / denom, zero, one)
    t = (b * s + f) / e
    if t < zero:
        t = zero
        s = wp.clamp(-c / a, zero, one)
    elif t > one:
        t = one
        s = wp.clamp((b - c) / a, zero, one)
    return wp.vec2d(s, t)


@wp.func
def contact_normal(p0: wp.vec3d, p1: wp.vec3d, q0: wp.vec3d, q1: wp.vec3d) -> wp.vec3d:
    """A unit vector normal to both segments (to the first one when they are parallel; +Z for two points)."""
    d1 = p1 - p0
    d2 = q1 - q0
    n = wp.cross(d1, d2)
    if wp.dot(n, n) <= PARALLEL_EPS * wp.dot(d1, d1) * wp.dot(d2, d2):  # parallel, or a point (|n| = 0)
        d = d1
        if wp.dot(d, d) == wp.float64(0.0):
            d = d2
        if wp.dot(d, d) == wp.float64(0.0):
            return wp.vec3d(wp.float64(0.0), wp.float64(0.0), wp.float64(1.0))
        axis = wp.vec3d(wp.float64(1.0), wp.float64(0.0), wp.float64(0.0))
        if wp.abs(d[0]) > wp.abs(d[1]):
            axis = wp.vec3d(wp.float64(0.0), wp.float64(1.0), wp.float64(0.0))
        n = wp.cross(d, axis)
    return n / wp.sqrt(wp.dot(n, n))


@wp.kernel
def ground_penetration_kernel(
    points: wp.array2d[wp.vec3d],
    ground_height: wp.float64,
    depth_out: wp.array2d[wp.float64],
    penalty_out: wp.array[wp.float64],
):
    """Depth below the ground ``max(0, h - z)`` per point, and the per-frame penalty ``sum depth^2`` (NaN where a
    point is NaN)."""
    f, v = wp.tid()
    d = ground_height - points[f, v][2]
    if d > wp.float64(0.0) or wp.isnan(d):  # a NaN point makes a NaN penalty (a diverged optimization shows)
        depth_out[f, v] = d
        wp.atomic_add(penalty_out, f, d * d)


@wp.kernel
def capsule_penetration_kernel(
    seg_a: wp.array2d[wp.vec3d],
    seg_b: wp.array2d[wp.vec3d],
    radii: wp.array[wp.float64],
    pairs: wp.array2d[wp.int32],
    depth_out: wp.array2d[wp.float64],
    penalty_out: wp.array[wp.float64],
):
    """Overlap ``max(0, r_i + r_j - dist(segment_i, segment_j))`` per frame and capsule pair, and the per-frame
    penalty ``sum overlap^2``. Segments are (seg_a[f, i], seg_b[f, i])."""
    f, k = wp.tid()
    i = pairs[k, 0]
    j = pairs[k, 1]
    p0 = seg_a[f, i]
    p1 = seg_b[f, i]
    q0 = seg_a[f, j]
    q1 = seg_b[f, j]
    st = segment_closest_params(p0, p1, q0, q1)
    cp = p0 + (p1 - p0) * st[0]
    cq = q0 + (q1 - q0) * st[1]
    delta = cp - cq
    dd = wp.dot(delta, delta)
    dist = wp.float64(0.0)
    if dd > DISTANCE_EPS:
        dist = wp.sqrt(dd)
    else:  # coincident closest points: the distance along a fixed normal (value within 1e-9 m, gradient a unit vector)
        dist = wp.dot(delta, contact_normal(p0, p1, q0, q1))
    pen = radii[i] + radii[j] - dist
    if pen > wp.float64(0.0) or wp.isnan(pen):  # NaN input: a NaN penalty, not 0
        depth_out[f, k] = pen
        wp.atomic_add(penalty_out, f, pen * pen)
