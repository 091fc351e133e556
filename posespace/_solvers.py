"""Batched damped-least-squares inverse kinematics on local joint rotations (NumPy)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["damped_least_squares_ik"]


def _fk_numpy(parents: np.ndarray, local_t: np.ndarray, local_q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """World positions (B, J, 3) and rotations (B, J, 4) by a loop over joints (parents-first)."""
    from sim.rotations import quat_multiply, quat_rotate

    B, J = local_q.shape[:2]
    pos = np.zeros((B, J, 3))
    rot = np.zeros((B, J, 4))
    for j in range(J):
        p = parents[j]
        if p < 0:
            pos[:, j], rot[:, j] = local_t[:, j], local_q[:, j]
        else:
            pos[:, j] = pos[:, p] + quat_rotate(rot[:, p], local_t[:, j])
            rot[:, j] = quat_multiply(rot[:, p], local_q[:, j])
    return pos, rot


def damped_least_squares_ik(
    rig,
    local_q: np.ndarray,
    active: np.ndarray,
    effectors: Sequence[int],
    targets: np.ndarray,
    iters: int,
    damping: float,
    root_translation: np.ndarray | None = None,
) -> np.ndarray:
    """Damped least-squares IK on local joint rotations (the classic Jacobian-transpose-with-damping solve).

    The Jacobian of effector ``e`` w.r.t. a world-frame rotation increment ``w_j`` at an ancestor ``j`` is
    ``-[p_e - p_j]_x``; the step ``(J^T J + lambda^2 I)^-1 J^T r`` is applied as ``W_j <- exp(w_j) W_j``,
    i.e. ``local_j <- (W_parent^-1 exp(w_j) W_parent) local_j``. The root may only tilt (no rotation about up:
    poses have no heading). Per pose, ``lambda`` starts at ``damping`` and follows Levenberg's rule: a step
    that lowers the error is taken and ``lambda`` shrinks, otherwise the step is dropped and ``lambda`` grows.

    Args:
        rig: the rig (parents, rest translations).
        local_q: local joint rotations [quat xyzw], shape (B, J, 4).
        active: joints that may rotate, shape (J,), bool.
        effectors: joint indices with targets (H of them).
        targets: effector targets in skeleton space [m], shape (B, H, 3).
        iters: iterations.
        damping: initial damping [m] (in the units of the residual: larger is slower and steadier).
        root_translation: root positions [m], shape (B, 3) or (3,); the rest position when None.

    Returns:
        Local rotations, shape (B, J, 4).
    """
    from sim.rotations import axis_angle_to_quat, quat_conjugate, quat_multiply, quat_normalize

    q = np.array(local_q, dtype=np.float64)
    B, J = q.shape[:2]
    eff = np.asarray(effectors)
    parents = np.asarray(rig.parents)
    t = np.broadcast_to(rig.rest_translations, (B, J, 3)).copy()
    if root_translation is not None:
        t[:, 0] = np.broadcast_to(root_translation, (B, 3))
    cols = np.flatnonzero(active)
    anc = np.zeros((len(eff), len(cols)), dtype=bool)  # column joint is a strict ancestor of the effector
    for i, e in enumerate(eff):
        k = parents[e]
        while k >= 0:
            anc[i, np.searchsorted(cols, k)] = active[k]
            k = parents[k]
    root_col = np.searchsorted(cols, 0)

    def residual(qq):
        pos, rot = _fk_numpy(parents, t, qq)
        return pos, rot, targets - pos[:, eff]

    pos, rot, r = residual(q)
    cost = (r**2).sum(axis=(1, 2))
    lam = np.full(B, float(damping))
    eye = np.eye(3 * len(cols))
    for _ in range(iters):
        # J[b, 3h + a, 3c + k] = (e_k x (p_e - p_j))_a for ancestor j = cols[c]
        lever = pos[:, eff][:, :, None, :] - pos[:, cols][:, None, :, :]  # (B, H, C, 3)
        jac = np.zeros((B, len(eff), 3, len(cols), 3))
        for k in range(3):
            e = np.zeros(3)
            e[k] = 1.0
            jac[:, :, :, :, k] = np.cross(e, lever).transpose(0, 1, 3, 2)  # d p_e[a] / d w_j[k]
        jac = jac * anc[None, :, None, :, None]
        jac[:, :, :, root_col, 2] = 0.0  # the root only tilts
        jm = jac.reshape(B, 3 * len(eff), 3 * len(cols))
        a = np.einsum("bmi,bmj->bij", jm, jm) + (lam**2)[:, None, None] * eye
        g = np.einsum("bmi,bm->bi", jm, r.reshape(B, -1))
        w = np.linalg.solve(a, g[..., None])[..., 0].reshape(B, len(cols), 3)
        inc = axis_angle_to_quat(w)  # world-frame increments
        par = parents[cols]
        wp = np.where((par >= 0)[None, :, None], rot[:, np.maximum(par, 0)], np.array([0.0, 0.0, 0.0, 1.0]))
        local_inc = quat_multiply(quat_multiply(quat_conjugate(wp), inc), wp)
        trial = q.copy()
        trial[:, cols] = quat_normalize(quat_multiply(local_inc, q[:, cols]))
        tpos, trot, tr = residual(trial)
        tcost = (tr**2).sum(axis=(1, 2))
        ok = tcost < cost
        # Levenberg's rule per pose: accept and trust the linearization more, or reject and damp harder
        q[ok], pos[ok], rot[ok], r[ok], cost[ok] = trial[ok], tpos[ok], trot[ok], tr[ok], tcost[ok]
        lam = np.where(ok, np.maximum(lam * 0.3, 1e-3 * damping), lam * 4.0)
    best_q = q
    return best_q
