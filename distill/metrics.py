"""How close a distilled motion is to a reference (the oracle check): joint angles and root path.

* joint-angle error: geodesic angle ``2 acos |<q_a, q_b>|`` between the local rotations of a joint in two
  motions [deg], averaged over frames and over the evaluated joints (by default every joint);
* root-path error: distance between the body-root joints' world positions (see
  :func:`distill.trajectory.body_root_joint`) [m], averaged over frames, divided by the body length.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import sim
from sim import Motion, Rig

from .renderer import body_dimensions
from .trajectory import body_root_joint

__all__ = ["MotionError", "joint_angle_errors", "motion_error"]


def joint_angle_errors(a: Motion, b: Motion) -> np.ndarray:
    """Geodesic angle between local joint rotations [deg], shape (F, J)."""
    if a.rotations.shape != b.rotations.shape:
        raise ValueError(f"motions differ in shape: {a.rotations.shape} vs {b.rotations.shape}")
    dot = np.abs(np.sum(a.rotations * b.rotations, axis=-1))
    return np.degrees(2.0 * np.arccos(np.clip(dot, 0.0, 1.0)))


@dataclass
class MotionError:
    """Errors of a motion against a reference.

    Attributes:
        mean_joint_angle_deg: mean over frames and joints of the local-rotation angle error [deg].
        per_joint_deg: mean over frames per joint [deg], shape (J,).
        root_path_error: mean body-root position error over frames / body length [unitless].
        root_path_error_m: the same in metres [m].
        body_length: the normalization [m].
    """

    mean_joint_angle_deg: float
    per_joint_deg: np.ndarray
    root_path_error: float
    root_path_error_m: float
    body_length: float

    def summary(self, rig: Rig | None = None, worst: int = 5) -> str:
        order = np.argsort(self.per_joint_deg)[::-1][:worst]
        names = [rig.joint_names[j] if rig is not None else str(j) for j in order]
        worst_txt = ", ".join(f"{n} {self.per_joint_deg[j]:.1f}" for n, j in zip(names, order))
        return (
            f"mean joint-angle error {self.mean_joint_angle_deg:.2f} deg, root-path error "
            f"{100 * self.root_path_error:.2f}% of body length ({self.root_path_error_m:.4g} m); worst joints: "
            f"{worst_txt}"
        )


def motion_error(rig: Rig, motion: Motion, reference: Motion) -> MotionError:
    """Joint-angle and root-path errors of ``motion`` against ``reference`` (same frame count)."""
    angles = joint_angle_errors(motion, reference)
    j = body_root_joint(rig)
    pa = sim.pose_motion(rig, motion)[0][:, j]
    pb = sim.pose_motion(rig, reference)[0][:, j]
    length = body_dimensions(rig)[0]
    dist = float(np.linalg.norm(pa - pb, axis=-1).mean())
    return MotionError(float(angles.mean()), angles.mean(0), dist / length, dist, length)
