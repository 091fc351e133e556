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

import warnings
from dataclasses import dataclass

import numpy as np
import torch

import sim
from sim import Motion, Rig
from sim._numbers import is_integer
from sim.rotations import axis_angle_to_quat, quat_conjugate, quat_multiply, quat_rotate
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


CYCLE_TOLERANCE = 1e-3
"""Max abs quaternion-component difference between a cyclic clip's first and last keys (joints below the body root);
a clip that differs more jumps at every loop seam (warned)."""


def sample_clip(clip: Motion, frame_count: int, fps: float, loop: bool = True, rig: Rig | None = None) -> Motion:
    """``frame_count`` frames of ``clip`` at ``fps`` from its start; past its end it loops (or holds the last pose).

    Looping treats the clip as a cycle whose last key equals its first (as in glTF walk cycles) and carries on
    where the previous cycle ended: each repeat is moved by the clip's own ground-plane displacement and turned by
    its change of heading (about +Z), like ``sim.physics.loop_motion``, so a walk keeps walking instead of jumping
    back to its start every cycle.

    Args:
        clip: the clip.
        frame_count: frames to sample.
        fps: sample rate [1/s].
        loop: loop past the clip's end (else hold its last pose).
        rig: the clip's character; with it the displacement is the body root's (:func:`body_root_joint`, e.g. a
            glTF hip below static container joints), without it joint 0's.
    """
    t = np.arange(frame_count) / float(fps)
    period = clip.duration
    cycles = np.zeros(frame_count, dtype=np.int64)
    if loop and period > 0:
        cycles = np.floor(t / period + 1e-9).astype(np.int64)
        t = np.clip(t - cycles * period, 0.0, period)
    pieces = [clip.sample(clip.times[0] + np.array([ti])) for ti in t]  # one by one: the phases wrap around
    trans = None if clip.translations is None else np.concatenate([p.translations for p in pieces])
    out = Motion(
        fps,
        np.concatenate([p.root_translations for p in pieces]),
        np.concatenate([p.rotations for p in pieces]),
        trans,
        name=clip.name,
    )
    return out if cycles.max() == 0 else _carry_on(out, clip, cycles, rig)


def _twist_z(q: np.ndarray) -> float:
    """Angle [rad] of the rotation about +Z in the swing-twist split of the unit quaternion ``q`` (xyzw)."""
    return 0.0 if abs(q[2]) + abs(q[3]) < 1e-12 else 2.0 * float(np.arctan2(q[2], q[3]))


def _carry_on(out: Motion, clip: Motion, cycles: np.ndarray, rig: Rig | None) -> Motion:
    """Moves the frames of each repeated cycle by the accumulated per-cycle ground-plane displacement and heading."""
    j = 0 if rig is None else body_root_joint(rig)
    if j != 0:
        pos, rot = sim.pose_motion(rig, clip.slice(0, 1))
        last_pos, last_rot = sim.pose_motion(rig, clip.slice(clip.frame_count - 1, clip.frame_count))
        p0, q0, p1, q1 = pos[0, j], rot[0, j], last_pos[0, j], last_rot[0, j]
    else:
        p0, q0 = clip.root_translations[0], clip.rotations[0, 0]
        p1, q1 = clip.root_translations[-1], clip.rotations[-1, 0]
    _warn_if_open(clip, rig, j)
    dyaw = _twist_z(quat_multiply(q1, quat_conjugate(q0)))
    step = np.array([p1[0] - p0[0], p1[1] - p0[1], 0.0])
    pivot = np.array([p0[0], p0[1], 0.0])
    # per cycle k: x -> R_k (x - pivot) + pivot + a_k, with R_k = Rz(k dyaw) and a_k = sum_{i<k} R_i step
    k_max = int(cycles.max())
    turns = axis_angle_to_quat(np.outer(np.arange(k_max + 1) * dyaw, [0.0, 0.0, 1.0]))
    shifts = np.concatenate([np.zeros((1, 3)), np.cumsum(quat_rotate(turns[:-1], step[None]), axis=0)])
    turn, shift = turns[cycles], shifts[cycles]  # per frame
    rotations = out.rotations.copy()
    if j == 0:
        root = quat_rotate(turn, out.root_translations - pivot) + pivot + shift
        rotations[:, 0] = quat_multiply(turn, rotations[:, 0])
        trans = None if out.translations is None else out.translations.copy()
        if trans is not None:
            trans[:, 0] = root
        return Motion(out.fps, root, rotations, trans, times=out.times, name=out.name)
    # a body root below static joints: move its world transform, expressed in its parent's frame
    pos, rot = sim.pose_motion(rig, out)
    parent = rig.parents[j]
    world_pos = quat_rotate(turn, pos[:, j] - pivot) + pivot + shift
    world_rot = quat_multiply(turn, rot[:, j])
    inv_parent = quat_conjugate(rot[:, parent])
    trans = out.local_translations(rig).copy()
    trans[:, j] = quat_rotate(inv_parent, world_pos - pos[:, parent])
    rotations[:, j] = quat_multiply(inv_parent, world_rot)
    return Motion(out.fps, out.root_translations, rotations, trans, times=out.times, name=out.name)


def _warn_if_open(clip: Motion, rig: Rig | None, body_root: int) -> None:
    below = np.arange(clip.joint_count) > body_root if rig is None else _descendants(rig, body_root)
    if below.any():
        a, b = clip.rotations[0, below], clip.rotations[-1, below]
        gap = float(np.minimum(np.abs(a - b).max(-1), np.abs(a + b).max(-1)).max())  # q and -q are one rotation
        if gap > CYCLE_TOLERANCE:
            warnings.warn(
                f"clip {clip.name!r}: its last key differs from its first (not a closed cycle); looping it jumps at "
                "every seam",
                stacklevel=4,
            )


def _descendants(rig: Rig, j: int) -> np.ndarray:
    """Joints strictly below ``j``, a boolean mask (J,)."""
    below = np.zeros(rig.joint_count, dtype=bool)
    for k in range(j + 1, rig.joint_count):
        below[k] = below[rig.parents[k]] or rig.parents[k] == j
    return below


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
        times: frame times from the first frame [s], shape (F,), a float32 buffer (rendering).
        sample_times: the init motion's frame times [s], shape (F,), float64 (the distilled motion keeps them).
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
        if key_count is not None and not is_integer(key_count):
            raise ValueError(f"key_count: must be an integer number of spline keys (or None), got {key_count!r}")
        k = self.frame_count if key_count is None else min(int(key_count), self.frame_count)
        basis = catmull_rom_basis(self.frame_count, k)
        self.register_buffer("basis", torch.as_tensor(basis, dtype=torch.float32))
        self.register_buffer("times", torch.as_tensor(init.times - init.times[0], dtype=torch.float32))
        self.start_time = float(init.times[0])
        self.sample_times = np.array(init.times, dtype=np.float64)  # exact (the float32 buffer is for rendering)
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
        times = self.sample_times.copy()
        return Motion(self.fps, root, rot, trans if self.keeps_translations else None, times=times, name=name)
