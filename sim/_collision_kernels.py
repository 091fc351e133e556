"""Warp kernels for differentiable contact penalties: ground penetration of points, capsule-capsule overlap.

All kernels are float64 (the public API converts); inputs come before outputs; penalties are summed per frame
with atomics (differentiable in Warp). Index conventions: ``f`` a frame, ``v`` a point, ``k`` a capsule pair.
"""

from __future__ import annotations

import warp as wp

DISTANCE_EPS = wp.constant(wp.float64(1.0e-18))
"""Added (squared) inside the segment distance's square root so its gradient stays finite at zero distance."""


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
    if denom > eps:
        s = wp.clamp((b * f - c * e) / denom, zero, one)
    t = (b * s + f) / e
    if t < zero:
        t = zero
        s = wp.clamp(-c / a, zero, one)
    elif t > one:
        t = one
        s = wp.clamp((b - c) / a, zero, one)
    return wp.vec2d(s, t)


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
    dist = wp.sqrt(wp.dot(delta, delta) + DISTANCE_EPS)
    pen = radii[i] + radii[j] - dist
    if pen > wp.float64(0.0) or wp.isnan(pen):  # NaN input: a NaN penalty, not 0
        depth_out[f, k] = pen
        wp.atomic_add(penalty_out, f, pen * pen)
