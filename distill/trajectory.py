"""The optimized joint trajectory: body-root translation and per-joint 6D rotations, per frame or as keyframes.

The *body root* is the joint that moves the character as a whole. It is joint 0 for most rigs; when joint 0 is a
static container above the body (glTF exports often have ``_rootJoint -> b_Root -> Hip``), it is the first joint
down that chain that branches or skins vertices (:func:`body_root_joint`). The joints above it keep their initial
transforms: their rotations would only duplicate the body root's, which makes the trajectory ambiguous.

Parameters (all torch leaves, optimized by the caller):

* ``translation``: the body root's local translation [m], shape (K, 3) (for joint 0: the root translation in
  skeleton space);
* ``rotations_6d``: local rotations of the body root and every joint below it (first two matrix columns),
  shape (K, J_opt, 6).

``K`` is the frame count, or the keyframe count with a Catmull-Rom spline through uniform keys (a fixed (F, K)
basis matrix, so the spline is linear in the parameters).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from sim import Motion, Rig
from sim.torch_ops import TorchRig, quat_to_rot6d, rot6d_to_quat

__all__ = ["PoseSequence", "Trajectory", "body_root_joint", "catmull_rom_basis", "sample_clip"]


def body_root_joint(rig: Rig) -> int:
    """The first joint from the root down that has no single child or skins vertices (see module docstring)."""
    influence = np.zeros(rig.joint_count)
    for m in rig.meshes:
        np.add.at(influence, m.influence_joints.reshape(-1), m.influence_weights.reshape(-1))
    children = rig.children()
    j = 0
    while len(children[j]) == 1 and influence[j] == 0:
        j = children[j][0]
    return j


def catmull_rom_basis(frame_count: int, key_count: int) -> np.ndarray:
    """Interpolation matrix (frame_count, key_count) of a uniform Catmull-Rom spline through ``key_count`` keys spread
    evenly over the frames (the missing neighbours of the end keys are extrapolated linearly)."""
    if key_count >= frame_count:
        return np.eye(frame_count)
    if key_count < 2:
        raise ValueError(f"key_count: need at least 2 keys, got {key_count}")
    u = np.linspace(0.0, key_count - 1, frame_count)
    basis = np.zeros((frame_count, key_count))
    for f, x in enumerate(u):
        i = min(int(np.floor(x)), key_count - 2)
        t = x - i
        w = (
            0.5 * (-(t**3) + 2 * t**2 - t),
            0.5 * (3 * t**3 - 5 * t**2 + 2),
            0.5 * (-3 * t**3 + 4 * t**2 + t),
            0.5 * (t**3 - t**2),
        )
        for k, wk in zip(range(i - 1, i + 3), w):
            if k < 0:  # phantom key 2 P0 - P1 (linear extrapolation keeps straight lines straight)
                basis[f, 0] += 2 * wk
                basis[f, 1] -= wk
            elif k >= key_count:
                basis[f, key_count - 1] += 2 * wk
                basis[f, key_count - 2] -= wk
            else:
                basis[f, k] += wk
    return basis


def sample_clip(clip: Motion, frame_count: int, fps: float, loop: bool = True) -> Motion:
    """``frame_count`` frames of ``clip`` at ``fps`` from its start; past its end it loops (or holds the last pose).

    Looping treats the clip as a cycle whose last key equals its first (as in glTF walk cycles).
    """
    t = np.arange(frame_count) / float(fps)
    if loop and clip.duration > 0:
        t = np.mod(t, clip.duration)
    pieces = [clip.sample(clip.times[0] + np.array([ti])) for ti in t]
    trans = None if clip.translations is None else np.concatenate([p.translations for p in pieces])
    return Motion(
        fps,
        np.concatenate([p.root_translations for p in pieces]),
        np.concatenate([p.rotations for p in pieces]),
        trans,
        name=clip.name,
    )


@dataclass
class PoseSequence:
    """A differentiable pose per frame (torch).

    Attributes:
        root_translation: joint 0's translation in skeleton space [m], shape (F, 3).
        rotations: local joint rotations [unit quat xyzw], shape (F, J, 4).
        translations: local joint translations [m], shape (F, J, 3).
    """

    root_translation: torch.Tensor
    rotations: torch.Tensor
    translations: torch.Tensor


class Trajectory(torch.nn.Module):
    """Optimizable joint trajectory of a rig over ``frame_count`` frames at ``fps``.

    Attributes:
        rig: the character.
        fps: frame rate [1/s].
        frame_count: frames.
        body_root: index of the body-root joint.
        joints: indices of the optimized joints (the body root and its descendants), shape (J_opt,).
        translation: body-root local translation keys [m], shape (K, 3), a parameter.
        rotations_6d: 6D rotation keys of the optimized joints, shape (K, J_opt, 6), a parameter.
    """

    def __init__(self, rig: Rig, init: Motion, key_count: int | None = None):
        """Starts from ``init`` (its frame count and fps define the trajectory's; e.g. ``Motion.rest``).

        Args:
            rig: the character.
            init: the initial motion.
            key_count: spline keys; None (or >= frames) optimizes every frame.
        """
        super().__init__()
        init.check_rig(rig)
        self.rig = rig
        self.fps = init.fps
        self.frame_count = init.frame_count
        self.body_root = body_root_joint(rig)
        below = np.zeros(rig.joint_count, dtype=bool)
        below[self.body_root] = True
        for j in range(self.body_root + 1, rig.joint_count):
            below[j] = below[rig.parents[j]]
        self.joints = np.flatnonzero(below)
        k = self.frame_count if key_count is None else min(int(key_count), self.frame_count)
        basis = catmull_rom_basis(self.frame_count, k)
        self.register_buffer("basis", torch.as_tensor(basis, dtype=torch.float32))
        self.register_buffer("times", torch.as_tensor(init.times - init.times[0], dtype=torch.float32))
        self.start_time = float(init.times[0])
        self.keeps_translations = init.translations is not None or self.body_root != 0
        local_t = torch.as_tensor(init.local_translations(rig), dtype=torch.float32)
        rot = torch.as_tensor(init.rotations, dtype=torch.float32)
        self.register_buffer("init_translations", local_t)
        self.register_buffer("init_rotations", rot)
        # keys: least-squares fit of the initial motion through the basis (exact when per frame)
        pinv = torch.linalg.pinv(self.basis)
        self.translation = torch.nn.Parameter(pinv @ local_t[:, self.body_root])
        r6 = quat_to_rot6d(rot[:, self.joints])
        self.rotations_6d = torch.nn.Parameter(torch.einsum("kf,fjd->kjd", pinv, r6))

    @property
    def key_count(self) -> int:
        return int(self.basis.shape[1])

    def forward(self) -> PoseSequence:
        """The pose of every frame."""
        trans = self.basis @ self.translation
        r6 = torch.einsum("fk,kjd->fjd", self.basis, self.rotations_6d)
        q = rot6d_to_quat(r6)
        rotations = self.init_rotations.clone()
        rotations[:, self.joints] = q
        translations = self.init_translations.clone()
        translations[:, self.body_root] = trans
        return PoseSequence(translations[:, 0], rotations, translations)

    def world(self, trig: TorchRig, pose: PoseSequence | None = None) -> torch.Tensor:
        """World joint transforms (F, J, 7) of ``pose`` (default: the current one)."""
        pose = self() if pose is None else pose
        return trig.forward_kinematics(pose.root_translation, pose.rotations, pose.translations)

    def to_motion(self, name: str = "distilled") -> Motion:
        """The current trajectory as a :class:`sim.Motion` (translations set when the body root is not joint 0)."""
        with torch.no_grad():
            pose = self()
        rot = pose.rotations.double().cpu().numpy()
        trans = pose.translations.double().cpu().numpy()
        root = trans[:, 0].copy()
        times = self.start_time + self.times.double().cpu().numpy()
        return Motion(self.fps, root, rot, trans if self.keeps_translations else None, times=times, name=name)
