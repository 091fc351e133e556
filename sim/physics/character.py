"""A rig as an articulated rigid-body character: bodies, capsule colliders, mass properties, joints, PD gains.

The description is plain NumPy (no Newton): :mod:`sim.physics.newton_model` turns it into a Newton model and
:mod:`usd_io.physics_usd` into a UsdPhysics stage, so both see exactly the same bodies, masses and limits.

Frames. Every body's frame is the world frame of its *representative* rig joint (the bone it was made from).
Rig joints merged into a body keep a fixed offset ``joint_offsets`` in that body's frame, taken from the
*reference pose* (the clip's mean local rotations, or the rest pose without a clip). Each non-root body hangs
from its parent body by a 3-DoF rotational joint (Newton D6 / UsdPhysics generic joint, translations locked):
its parent anchor is the child's frame at the reference pose rotated by the joint's axis frame ``A``, its child
anchor is ``A``. Joint coordinates are intrinsic X-Y-Z Euler angles of ``A^-1 D A``, where ``D`` is the rotation
of the child relative to the reference pose; ``A`` orders the axes so the least-used one sits in the middle
(away from gimbal lock).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from ..kinematics import pose_motion, skin_motion
from ..motion import Motion
from ..rig import Rig, RigError
from ..rotations import (
    matrix_to_quat,
    quat_conjugate,
    quat_multiply,
    quat_normalize,
    quat_rotate,
    quat_to_axis_angle,
    quat_to_matrix,
)
from ._capsules import Capsule, capsule_mass_properties, fit_capsule, fit_sole_capsule, segment_distance
from ._mesh_volume import enclosed_volume
from .config import CharacterConfig

__all__ = [
    "GRAVITY",
    "PhysicsCharacter",
    "build_character",
    "euler_xyz_to_quat",
    "quat_to_euler_xyz",
]

GRAVITY = 9.81
"""Gravitational acceleration [m/s^2] (along -Z)."""


def quat_to_euler_xyz(q: np.ndarray) -> np.ndarray:
    """Intrinsic X-Y-Z Euler angles [rad] of quaternions (..., 4): ``R = Rx(a) Ry(b) Rz(c)``, b in [-pi/2, pi/2].

    This is the coordinate convention of a Newton D6 joint with angular axes X, Y, Z.
    """
    m = quat_to_matrix(q)
    cos_b = np.hypot(m[..., 0, 0], m[..., 0, 1])
    b = np.arctan2(m[..., 0, 2], cos_b)
    # at |b| = 90 deg only a +- c is defined (the other entries are round-off): all of it on a
    lock = cos_b < 1e-9
    a = np.where(lock, np.arctan2(m[..., 2, 1], m[..., 1, 1]), np.arctan2(-m[..., 1, 2], m[..., 2, 2]))
    c = np.where(lock, 0.0, np.arctan2(-m[..., 0, 1], m[..., 0, 0]))
    return np.stack([a, b, c], axis=-1)


def _nearest_euler_equivalent(coords: np.ndarray, near: np.ndarray) -> np.ndarray:
    """The X-Y-Z Euler angles [rad] describing the same rotations as ``coords`` (..., 3) that lie nearest ``near``
    (same shape): of ``(x, y, z)`` and ``(x + pi, pi - y, z + pi)``, each angle moved by whole turns towards
    ``near``, the closer one.

    Reading coordinates back from rotations lands on ``|y| <= 90 deg``: a target at ``y = 100 deg`` came back as
    ``(x - 180, 80, z - 180) deg``, the same rotation, but the PD drives then swung X and Z half a turn.
    """
    coords = np.asarray(coords, dtype=np.float64)
    near = np.asarray(near, dtype=np.float64)
    twin = np.stack([coords[..., 0] + np.pi, np.pi - coords[..., 1], coords[..., 2] + np.pi], axis=-1)
    a, b = (c - 2.0 * np.pi * np.round((c - near) / (2.0 * np.pi)) for c in (coords, twin))
    closer = ((b - near) ** 2).sum(-1, keepdims=True) < ((a - near) ** 2).sum(-1, keepdims=True)
    return np.where(closer, b, a)


def _split_at_gimbal_lock(e: np.ndarray, prev: np.ndarray, tol: float = 1e-6) -> None:
    """Where Y is at +-90 deg (within ``tol`` [rad]) only X + Z (X - Z at -90) is defined: splits it, in place,
    nearest the previous frame's X and Z (``e``, ``prev``: (..., 3) [rad])."""
    sign = np.sign(np.sin(e[..., 1]))
    lock = np.abs(np.cos(e[..., 1])) < tol
    if not lock.any():
        return
    total = e[..., 0] + sign * e[..., 2]
    was = prev[..., 0] + sign * prev[..., 2]
    total = total - 2.0 * np.pi * np.round((total - was) / (2.0 * np.pi))
    half = 0.5 * (total - was)
    e[..., 0] = np.where(lock, prev[..., 0] + half, e[..., 0])
    e[..., 2] = np.where(lock, prev[..., 2] + sign * half, e[..., 2])


