"""Is a reference motion dynamically possible? A centroidal check per frame (NumPy).

For each frame the whole-body centre of mass acceleration fixes the net contact force ``F = M (a_com + g z)``.
A physical character can produce it only when (i) some body touches the ground, (ii) ``F`` points up and lies in
the friction cone, and (iii) its centre of pressure -- the ground point about which the contact force also produces
the rate of change of the angular momentum about the centre of mass -- lies within the support polygon of the
touching bodies. Frames that fail explain tracking error that no controller can remove while following the
reference closely. Derivatives are central differences of the sampled frames.
"""

from __future__ import annotations

import numpy as np

from ..rotations import quat_conjugate, quat_multiply, quat_rotate, quat_to_axis_angle, quat_to_matrix
from .character import GRAVITY, PhysicsCharacter

__all__ = ["dynamic_feasibility"]


def _cross2(a: np.ndarray, b: np.ndarray) -> float:
    return float(a[0] * b[1] - a[1] * b[0])


def _hull(points: np.ndarray) -> np.ndarray:
    """2D convex hull (monotone chain), counter-clockwise, shape (H, 2)."""
    p = np.unique(points, axis=0)
    if len(p) <= 2:
        return p
    p = p[np.lexsort((p[:, 1], p[:, 0]))]

    def half(pts):
        out: list[np.ndarray] = []
        for q in pts:
            while len(out) >= 2 and _cross2(out[-1] - out[-2], q - out[-2]) <= 0:
                out.pop()
            out.append(q)
        return out

    lower, upper = half(p), half(p[::-1])
    return np.array(lower[:-1] + upper[:-1])


def _distance_to_polygon(x: np.ndarray, hull: np.ndarray) -> float:
    """Distance [m] from a 2D point to a convex polygon (0 inside); a point or segment for 1 or 2 vertices."""
    if len(hull) == 1:
        return float(np.linalg.norm(x - hull[0]))
    edges = [(hull[i], hull[(i + 1) % len(hull)]) for i in range(len(hull) if len(hull) > 2 else 1)]
    if len(hull) > 2 and all(_cross2(b - a, x - a) >= 0 for a, b in edges):
        return 0.0
    best = np.inf
    for a, b in edges:
        d = b - a
        t = np.clip((x - a) @ d / max(d @ d, 1e-18), 0.0, 1.0)
        best = min(best, float(np.linalg.norm(x - (a + t * d))))
    return best


def dynamic_feasibility(
    character: PhysicsCharacter,
    body_pos: np.ndarray,
    body_rot: np.ndarray,
    fps: float,
    *,
    friction: float = 1.0,
    contact_height_fraction: float = 0.02,
    ground_height: float = 0.0,
) -> dict[str, object]:
    """Per-frame centroidal feasibility of body trajectories (e.g. a reference seen by the character).

    Args:
        character: the character (masses, capsules).
        body_pos, body_rot: world body frames (F, B, 3) / (F, B, 4).
        fps: frame rate [1/s].
        friction: Coulomb coefficient of the ground.
        contact_height_fraction: a capsule touches the ground when its lowest point is within this fraction of the
            character height.
        ground_height: ground plane height [m].

    Returns:
        ``infeasible_ratio`` (share of frames failing any test), ``unsupported_ratio`` (the centre of mass is not
        in free fall but nothing touches the ground), ``friction_ratio`` (force outside the friction cone or
        pulling), ``zmp_ratio`` (centre of pressure outside the support polygon by more than the touching
        capsules' mean radius), ``mean_zmp_excess_m`` (mean distance outside over the frames that touch), and the
        per-frame boolean ``infeasible`` list.
    """
    F = body_pos.shape[0]
    m = character.body_mass
    com_b = body_pos + quat_rotate(body_rot, character.body_com)
    com = (com_b * m[None, :, None]).sum(axis=1) / m.sum()
    dt = 1.0 / fps
    if F < 3:
        raise ValueError(f"dynamic_feasibility: need at least 3 frames, got {F}")
    # second differences on neighbouring frames: np.gradient twice spans 4 frames (x[i+2] - 2 x[i] + x[i-2]) / 4dt^2
    # and reads a frame-rate oscillation as no acceleration at all
    acc = np.empty_like(com)
    acc[1:-1] = (com[2:] - 2.0 * com[1:-1] + com[:-2]) / dt**2
    if F >= 4:  # one-sided, second order
        acc[0] = (2.0 * com[0] - 5.0 * com[1] + 4.0 * com[2] - com[3]) / dt**2
        acc[-1] = (2.0 * com[-1] - 5.0 * com[-2] + 4.0 * com[-3] - com[-4]) / dt**2
    else:
        acc[0], acc[-1] = acc[1], acc[-2]
    force = acc + np.array([0.0, 0.0, GRAVITY])  # contact force per unit mass
    # angular momentum about the centre of mass and its rate
    vel = np.gradient(com_b, dt, axis=0)
    dq = quat_to_axis_angle(quat_multiply(body_rot[2:], quat_conjugate(body_rot[:-2]))) / (2 * dt)
    omega = np.concatenate([dq[:1], dq, dq[-1:]], axis=0)  # world angular velocity, central differences
    rmat = quat_to_matrix(body_rot)
    inertia_w = rmat @ character.body_inertia[None] @ np.swapaxes(rmat, -1, -2)
    spin = np.einsum("fbij,fbj->fbi", inertia_w, omega)
    orbit = np.cross(com_b - com[:, None], vel) * m[None, :, None]
    ang_mom = (spin + orbit).sum(axis=1)
    ldot = np.gradient(ang_mom, dt, axis=0) / m.sum()  # per unit mass
    seg_a, seg_b = character.capsule_world(body_pos, body_rot)
    r = character.capsule_radii
    low_end = np.where((seg_a[..., 2] < seg_b[..., 2])[..., None], seg_a, seg_b)
    low = low_end[..., 2] - r - ground_height
    touch = low < contact_height_fraction * character.height
    unsupported = np.zeros(F, dtype=bool)
    friction_bad = np.zeros(F, dtype=bool)
    zmp_bad = np.zeros(F, dtype=bool)
    excess = []
    free_fall_tol = 0.25 * GRAVITY
    for f in range(F):
        if not touch[f].any():
            unsupported[f] = np.linalg.norm(force[f]) > free_fall_tol
            continue
        fz = force[f, 2]
        if fz <= 0 or np.linalg.norm(force[f, :2]) > friction * fz:
            friction_bad[f] = True
        if fz <= 0:
            continue
        h = com[f, 2] - ground_height
        zmp = com[f, :2] - h * force[f, :2] / fz + np.array([-ldot[f, 1], ldot[f, 0]]) / fz
        # the footprint: every capsule end within the contact band (a capsule lying flat supports along its length)
        ends = np.concatenate([seg_a[f, touch[f]], seg_b[f, touch[f]]])
        radii = np.concatenate([r[touch[f]], r[touch[f]]])
        pts = ends[ends[:, 2] - radii - ground_height < contact_height_fraction * character.height, :2]
        d = _distance_to_polygon(zmp, _hull(pts))
        margin = float(r[touch[f]].mean())
        excess.append(max(d - margin, 0.0))
        zmp_bad[f] = d > margin
    bad = unsupported | friction_bad | zmp_bad
    return {
        "infeasible_ratio": float(bad.mean()),
        "unsupported_ratio": float(unsupported.mean()),
        "friction_ratio": float(friction_bad.mean()),
        "zmp_ratio": float(zmp_bad.mean()),
        "mean_zmp_excess_m": float(np.mean(excess)) if excess else 0.0,
        "infeasible": bad.tolist(),
    }
