"""Warp kernels of the pose validators (generic over float32/float64, differentiated by ``wp.Tape``).

Index conventions: ``n`` a pose, ``j`` a joint, ``b`` a blend pair. (Sphere overlaps use
:func:`sim.collision.capsule_penetration_penalty`: a sphere is a capsule whose segment ends coincide.)
"""

from __future__ import annotations

from typing import Any

import warp as wp


@wp.kernel
def joint_limit_kernel(
    d: wp.array2d(dtype=Any),
    plane_normals: wp.array(dtype=Any),
    swing_support: wp.array2d(dtype=Any),
    twist_lo: wp.array(dtype=Any),
    twist_hi: wp.array(dtype=Any),
    weight: wp.array(dtype=Any),
    swing_out: wp.array3d(dtype=Any),
    twist_out: wp.array2d(dtype=Any),
):
    """Signed swing beyond each limit half-plane and signed twist beyond its range [rad]. Launch dim (N, J).

    ``d[n, j]`` is a canonical pose quaternion (bone along local x). It splits as ``swing * twist`` (twist about
    x); the swing's rotation vector ``s = (s_y, s_z)`` must lie in the convex polygon
    ``{s : n_k . s <= swing_support[j, k]}`` (``n_k = plane_normals[k]``, 2D unit vectors). Outputs
    ``weight * (n_k . s - support)`` per plane (positive outside) and ``weight * max(twist - twist_hi,
    twist_lo - twist)`` (positive outside the range, negative inside).

    A half-turn swing (``q_x = q_w = 0``, the bone reversed) has no twist: below ``q_x^2 + q_w^2 = 1e-12`` the
    twist is identity, as in :func:`posespace._rotations.swing_twist_x`, so the swing reads pi with a finite
    gradient. A non-finite quaternion gives NaN outputs (``wp.normalize`` would read it as the rest pose).
    """
    n, j = wp.tid()
    dq = d[n, j]
    q = wp.normalize(dq)
    zero = q[3] - q[3]
    one = zero + type(zero)(1.0)
    two = one + one
    eps = type(zero)(1.0e-12)
    # 0 for a finite quaternion, NaN otherwise (NaN * 0 and inf * 0 are NaN)
    poison = zero * (dq[0] + dq[1] + dq[2] + dq[3])
    if q[3] < zero:
        q = -q
    tn2 = q[0] * q[0] + q[3] * q[3]
    twist = zero
    tx = zero
    tw = one
    if tn2 > eps:
        tn = wp.sqrt(tn2 + eps)
        twist = two * wp.atan2(q[0], q[3])
        tx = q[0] / tn
        tw = q[3] / tn
    # s = q * conj(t), t = (tx, 0, 0, tw): only the y, z and w parts are needed
    sy = tw * q[1] - tx * q[2]
    sz = tw * q[2] + tx * q[1]
    sw = tw * q[3] + tx * q[0]
    vn = wp.sqrt(sy * sy + sz * sz + eps)
    k = two * wp.atan2(vn, sw) / vn
    w = weight[j]
    for p in range(plane_normals.shape[0]):
        nrm = plane_normals[p]
        swing_out[n, j, p] = w * (k * (nrm[0] * sy + nrm[1] * sz) - swing_support[j, p]) + poison
    twist_out[n, j] = w * wp.max(twist - twist_hi[j], twist_lo[j] - twist) + poison


@wp.kernel
def twist_collapse_kernel(
    world: wp.array2d(dtype=Any),
    bind_rot_inv: wp.array(dtype=Any),
    pairs: wp.array2d(dtype=wp.int32),
    pair_weights: wp.array2d(dtype=Any),
    axes: wp.array(dtype=Any),
    ratio_out: wp.array2d(dtype=Any),
):
    """Linear-blend-skinning thickness ratio of each blend pair under its relative twist. Launch dim (N, B).

    The two joints' rotations since bind, ``R_a = rot(world_a) bind_a^-1`` and ``R_c``, give the relative
    rotation ``M = R_a^-1 R_c`` (bind-pose world coordinates); its twist ``theta`` about the pair's bone axis
    shrinks a vertex blended ``w_a : w_c`` to ``|w_a + w_c e^{i theta}|`` of its distance to the bone.
    """
    n, b = wp.tid()
    ja = pairs[b, 0]
    jc = pairs[b, 1]
    ra = wp.transform_get_rotation(world[n, ja]) * bind_rot_inv[ja]
    rc = wp.transform_get_rotation(world[n, jc]) * bind_rot_inv[jc]
    m = wp.quat_inverse(ra) * rc
    ax = axes[b]
    s = m[0] * ax[0] + m[1] * ax[1] + m[2] * ax[2]
    zero = s - s
    mw = m[3]
    if mw < zero:
        s = -s
        mw = -mw
    theta = (zero + type(zero)(2.0)) * wp.atan2(s, mw)
    wa = pair_weights[b, 0]
    wc = pair_weights[b, 1]
    r2 = wa * wa + wc * wc + (zero + type(zero)(2.0)) * wa * wc * wp.cos(theta)
    ratio_out[n, b] = wp.sqrt(wp.max(r2, zero) + type(zero)(1.0e-12)) / (wa + wc)
