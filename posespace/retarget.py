"""Pose transfer between humanoid skeletons through the canonical bone frames of :mod:`posespace.skeleton`.

A *humanoid correspondence* (:func:`humanoid_map`) names, for any humanoid rig, the joints that play the roles
of the procedural biped's: pelvis, a torso chain (pelvis to the joint the arms hang from), a neck chain, head, and
per side clavicle / upper arm / forearm / hand and thigh / shin / foot / toes. It is found generically: left/right
pairs from :class:`posespace.CharacterFrame` (verified mirror symmetry), the spine as the path from the root to
the highest active joint on the symmetry plane, limbs as the side subtrees hanging off it (legs reach lowest, arms
are the longest of the rest), and along each limb's main chain (largest subtree first, end sites and joints at
the same place as their predecessor skipped) the middle joint found by name (``knee|shin|calf|lowerleg|tibia``,
``Leg``; ``forearm|lowerarm|elbow``) or, failing that, by shape (a leg's last long downward bone; an arm's last
long bone). The joints before and after it take the other roles, so CMU's ``LHipJoint -> LeftHip -> LeftKnee``,
Mixamo's ``LeftUpLeg -> LeftLeg`` and the biped's ``left_thigh -> left_shin`` all map knee to knee.

Transfer (:func:`retarget_motion`), frame by frame, parents first, with ``A`` the map from the source's
character axes (forward, left, up) to the target's and ``C_j`` the smallest rotation turning target bone ``j``'s
rest direction onto its source bone's (carried by ``A``):

* posture roles (:data:`ALIGNED_ROLES`: thighs and upper arms) and a root pelvis turn in the world like their
  source bone does away from its rest, starting from the target's rest bone turned by ``C_j``: they point the
  way the source's point even where the rest postures differ (A-pose vs arms down, legs spread vs closed);
* the other matched joints (clavicles, forearms, hands, shins, feet, toes, head) take the source's canonical
  rotation, ``d_t = P d_s P^-1``: ``P`` (a twist about the bone) reconciles the two canonical frames once the
  bones are aligned, because a frame's second axis follows world up for slanted bones and the character's left
  for near-vertical ones (without it an A-pose's right elbow would flex backwards on an arms-down rig). Rest
  counts as neutral on both rigs here (a flat foot, a straight knee), whatever the bone geometry;
* chains of different lengths (torso, neck): each target joint gets its share of the source chain's rotation
  vectors ``log d`` (by equal fractions of the chain, so equal lengths copy ``d`` one to one);
* every other joint (e.g. CMU ``LHipJoint``, ``lhand``, fingers) keeps its rest rotation (``d = I``).

The root's horizontal displacement from its rest position is scaled by the ratio of the pelvis heights and turned
into the target's axes; its height puts the target's lowest joint as high above the ground (z = 0) as the source's,
scaled the same way and counted from each rig's standing clearance (how high its lowest joint sits when it stands in
its rest pose), so feet on the ground stay on it whatever the proportions, also on rigs whose rest pose has the
hips, not the feet, at z = 0 (BVH). Poses ignore the root.
On the same skeleton the transfer reproduces the local rotations of the joints with a role exactly (``A``, ``C_j``
and ``P`` are identities); the joints without one are at rest, as on any target.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

import numpy as np

from sim import Motion, Rig, RigError, pose_motion, skin_motion
from sim.rotations import (
    axis_angle_to_quat,
    matrix_to_quat,
    quat_conjugate,
    quat_multiply,
    quat_normalize,
    quat_rotate,
    quat_to_axis_angle,
)

from .skeleton import MIN_BONE_FRACTION, CharacterFrame, canonical_frames, joint_active_mask

__all__ = ["ALIGNED_ROLES", "ARM_ROLES", "LEG_ROLES", "HumanoidMap", "humanoid_map", "retarget_motion"]

ARM_ROLES = ("clavicle", "upper_arm", "lower_arm", "hand")
"""Per-side arm roles (joint names of the procedural biped without the ``left_``/``right_`` prefix)."""

LEG_ROLES = ("thigh", "shin", "foot", "toes")
"""Per-side leg roles."""

UPRIGHT_COS = 0.8
"""The pelvis-to-head direction must be within ~37 deg of world up for a rig to count as a humanoid."""

LONG_BONE = 0.08
"""Fallback role finding: a bone at least this fraction of the rig height is a limb segment, not a hand/foot."""

ALIGNED_ROLES = ("thigh", "upper_arm")
"""Roles whose bone *direction* is transferred (rest postures differ most there: A-pose, arms down, legs
spread); the other matched joints copy their canonical rotation ``d`` (rest counts as neutral on both rigs)."""

DOWNWARD_COS = 0.75
"""Fallback role finding: a shin points down within ~41 deg of vertical at rest."""

_FOREARM_TOKENS = re.compile(r"forearm|lowerarm|elbow|radius|ulna")
_SHIN_TOKENS = re.compile(r"knee|shin|calf|lowerleg|tibia|^leg$")
_SIDE_TOKENS = re.compile(r"(left|right)", re.IGNORECASE)


@dataclass(frozen=True)
class HumanoidMap:
    """Joint indices of one rig per humanoid role (-1: the rig has no such joint).

    Attributes:
        pelvis: the joint the legs hang from (the root for most rigs).
        torso: spine joints after the pelvis up to and including the one the arms hang from, bottom first.
        neck: spine joints after that, before the head.
        head: the highest active joint on the symmetry plane.
        roles: ``"left_thigh"`` etc. (:data:`ARM_ROLES`, :data:`LEG_ROLES` per side) -> joint index or -1.
    """

    pelvis: int
    torso: tuple[int, ...]
    neck: tuple[int, ...]
    head: int
    roles: dict[str, int]

    def one_to_one(self) -> dict[str, int]:
        """Roles that map joint to joint (pelvis, head and the limb roles present in this rig)."""
        out = {"pelvis": self.pelvis, "head": self.head}
        out.update({k: v for k, v in self.roles.items() if v >= 0})
        return out

    def named(self, rig: Rig) -> dict[str, str | list[str]]:
        """The map with joint names (for messages and reports)."""
        n = rig.joint_names
        out: dict[str, str | list[str]] = {"pelvis": n[self.pelvis], "head": n[self.head]}
        out["torso"] = [n[j] for j in self.torso]
        out["neck"] = [n[j] for j in self.neck]
        out.update({k: (n[v] if v >= 0 else "-") for k, v in self.roles.items()})
        return out


def _base_name(name: str) -> str:
    """Joint name without namespace, side markers, digits and separators, lower case (``LeftForeArm`` ->
    ``forearm``, ``mixamorig:LeftLeg`` -> ``leg``)."""
    s = re.split(r"[:|/]", name)[-1]  # FBX / Maya namespaces and DAG paths
    s = re.sub(r"[_.]?\d+$", "", s)
    s = _SIDE_TOKENS.sub("", s)
    s = re.sub(r"^[LlRr](?=[A-Z_.])", "", s)
    s = re.sub(r"[_.][LlRr]$", "", s)
    return re.sub(r"[^a-z]", "", s.lower())


def humanoid_map(rig: Rig, frame: CharacterFrame | None = None) -> HumanoidMap:
    """The humanoid correspondence of ``rig`` (module docstring).

    Raises:
        RigError: the rig has no verified left/right symmetry, no upright spine, or no two pairs of limbs shaped
            like legs and arms (e.g. a quadruped).
    """
    frame = frame or CharacterFrame(rig)
    what = f"rig {rig.name!r}: no humanoid correspondence"
    if not frame.symmetric:
        raise RigError(f"{what}: no verified left/right joint pairs")
    J = rig.joint_count
    pos, _ = rig.rest_world_transforms()
    height = max(rig.height(), 1e-9)
    tiny = MIN_BONE_FRACTION * height
    parents = rig.parents
    children = rig.children()
    active = joint_active_mask(rig)
    mirror = frame.mirror
    centre = mirror == np.arange(J)
    cand = np.flatnonzero(centre & active)
    head = int(cand[np.argmax(pos[cand, 2])])
    path = [head]
    while path[-1] > 0:
        path.append(int(parents[path[-1]]))
    path = path[::-1]  # root ... head
    on_path = set(path)

    # limb roots: left-side joints whose parent is on the symmetry plane
    left_roots = [j for j in range(1, J) if not centre[j] and centre[parents[j]] and _is_left(frame, j, pos, children)]
    if len(left_roots) < 2:
        raise RigError(f"{what}: found {len(left_roots)} left limb(s), need legs and arms")
    size = np.ones(J, dtype=np.int64)
    for j in range(J - 1, 0, -1):
        size[parents[j]] += size[j]
    chains = {r: _main_chain(r, children, size, active, pos, tiny) for r in left_roots}
    lowest = {r: min(pos[j, 2] for j in _subtree(r, children)) for r in left_roots}
    length = {r: float(np.linalg.norm(pos[_subtree(r, children)] - pos[r], axis=-1).max()) for r in left_roots}
    leg_root = min(left_roots, key=lambda r: lowest[r])
    others = [r for r in left_roots if r != leg_root]
    arm_root = max(others, key=lambda r: length[r])
    pelvis = _deepest_on_path(int(parents[leg_root]), parents, on_path)
    arm_attach = _deepest_on_path(int(parents[arm_root]), parents, on_path)
    up = pos[head] - pos[pelvis]
    if np.linalg.norm(up) < tiny or up[2] / np.linalg.norm(up) < UPRIGHT_COS:
        raise RigError(
            f"{what}: the spine from {rig.joint_names[pelvis]!r} to {rig.joint_names[head]!r} is not upright"
        )
    if path.index(arm_attach) <= path.index(pelvis):
        raise RigError(f"{what}: the arms ({rig.joint_names[arm_root]!r}) do not hang above the pelvis")
    if lowest[leg_root] > pos[pelvis, 2] - 0.3 * height:
        raise RigError(f"{what}: no leg reaches below the pelvis ({rig.joint_names[leg_root]!r})")
    if length[arm_root] < 0.2 * height:
        raise RigError(f"{what}: the arm chain from {rig.joint_names[arm_root]!r} is too short for an arm")
    i_p, i_a = path.index(pelvis), path.index(arm_attach)
    torso = tuple(path[i_p + 1 : i_a + 1])
    neck = tuple(path[i_a + 1 : -1])

    leg = _leg_roles(rig, chains[leg_root], pos, height, what)
    arm = _arm_roles(rig, chains[arm_root], pos, height, what)
    # facing comes from which side the names call left: swapped labels faced the rig backwards (knees bent the
    # wrong way, walks heel first); the feet tell
    foot = leg[2]
    reach = pos[_subtree(foot, children)] - pos[foot]
    toe = reach[np.argmax(np.linalg.norm(reach[:, :2], axis=-1))]
    if np.linalg.norm(toe[:2]) > 0.02 * height and toe @ frame.forward < -0.5 * np.linalg.norm(toe[:2]):
        raise RigError(
            f"{what}: the feet ({rig.joint_names[foot]!r}) point backwards for the side the joint names call left "
            "(left/right labels swapped?)"
        )
    roles: dict[str, int] = {}
    for side in ("left", "right"):
        for name, j in (*zip(LEG_ROLES, leg), *zip(ARM_ROLES, arm)):
            roles[f"{side}_{name}"] = -1 if j < 0 else int(j if side == "left" else mirror[j])
    return HumanoidMap(int(pelvis), torso, neck, int(head), roles)


def _is_left(frame: CharacterFrame, j: int, pos: np.ndarray, children) -> bool:
    """Whether side joint ``j``'s subtree lies left of its mirror's (the joints themselves may coincide)."""
    mine = pos[_subtree(j, children)].mean(axis=0)
    other = pos[_subtree(int(frame.mirror[j]), children)].mean(axis=0)
    return float((mine - other) @ frame.left) > 0.0


def _subtree(r: int, children: list[list[int]]) -> list[int]:
    out, stack = [], [r]
    while stack:
        j = stack.pop()
        out.append(j)
        stack.extend(children[j])
    return out


def _deepest_on_path(j: int, parents: np.ndarray, on_path: set[int]) -> int:
    while j not in on_path:
        j = int(parents[j])
    return j


def _main_chain(r: int, children, size, active, pos, tiny) -> list[int]:
    """Active joints from ``r`` down its largest subtree, skipping joints at the same place as the previous one."""
    chain, j = [r], r
    while True:
        kids = [c for c in children[j] if active[c]]
        if not kids:
            return chain
        j = max(kids, key=lambda c: size[c])
        if np.linalg.norm(pos[j] - pos[chain[-1]]) > tiny:
            chain.append(j)


def _bones(chain: list[int], pos: np.ndarray) -> list[np.ndarray]:
    """Vector from each chain joint to the next (zero for the last)."""
    return [pos[b] - pos[a] for a, b in itertools.pairwise(chain)] + [np.zeros(3)]


def _leg_roles(rig: Rig, chain: list[int], pos, height, what) -> list[int]:
    """(thigh, shin, foot, toes) joints of a left leg's main chain (-1 where missing)."""
    k = next((i for i, j in enumerate(chain) if _SHIN_TOKENS.search(_base_name(rig.joint_names[j]))), None)
    if k is None:
        bones = _bones(chain, pos)
        long_down = [
            i for i, b in enumerate(bones)
            if np.linalg.norm(b) >= LONG_BONE * height and -b[2] / np.linalg.norm(b) >= DOWNWARD_COS
        ]  # fmt: skip
        k = long_down[-1] if long_down else None
    if k is None or k == 0 or k + 1 >= len(chain):
        raise RigError(f"{what}: no thigh / shin / foot in the leg {[rig.joint_names[j] for j in chain]}")
    return [chain[k - 1], chain[k], chain[k + 1], chain[k + 2] if k + 2 < len(chain) else -1]


