"""Warp kernels for forward kinematics and linear blend skinning (generic over float32/float64).

Index conventions: ``n`` is a pose (frame x batch, flattened), ``j`` a joint, ``v`` a vertex, ``k`` an influence.
"""

from __future__ import annotations

from typing import Any

import warp as wp


@wp.kernel
def fk_level_kernel(
    level_joints: wp.array[wp.int32],
    parents: wp.array[wp.int32],
    local_t: wp.array2d(dtype=Any),
    local_q: wp.array2d(dtype=Any),
    world_out: wp.array2d(dtype=Any),
):
    """World transform of every joint of one tree level: ``world[p] * (t, q)``. Launch dim (N, level size).

    Parents are written by the launch for the previous level; one launch per level keeps the adjoint exact
    (no loop-carried variables, see the Warp gradient trap in the field notes).
    """
    n, i = wp.tid()
    j = level_joints[i]
    p = parents[j]
    x = wp.transformation(local_t[n, j], local_q[n, j])
    if p >= 0:
        x = wp.transform_multiply(world_out[n, p], x)
    world_out[n, j] = x


@wp.kernel
def skin_kernel(
    world: wp.array2d(dtype=Any),
    joints: wp.array2d(dtype=wp.int32),
    weights: wp.array2d(dtype=Any),
    bind_points: wp.array2d(dtype=Any),
    bind_normals: wp.array2d(dtype=Any),
    points_out: wp.array2d(dtype=Any),
    normals_out: wp.array2d(dtype=Any),
):
    """LBS of points and normals. Launch dim (N, V).

    ``bind_points[v, k]`` is vertex ``v`` in the frame of its ``k``-th joint at bind time
    (``inverse_bind @ p``), so a skinning transform is just the joint's world rigid transform.
    """
    n, v = wp.tid()
    p = bind_points[v, 0] - bind_points[v, 0]
    u = p
    for k in range(joints.shape[1]):
        w = weights[v, k]
        x = world[n, joints[v, k]]
        p = p + w * wp.transform_point(x, bind_points[v, k])
        u = u + w * wp.quat_rotate(wp.transform_get_rotation(x), bind_normals[v, k])
    points_out[n, v] = p
    normals_out[n, v] = wp.normalize(u)


@wp.kernel
def skin_adjoint_kernel(
    world: wp.array2d(dtype=Any),
    joints: wp.array2d(dtype=wp.int32),
    weights: wp.array2d(dtype=Any),
    bind_points: wp.array2d(dtype=Any),
    bind_normals: wp.array2d(dtype=Any),
    adj_points: wp.array2d(dtype=Any),
    adj_normals: wp.array2d(dtype=Any),
    adj_rot_out: wp.array2d(dtype=Any),
    adj_trans_out: wp.array2d(dtype=Any),
):
    """Hand-written adjoint of :func:`skin_kernel` w.r.t. each joint's rotation matrix and translation.

    Accumulates ``dL/dR[n, j] += w (g_p b^T + g_u nb^T)`` and ``dL/dt[n, j] += w g_p``. Launch dim (N, V).
    """
    n, v = wp.tid()
    # recompute the unnormalized blended normal to differentiate the normalization
    u = bind_normals[v, 0] - bind_normals[v, 0]
    for k in range(joints.shape[1]):
        x = world[n, joints[v, k]]
        u = u + weights[v, k] * wp.quat_rotate(wp.transform_get_rotation(x), bind_normals[v, k])
    length = wp.length(u)
    gn = adj_normals[n, v]
    gu = gn - gn
    if length > type(length)(0.0):
        nrm = u / length
        gu = (gn - nrm * wp.dot(nrm, gn)) / length
    gp = adj_points[n, v]
    for k in range(joints.shape[1]):
        j = joints[v, k]
        w = weights[v, k]
        wp.atomic_add(adj_rot_out, n, j, w * (wp.outer(gp, bind_points[v, k]) + wp.outer(gu, bind_normals[v, k])))
        wp.atomic_add(adj_trans_out, n, j, w * gp)


@wp.kernel
def transform_to_rt_kernel(
    world: wp.array2d(dtype=Any),
    rot_out: wp.array2d(dtype=Any),
    trans_out: wp.array2d(dtype=Any),
):
    """Rotation matrix and translation of each transform; run in adjoint mode to map (dL/dR, dL/dt) to dL/dX."""
    n, j = wp.tid()
    x = world[n, j]
    rot_out[n, j] = wp.quat_to_matrix(wp.transform_get_rotation(x))
    trans_out[n, j] = wp.transform_get_translation(x)
