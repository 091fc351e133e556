"""Regularizers of the distilled trajectory (torch, differentiable): smoothness, ground and self-collision
penalties, and the optional pose-prior hook.

All lengths are measured in body lengths (the character's largest bind-pose extent) so one set of weights
serves characters of any size and unit.

The ground and self-collision terms here are local, self-contained stand-ins (``ground_penalty_local``,
``SelfCollisionSpheres``) until the physics package's differentiable penalties (``sim.collision_torch``) land;
the optimizer takes them as plain callables, so swapping them is a one-line change in :mod:`distill.optimize`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from sim import Rig

__all__ = [
    "PosePrior",
    "SelfCollisionSpheres",
    "ground_penalty_local",
    "smoothness",
]

PosePrior = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
"""Pose-prior hook: ``prior(rotations (F, J, 4) local quats xyzw, world (F, J, 7)) -> scalar`` (lower is
more plausible). The pose-space package provides one; None disables the term."""


def smoothness(world: torch.Tensor, body_length: float) -> torch.Tensor:
    """Mean squared second difference of world joint positions [body lengths^2 per frame^2].

    Args:
        world: world joint transforms, shape (F, J, 7) (positions first).
        body_length: normalization length [m].
    """
    if world.shape[0] < 3:
        return world.sum() * 0.0
    p = world[..., :3] / body_length
    acc = p[2:] - 2.0 * p[1:-1] + p[:-2]
    return acc.square().sum(-1).mean()


def ground_penalty_local(points: torch.Tensor, ground_z: float, body_length: float) -> torch.Tensor:
    """Mean over frames of the summed squared depth of skinned points below the ground plane z = ``ground_z``
    [body lengths^2].

    Args:
        points: skinned vertices [m], shape (F, V, 3).
    """
    depth = (ground_z - points[..., 2]).clamp_min(0.0) / body_length
    return depth.square().sum(-1).mean()


class SelfCollisionSpheres:
    """Self-penetration penalty between body parts approximated by spheres along the bones.

    Each skinning joint with a child gets ``samples`` spheres on the segment to its (first) child, with the radius
    the median distance from the segment of the vertices it dominates. Spheres of joints closer than
    ``min_hops`` in the tree never collide (neighbouring parts overlap at the joints by design). The penalty is
    the mean over frames of the summed squared overlap ``relu(r_a + r_b - d)`` [body lengths^2], less the overlap
    already present in the bind pose.
    """

    def __init__(self, rig: Rig, samples: int = 3, min_hops: int = 3, radius_scale: float = 0.8):
        mesh = rig.merged_mesh()
        bind_pos = np.linalg.inv(rig.inverse_bind_matrices)[:, :3, 3]
        dominant = mesh.influence_joints[np.arange(mesh.vertex_count), mesh.influence_weights.argmax(1)]
        children = rig.children()
        owners, fractions, radii, child_of = [], [], [], []
        for j in range(rig.joint_count):
            pts = mesh.points[dominant == j]
            if len(pts) < 4 or not children[j]:
                continue
            c = children[j][0]
            a, b = bind_pos[j], bind_pos[c]
            ab = b - a
            t = np.clip((pts - a) @ ab / max(ab @ ab, 1e-12), 0, 1)
            r = float(np.median(np.linalg.norm(pts - (a + t[:, None] * ab), axis=1))) * radius_scale
            for s in range(samples):
                owners.append(j)
                child_of.append(c)
                fractions.append((s + 0.5) / samples)
                radii.append(r)
        hops = _tree_hops(rig.parents)
        o = np.array(owners, dtype=np.int64)
        pairs = [(i, k) for i in range(len(o)) for k in range(i + 1, len(o)) if hops[o[i], o[k]] >= min_hops]
        self.owner = torch.as_tensor(o)
        self.child = torch.as_tensor(np.array(child_of, dtype=np.int64))
        self.fraction = torch.as_tensor(np.array(fractions), dtype=torch.float32)
        self.radius = torch.as_tensor(np.array(radii), dtype=torch.float32)
        self.pairs = torch.as_tensor(np.array(pairs, dtype=np.int64).reshape(-1, 2))
        self.body_length = float(max(np.ptp(mesh.points, axis=0).max(), 1e-9))
        self.bind_overlap = None
        rest = torch.as_tensor(np.concatenate([bind_pos, np.tile([0, 0, 0, 1.0], (len(bind_pos), 1))], 1))
        self.bind_overlap = self._overlap(rest[None].float())[0].detach()

    def centres(self, world: torch.Tensor) -> torch.Tensor:
        """Sphere centres [m], shape (F, S, 3), from world joint transforms (F, J, 7)."""
        p = world[..., :3]
        f = self.fraction.to(p)[:, None]
        return p[:, self.owner] * (1 - f) + p[:, self.child] * f

    def _overlap(self, world: torch.Tensor) -> torch.Tensor:
        if len(self.pairs) == 0:
            return world[..., 0, 0:1] * 0.0
        c = self.centres(world)
        a, b = self.pairs[:, 0], self.pairs[:, 1]
        d = (c[:, a] - c[:, b]).norm(dim=-1)
        r = self.radius.to(d)
        return (r[a] + r[b] - d).clamp_min(0.0) / self.body_length  # (F, P)

    def __call__(self, world: torch.Tensor) -> torch.Tensor:
        """The penalty for world joint transforms (F, J, 7)."""
        excess = (self._overlap(world) - self.bind_overlap.to(world)).clamp_min(0.0)
        return excess.square().sum(-1).mean()


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
