"""A rig prepared for the pose space: canonical frames, joint features, the body, and pose encoding.

Pose coordinates (see :mod:`posespace.skeleton`): a pose of a ``J``-joint rig is ``d`` in 6D form, shape
(J, 6): each active joint's rotation away from rest in its canonical bone frame; the root's is its world tilt with
the heading removed (root translation and heading are not part of a pose). Inactive joints stay at rest.
"""

from __future__ import annotations

import numpy as np
import torch

from sim import Motion, Rig
from sim.rotations import (
    matrix_to_rot6d,
    quat_conjugate,
    quat_identity,
    quat_multiply,
    quat_rotate,
    quat_to_matrix,
    quat_to_rot6d,
    rot6d_to_matrix,
    rot6d_to_quat,
)

from ._rotations import remove_twist_x, twist_quat_x
from .body import BodyConfig, BodyModel
from .skeleton import (
    CharacterFrame,
    canonical_frames,
    graph_distances,
    joint_active_mask,
    rest_offsets_world,
    rig_signature,
)

__all__ = ["FEATURE_COUNT", "IDENTITY_6D", "PoseRig"]

IDENTITY_6D = np.array([1.0, 0.0, 0.0, 0.0, 1.0, 0.0])
"""6D form of the identity rotation (first two matrix columns)."""

FEATURE_COUNT = 26
"""Length of a joint's conditioning feature vector (see :meth:`PoseRig.joint_features`)."""