def _arm_roles(rig: Rig, chain: list[int], pos, height, what) -> list[int]:
    """(clavicle, upper arm, forearm, hand) joints of a left arm's main chain (-1 where missing)."""
    k = next((i for i, j in enumerate(chain) if _FOREARM_TOKENS.search(_base_name(rig.joint_names[j]))), None)
    if k is None:
        long = [i for i, b in enumerate(_bones(chain, pos)) if np.linalg.norm(b) >= LONG_BONE * height]
        k = long[-1] if long else None
    if k is None or k == 0:
        raise RigError(f"{what}: no upper arm / forearm in the arm {[rig.joint_names[j] for j in chain]}")
    return [chain[k - 2] if k >= 2 else -1, chain[k - 1], chain[k], chain[k + 1] if k + 1 < len(chain) else -1]


# -- transfer -------------------------------------------------------------------------------------------------


def _world_rotations(rig: Rig, local: np.ndarray) -> np.ndarray:
    """World joint rotations from local ones [quat xyzw], shape (F, J, 4)."""
    out = np.empty_like(local)
    out[:, 0] = local[:, 0]
    for j in range(1, rig.joint_count):
        out[:, j] = quat_multiply(out[:, rig.parents[j]], local[:, j])
    return out


def _shortest_arc(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The smallest rotation taking unit vector ``a`` to unit vector ``b`` [quat xyzw], shape (4,)."""
    c = float(np.clip(a @ b, -1.0, 1.0))
    axis = np.cross(a, b)
    if np.linalg.norm(axis) < 1e-9:
        if c > 0:
            return np.array([0.0, 0.0, 0.0, 1.0])
        axis = np.cross(a, [1.0, 0.0, 0.0] if abs(a[0]) < 0.9 else [0.0, 1.0, 0.0])
    return axis_angle_to_quat(axis / np.linalg.norm(axis) * np.arccos(c))


def _chain_weights(n_source: int, n_target: int) -> np.ndarray:
    """Overlap of equal target and source fractions of a chain, shape (n_target, n_source); rows sum to
    ``n_source / n_target`` of a source joint, columns to one (each source rotation is used exactly once)."""
    w = np.zeros((n_target, n_source))
    for t in range(n_target):
        lo, hi = t / n_target, (t + 1) / n_target
        for s in range(n_source):
            w[t, s] = max(0.0, min(hi, (s + 1) / n_source) - max(lo, s / n_source)) * n_source
    return w


def _body(rig: Rig, pelvis: int) -> list[int]:
    """The joints of the body: the pelvis and its subtree (legs, spine, arms, head), not the joints above it (a
    locator root on the ground counted as the lowest joint: travel scaled 2% short, the feet pinned at its height)."""
    return _subtree(pelvis, rig.children())


def _hip_height(rig: Rig, pelvis: int) -> float:
    """Rest height of the pelvis joint above the body's lowest joint [m] (not of joint 0: a rig may be rooted on
    the ground below its hips)."""
    pos, _ = rig.rest_world_transforms()
    return float(max(pos[pelvis, 2] - pos[_body(rig, pelvis), 2].min(), 1e-9))


def _joint_clearance(rig: Rig, pelvis: int) -> float:
    """Height of the body's lowest joint above the ground when the rig stands in its rest pose [m]: above its
    lowest skinned vertex for rigs with a mesh, else its rest height when not negative (BVH rigs put the hips, not
    the feet, at the origin: their lowest joints, the end sites, sit at the soles)."""
    pos, _ = rig.rest_world_transforms()
    low = float(pos[_body(rig, pelvis), 2].min())
    if rig.meshes:
        points, _ = skin_motion(rig, Motion.rest(rig))
        return max(low - float(points[0, :, 2].min()), 0.0)
    return max(low, 0.0)


def retarget_motion(
    source: Rig,
    motion: Motion,
    target: Rig,
    source_map: HumanoidMap | None = None,
    target_map: HumanoidMap | None = None,
    name: str | None = None,
) -> Motion:
    """``motion`` of humanoid ``source`` transferred onto humanoid ``target`` (module docstring).

    Args:
        source: the rig ``motion`` animates.
        motion: the clip, F frames.
        target: the rig to animate.
        source_map, target_map: their correspondences (found with :func:`humanoid_map` when None).
        name: the new clip's name (default: the source clip's).

    Returns:
        A motion of ``target`` with the source's fps and times (local rotations only: no per-joint translations).

    Raises:
        RigError: either rig has no humanoid correspondence, or the motion does not fit ``source``.
    """
    motion.check_rig(source)
    fs, ft = CharacterFrame(source), CharacterFrame(target)
    sm = source_map or humanoid_map(source, fs)
    tm = target_map or humanoid_map(target, ft)
    fw_s, fl_s = canonical_frames(source, fs)
    fw_t, fl_t = canonical_frames(target, ft)
    _, rest_s = source.rest_world_transforms()
    _, rest_t = target.rest_world_transforms()
    axis_map = ft.axes @ fs.axes.T  # source world -> target world (character axes to character axes)
    qa = matrix_to_quat(axis_map)
    x = np.array([1.0, 0.0, 0.0])

    world_s = _world_rotations(source, motion.rotations)
    delta_s = quat_multiply(world_s, quat_conjugate(rest_s))  # world rotation of each source joint away from rest
    delta_s = quat_multiply(quat_multiply(qa, delta_s), quat_conjugate(qa))  # in the target's axes

    def align(j: int, s: int) -> np.ndarray:
        """Smallest rotation (target world) turning target bone j's rest axis onto source bone s's."""
        return _shortest_arc(quat_rotate(fw_t[j], x), axis_map @ quat_rotate(fw_s[s], x))

    def reframe(j: int, s: int) -> np.ndarray:
        """``p`` with ``d_t = p d_s p^-1``: source frame s, carried into target axes and onto bone j, seen from
        target frame j; a pure twist about the bone (the frames' second axes may follow different rules)."""
        return quat_multiply(
            quat_multiply(quat_conjugate(fw_t[j]), quat_conjugate(align(j, s))), quat_multiply(qa, fw_s[s])
        )

    # posture roles turn in the world like their source bone; the others take the source's canonical rotation
    pre_s = quat_multiply(source.rest_rotations, fl_s)
    d_s = quat_multiply(quat_multiply(quat_conjugate(pre_s), motion.rotations), fl_s)
    aligned: dict[int, tuple[int, np.ndarray]] = {}
    d_t: dict[int, np.ndarray] = {}
    s_one = sm.one_to_one()
    for role, j in tm.one_to_one().items():
        s = s_one.get(role, -1)
        if s < 0 or (role == "head" and s in (*sm.torso, *sm.neck)):
            # a source head that ends its torso or neck chain turns with that chain: the chain's share carries its
            # rotation to the target, and the target head turning by it again doubled it (0.197 rad for 0.1)
            continue
        if (role == "pelvis" and j == 0) or role.split("_", 1)[-1] in ALIGNED_ROLES:
            aligned[j] = (s, quat_multiply(align(j, s), rest_t[j]))
        else:
            p = reframe(j, s)
            d_t[j] = quat_multiply(quat_multiply(p, d_s[:, s]), quat_conjugate(p))
    # chains: each target joint takes its share of the source chain's rotation vectors
    for src, dst in ((sm.torso, tm.torso), (sm.neck, tm.neck)):
        if not dst or not src:
            continue
        logs = quat_to_axis_angle(d_s[:, list(src)])  # (F, S, 3)
        w = _chain_weights(len(src), len(dst))
        for t_i, j in enumerate(dst):
            v = np.zeros((motion.frame_count, 3))
            for s_i, s in enumerate(src):
                if w[t_i, s_i] > 0:
                    v += w[t_i, s_i] * quat_rotate(reframe(j, s), logs[:, s_i])
            d_t[j] = axis_angle_to_quat(v)

    F, J = motion.frame_count, target.joint_count
    world_t = np.empty((F, J, 4))
    local_t = np.empty((F, J, 4))
    for j in range(J):
        p = int(target.parents[j])
        if j in aligned:
            s, c = aligned[j]
            world_t[:, j] = quat_multiply(delta_s[:, s], c)
            local_t[:, j] = world_t[:, j] if p < 0 else quat_multiply(quat_conjugate(world_t[:, p]), world_t[:, j])
            continue
        if j in d_t:
            pre = quat_multiply(target.rest_rotations[j], fl_t[j])
            local_t[:, j] = quat_multiply(quat_multiply(pre, d_t[j]), quat_conjugate(fl_t[j]))
        else:
            local_t[:, j] = target.rest_rotations[j]
        world_t[:, j] = local_t[:, j] if p < 0 else quat_multiply(world_t[:, p], local_t[:, j])

    # the root's displacement from its rest position, scaled by the hip heights and turned into the target's axes;
    # its height puts the target's lowest joint as high above the ground as the source's (scaled), counted from
    # each rig's standing clearance (a BVH rig's rest pose has the hips, not the feet, at z = 0)
    k = _hip_height(target, tm.pelvis) / _hip_height(source, sm.pelvis)
    root = target.rest_translations[0] + k * (motion.root_translations - source.rest_translations[0]) @ axis_map.T
    rot_t = quat_normalize(local_t)
    source_low = pose_motion(source, motion)[0][:, _body(source, sm.pelvis), 2].min(axis=1)
    target_pos = pose_motion(target, Motion(motion.fps, np.zeros((F, 3)), rot_t))[0]
    target_low = target_pos[:, _body(target, tm.pelvis), 2].min(axis=1)
    root[:, 2] = (
        _joint_clearance(target, tm.pelvis) + k * (source_low - _joint_clearance(source, sm.pelvis)) - target_low
    )
    return Motion(motion.fps, root, rot_t, times=motion.times, name=name or motion.name)