def euler_xyz_to_quat(e: np.ndarray) -> np.ndarray:
    """Quaternions (..., 4) from intrinsic X-Y-Z Euler angles [rad] (..., 3): ``Rx(a) Ry(b) Rz(c)``."""
    e = np.asarray(e, dtype=np.float64)
    half = 0.5 * e
    s, c = np.sin(half), np.cos(half)
    zero = np.zeros_like(s[..., 0])
    qx = np.stack([s[..., 0], zero, zero, c[..., 0]], -1)
    qy = np.stack([zero, s[..., 1], zero, c[..., 1]], -1)
    qz = np.stack([zero, zero, s[..., 2], c[..., 2]], -1)
    return quat_multiply(quat_multiply(qx, qy), qz)


def _rot_mul_pos(q: np.ndarray, p: np.ndarray, q2: np.ndarray, p2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Composition of rigid transforms (p, q) * (p2, q2)."""
    return p + quat_rotate(q, p2), quat_multiply(q, q2)


def _inv(p: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    qi = quat_conjugate(q)
    return -quat_rotate(qi, p), qi


@dataclass
class PhysicsCharacter:
    """An articulated rigid-body character made from a rig (see the module docstring for frames).

    Attributes:
        rig: the rig (already scaled to its physical size).
        config: the configuration it was built with.
        body_joint: representative rig joint per body, shape (body_count,); body 0 is the root.
        body_parent: parent body per body (-1 for the root), shape (body_count,).
        joint_body: owning body per rig joint, shape (joint_count,).
        joint_offset_pos, joint_offset_rot: each rig joint's frame in its owning body's frame at the reference
            pose [m] (joint_count, 3) and [quat xyzw] (joint_count, 4).
        capsules: one collider per body, in the body frame.
        body_mass: [kg], shape (body_count,).
        body_com: centre of mass in the body frame [m], shape (body_count, 3).
        body_inertia: inertia about the centre of mass in body-frame axes [kg m^2], shape (body_count, 3, 3).
        parent_anchor_pos, parent_anchor_rot: joint frame in the parent body's frame [m], [quat], shape
            (body_count, 3) / (body_count, 4); row 0 (root, free joint) is unused (identity).
        child_anchor_rot: joint frame in the child body's frame [quat], shape (body_count, 4) (position is 0).
        limit_lower, limit_upper: joint coordinate limits [rad], shape (body_count, 3); +-inf when unlimited;
            row 0 unused.
        stiffness: PD stiffness per joint coordinate [N m/rad], shape (body_count, 3); row 0 is 0.
        damping: PD damping per joint coordinate [N m s/rad], shape (body_count, 3).
        armature: rotor inertia per joint coordinate [kg m^2], shape (body_count, 3).
        support_body: True for bodies that touch the ground in the reference motion, shape (body_count,).
        collision_filter_pairs: body pairs (i < j) that never collide: parent/child pairs and pairs overlapping
            in the reference pose.
        filter_overlap_m: for the non-adjacent pairs among those, their deepest capsule overlap [m] in the poses
            that made them filtered (rest pose, first reference frame): the self-penetration metric counts only
            what lies beyond it.
        height: character height [m] (bind pose, Z).
        reference_local_rotations: the reference pose's local joint rotations [quat], shape (joint_count, 4).
        reference_body_pos, reference_body_rot: world body frames of the reference pose (root at the rig's rest
            position) [m] (body_count, 3) / [quat] (body_count, 4).
        notes: remarks made while building (e.g. meshless colliders).
    """

    rig: Rig
    config: CharacterConfig
    body_joint: np.ndarray
    body_parent: np.ndarray
    joint_body: np.ndarray
    joint_offset_pos: np.ndarray
    joint_offset_rot: np.ndarray
    capsules: list[Capsule]
    body_mass: np.ndarray
    body_com: np.ndarray
    body_inertia: np.ndarray
    parent_anchor_pos: np.ndarray
    parent_anchor_rot: np.ndarray
    child_anchor_rot: np.ndarray
    limit_lower: np.ndarray
    limit_upper: np.ndarray
    stiffness: np.ndarray
    damping: np.ndarray
    armature: np.ndarray
    support_body: np.ndarray
    collision_filter_pairs: list[tuple[int, int]]
    height: float
    reference_local_rotations: np.ndarray
    reference_body_pos: np.ndarray
    reference_body_rot: np.ndarray
    notes: list[str] = field(default_factory=list)
    filter_overlap_m: dict[tuple[int, int], float] = field(default_factory=dict)

    # -- sizes and names ----------------------------------------------------------------------------------
    @property
    def body_count(self) -> int:
        return len(self.body_joint)

    @property
    def body_names(self) -> list[str]:
        """Body names (their representative rig joints' names)."""
        return [self.rig.joint_names[j] for j in self.body_joint]

    @property
    def total_mass(self) -> float:
        return float(self.body_mass.sum())

    @property
    def dof_count(self) -> int:
        """Actuated joint coordinates (3 per non-root body)."""
        return 3 * (self.body_count - 1)

    def adjacent_pairs(self) -> list[tuple[int, int]]:
        """Parent/child body pairs (i < j)."""
        return [(int(min(p, b)), int(max(p, b))) for b, p in enumerate(self.body_parent) if p >= 0]

    def colliding_pairs(self) -> np.ndarray:
        """Body pairs that collide with each other, shape (P, 2) (empty without self-collision)."""
        if not self.config.self_collision:
            return np.zeros((0, 2), dtype=np.int32)
        skip = set(self.collision_filter_pairs)
        pairs = [(i, j) for i in range(self.body_count) for j in range(i + 1, self.body_count) if (i, j) not in skip]
        return np.array(pairs, dtype=np.int32).reshape(-1, 2)

    # -- reference motion -> body trajectories and joint coordinates ------------------------------------
    def body_transforms(self, motion: Motion) -> tuple[np.ndarray, np.ndarray]:
        """World body frames of a rig motion: positions [m] (F, B, 3) and rotations [quat] (F, B, 4)."""
        pos, rot = pose_motion(self.rig, motion)
        return pos[:, self.body_joint], rot[:, self.body_joint]

    def joint_coordinates(self, body_rot: np.ndarray, unwrap: bool = True) -> np.ndarray:
        """Joint coordinates [rad] of world body rotations (..., B, 4) -> (..., B - 1, 3) (Euler X-Y-Z).

        With ``unwrap`` and rotations (F, B, 4) (a leading frame axis), each frame's angles are put on the Euler
        branch nearest the previous frame's: no 2 pi jumps, and none of 180 deg in X and Z where Y passes
        +-90 deg (the principal branch keeps |Y| <= 90 deg).
        """
        parent = self.body_parent[1:]
        qp = body_rot[..., parent, :]
        qc = body_rot[..., 1:, :]
        # joint rotation: anchor_p^-1 * qp^-1 * qc * anchor_c
        rel = quat_multiply(quat_conjugate(qp), qc)
        rj = quat_multiply(quat_multiply(quat_conjugate(self.parent_anchor_rot[1:]), rel), self.child_anchor_rot[1:])
        e = quat_to_euler_xyz(rj)
        if unwrap and e.ndim == 3:
            for f in range(1, len(e)):
                e[f] = _nearest_euler_equivalent(e[f], e[f - 1])
                _split_at_gimbal_lock(e[f], e[f - 1])
        return e

    def body_rotations_from_coordinates(self, root_rot: np.ndarray, coords: np.ndarray) -> np.ndarray:
        """World body rotations (..., B, 4) from root rotations (..., 4) and joint coordinates (..., B - 1, 3)."""
        out = np.zeros((*root_rot.shape[:-1], self.body_count, 4))
        out[..., 0, :] = root_rot
        rj = euler_xyz_to_quat(coords)
        for b in range(1, self.body_count):
            p = self.body_parent[b]
            q = quat_multiply(out[..., p, :], self.parent_anchor_rot[b])
            q = quat_multiply(q, rj[..., b - 1, :])
            out[..., b, :] = quat_multiply(q, quat_conjugate(self.child_anchor_rot[b]))
        return out

    def body_positions_from_rotations(self, root_pos: np.ndarray, body_rot: np.ndarray) -> np.ndarray:
        """World body origins (..., B, 3) from the root origin (..., 3) and world body rotations (..., B, 4)."""
        out = np.zeros((*root_pos.shape[:-1], self.body_count, 3))
        out[..., 0, :] = root_pos
        for b in range(1, self.body_count):
            p = self.body_parent[b]
            out[..., b, :] = out[..., p, :] + quat_rotate(body_rot[..., p, :], self.parent_anchor_pos[b])
        return out

    def motion_from_bodies(self, body_pos: np.ndarray, body_rot: np.ndarray, fps: float, name: str = "tracked"):
        """The rig motion whose owning bodies move as given (merged joints ride rigidly on their bodies).

        Args:
            body_pos: world body origins [m], shape (F, B, 3).
            body_rot: world body rotations [quat], shape (F, B, 4).
            fps: frame rate of the samples [1/s].

        Returns:
            A :class:`Motion` of the rig (root translation and local rotations; local translations stay the rig's).
        """
        jb = self.joint_body
        wp_, wq = _rot_mul_pos(body_rot[:, jb], body_pos[:, jb], self.joint_offset_rot, self.joint_offset_pos)
        parents = self.rig.parents
        local = np.empty_like(wq)
        local[:, 0] = wq[:, 0]
        local[:, 1:] = quat_multiply(quat_conjugate(wq[:, parents[1:]]), wq[:, 1:])
        return Motion(fps, wp_[:, 0], quat_normalize(local), name=name)

    def reference_body_transforms(
        self, root_pos: np.ndarray | None = None, root_rot: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The reference pose's world body frames (every joint coordinate 0), (B, 3) [m] and (B, 4) [quat].

        Args:
            root_pos, root_rot: place the pose rigidly so that the root body sits at this frame [m], [quat xyzw]
                (both or neither); default: where the reference pose has it.
        """
        pos, rot = self.reference_body_pos.copy(), self.reference_body_rot.copy()
        if root_pos is None and root_rot is None:
            return pos, rot
        if root_pos is None or root_rot is None:
            raise ValueError("reference_body_transforms: give both root_pos and root_rot, or neither")
        turn = quat_multiply(np.asarray(root_rot, dtype=np.float64), quat_conjugate(rot[0]))
        return quat_rotate(turn, pos - pos[0]) + np.asarray(root_pos, dtype=np.float64), quat_multiply(turn, rot)

    def capsule_world(self, body_pos: np.ndarray, body_rot: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """World capsule segment ends (..., B, 3) x 2 for body frames (..., B, 3) / (..., B, 4)."""
        a = np.stack([c.endpoints[0] for c in self.capsules])
        b = np.stack([c.endpoints[1] for c in self.capsules])
        return body_pos + quat_rotate(body_rot, a), body_pos + quat_rotate(body_rot, b)

    @property
    def capsule_radii(self) -> np.ndarray:
        """Capsule radii [m], shape (body_count,)."""
        return np.array([c.radius for c in self.capsules])

    @functools.cached_property
    def collider_reach(self) -> np.ndarray:
        """Distance [m] from each body's centre of mass to the farthest point of its capsule, shape (body_count,)
        (computed once: the capsules and masses of a built character do not change)."""
        a = np.stack([c.endpoints[0] for c in self.capsules])
        b = np.stack([c.endpoints[1] for c in self.capsules])
        ends = np.maximum(np.linalg.norm(a - self.body_com, axis=-1), np.linalg.norm(b - self.body_com, axis=-1))
        return ends + self.capsule_radii

    def summary(self) -> str:
        """One line per body: name, parent, mass, capsule size, gains."""
        lines = [f"{self.rig.name}: {self.body_count} bodies, {self.total_mass:.3g} kg, height {self.height:.3g} m"]
        for b in range(self.body_count):
            c = self.capsules[b]
            p = self.body_parent[b]
            parent = self.body_names[p] if p >= 0 else "-"
            lines.append(
                f"  {self.body_names[b]:<24} parent {parent:<24} m={self.body_mass[b]:.3g}"
                f" r={c.radius:.3g} h={2 * c.half_height:.3g} ke={self.stiffness[b].round(3).tolist()}"
                f"{' support' if self.support_body[b] else ''}"
            )
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------
def _mean_rotations(q: np.ndarray) -> np.ndarray:
    """Chordal mean of quaternions over axis 0 (sign-aligned to the first), shape (F, J, 4) -> (J, 4)."""
    ref = q[0]
    sign = np.where(np.sum(q * ref, axis=-1, keepdims=True) < 0, -1.0, 1.0)
    m = (q * sign).sum(axis=0)
    return quat_normalize(m)


def _meshless_points(
    rig: Rig, world_pos: np.ndarray, radius_fraction: float, trunk_radius: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """Pseudo-vertices on a ring around each bone (joint -> child), owned by the joint. Returns points, owners.

    A bone's ring radius is ``radius_fraction`` x its length, and at least ``trunk_radius`` [m] for trunk bones
    (whose child's subtree holds at least a third of the joints), 0.8 ``trunk_radius`` for the bone ending at the
    topmost joint (the head); each trunk joint also gets a ball of points of that radius.
    """
    subtree = np.ones(rig.joint_count)
    for c in range(rig.joint_count - 1, 0, -1):  # parents first: accumulate children into parents
        subtree[rig.parents[c]] += subtree[c]
    trunk = subtree >= rig.joint_count / 3.0
    head = int(np.argmax(world_pos[:, 2])) if trunk_radius > 0.0 else -1  # the topmost joint ends the head bone
    pts, owners = [], []
    angles = np.linspace(0.0, 2 * np.pi, 8, endpoint=False)
    for c in range(1, rig.joint_count):
        j = rig.parents[c]
        a, b = world_pos[j], world_pos[c]
        d = b - a
        length = float(np.linalg.norm(d))
        if length < 1e-9:
            continue
        u = d / length
        t = np.cross(u, [1.0, 0.0, 0.0] if abs(u[0]) < 0.9 else [0.0, 1.0, 0.0])
        t /= np.linalg.norm(t)
        w = np.cross(u, t)
        r = max(radius_fraction * length, trunk_radius if trunk[c] else 0.8 * trunk_radius if c == head else 0.0)
        for s in np.linspace(0.0, 1.0, 5):
            ring = a + s * d + r * (np.cos(angles)[:, None] * t + np.sin(angles)[:, None] * w)
            pts.append(ring)
            owners.append(np.full(len(ring), j))
    if trunk_radius > 0.0:  # a ball at each trunk joint: a pelvis whose bones are all short still has a body
        golden = np.pi * (3.0 - np.sqrt(5.0))
        k = np.arange(32)
        z = 1.0 - 2.0 * (k + 0.5) / len(k)
        ball = np.stack([np.sqrt(1 - z * z) * np.cos(golden * k), np.sqrt(1 - z * z) * np.sin(golden * k), z], 1)
        for j in np.flatnonzero(trunk):
            pts.append(world_pos[j] + trunk_radius * ball)
            owners.append(np.full(len(ball), j))
    if not pts:
        raise RigError(f"rig {rig.name!r}: no bones to build colliders from")
    return np.concatenate(pts), np.concatenate(owners)


def _assign_bodies(rig: Rig, significant: np.ndarray) -> tuple[list[int], np.ndarray]:
    """Representative joints per body and the owning body per joint."""
    children = rig.children()
    below = np.asarray(significant, dtype=bool).copy()  # the joint's subtree holds a significant joint
    for j in range(rig.joint_count - 1, 0, -1):  # children before parents
        below[rig.parents[j]] |= below[j]
    # the root body: the first significant joint, or where the significant joints branch; a vertex-less side branch
    # (an IK helper beside the pelvis under a ground-level root) does not stop the descent
    root = 0
    while not significant[root]:
        onward = [c for c in children[root] if below[c]]
        if len(onward) != 1:
            break
        root = onward[0]
    body_joint = [root]
    joint_body = np.full(rig.joint_count, -1, dtype=np.int64)
    k = root
    while k >= 0:  # the chain above (and including) the root body's joint belongs to body 0
        joint_body[k] = 0
        k = int(rig.parents[k])
    for j in range(rig.joint_count):
        if joint_body[j] >= 0:
            continue
        if significant[j]:
            joint_body[j] = len(body_joint)
            body_joint.append(j)
        else:
            joint_body[j] = joint_body[rig.parents[j]]
    return body_joint, joint_body


def _axis_frame(rotvecs: np.ndarray) -> np.ndarray:
    """Rotation (3, 3) whose columns are the joint axes: most-used, least-used (middle), and their cross."""
    if len(rotvecs) < 3 or np.abs(rotvecs).max() < 1e-9:
        return np.eye(3)
    cov = rotvecs.T @ rotvecs / len(rotvecs)
    _, v = np.linalg.eigh(cov)  # ascending eigenvalues
    e_major, e_minor = v[:, 2], v[:, 0]
    # keep axes close to the body frame's own axes' signs for readability
    e_major = e_major * (1.0 if e_major[np.argmax(np.abs(e_major))] > 0 else -1.0)
    e_minor = e_minor * (1.0 if e_minor[np.argmax(np.abs(e_minor))] > 0 else -1.0)
    return np.stack([e_major, e_minor, np.cross(e_major, e_minor)], axis=1)


def build_character(rig: Rig, motion: Motion | None = None, cfg: CharacterConfig | None = None) -> PhysicsCharacter:
    """Builds the physics character of a rig (already at its physical size; see :func:`prepare_reference`).

    Args:
        rig: the rig; its skinned mesh (or, without one, its bones) gives the colliders.
        motion: the reference motion; it sets the reference pose (mean local rotations), the joint axis frames,
            the motion-derived joint limits and the ground-contact bodies. Without it the rest pose is used.
        cfg: builder options (scale the rig to a real size first: :func:`prepare_reference`).

    Raises:
        RigError: the motion does not fit the rig, or nothing to build colliders from.
    """
    cfg = (cfg or CharacterConfig()).check()
    notes: list[str] = []
    height = rig.height()
    if not (np.isfinite(height) and height > 0):
        raise RigError(f"rig {rig.name!r} has height {height:g} m: its joints and mesh are flat, nothing to size"
                       " colliders, gaps and gains by")  # fmt: skip
    if motion is not None:
        motion.check_rig(rig)
        ref_local = _mean_rotations(motion.rotations)
    else:
        ref_local = rig.rest_rotations.copy()
    ref_motion = Motion(1.0, rig.rest_translations[0][None], ref_local[None], name="reference_pose")
    wpos, wrot = (a[0] for a in pose_motion(rig, ref_motion))

    # -- points and their skinning weights ----------------------------------------------------------------
    if rig.meshes and sum(m.vertex_count for m in rig.meshes):
        mesh = rig.merged_mesh()
        points = skin_motion(rig, ref_motion)[0][0]
        weights = np.zeros((mesh.vertex_count, rig.joint_count))
        rows = np.repeat(np.arange(mesh.vertex_count)[:, None], mesh.influence_count, axis=1)
        np.add.at(weights, (rows, mesh.influence_joints), mesh.influence_weights)
    else:
        points, owner = _meshless_points(
            rig, wpos, cfg.meshless_radius_fraction, cfg.meshless_trunk_radius_fraction * height
        )
        weights = np.zeros((len(points), rig.joint_count))
        weights[np.arange(len(points)), owner] = 1.0
        notes.append("rig has no skinned mesh: colliders from bone capsules")
    thr = cfg.collider_weight_threshold
    extent = np.zeros(rig.joint_count)
    for j in range(rig.joint_count):
        p = points[weights[:, j] >= thr]
        if len(p):
            extent[j] = float(np.linalg.norm(p.max(0) - p.min(0)))
    significant = (weights.sum(axis=0) >= max(4.0, cfg.min_body_vertex_fraction * len(points))) & (
        extent >= cfg.min_body_size_fraction * height
    )
    body_joint_list, joint_body = _assign_bodies(rig, significant)
    body_joint = np.array(body_joint_list, dtype=np.int64)
    B = len(body_joint)
    if B < 2:
        raise RigError(f"rig {rig.name!r}: only one rigid body ({rig.joint_names[body_joint[0]]!r}); no other bone has"
                       " min_body_vertex_fraction of the vertices and min_body_size_fraction of the height: nothing to"
                       " articulate")  # fmt: skip
    body_parent = np.array([-1] + [int(joint_body[rig.parents[j]]) for j in body_joint[1:]], dtype=np.int64)
    body_weights = np.zeros((len(points), B))
    np.add.at(body_weights.T, joint_body, weights.T)

    # body frames at the reference pose and joint offsets
    bpos, brot = wpos[body_joint], wrot[body_joint]
    ipos, irot = _inv(bpos[joint_body], brot[joint_body])
    off_pos, off_rot = _rot_mul_pos(irot, ipos, wrot, wpos)

    # -- colliders ----------------------------------------------------------------------------------------
    member = body_weights >= thr
    lonely = ~member.any(axis=1)
    member[np.flatnonzero(lonely), np.argmax(body_weights[lonely], axis=1)] = True
    local_pts = []
    min_r = cfg.min_radius_fraction * height
    bare_r = np.zeros(B)  # radius floor of the bodies without vertices
    for b in range(B):
        p = points[member[:, b]]
        if len(p) == 0:
            # bones without vertices (a hub hips whose skin is weighted to the thighs): a bone capsule from its
            # origin to its child bodies' (a small sphere at a leaf), not a speck carrying what hangs below it
            p = np.concatenate([bpos[b][None], bpos[np.flatnonzero(body_parent == b)]])
            bare_r[b] = cfg.meshless_radius_fraction * height if len(p) > 1 else min_r
            shape = "a bone capsule to its child bodies" if len(p) > 1 else "a sphere at its origin"
            notes.append(f"body {rig.joint_names[body_joint[b]]!r} has no skinned vertices: {shape}, radius"
                         f" {bare_r[b]:.3g} m")  # fmt: skip
        ip, iq = _inv(bpos[b], brot[b])
        local_pts.append(ip + quat_rotate(iq, p))
    capsules = [fit_capsule(p, cfg.collider_radius_quantile, max(min_r, r)) for p, r in zip(local_pts, bare_r)]

    # -- support bodies from the reference motion (lowest capsule point near the ground) --------------------
    if motion is not None:
        fpos, frot = pose_motion(rig, motion)
        fb_pos, fb_rot = fpos[:, body_joint], frot[:, body_joint]
    else:
        fb_pos, fb_rot = bpos[None], brot[None]

    def lowest(caps):
        a = np.stack([c.endpoints[0] for c in caps])
        b = np.stack([c.endpoints[1] for c in caps])
        za = (fb_pos + quat_rotate(fb_rot, a))[..., 2]
        zb = (fb_pos + quat_rotate(fb_rot, b))[..., 2]
        return np.minimum(za, zb) - np.array([c.radius for c in caps])

    low = lowest(capsules)
    floor = float(low.min())
    near = low < floor + cfg.contact_height_fraction * height
    support = near.mean(axis=0) >= cfg.contact_frame_fraction
    feet = support_feet(support, body_parent)
    for b in np.flatnonzero(feet):  # a shin above its foot keeps its bone's capsule (a sole left 35 cm bare)
        if cfg.contact_colliders == "sole" and motion is not None:
            # the world's down seen in the body frame while the body touches the ground
            down_b = quat_rotate(quat_conjugate(fb_rot[near[:, b], b]), np.array([0.0, 0.0, -1.0])).mean(axis=0)
            capsules[b] = fit_sole_capsule(local_pts[b], down_b, min_r)
        else:
            capsules[b] = fit_capsule(local_pts[b], cfg.contact_collider_radius_quantile, min_r)

    # -- mass properties ------------------------------------------------------------------------------------
    rel = np.ones(B)
    for b in range(B):
        name = rig.joint_names[body_joint[b]].lower()
        if "tail" in name:
            rel[b] *= float(cfg.tail_density_scale)
        for key, factor in cfg.density_scale.items():
            if key.lower() in name:
                rel[b] *= float(factor)
    body_names_lower = [rig.joint_names[j].lower() for j in body_joint]
    for key in cfg.density_scale:
        if not any(key.lower() in n for n in body_names_lower):
            notes.append(f"CharacterConfig.density_scale[{key!r}]: matches no body of {rig.name!r}")
    density = cfg.density_kg_m3
    capsule_volume = np.array([c.volume() for c in capsules])
    if cfg.total_mass_kg is not None:
        density = cfg.total_mass_kg / float((rel * capsule_volume).sum())
    elif cfg.mass_from == "mesh" and rig.meshes and sum(m.vertex_count for m in rig.meshes):
        mesh_volume = enclosed_volume(points, mesh.triangles)  # the skinned reference pose, where the capsules are
        if mesh_volume is None:
            notes.append("skinned mesh is not closed: mass from the colliders' volume")
        else:
            # the capsules overlap at the joints and bulge past the skin: fill the skin's volume instead
            density *= mesh_volume / float(capsule_volume.sum())
            notes.append(
                f"mass from the skin's enclosed volume, {mesh_volume * 1e3:.4g} L (the capsules hold "
                f"{capsule_volume.sum() * 1e3:.4g} L)"
            )
    props = [capsule_mass_properties(c, density * r) for r, c in zip(rel, capsules)]
    body_mass = np.array([p[0] for p in props])
    body_com = np.stack([p[1] for p in props])
    body_inertia = np.stack([p[2] for p in props])
    total_mass = float(body_mass.sum())

    # -- joints: anchors, axis frames ---------------------------------------------------------------------
    parent_anchor_pos = np.zeros((B, 3))
    parent_anchor_rot = np.tile([0.0, 0.0, 0.0, 1.0], (B, 1))
    child_anchor_rot = np.tile([0.0, 0.0, 0.0, 1.0], (B, 1))
    par_ipos, par_irot = _inv(bpos[body_parent[1:]], brot[body_parent[1:]])
    rel_pos, rel_rot = _rot_mul_pos(par_irot, par_ipos, brot[1:], bpos[1:])
    parent_anchor_pos[1:] = rel_pos
    if motion is not None:
        rel_t = quat_multiply(quat_conjugate(fb_rot[:, body_parent[1:]]), fb_rot[:, 1:])  # (F, B-1, 4)
        dev = quat_multiply(quat_conjugate(rel_rot)[None], rel_t)
        rotvec = quat_to_axis_angle(dev)  # in the child's reference frame
    for b in range(1, B):
        a_mat = _axis_frame(rotvec[:, b - 1]) if motion is not None else np.eye(3)
        a_q = matrix_to_quat(a_mat)
        child_anchor_rot[b] = a_q
        parent_anchor_rot[b] = quat_multiply(rel_rot[b - 1], a_q)

    character = PhysicsCharacter(
        rig=rig,
        config=cfg,
        body_joint=body_joint,
        body_parent=body_parent,
        joint_body=joint_body,
        joint_offset_pos=off_pos,
        joint_offset_rot=off_rot,
        capsules=capsules,
        body_mass=body_mass,
        body_com=body_com,
        body_inertia=body_inertia,
        parent_anchor_pos=parent_anchor_pos,
        parent_anchor_rot=parent_anchor_rot,
        child_anchor_rot=child_anchor_rot,
        limit_lower=np.full((B, 3), -np.inf),
        limit_upper=np.full((B, 3), np.inf),
        stiffness=np.zeros((B, 3)),
        damping=np.zeros((B, 3)),
        armature=np.zeros((B, 3)),
        support_body=support,
        collision_filter_pairs=[],
        height=height,
        reference_local_rotations=ref_local,
        reference_body_pos=bpos.copy(),
        reference_body_rot=brot.copy(),
        notes=notes,
    )

    # -- joint limits -------------------------------------------------------------------------------------
    margin = np.deg2rad(cfg.joint_limit_margin_deg)
    half_min = np.deg2rad(cfg.min_joint_half_range_deg)
    if cfg.joint_limits == "motion" and motion is not None:
        coords = character.joint_coordinates(fb_rot)
        lo, hi = coords.min(axis=0) - margin, coords.max(axis=0) + margin
        mid = 0.5 * (lo + hi)
        half = np.maximum(0.5 * (hi - lo), half_min)
        # the coordinates are unwrapped (one Euler branch along the clip), so a range may pass +-180 deg: clamping
        # it there held a joint turning on past 180 deg at the limit; a window of a whole turn or more is no limit
        full = half >= np.pi
        character.limit_lower[1:] = np.where(full, -np.inf, mid - half)
        character.limit_upper[1:] = np.where(full, np.inf, mid + half)
        # keep the middle (Y) coordinate off the gimbal singularity
        character.limit_lower[1:, 1] = np.maximum(character.limit_lower[1:, 1], -np.deg2rad(85.0))
        character.limit_upper[1:, 1] = np.minimum(character.limit_upper[1:, 1], np.deg2rad(85.0))
        beyond = np.abs(coords[..., 1]).max(axis=0) > np.deg2rad(85.0)
        for b in np.flatnonzero(beyond) + 1:
            y = np.rad2deg(np.abs(coords[:, b - 1, 1]).max())
            notes.append(f"joint {rig.joint_names[body_joint[b]]!r}: the reference's Y coordinate reaches"
                         f" {y:.0f} deg, past the +-85 deg limit that keeps it off the gimbal singularity: tracked"
                         " only up to it")  # fmt: skip
    for name, (lo_deg, hi_deg) in cfg.joint_limits_deg.items():
        if name not in rig.joint_names:
            raise ValueError(f"CharacterConfig.joint_limits_deg[{name!r}]: rig {rig.name!r} has no joint of that name")
        j = rig.joint_index(name)
        b = int(joint_body[j])
        if b == 0 and body_joint[0] == j:
            raise RigError(f"joint_limits_deg: joint {name!r} is the root body's (a free joint): it has no limits")
        if body_joint[b] != j or b == 0:
            raise RigError(f"joint_limits_deg: joint {name!r} is merged into body {rig.joint_names[body_joint[b]]!r}")
        character.limit_lower[b] = np.deg2rad(lo_deg)
        character.limit_upper[b] = np.deg2rad(hi_deg)

    # -- PD gains from effective inertia -------------------------------------------------------------------
    _set_gains(character, bpos, brot, cfg, total_mass)

    # -- collision filtering ------------------------------------------------------------------------------
    adjacent = set(character.adjacent_pairs())
    filt = set(adjacent)
    overlap: dict[tuple[int, int], float] = {}
    if cfg.filter_reference_overlaps:
        poses = [(bpos, brot)]
        if motion is not None:
            poses.append((fb_pos[0], fb_rot[0]))
        for pp, pr in poses:
            a, b_ = character.capsule_world(pp, pr)
            r = character.capsule_radii
            i, j = np.triu_indices(B, 1)
            depth = r[i] + r[j] - segment_distance(a[i], b_[i], a[j], b_[j])
            for x, y, dep in zip(i[depth > 0], j[depth > 0], depth[depth > 0]):
                pair = (int(x), int(y))
                filt.add(pair)
                if pair not in adjacent:
                    overlap[pair] = max(overlap.get(pair, 0.0), float(dep))
    character.collision_filter_pairs = sorted(filt)
    character.filter_overlap_m = overlap
    return character


def support_feet(support: np.ndarray, body_parent: np.ndarray) -> np.ndarray:
    """The feet among the support bodies: those with no support body below them in the tree, shape (B,) bool.

    Args:
        support: support-body flags, shape (B,).
        body_parent: parent body index per body (-1 or 0 for the root's), bodies ordered parents first, (B,).
    """
    support = np.asarray(support, dtype=bool)
    below = np.zeros(len(support), dtype=bool)  # a support body somewhere below
    for b in range(len(support) - 1, 0, -1):  # children before parents
        if support[b] or below[b]:
            below[body_parent[b]] = True
    return support & ~below


def _set_gains(ch: PhysicsCharacter, bpos, brot, cfg: CharacterConfig, total_mass: float) -> None:
    """Stiffness/damping per joint coordinate from the effective inertia about each joint axis."""
    B = ch.body_count
    # world-frame com and inertia of each body at the reference pose
    com_w = bpos + quat_rotate(brot, ch.body_com)
    rmat = quat_to_matrix(brot)
    inertia_w = rmat @ ch.body_inertia @ np.swapaxes(rmat, -1, -2)
    children: list[list[int]] = [[] for _ in range(B)]
    for b in range(1, B):
        children[ch.body_parent[b]].append(b)
    subtree = [[b] for b in range(B)]
    for b in range(B - 1, 0, -1):
        subtree[ch.body_parent[b]].extend(subtree[b])
    # support chains: bodies from the root to each foot (a leg's lowest support body: a shin and its foot, or a
    # foot and its toes, are one leg carrying one share of the weight)
    chains = list(np.flatnonzero(support_feet(ch.support_body, ch.body_parent)))
    on_chain = np.zeros(B, dtype=int)
    lever = np.zeros(B)
    # where each support body meets the ground: the lowest point of its capsule at the reference pose
    seg_a, seg_b = ch.capsule_world(bpos, brot)
    low_end = np.where((seg_a[:, 2] < seg_b[:, 2])[:, None], seg_a, seg_b)
    contact = low_end - ch.capsule_radii[:, None] * np.array([0.0, 0.0, 1.0])
    for s in chains:
        k = s
        while k > 0:
            on_chain[k] += 1
            lever[k] = max(lever[k], float(np.linalg.norm(contact[s] - bpos[k])))
            k = ch.body_parent[k]
    n_chains = max(len(chains), 1)
    omega = 2.0 * np.pi * cfg.stiffness_hz
    for b in range(1, B):
        joint_p = bpos[b]
        i_sub = np.zeros((3, 3))
        for k in subtree[b]:
            r = com_w[k] - joint_p
            i_sub += inertia_w[k] + ch.body_mass[k] * (np.dot(r, r) * np.eye(3) - np.outer(r, r))
        # joint axes in world: parent body rotation * parent anchor rotation (coordinates are about those axes)
        axes = quat_to_matrix(quat_multiply(brot[ch.body_parent[b]], ch.parent_anchor_rot[b]))
        i_eff = np.array([axes[:, k] @ i_sub @ axes[:, k] for k in range(3)])
        if cfg.support_load and on_chain[b]:
            i_eff = i_eff + total_mass * lever[b] ** 2 / n_chains
        ch.stiffness[b] = omega**2 * i_eff
        ch.damping[b] = 2.0 * cfg.damping_ratio * omega * i_eff
        ch.armature[b] = cfg.armature_fraction * float(i_eff.mean())  # one value per joint (USD: newton:armature)
