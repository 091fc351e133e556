"""Warp kernels of the soft mesh rasterizer (float32).

The rasterizer works on a list of (image, triangle, tile) *pairs* produced by binning (see
:mod:`distill.rasterizer`): one thread per pair and pixel of the tile. Every thread evaluates one triangle at one
pixel and atomically adds its contribution to per-pixel accumulators, so there are no loops over triangles and
Warp's generated adjoints are exact (the adjoint of an atomic add is a read of the accumulator's gradient). A first
pass without gradient (:func:`shift_kernel`) finds each pixel's softmax shift and the contributing threads; the
second (:func:`accumulate_kernel`) accumulates.

Per pixel ``p`` and triangle ``j`` (screen coordinates in pixels, ``zeta`` = normalized inverse depth, larger is
closer; ``d`` the distance from ``p`` to the triangle's boundary, ``delta`` the edge offset)::

    x_j   = min(x_max, +d^2 / sigma + delta)   if p is inside j,   -d^2 / sigma + delta   otherwise
    D_j   = f_j taper(x_j) sigmoid(x_j)                                  soft coverage
    e_j   = f_j taper(x_j) exp((zeta_j(p) - zshift(p)) / gamma - softplus(-x_j))   depth softmax (= D_j exp(...))
    S     = sum_j e_j,   C = sum_j e_j c_j(p),   Z = sum_j e_j zeta_j(p),   L = sum_j log(1 - D_j)

This is SoftRas (Liu et al. 2019) with two changes that keep the image a continuous function of the vertices:

* ``delta`` shifts the sigmoid so that coverage on a triangle's own edge is ``sigmoid(delta)`` (0.95 for 3), not
  0.5: the union ``1 - prod(1 - D)`` of two triangles sharing an interior edge is then ~0.998 instead of 0.75, so a
  closed surface renders without its wireframe (silhouettes grow by ``sqrt(delta sigma)`` pixels);
* ``f_j`` in [0, 1], the triangle's facing weight (a smooth function of its screen vertices computed by the caller),
  fades a triangle out as it turns edge-on instead of popping it when back-face culling drops it; ``taper`` rises
  smoothly from 0 at the cutoff logit ``-x_cut`` to 1 at ``-(1 - TAPER) x_cut`` so contributions fade in instead of
  popping at the cutoff (the depth softmax would amplify the pop of a triangle in front).

``zshift`` is a per-pixel log-sum-exp shift, found by a first pass (:func:`shift_kernel`, no gradient) over the same
pairs: the largest ``zeta_j(p) + gamma (log(f_j taper(x_j)) - softplus(-x_j))`` of the pixel's contributions, i.e.
the log-weight of its largest softmax term in units of ``zeta``. The softmax (``C / S``, ``Z / S``) is invariant to
the shift, so it carries no gradient; with it the largest term of every covered pixel is 1 (to float32 round-off of
``zeta / gamma``, see :data:`distill.rasterizer.MIN_GAMMA`), so ``S >= ~1`` and no term the pixel depends on
underflows, for any valid ``gamma`` and whatever the depth range of the other surfaces (a per-tile shift let a far
surface next to a near one underflow to 0, and ``C / S`` overflow in the backward pass). ``zeta`` outside [0, 1] (a
vertex inside the near plane, or beyond the far plane) needs no clamp for the same reason. The first pass also
records which (pair, pixel) threads contribute; the second pass (:func:`accumulate_kernel`, and its adjoint) runs
on exactly those (about a quarter of them for a character), not on every pair and tile pixel.
"""

from __future__ import annotations

import warp as wp

X_MAX = wp.constant(30.0)
"""Cap on the inside logit ``x`` (coverage 1 - 1e-13): deep interior pixels carry no geometric gradient."""

TAPER = wp.constant(0.3)
"""Fraction of the cutoff logit over which contributions fade in."""


@wp.func
def _cross2(a: wp.vec2, b: wp.vec2) -> float:
    return a[0] * b[1] - a[1] * b[0]


@wp.func
def _segment_dist2(p: wp.vec2, a: wp.vec2, b: wp.vec2) -> float:
    """Squared distance [px^2] from ``p`` to the segment ``ab``."""
    ab = b - a
    t = wp.clamp(wp.dot(p - a, ab) / wp.max(wp.dot(ab, ab), 1.0e-12), 0.0, 1.0)
    d = p - (a + t * ab)
    return wp.dot(d, d)


