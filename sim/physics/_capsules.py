"""Capsule fitting to point sets, and the mass properties of solid capsules (NumPy)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Capsule", "capsule_mass_properties", "fit_capsule", "fit_sole_capsule", "segment_distance"]


@dataclass
class Capsule:
    """A capsule in a body frame: the segment ``center +- half_height * axis`` swept by a sphere of ``radius``.

    Attributes:
        center: segment midpoint in the body frame [m], shape (3,).
        axis: unit segment direction in the body frame, shape (3,).
        half_height: half the segment length [m] (0 for a sphere).
        radius: sphere radius [m].
    """

    center: np.ndarray
    axis: np.ndarray
    half_height: float
    radius: float

    @property
    def endpoints(self) -> tuple[np.ndarray, np.ndarray]:
        """The segment ends [m], each shape (3,)."""
        return self.center - self.half_height * self.axis, self.center + self.half_height * self.axis

    def rotation(self) -> np.ndarray:
        """A unit quaternion (xyzw) rotating +Z onto ``axis`` (Newton and USD capsules extend along Z)."""
        z = np.array([0.0, 0.0, 1.0])
        a = self.axis / np.linalg.norm(self.axis)
        c = float(np.dot(z, a))
        if c < -1.0 + 1e-12:
            return np.array([1.0, 0.0, 0.0, 0.0])
        v = np.cross(z, a)
        q = np.array([v[0], v[1], v[2], 1.0 + c])
        return q / np.linalg.norm(q)

    def volume(self) -> float:
        """Solid volume [m^3]."""
        r, h = self.radius, 2.0 * self.half_height
        return float(np.pi * r * r * h + 4.0 / 3.0 * np.pi * r**3)


def fit_capsule(points: np.ndarray, radius_quantile: float, min_radius: float, radius: float | None = None) -> Capsule:
    """Fits a capsule to points (e.g. the vertices a bone dominates).

    The axis is the points' principal direction; the radius is the ``radius_quantile`` quantile of their distances
    from that axis (at least ``min_radius``); the segment ends are then the tightest that contain every point
    lying within that radius of the axis.

    Args:
        points: shape (N, 3), N >= 1.
        radius_quantile: in [0, 1]; 1 bounds every point.
        min_radius: lower bound of the radius [m].
        radius: when given, this radius [m] instead of the quantile (still at least ``min_radius``).
    """
    points = np.asarray(points, dtype=np.float64)
    if len(points) == 0:
        raise ValueError("fit_capsule: no points")
    c = points.mean(axis=0)
    d = points - c
    if len(points) >= 2 and np.abs(d).max() > 0:
        _, _, vt = np.linalg.svd(d, full_matrices=False)
        axis = vt[0]
    else:
        axis = np.array([0.0, 0.0, 1.0])
    s = d @ axis
    perp = np.linalg.norm(d - s[:, None] * axis, axis=1)
    r = float(np.quantile(perp, np.clip(radius_quantile, 0.0, 1.0))) if radius is None else float(radius)
    r = max(r, float(min_radius))
    reach = np.sqrt(np.maximum(r * r - perp * perp, 0.0))
    inside = perp <= r + 1e-12
    if not inside.any():
        inside[:] = True
    hi = float(np.max(s[inside] - reach[inside]))
    lo = float(np.min(s[inside] + reach[inside]))
    if hi < lo:  # all points fit in a sphere around some axis point: collapse the segment
        mid = 0.5 * (lo + hi)
        lo = hi = mid
    center = c + 0.5 * (lo + hi) * axis
    return Capsule(center, axis, 0.5 * (hi - lo), r)


def fit_sole_capsule(points: np.ndarray, down: np.ndarray, min_radius: float, sole_fraction: float = 0.35) -> Capsule:
    """Fits a capsule to the sole of a foot: lying across the lowest points, touching the lowest one.

    Args:
        points: the foot's points in its body frame, shape (N, 3).
        down: the body-frame direction of the world's down while the foot stands, shape (3,).
        min_radius: lower bound of the radius [m].
        sole_fraction: points within this fraction of the points' extent along ``down`` from the lowest point
            make up the sole.
    """
    points = np.asarray(points, dtype=np.float64)
    d = np.asarray(down, dtype=np.float64)
    d = d / np.linalg.norm(d)
    depth = points @ d
    deepest = float(depth.max())
    extent = float(depth.max() - depth.min())
    sole = points[depth >= deepest - sole_fraction * max(extent, 1e-9)]
    flat = sole - np.outer(sole @ d, d)  # projected onto the plane normal to down
    c = flat.mean(axis=0)
    f = flat - c
    if len(sole) >= 2 and np.abs(f).max() > 0:
        _, _, vt = np.linalg.svd(f, full_matrices=False)
        axis = vt[0] - np.dot(vt[0], d) * d
        axis /= np.linalg.norm(axis)
    else:
        axis = np.cross(d, [1.0, 0.0, 0.0] if abs(d[0]) < 0.9 else [0.0, 1.0, 0.0])
        axis /= np.linalg.norm(axis)
    s = f @ axis
    side = np.cross(d, axis)
    width = float((f @ side).max() - (f @ side).min()) if len(sole) else 0.0
    r = max(0.5 * width, float(min_radius))
    length = float(s.max() - s.min()) if len(sole) else 0.0
    half = max(0.5 * length - r, 0.0)
    center = c + 0.5 * (s.max() + s.min()) * axis + (deepest - r) * d
    return Capsule(center, axis, half, r)


def capsule_mass_properties(capsule: Capsule, density: float) -> tuple[float, np.ndarray, np.ndarray]:
    """Mass [kg], centre of mass [m] (3,) and inertia about the centre of mass [kg m^2] (3, 3) in the body frame.

    Solid capsule: a cylinder of length ``2 h`` plus two hemispheres, with the hemispheres' parallel-axis
    terms about the capsule centre (centroid at ``3 r / 8`` from each flat face).
    """
    r, h = float(capsule.radius), float(capsule.half_height)
    L = 2.0 * h
    m_cyl = density * np.pi * r * r * L
    m_hemi = density * 2.0 / 3.0 * np.pi * r**3  # each
    mass = m_cyl + 2.0 * m_hemi
    i_axis = m_cyl * r * r / 2.0 + 2.0 * (2.0 / 5.0) * m_hemi * r * r
    # cylinder about a transverse axis through its centre
    i_cyl_t = m_cyl * (r * r / 4.0 + L * L / 12.0)
    # hemisphere: about its own centroid transverse axis 83/320 m r^2; centroid at h + 3r/8 from the centre
    i_hemi_t = m_hemi * (83.0 / 320.0) * r * r + m_hemi * (h + 3.0 * r / 8.0) ** 2
    i_trans = i_cyl_t + 2.0 * i_hemi_t
    a = capsule.axis / np.linalg.norm(capsule.axis)
    inertia = i_trans * np.eye(3) + (i_axis - i_trans) * np.outer(a, a)
    return float(mass), capsule.center.copy(), inertia


def segment_distance(p0: np.ndarray, p1: np.ndarray, q0: np.ndarray, q1: np.ndarray) -> np.ndarray:
    """Closest distance between segments [p0, p1] and [q0, q1], batched over leading dimensions (..., 3) -> (...).

    The textbook clamped closest-point computation (Ericson, Real-Time Collision Detection, 5.1.9).
    """
    d1, d2, r = p1 - p0, q1 - q0, p0 - q0
    a = np.sum(d1 * d1, -1)
    e = np.sum(d2 * d2, -1)
    f = np.sum(d2 * r, -1)
    c = np.sum(d1 * r, -1)
    b = np.sum(d1 * d2, -1)
    eps = 1e-14
    a_ok, e_ok = a > eps, e > eps
    a_safe, e_safe = np.where(a_ok, a, 1.0), np.where(e_ok, e, 1.0)
    denom = a * e - b * b
    s = np.where(denom > eps, np.clip((b * f - c * e) / np.where(denom > eps, denom, 1.0), 0.0, 1.0), 0.0)
    t = (b * s + f) / e_safe
    s = np.where(t < 0.0, np.clip(-c / a_safe, 0.0, 1.0), np.where(t > 1.0, np.clip((b - c) / a_safe, 0.0, 1.0), s))
    t = np.clip(t, 0.0, 1.0)
    # degenerate segments (points)
    s = np.where(e_ok, s, np.clip(-c / a_safe, 0.0, 1.0))
    t = np.where(e_ok, t, 0.0)
    t = np.where(a_ok, t, np.clip(f / e_safe, 0.0, 1.0))
    s = np.where(a_ok, s, 0.0)
    t = np.where(a_ok | e_ok, t, 0.0)
    cp = p0 + d1 * s[..., None]
    cq = q0 + d2 * t[..., None]
    return np.linalg.norm(cp - cq, axis=-1)