class PoseRig:
    """Constants of one rig for the pose model and the validators.

    Attributes:
        rig: the rig.
        joint_count: J.
        height: rig height [m].
        signature: skeleton hash (see :func:`posespace.skeleton.rig_signature`).
        frame: facing and left/right symmetry.
        frames_world: canonical frames, world rest [quat xyzw], shape (J, 4).
        frames_local: canonical frames in each joint's rest frame [quat xyzw], shape (J, 4).
        active: joints the model poses, shape (J,), bool.
        active_index: their indices (the model's tokens), shape (A,).
        distances: skeletal graph distance (hops), shape (J, J).
        features: per-joint conditioning features, shape (J, FEATURE_COUNT), float32.
        body: parts, collision spheres and blend pairs of the skinned body.
    """

    def __init__(self, rig: Rig, body_config: BodyConfig | None = None):
        self.rig = rig
        self.joint_count = rig.joint_count
        self.height = max(rig.height(), 1e-9)
        self.signature = rig_signature(rig)
        self.frame = CharacterFrame(rig)
        self.frames_world, self.frames_local = canonical_frames(rig, self.frame)
        # mirror of a canonical rotation D_j onto joint m(j): P_j D_j P_j^T with P_j = F_m(j)^T M F_j
        fw = quat_to_matrix(self.frames_world)
        self._mirror_p = np.einsum("jba,bc,jcd->jad", fw[self.frame.mirror], self.frame.reflection, fw)
        self.active = joint_active_mask(rig)
        self.active_index = np.flatnonzero(self.active)
        self.distances = graph_distances(rig.parents)
        self.body = BodyModel(rig, body_config)
        self.features = self.joint_features()
        # q_local = pre * d * post with pre = q_rest * c, post = c^-1
        self._pre = quat_multiply(rig.rest_rotations, self.frames_local)
        self._post = quat_conjugate(self.frames_local)
        self._torch_cache: dict = {}

    # -- features -------------------------------------------------------------------------------------------
    def joint_features(self) -> np.ndarray:
        """Conditioning features per joint, shape (J, FEATURE_COUNT), float32.

        Vectors are in the character's (forward, left, up) coordinates.
        Columns: rest offset from the parent / h (3), rest position relative to the root / h (3), canonical
        bone axis (3) and second axis (3) in the world, depth / 10, bone length / h, child count / 4, subtree
        share, leaf flag, longest chain below / h, root flag, skinned-region vertex share, region thickness / h,
        region extent / h, region centroid minus joint / h (3), height above the rig's lowest joint / h.
        """
        rig, h, body = self.rig, self.height, self.body
        J = rig.joint_count
        to_char = self.frame.axes.T  # world -> (forward, left, up)
        pos, _ = rig.rest_world_transforms()
        pos = pos @ to_char.T
        offsets = rest_offsets_world(rig) @ to_char.T
        frames = np.stack(
            [quat_rotate(self.frames_world, np.array(e)) @ to_char.T for e in ([1.0, 0, 0], [0, 1.0, 0])], axis=1
        )  # (J, 2, 3)
        depth = rig.depths()
        children = rig.children()
        size = np.ones(J)
        chain = np.zeros(J)
        for j in range(J - 1, 0, -1):
            p = rig.parents[j]
            size[p] += size[j]
            chain[p] = max(chain[p], chain[j] + np.linalg.norm(offsets[j]))
        f = np.zeros((J, FEATURE_COUNT))
        f[:, 0:3] = offsets / h
        f[:, 3:6] = (pos - pos[0]) / h
        f[:, 6:9] = frames[:, 0]
        f[:, 9:12] = frames[:, 1]
        f[:, 12] = depth / 10.0
        f[:, 13] = np.linalg.norm(offsets, axis=-1) / h
        f[:, 14] = np.array([len(c) for c in children]) / 4.0
        f[:, 15] = size / J
        f[:, 16] = np.array([len(c) == 0 for c in children], dtype=float)
        f[:, 17] = chain / h
        f[0, 18] = 1.0
        f[:, 19] = body.region_share
        f[:, 20] = body.region_radius / h
        f[:, 21] = body.region_extent / h
        f[:, 22:25] = body.region_centroid @ to_char.T / h
        f[:, 25] = (pos[:, 2] - pos[:, 2].min()) / h
        return f.astype(np.float32)

    # -- encoding (NumPy) -----------------------------------------------------------------------------------
    def encode_rotations(self, rotations: np.ndarray) -> np.ndarray:
        """Local joint rotations [quat xyzw] (N, J, 4) -> canonical pose quaternions ``d`` (N, J, 4).

        The root's heading is removed; inactive joints are set to identity.
        """
        rotations = np.asarray(rotations, dtype=np.float64)
        d = quat_multiply(quat_multiply(quat_conjugate(self._pre), rotations), quat_conjugate(self._post))
        d[..., 0, :] = remove_twist_x(d[..., 0, :])
        d[..., ~self.active, :] = quat_identity()
        return np.where(d[..., 3:4] < 0, -d, d)

    def decode_quats(self, d: np.ndarray, headings: np.ndarray | None = None) -> np.ndarray:
        """Canonical pose quaternions ``d`` (N, J, 4) -> local joint rotations [quat xyzw] (N, J, 4).

        Args:
            headings: optional world yaw rotations [quat xyzw] re-applied to the root, shape (N, 4).
        """
        d = np.array(d, dtype=np.float64)
        d[..., ~self.active, :] = quat_identity()
        out = quat_multiply(quat_multiply(self._pre, d), self._post)
        if headings is not None:
            out[..., 0, :] = quat_multiply(headings, out[..., 0, :])
        return out

    def headings(self, rotations: np.ndarray) -> np.ndarray:
        """World yaw (rotation about up) of the root of each pose, the part :meth:`encode` drops, shape (N, 4)."""
        rotations = np.asarray(rotations, dtype=np.float64)
        d0 = quat_multiply(quat_multiply(quat_conjugate(self._pre[0]), rotations[..., 0, :]), self.frames_local[0])
        t = twist_quat_x(d0)
        f = self.frames_world[0]
        return quat_multiply(quat_multiply(f, t), quat_conjugate(f))

    def encode(self, motion: Motion) -> np.ndarray:
        """Every frame of ``motion`` as a pose in 6D form, shape (F, J, 6)."""
        motion.check_rig(self.rig)
        return quat_to_rot6d(self.encode_rotations(motion.rotations))

    def decode(
        self,
        poses: np.ndarray,
        fps: float = 30.0,
        name: str = "poses",
        like: Motion | None = None,
        on_ground: bool = True,
    ) -> Motion:
        """Poses in 6D form (N, J, 6) -> a Motion with one pose per frame.

        Args:
            like: a motion with the same frame count whose root translations, headings, inactive joints' rotations,
                times, fps and name are kept (e.g. the input of a projection).
            on_ground: without ``like``: each pose stands on the ground, its lowest point (skinned vertex, or joint
                for rigs without a mesh) at z = 0, the root above its rest position's x, y (:meth:`ground_heights`),
                facing the rest heading. False: the root at its rest position (BVH rigs have the hips at the origin
                there, so the feet end up below the ground) -- cheaper where only root-relative positions matter.
        """
        poses = np.asarray(poses, dtype=np.float64)
        if like is not None:
            if like.frame_count != len(poses):
                raise ValueError(f"like: {like.frame_count} frames for {len(poses)} poses")
            rot = self.decode_quats(rot6d_to_quat(poses), self.headings(like.rotations))
            rot[:, ~self.active] = like.rotations[:, ~self.active]
            return Motion(like.fps, like.root_translations, rot, like.translations, times=like.times, name=like.name)
        rot = self.decode_quats(rot6d_to_quat(poses))
        root = np.broadcast_to(self.rig.rest_translations[0], (len(poses), 3)).copy()
        if on_ground:
            root[:, 2] = self.ground_heights(rot)
        return Motion(fps, root, rot, name=name)

    def lowest_points(self, rotations: np.ndarray, translations: np.ndarray | None = None) -> np.ndarray:
        """Height [m] of the lowest point of each pose with the root at the origin, shape (N,): over the skinned
        vertices of the rig's meshes, or over the joints of a rig without a mesh.

        Args:
            rotations: local joint rotations [quat xyzw], shape (N, J, 4).
            translations: optional local joint translations [m], shape (N, J, 3) (the root column is ignored);
                the rest translations when None.
        """
        import sim

        rotations = np.asarray(rotations, dtype=np.float64)
        if translations is not None:
            translations = np.array(translations, dtype=np.float64)
            translations[:, 0] = 0.0
        motion = Motion(30.0, np.zeros((len(rotations), 3)), rotations, translations)
        if self.rig.meshes:
            points, _ = sim.skin_motion(self.rig, motion)
        else:
            points, _ = sim.pose_motion(self.rig, motion)
        return points[..., 2].min(axis=1)

    def ground_heights(self, rotations: np.ndarray, translations: np.ndarray | None = None) -> np.ndarray:
        """Root height [m] that puts the lowest point of each pose (:meth:`lowest_points`, same arguments) on the
        ground z = 0, shape (N,)."""
        return -self.lowest_points(rotations, translations)

    def mirror(self, poses: np.ndarray) -> np.ndarray:
        """Left/right mirror images of 6D poses (N, J, 6) (identity map for rigs without verified symmetry: a copy
        of ``poses``, as the mirror map is unknown there)."""
        poses = np.asarray(poses, dtype=np.float64)
        if not self.frame.symmetric:
            return poses.copy()
        m = rot6d_to_matrix(poses)
        p = self._mirror_p
        out = np.empty_like(m)
        out[..., self.frame.mirror, :, :] = p @ m @ np.swapaxes(p, -1, -2)
        return matrix_to_rot6d(out)

    def rest_pose(self, n: int = 1) -> np.ndarray:
        """The rest pose in 6D form, shape (n, J, 6)."""
        return np.broadcast_to(IDENTITY_6D, (n, self.joint_count, 6)).copy()

    # -- torch ----------------------------------------------------------------------------------------------
    def torch_constants(self, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> dict:
        """Cached torch copies of the encoding constants and features on ``device``."""
        key = (str(device), dtype)
        if key not in self._torch_cache:
            t = lambda a: torch.as_tensor(np.asarray(a), dtype=dtype, device=device)  # noqa: E731
            self._torch_cache[key] = {
                "pre": t(self._pre),
                "post": t(self._post),
                "active": torch.as_tensor(self.active, device=device),
                "features": t(self.features),
                "distances": torch.as_tensor(self.distances, dtype=torch.long, device=device),
                "identity6d": t(IDENTITY_6D),
            }
        return self._torch_cache[key]

    def encode_torch(self, rotations: torch.Tensor) -> torch.Tensor:
        """Differentiable :meth:`encode_rotations` + 6D: local joint rotations [quat xyzw] (..., J, 4) -> 6D poses
        (..., J, 6) (root heading removed, inactive joints identity)."""
        from sim.torch_ops import quat_multiply, quat_to_rot6d

        from ._rotations import TWIST_EPS, quat_conjugate_t

        c = self.torch_constants(rotations.device, rotations.dtype)
        q = rotations / rotations.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        pre, post = c["pre"].expand_as(q), c["post"].expand_as(q)
        d = quat_multiply(quat_multiply(quat_conjugate_t(pre), q), quat_conjugate_t(post))
        root = torch.where(d[..., 0, 3:4] < 0, -d[..., 0, :], d[..., 0, :])
        # a half-turn swing has no twist (below TWIST_EPS, as NumPy); the masked inputs keep gradients finite
        ok = root[..., 0] ** 2 + root[..., 3] ** 2 > TWIST_EPS
        qx, qw = torch.where(ok, root[..., 0], 0.0), torch.where(ok, root[..., 3], 1.0)
        norm = torch.sqrt(qx**2 + qw**2)
        zero = torch.zeros_like(norm)
        twist = torch.stack([qx / norm, zero, zero, qw / norm], dim=-1)
        d = torch.cat([quat_multiply(quat_conjugate_t(twist), root)[..., None, :], d[..., 1:, :]], dim=-2)
        x = quat_to_rot6d(d)
        return torch.where(c["active"][:, None], x, c["identity6d"])

    def check_poses(self, x: torch.Tensor | np.ndarray, name: str = "poses", flat: bool = False) -> None:
        """ValueError naming ``name`` unless ``x`` is a batch of 6D poses of this rig, shape (N, ..., J, 6) (at
        least one batch dimension: a single (J, 6) pose, or one of another joint count, would broadcast against
        the rig's constants into something else); exactly (N, J, 6) when ``flat``."""
        shape = tuple(x.shape)
        if (len(shape) != 3 if flat else len(shape) < 3) or shape[-2:] != (self.joint_count, 6):
            more = "" if flat else " (or more batch dimensions)"
            raise ValueError(f"{name}: 6D poses of rig {self.rig.name!r} must have shape (N, {self.joint_count}, 6)"
                             f"{more}, got {shape}")  # fmt: skip

    def decode_torch(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Differentiable decode of 6D poses (N, ..., J, 6) (ValueError for other shapes, :meth:`check_poses`).

        Returns:
            d: canonical pose quaternions [xyzw], inactive joints identity, shape (N, ..., J, 4).
            local: local joint rotations [xyzw], shape (N, ..., J, 4).
        """
        from sim.torch_ops import quat_multiply, rot6d_to_quat

        self.check_poses(x, "x")
        c = self.torch_constants(x.device, x.dtype)
        x = torch.where(c["active"][:, None], x, c["identity6d"])
        d = rot6d_to_quat(x)
        local = quat_multiply(quat_multiply(c["pre"].expand_as(d), d), c["post"].expand_as(d))
        return d, local

    def __repr__(self) -> str:
        return f"PoseRig({self.rig.name!r}, joints={self.joint_count}, active={int(self.active.sum())})"