@wp.func
def _softplus(x: float) -> float:
    return wp.max(x, 0.0) + wp.log(1.0 + wp.exp(-wp.abs(x)))


@wp.func
def _taper(x: float, x_cut: float) -> float:
    """Smoothstep from 0 at ``x = -x_cut`` to 1 at ``x = -(1 - TAPER) x_cut``."""
    t = wp.clamp((x + x_cut) / (TAPER * x_cut), 0.0, 1.0)
    return t * t * (3.0 - 2.0 * t)


@wp.func
def _logit(p: wp.vec2, a: wp.vec2, b: wp.vec2, c: wp.vec2, inv_sigma: float, offset: float) -> wp.vec4:
    """Coverage logit ``x`` and clamped, renormalized barycentrics ``(x, wa, wb, wc)`` of pixel ``p``."""
    area = _cross2(b - a, c - a)
    # the caller drops degenerate triangles; this keeps a round-off area from dividing by zero all the same
    if area >= 0.0:
        area = wp.max(area, 1.0e-12)
    else:
        area = wp.min(area, -1.0e-12)
    wa = _cross2(c - b, p - b) / area
    wb = _cross2(a - c, p - c) / area
    wc = _cross2(b - a, p - a) / area
    d2 = wp.min(wp.min(_segment_dist2(p, a, b), _segment_dist2(p, b, c)), _segment_dist2(p, c, a))
    x = 0.0
    if wa >= 0.0 and wb >= 0.0 and wc >= 0.0:
        x = wp.min(d2 * inv_sigma + offset, X_MAX)
    else:
        x = offset - d2 * inv_sigma
    ca = wp.max(wa, 0.0)
    cb = wp.max(wb, 0.0)
    cc = wp.max(wc, 0.0)
    total = ca + cb + cc
    return wp.vec4(x, ca / total, cb / total, cc / total)


@wp.func
def _near(p: wp.vec2, a: wp.vec3, b: wp.vec3, c: wp.vec3, reach: float) -> bool:
    """Whether ``p`` lies in the triangle's screen box dilated by ``reach`` [px] (cheap early rejection)."""
    return (
        p[0] >= wp.min(wp.min(a[0], b[0]), c[0]) - reach
        and p[0] <= wp.max(wp.max(a[0], b[0]), c[0]) + reach
        and p[1] >= wp.min(wp.min(a[1], b[1]), c[1]) - reach
        and p[1] <= wp.max(wp.max(a[1], b[1]), c[1]) + reach
    )


@wp.func
def _pixel(
    pair_image: wp.array[wp.int32],
    pair_tile: wp.array[wp.int32],
    i: int,
    k: int,
    tile_size: int,
    tiles_x: int,
) -> wp.vec2i:
    tile = pair_tile[i]
    ty = tile // tiles_x
    tx = tile - ty * tiles_x
    ky = k // tile_size
    return wp.vec2i(tx * tile_size + (k - ky * tile_size), ty * tile_size + ky)


@wp.kernel
def shift_kernel(
    pair_image: wp.array[wp.int32],
    pair_tri: wp.array[wp.int32],
    pair_tile: wp.array[wp.int32],
    verts: wp.array2d(dtype=wp.vec3),
    tri_weight: wp.array2d(dtype=float),
    tris: wp.array2d(dtype=wp.int32),
    inv_sigma: float,
    offset: float,
    gamma: float,
    x_cut: float,
    reach: float,
    tile_size: int,
    tiles_x: int,
    zshift_out: wp.array3d(dtype=float),
    contributes_out: wp.array2d(dtype=wp.uint8),
):
    """First pass (no gradient): the per-pixel softmax shift and which threads contribute.

    Launch dim (pairs, tile_size^2). ``zshift_out`` (N, H, W) must start below every candidate (e.g. -1e30); it
    receives the atomic max of ``zeta + gamma (log f - softplus(-x))`` [normalized inverse depth]; ``contributes_out``
    (pairs, tile_size^2) must start at 0 and is set to 1 where the thread adds a contribution.
    """
    i, k = wp.tid()
    px = _pixel(pair_image, pair_tile, i, k, tile_size, tiles_x)
    if px[0] < zshift_out.shape[2] and px[1] < zshift_out.shape[1]:
        n = pair_image[i]
        t = pair_tri[i]
        va = verts[n, tris[t, 0]]
        vb = verts[n, tris[t, 1]]
        vc = verts[n, tris[t, 2]]
        p = wp.vec2(float(px[0]) + 0.5, float(px[1]) + 0.5)
        if _near(p, va, vb, vc, reach):
            g = _logit(p, wp.vec2(va[0], va[1]), wp.vec2(vb[0], vb[1]), wp.vec2(vc[0], vc[1]), inv_sigma, offset)
            x = g[0]
            if x > -x_cut:
                zeta = g[1] * va[2] + g[2] * vb[2] + g[3] * vc[2]
                f = tri_weight[n, t] * _taper(x, x_cut)
                log_w = wp.log(wp.max(f, 1.0e-30)) - _softplus(-x)
                wp.atomic_max(zshift_out, n, px[1], px[0], zeta + gamma * log_w)
                contributes_out[i, k] = wp.uint8(1)


