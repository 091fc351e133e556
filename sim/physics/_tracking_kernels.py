"""Warp kernels of the tracking loop: PD target playback, residual root assist, rollout costs. Never differentiated."""

from __future__ import annotations

import warp as wp

from .._collision_kernels import segment_closest_params

wp.set_module_options({"enable_backward": False})


BLOWN_COST = wp.constant(1.0e30)
"""Per-frame cost the cost kernels write for a world whose state is not finite (float32 sums stay comparable);
``CharacterSimulation.rollout`` reports a rollout cost at or above it as inf."""


@wp.kernel
def play_targets_kernel(
    step: wp.array[wp.int32],
    substeps: int,
    frame_count: int,
    table_q: wp.array3d[wp.float32],
    table_qd: wp.array3d[wp.float32],
    q_stride: int,
    q_offset: int,
    qd_stride: int,
    qd_offset: int,
    target_q_out: wp.array[wp.float32],
    target_qd_out: wp.array[wp.float32],
):
    """Writes the PD targets at the end of the current substep (linear between motion frames).

    ``table_q``/``table_qd``: (frame_count, world_count, coord_count); the substep ``s`` runs from frame
    ``s // substeps`` towards the next one.
    """
    w, c = wp.tid()
    s = step[0]
    f = s // substeps
    a = float(s - f * substeps + 1) / float(substeps)
    f0 = wp.min(f, frame_count - 1)
    f1 = wp.min(f + 1, frame_count - 1)
    target_q_out[w * q_stride + q_offset + c] = table_q[f0, w, c] * (1.0 - a) + table_q[f1, w, c] * a
    target_qd_out[w * qd_stride + qd_offset + c] = table_qd[f0, w, c] * (1.0 - a) + table_qd[f1, w, c] * a


@wp.kernel
def advance_step_kernel(step: wp.array[wp.int32]):
    step[0] = step[0] + 1


