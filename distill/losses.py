"""Regularizers of the distilled trajectory (torch, differentiable): smoothness, ground and self-collision
penalties (the Warp kernels of :mod:`sim.collision` through :mod:`sim.collision_torch`), and the optional
pose-prior hook.

All lengths are measured in body lengths (the character's largest horizontal bind-pose extent,
:func:`distill.renderer.body_dimensions`, the length the renderer frames and the optimizer scales the translation's
learning rate by) and times in seconds, so the smoothness and self-collision weights serve characters of any size
and unit at any frame rate. The ground penalty is the exception in one respect: it sums over the skinned vertices,
so its value (and the weight it needs) grows with the mesh's vertex count (see :func:`ground_penalty`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from sim import Rig
from sim.collision import capsule_penetration
from sim.collision_torch import capsule_penetration_penalty, ground_penetration_penalty
from sim.torch_ops import quat_rotate

from .renderer import body_dimensions

__all__ = ["PosePrior", "SelfCollisionCapsules", "ground_penalty", "smoothness"]

PosePrior = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
"""Pose-prior hook: ``prior(rotations (F, J, 4) local quats xyzw, world (F, J, 7)) -> scalar`` (lower is
more plausible). ``posespace.PoseSpace.pose_prior(rig)`` provides one (``examples/distill.py --pose-prior``); None
disables the term."""


def smoothness(world: torch.Tensor, body_length: float, fps: float = 1.0) -> torch.Tensor:
    """Mean squared acceleration of the world joint positions [body lengths^2 / s^4].

    The acceleration of joint j at frame k is the second difference ``(p[k+1] - 2 p[k] + p[k-1]) * fps^2``
    [body lengths / s^2]; the mean is over the F - 2 inner frames and the joints, of its squared norm. Measured per
    second, the same motion scores the same at any frame rate (the per-frame second difference shrinks with
    1 / fps^2, its square with 1 / fps^4: at 16 fps a weight counted 16x less than at 8 fps).

    Args:
        world: world joint transforms, shape (F, J, 7) (positions first).
        body_length: normalization length [m].
        fps: frame rate of the samples [1/s] (the default 1 gives the per-frame value, squared second differences
            in body lengths^2).

    Returns:
        scalar; zero for fewer than 3 frames.
    """
    if world.shape[0] < 3:
        return world.sum() * 0.0
    p = world[..., :3] / body_length
    acc = (p[2:] - 2.0 * p[1:-1] + p[:-2]) * float(fps) ** 2
    return acc.square().sum(-1).mean()


def ground_penalty(points: torch.Tensor, ground_z: float, body_length: float) -> torch.Tensor:
    """Mean over frames of the squared depth of skinned points below the ground plane z = ``ground_z``, *summed over
    the points* [body lengths^2] (``sim.collision_torch.ground_penetration_penalty``).

    A sum, not a mean, over the vertices: the same sink scores in proportion to the number of vertices under the
    ground, so a finer mesh of the same character scores more (a 5 cm sink of a test tube: 2.7e-2 with 82 vertices,
    1.1e-1 with 322). ``LossWeights.ground`` therefore depends on the mesh: to penalize a character of V vertices as
    strongly as one of V0, scale the weight by V0 / V.

    Args:
        points: skinned vertices [m], shape (F, V, 3).
        ground_z: height of the ground plane [m].
        body_length: normalization length [m].
    """
    return ground_penetration_penalty(points, ground_z).mean() / body_length**2


class SelfCollisionCapsules:
    """Self-penetration penalty between body parts approximated by capsules bound to the joints.

    Every joint that dominates at least ``min_points`` vertices gets one capsule: the principal axis of those
    vertices in the joint's frame (through their mean, spanning their extent), with the radius their median
    distance to it times ``radius_scale``; it moves rigidly with its joint. Capsules of joints closer than
    ``min_hops`` bones in the tree, and pairs that already overlap in the rest pose, are never tested. The penalty
    is the mean over frames of ``sim.collision_torch.capsule_penetration_penalty`` (summed squared overlaps)
    [body lengths^2].

    Attributes:
        joints: the joint of each capsule, shape (C,).
        local_a, local_b: capsule segment ends in their joint's frame [m], shape (C, 3).
        radii: [m], shape (C,).
        pairs: tested capsule index pairs, shape (P, 2).
    """

    def __init__(self, rig: Rig, min_hops: int = 3, radius_scale: float = 0.8, min_points: int = 8):
        mesh = rig.merged_mesh()
        dominant = mesh.influence_joints[np.arange(mesh.vertex_count), mesh.influence_weights.argmax(1)]
        joints, ends_a, ends_b, radii = [], [], [], []
        for j in range(rig.joint_count):
            if (dominant == j).sum() < min_points:
                continue
            ibm = rig.inverse_bind_matrices[j]
            pts = mesh.points[dominant == j] @ ibm[:3, :3].T + ibm[:3, 3]  # in the joint's frame, as skinned
            centre = pts.mean(0)
            axis = np.linalg.svd(pts - centre, full_matrices=False)[2][0]
            t = (pts - centre) @ axis
            a, b = centre + t.min() * axis, centre + t.max() * axis
            ab = b - a
            u = np.clip((pts - a) @ ab / max(ab @ ab, 1e-24), 0.0, 1.0)
            joints.append(j)
            ends_a.append(a)
            ends_b.append(b)
            radii.append(np.median(np.linalg.norm(pts - (a + u[:, None] * ab), axis=1)) * radius_scale)
        self.joints = np.array(joints, dtype=np.int64)
        self.local_a = torch.as_tensor(np.array(ends_a).reshape(-1, 3), dtype=torch.float64)
        self.local_b = torch.as_tensor(np.array(ends_b).reshape(-1, 3), dtype=torch.float64)
        self.radii = torch.as_tensor(np.array(radii), dtype=torch.float64)
        self.body_length = body_dimensions(rig)[0]  # the smoothness and ground terms' length (was all 3 axes)
        hops = _tree_hops(rig.parents)
        c = len(joints)
        candidates = [(i, k) for i in range(c) for k in range(i + 1, c) if hops[joints[i], joints[k]] >= min_hops]
        pairs = np.array(candidates, dtype=np.int64).reshape(-1, 2)
        if len(pairs):  # drop pairs that already overlap in the rest pose
            pos, rot = rig.rest_world_transforms()
            a, b = self.segments(torch.as_tensor(np.concatenate([pos, rot], 1))[None])
            depth, _ = capsule_penetration(a[0].numpy(), b[0].numpy(), self.radii.numpy(), pairs)
            pairs = pairs[depth[0] <= 0.0]
        self.pairs = torch.as_tensor(pairs)

    def segments(self, world: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """World capsule ends [m], each shape (F, C, 3), from world joint transforms (F, J, 7)."""
        w = world[:, self.joints]
        pos, rot = w[..., :3], w[..., 3:]
        a = pos + quat_rotate(rot, self.local_a.to(world).expand_as(pos))
        b = pos + quat_rotate(rot, self.local_b.to(world).expand_as(pos))
        return a, b

    def __call__(self, world: torch.Tensor) -> torch.Tensor:
        """The penalty for world joint transforms (F, J, 7)."""
        if len(self.pairs) == 0:
            return world.sum() * 0.0
        a, b = self.segments(world)
        pen = capsule_penetration_penalty(a, b, self.radii.to(world), self.pairs)
        return pen.mean() / self.body_length**2


def _tree_hops(parents: np.ndarray) -> np.ndarray:
    """Number of bones on the tree path between every two joints, shape (J, J)."""
    n = len(parents)
    depth = np.zeros(n, dtype=np.int64)
    for j in range(1, n):
        depth[j] = depth[parents[j]] + 1
    hops = np.zeros((n, n), dtype=np.int64)
    for i in range(n):
        for k in range(i + 1, n):
            a, b, h = i, k, 0
            while a != b:
                if depth[a] >= depth[b]:
                    a = parents[a]
                else:
                    b = parents[b]
                h += 1
            hops[i, k] = hops[k, i] = h
    return hops