@wp.kernel
def accumulate_kernel(
    pair_image: wp.array[wp.int32],
    pair_tri: wp.array[wp.int32],
    pair_tile: wp.array[wp.int32],
    verts: wp.array2d(dtype=wp.vec3),
    colors: wp.array2d(dtype=wp.vec3),
    tri_weight: wp.array2d(dtype=float),
    tris: wp.array2d(dtype=wp.int32),
    zshift: wp.array3d(dtype=float),
    active: wp.array[wp.int32],
    inv_sigma: float,
    offset: float,
    inv_gamma: float,
    x_cut: float,
    tile_size: int,
    tiles_x: int,
    weight_out: wp.array3d(dtype=float),
    color_out: wp.array3d(dtype=wp.vec3),
    depth_out: wp.array3d(dtype=float),
    log_transmittance_out: wp.array3d(dtype=float),
):
    """Adds one triangle's softmax weight, weighted colour and depth, and ``log(1 - D)`` to its pixel.

    Launch dim (active count,): one thread per entry of ``active``, the (pair, tile pixel) threads
    ``pair * tile_size^2 + pixel`` that :func:`shift_kernel` marked on the same pairs, so the shift of every pixel
    written here is finite and at least the thread's own log-weight (to round-off). Differentiable w.r.t. ``verts``
    (x [px], y [px], zeta), ``colors`` and ``tri_weight`` (f); ``zshift`` carries no gradient (the softmax is shift
    invariant).
    """
    thread = active[wp.tid()]
    i = thread // (tile_size * tile_size)
    px = _pixel(pair_image, pair_tile, i, thread - i * (tile_size * tile_size), tile_size, tiles_x)
    n = pair_image[i]
    t = pair_tri[i]
    ia = tris[t, 0]
    ib = tris[t, 1]
    ic = tris[t, 2]
    va = verts[n, ia]
    vb = verts[n, ib]
    vc = verts[n, ic]
    p = wp.vec2(float(px[0]) + 0.5, float(px[1]) + 0.5)
    g = _logit(p, wp.vec2(va[0], va[1]), wp.vec2(vb[0], vb[1]), wp.vec2(vc[0], vc[1]), inv_sigma, offset)
    x = g[0]
    zeta = g[1] * va[2] + g[2] * vb[2] + g[3] * vc[2]
    col = g[1] * colors[n, ia] + g[2] * colors[n, ib] + g[3] * colors[n, ic]
    f = tri_weight[n, t] * _taper(x, x_cut)
    # sigmoid(x) = exp(-softplus(-x)); 1 - f sigmoid(x) = (1 - f) + f exp(-softplus(x))
    e = f * wp.exp((zeta - zshift[n, px[1], px[0]]) * inv_gamma - _softplus(-x))
    uncovered = (1.0 - f) + f * wp.exp(-_softplus(x))
    wp.atomic_add(weight_out, n, px[1], px[0], e)
    wp.atomic_add(color_out, n, px[1], px[0], e * col)
    wp.atomic_add(depth_out, n, px[1], px[0], e * zeta)
    wp.atomic_add(log_transmittance_out, n, px[1], px[0], wp.log(wp.max(uncovered, 1.0e-30)))
