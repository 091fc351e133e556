"""Batched damped-least-squares inverse kinematics on local joint rotations (NumPy), optionally constrained by a
differentiable penalty (the pose validators)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["damped_least_squares_ik"]

Penalty = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
"""``penalty(local_q (B, J, 4)) -> (loss (B,), d loss / d local_q (B, J, 4))``."""


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


def _parent_rotations(rot: np.ndarray, parents: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """World rotations (B, C, 4) of the parents of joints ``cols`` (identity for the root)."""
    par = parents[cols]
    return np.where((par >= 0)[None, :, None], rot[:, np.maximum(par, 0)], np.array([0.0, 0.0, 0.0, 1.0]))


def increment_gradient(local_q: np.ndarray, rot: np.ndarray, parents: np.ndarray, cols: np.ndarray,
                       grad_q: np.ndarray) -> np.ndarray:  # fmt: skip
    """Gradient w.r.t. world-frame rotation increments ``w_j`` at joints ``cols`` from one w.r.t. local rotations.

    The increment acts as ``local_j <- (W_parent^-1 exp(w_j) W_parent) local_j``; at ``w = 0`` its derivative is
    ``d local_j = (v, 0) * local_j`` with ``v = R_parent^T w / 2`` (quaternion product), so the gradient is
    ``R_parent (s g_xyz + u x g_xyz - g_w u) / 2`` for ``local_j = (u, s)`` and ``grad_q = (g_xyz, g_w)``.

    Args:
        local_q: local rotations [quat xyzw] (B, J, 4); rot: their world rotations (B, J, 4).
        parents: parent indices (J,); cols: the joints (C,).
        grad_q: d loss / d local_q, shape (B, J, 4).

    Returns:
        d loss / d w, shape (B, C, 3).
    """
    from sim.rotations import quat_rotate

    u, s = local_q[:, cols, :3], local_q[:, cols, 3:4]
    gx, gw = grad_q[:, cols, :3], grad_q[:, cols, 3:4]
    return 0.5 * quat_rotate(_parent_rotations(rot, parents, cols), s * gx + np.cross(u, gx) - gw * u)


def damped_least_squares_ik(
    rig,
    local_q: np.ndarray,
    active: np.ndarray,
    effectors: Sequence[int],
    targets: np.ndarray,
    iters: int,
    damping: float,
    root_translation: np.ndarray | None = None,
    penalty: Penalty | None = None,
    tolerance: float | Sequence[float] | np.ndarray = 1.0,
    project: Callable[[np.ndarray], np.ndarray] | None = None,
) -> np.ndarray:
    """Damped least-squares IK on local joint rotations (Levenberg-Marquardt), optionally with a penalty.

    The Jacobian of effector ``e`` w.r.t. a world-frame rotation increment ``w_j`` at an ancestor ``j`` is
    ``-[p_e - p_j]_x``; steps are applied as ``W_j <- exp(w_j) W_j``, i.e. ``local_j <- (W_parent^-1 exp(w_j)
    W_parent) local_j``. The root may only tilt (no rotation about up: poses have no heading).

    Without a penalty each step is ``(J^T J + lambda^2 I)^-1 J^T r`` on the handle residuals ``r``. With one, the
    merit is ``|r|^2 + tol^2 L`` (``L`` the penalty, ``tol`` the handle error that costs as much as ``L = 1``) and
    ``sqrt(L)`` joins the residuals as one Gauss-Newton row: the step solves
    ``(J^T J + tol^2 g g^T / (4 L) + lambda^2 I) w = J^T r - tol^2 g / 2`` (``g = dL/dw``): where the handles leave
    freedom, it is the smallest rotation change that restores the handles and zeroes the linearized penalty
    together. A decreasing ``tolerance`` schedule is a continuation: loose early (the penalty may move the
    handles to leave an arrangement it cannot repair in place), tight at the end (the handles are restored).

    Per pose, ``lambda`` starts at ``damping`` and follows Levenberg's rule: a step that lowers the merit is taken
    and ``lambda`` shrinks, otherwise the step is dropped and ``lambda`` grows.

    Args:
        rig: the rig (parents, rest translations).
        local_q: local joint rotations [quat xyzw], shape (B, J, 4).
        active: joints that may rotate, shape (J,), bool.
        effectors: joint indices with targets (H of them).
        targets: effector targets in skeleton space [m], shape (B, H, 3).
        iters: iterations.
        damping: initial damping [m] (in the units of the residual: larger is slower and steadier).
        root_translation: root positions [m], shape (B, 3) or (3,); the rest position when None.
        penalty: ``local_q (B, J, 4) -> (loss (B,), d loss / d local_q (B, J, 4))``, a smooth loss that is 0 where
            it is satisfied (e.g. the pose validators); None for plain least squares.
        tolerance: handle error that weighs as much as a penalty of 1 [m]: a number or one per iteration
            (``iters`` of them). Unused without a penalty.
        project: maps rotations (B, J, 4) onto the admissible ones (e.g. removes the root's heading, which tilts
            of a tilted root accumulate); applied to the start and to every trial step.

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
            if active[k]:  # an inactive ancestor has no column (searchsorted would name the next active one)
                anc[i, np.searchsorted(cols, k)] = True
            k = parents[k]
    root_col = np.searchsorted(cols, 0)
    tol2 = np.broadcast_to(np.asarray(tolerance, dtype=np.float64) ** 2, (iters,))

    def evaluate(qq):
        """Positions, rotations, handle residuals (B, H, 3), their squared norm, penalty and its gradient."""
        pos, rot = _fk_numpy(parents, t, qq)
        r = targets - pos[:, eff]
        if penalty is None:
            return pos, rot, r, (r**2).sum(axis=(1, 2)), np.zeros(B), np.zeros((B, len(cols), 3))
        loss, grad_q = penalty(qq)
        g = increment_gradient(qq, rot, parents, cols, np.asarray(grad_q, dtype=np.float64))
        g[:, root_col, 2] = 0.0  # the root only tilts
        return pos, rot, r, (r**2).sum(axis=(1, 2)), np.asarray(loss, dtype=np.float64), g

    if project is not None:
        q = project(q)
    pos, rot, r, cost, pen, grad = evaluate(q)
    lam = np.full(B, float(damping))
    eye = np.eye(3 * len(cols))
    for it in range(iters):
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
        rhs = np.einsum("bmi,bm->bi", jm, r.reshape(B, -1))
        if penalty is not None:
            # sqrt(L) as one more residual row: its gradient is g / (2 sqrt(L)), its target -sqrt(L)
            gf = grad.reshape(B, -1)
            on = pen > 0
            a = a + (tol2[it] * on / (4.0 * np.where(on, pen, 1.0)))[:, None, None] * gf[:, :, None] * gf[:, None, :]
            rhs = rhs - 0.5 * tol2[it] * gf
        w = np.linalg.solve(a, rhs[..., None])[..., 0].reshape(B, len(cols), 3)
        inc = axis_angle_to_quat(w)  # world-frame increments
        wp = _parent_rotations(rot, parents, cols)
        local_inc = quat_multiply(quat_multiply(quat_conjugate(wp), inc), wp)
        trial = q.copy()
        trial[:, cols] = quat_normalize(quat_multiply(local_inc, q[:, cols]))
        if project is not None:
            trial = project(trial)
        tpos, trot, tr, tcost, tpen, tgrad = evaluate(trial)
        ok = tcost + tol2[it] * tpen < cost + tol2[it] * pen
        # Levenberg's rule per pose: accept and trust the linearization more, or reject and damp harder
        q[ok], pos[ok], rot[ok], r[ok], cost[ok] = trial[ok], tpos[ok], trot[ok], tr[ok], tcost[ok]
        pen[ok], grad[ok] = tpen[ok], tgrad[ok]
        lam = np.where(ok, np.maximum(lam * 0.3, 1e-3 * damping), lam * 4.0)
    return q