@wp.kernel
def root_assist_kernel(
    step: wp.array[wp.int32],
    substeps: int,
    frame_count: int,
    ref_pos: wp.array[wp.vec3],
    ref_rot: wp.array[wp.quat],
    ref_vel: wp.array[wp.vec3],
    ref_omega: wp.array[wp.vec3],
    body_q: wp.array[wp.transform],
    body_qd: wp.array[wp.spatial_vector],
    body_com: wp.array[wp.vec3],
    bodies_per_world: int,
    kp_lin: float,
    kd_lin: float,
    kp_rot: float,
    kd_rot: float,
    max_force: float,
    max_torque: float,
    body_f_out: wp.array[wp.spatial_vector],
    force_sum_out: wp.array[wp.float32],
    force_max_out: wp.array[wp.float32],
):
    """Residual root wrench (PD towards the reference root frame), clamped; accumulates what it applied per world."""
    w = wp.tid()
    s = step[0]
    f = wp.min(s // substeps + 1, frame_count - 1)
    b = w * bodies_per_world
    X = body_q[b]
    p = wp.transform_get_translation(X)
    q = wp.transform_get_rotation(X)
    om = wp.spatial_bottom(body_qd[b])
    com_w = wp.transform_point(X, body_com[b])
    # body_qd's linear part is the centre of mass's velocity; ref_vel is the root origin's (d ref_pos / dt)
    v = wp.spatial_top(body_qd[b]) + wp.cross(om, p - com_w)
    force = kp_lin * (ref_pos[f] - p) + kd_lin * (ref_vel[f] - v)
    fn = wp.length(force)
    if fn > max_force:
        force = force * (max_force / fn)
        fn = max_force
    dq = ref_rot[f] * wp.quat_inverse(q)
    if dq[3] < 0.0:
        dq = -dq
    axis = wp.vec3(0.0)
    angle = wp.float32(0.0)
    wp.quat_to_axis_angle(dq, axis, angle)
    torque = kp_rot * axis * angle + kd_rot * (ref_omega[f] - om)
    tn = wp.length(torque)
    if tn > max_torque:
        torque = torque * (max_torque / tn)
    # the force acts at the body origin: move it to the centre of mass (torque of the offset)
    torque = torque + wp.cross(p - com_w, force)
    body_f_out[b] = body_f_out[b] + wp.spatial_vector(force, torque)
    force_sum_out[w] = force_sum_out[w] + fn
    force_max_out[w] = wp.max(force_max_out[w], fn)


@wp.kernel
def rollout_cost_kernel(
    step: wp.array[wp.int32],
    substeps: int,
    frame_count: int,
    body_q: wp.array[wp.transform],
    body_qd: wp.array[wp.spatial_vector],
    ref_pos: wp.array2d[wp.vec3],
    ref_rot: wp.array2d[wp.quat],
    ref_vel: wp.array2d[wp.vec3],
    bodies_per_world: int,
    inv_height: float,
    position_weight: float,
    root_weight: float,
    rotation_weight: float,
    velocity_weight: float,
    seg_a: wp.array[wp.vec3],
    seg_b: wp.array[wp.vec3],
    radius: wp.array[wp.float32],
    body_com: wp.array[wp.vec3],
    support: wp.array[wp.int32],
    contact_band: float,
    skate_weight: float,
    cost_out: wp.array[wp.float32],
):
    """Adds one frame's tracking cost per world (called after the frame's last substep).

    ``ref_*``: (frame_count, bodies_per_world); errors in character heights (positions, velocities) and radians.
    Foot skate: a support body (``support[k] != 0``) whose capsule (body-frame segment ``seg_a``-``seg_b``,
    ``radius``) comes within ``contact_band`` of the ground adds ``skate_weight x |v_xy|^2`` of its lowest point
    (in heights per second).
    """
    w = wp.tid()
    f = wp.min(step[0] // substeps, frame_count - 1)
    c = wp.float32(0.0)
    for k in range(bodies_per_world):
        X = body_q[w * bodies_per_world + k]
        dp = (wp.transform_get_translation(X) - ref_pos[f, k]) * inv_height
        e = position_weight * wp.dot(dp, dp)
        if k == 0:
            e = e * (1.0 + root_weight)
        dq = wp.transform_get_rotation(X) * wp.quat_inverse(ref_rot[f, k])
        cw = wp.min(wp.abs(dq[3]), 1.0)
        ang = 2.0 * wp.acos(cw)
        twist = body_qd[w * bodies_per_world + k]
        dv = (wp.spatial_top(twist) - ref_vel[f, k]) * inv_height
        c += e + rotation_weight * ang * ang + velocity_weight * wp.dot(dv, dv)
        if support[k] != 0:
            pa = wp.transform_point(X, seg_a[k])
            pb = wp.transform_point(X, seg_b[k])
            low = pa
            if pb[2] < pa[2]:
                low = pb
            if low[2] - radius[k] < contact_band:
                com = wp.transform_point(X, body_com[k])
                v = wp.spatial_top(twist) + wp.cross(wp.spatial_bottom(twist), low - com)
                vxy = wp.vec3(v[0], v[1], 0.0) * inv_height
                c += skate_weight * wp.dot(vxy, vxy)
    if not wp.isfinite(c):
        c = BLOWN_COST
    cost_out[w] = cost_out[w] + c


@wp.kernel
def self_penetration_cost_kernel(
    step: wp.array[wp.int32],
    substeps: int,
    frame_count: int,
    body_q: wp.array[wp.transform],
    bodies_per_world: int,
    inv_height: float,
    seg_a: wp.array[wp.vec3],
    seg_b: wp.array[wp.vec3],
    radius: wp.array[wp.float32],
    pairs: wp.array2d[wp.int32],
    allowance: wp.array2d[wp.float32],
    weight: float,
    cost_out: wp.array[wp.float32],
):
    """Adds one frame's self-penetration cost per world: for each body pair the simulation does not collide
    (``pairs`` (P, 2), world-local body indices), ``weight x (excess / height)^2`` of its capsule overlap beyond
    ``allowance[f, p]`` [m] (the pair's overlap allowed at frame ``f``). One thread per world, pairs in order
    (deterministic sums)."""
    w = wp.tid()
    f = wp.min(step[0] // substeps, frame_count - 1)
    c = wp.float32(0.0)
    for p in range(pairs.shape[0]):
        i = pairs[p, 0]
        j = pairs[p, 1]
        Xi = body_q[w * bodies_per_world + i]
        Xj = body_q[w * bodies_per_world + j]
        pa = wp.vec3d(wp.transform_point(Xi, seg_a[i]))
        pb = wp.vec3d(wp.transform_point(Xi, seg_b[i]))
        qa = wp.vec3d(wp.transform_point(Xj, seg_a[j]))
        qb = wp.vec3d(wp.transform_point(Xj, seg_b[j]))
        st = segment_closest_params(pa, pb, qa, qb)
        d = wp.length((pa + st[0] * (pb - pa)) - (qa + st[1] * (qb - qa)))
        excess = (radius[i] + radius[j] - wp.float32(d) - allowance[f, p]) * inv_height
        if excess > 0.0:
            c += weight * excess * excess
    if not wp.isfinite(c):
        c = BLOWN_COST
    cost_out[w] = cost_out[w] + c
