"""Per-rig constants of the pose space: canonical bone frames, skeletal graph distances, active joints.

Canonical bone frames (see ``design/posespace.md``): for every joint ``j`` a rest-pose world frame
``F_j = [a b c]`` whose x axis ``a`` is the bone direction (towards the joint's children, or continuing the
parent's bone for a leaf) and whose y axis ``b`` is world up (or the character's left for near-vertical bones)
made orthogonal to ``a`` (so an upright knee bends about y, a sloped one like the Fox's hind shin about z). The
root's frame is ``[up forward left]`` of the character, so its twist is the heading.
The character's left and forward come from its left/right joint names checked against the rest pose
(:class:`CharacterFrame`), which also gives the mirror map used for data augmentation. A joint's pose coordinate is
its rotation away from rest expressed in that frame::

    q_local[j] = q_rest[j] * c[j] * d[j] * c[j]^-1,      c[j] = W_rest[j]^-1 * F[j]

so ``d = identity`` is the rest pose, twist is rotation about the bone, and swing bends it. The model works on
the 6D form of ``d``.
"""

from __future__ import annotations

import hashlib
import re
from collections import deque

import numpy as np

from sim import Rig
from sim.rotations import matrix_to_quat, quat_conjugate, quat_multiply, quat_rotate, quat_to_matrix

__all__ = [
    "MIN_BONE_FRACTION",
    "MIRROR_TOLERANCE",
    "CharacterFrame",
    "canonical_frames",
    "character_frame",
    "graph_distances",
    "joint_active_mask",
    "rest_offsets_world",
    "rig_signature",
]

MIN_BONE_FRACTION = 1e-3
"""Offsets shorter than this fraction of the rig height count as zero-length (no direction)."""

MIRROR_TOLERANCE = 0.05
"""Left/right joint pairs must mirror each other's rest position within this fraction of the rig height."""

_CANCEL_FRACTION = 1e-2
"""A joint's children cancel out (its bone continues the incoming one) when their subtree-weighted directions sum
to less than this fraction of the total weight, i.e. they point within about a degree of opposite ways: the
resultant of a near-cancelling pair is rounding noise or a sub-millimetre asymmetry, so its direction would swing
the bone axis by up to 90 deg."""

_UP = np.array([0.0, 0.0, 1.0])
_Y = np.array([0.0, 1.0, 0.0])

_SIDE_PATTERNS = [
    (re.compile(r"Left"), "Right"), (re.compile(r"Right"), "Left"),
    (re.compile(r"left"), "right"), (re.compile(r"right"), "left"),
    (re.compile(r"LEFT"), "RIGHT"), (re.compile(r"RIGHT"), "LEFT"),
    (re.compile(r"^L(?=[A-Z_.])"), "R"), (re.compile(r"^R(?=[A-Z_.])"), "L"),
    (re.compile(r"^l(?=[a-z_.])"), "r"), (re.compile(r"^r(?=[a-z_.])"), "l"),
    (re.compile(r"(?<=[_.])L$"), "R"), (re.compile(r"(?<=[_.])R$"), "L"),
    (re.compile(r"(?<=[_.])l$"), "r"), (re.compile(r"(?<=[_.])r$"), "l"),
]  # fmt: skip
_LEFT_HINT = re.compile(r"(Left|left|LEFT|^L(?=[A-Z_.])|^l(?=[a-z_.])|[_.][Ll]$)")


class CharacterFrame:
    """Facing and left/right symmetry of a rig, found from joint names and checked against the rest pose.

    Attributes:
        mirror: index of each joint's mirror image (itself for joints on the symmetry plane), shape (J,).
        symmetric: True when left/right pairs were found and verified.
        left: horizontal unit vector from the character's right to its left, world (``+y`` when unknown).
        forward: ``left x up`` (``+x`` when unknown).
        axes: columns ``(forward, left, up)``, shape (3, 3): world -> character coordinates is ``axes.T @ v``.
        reflection: the mirror's linear part ``I - 2 left left^T``, shape (3, 3).
    """

    def __init__(self, rig: Rig):
        count = rig.joint_count
        self.mirror = np.arange(count)
        self.symmetric = False
        self.left = _Y.copy()
        keys = [re.sub(r"[_.]?\d+$", "", n) for n in rig.joint_names]
        mirror = np.arange(count)
        for i, j in _side_pairs(rig.joint_names, keys):
            mirror[i] = j
        pos, _ = rig.rest_world_transforms()
        lefts = [(i, int(j)) for i, j in enumerate(mirror) if j != i and mirror[j] == i and _LEFT_HINT.search(keys[i])]
        sep = [pos[i] - pos[j] for i, j in lefts if np.linalg.norm(pos[i] - pos[j]) > 1e-9]
        if not sep:
            self._finish()
            return
        lat = np.mean([d / np.linalg.norm(d) for d in sep], axis=0)
        lat[2] = 0.0
        if np.linalg.norm(lat) < 0.5:
            self._finish()
            return
        lat /= np.linalg.norm(lat)
        refl = np.eye(3) - 2.0 * np.outer(lat, lat)
        centre = pos[0]
        mirrored = (pos - centre) @ refl.T + centre
        tol = MIRROR_TOLERANCE * max(rig.height(), 1e-9)
        if np.all(np.linalg.norm(mirrored - pos[mirror], axis=-1) < tol) and np.all(mirror[mirror] == np.arange(count)):
            self.mirror, self.symmetric, self.left = mirror, True, lat
        self._finish()

    def _finish(self) -> None:
        self.forward = np.cross(self.left, _UP)
        self.axes = np.stack([self.forward, self.left, _UP], axis=-1)
        self.reflection = np.eye(3) - 2.0 * np.outer(self.left, self.left)


def _side_pairs(names: list[str], keys: list[str]) -> list[tuple[int, int]]:
    """(joint, its other-side joint) pairs by name: the full names first (``LeftHandIndex2`` <-> ``RightHandIndex2``),
    then, for joints whose full name has no counterpart, their names without a numeric suffix (``keys``: Fox's
    ``b_LeftLeg01_015`` <-> ``b_RightLeg01_019``), only where that key names one such joint on each side (several
    would collapse onto one partner)."""

    def match(i: int, name: str, index: dict[str, int]) -> tuple[int, int] | None:
        for pattern, repl in _SIDE_PATTERNS:
            other = pattern.sub(repl, name, count=1)
            if other != name and other in index and index[other] != i:
                return i, index[other]
        return None

    full = {n: i for i, n in enumerate(names)}
    pairs = [p for i, n in enumerate(names) if (p := match(i, n, full))]
    paired = {i for p in pairs for i in p}
    groups: dict[str, list[int]] = {}
    for i, k in enumerate(keys):
        if i not in paired:
            groups.setdefault(k, []).append(i)
    unique = {k: g[0] for k, g in groups.items() if len(g) == 1}
    pairs += [p for k, i in unique.items() if (p := match(i, k, unique))]
    return sorted(pairs)


def character_frame(rig: Rig) -> CharacterFrame:
    """The rig's :class:`CharacterFrame`."""
    return CharacterFrame(rig)


def graph_distances(parents: np.ndarray) -> np.ndarray:
    """Hop count between every pair of joints in the skeleton tree, shape (J, J), int32.

    Breadth-first search from each joint over the undirected tree (J is small: at most a few hundred).
    """
    parents = np.asarray(parents)
    count = len(parents)
    adj: list[list[int]] = [[] for _ in range(count)]
    for j, p in enumerate(parents):
        if p >= 0:
            adj[j].append(int(p))
            adj[int(p)].append(j)
    dist = np.full((count, count), -1, dtype=np.int32)
    for s in range(count):
        dist[s, s] = 0
        queue = deque([s])
        while queue:
            u = queue.popleft()
            for v in adj[u]:
                if dist[s, v] < 0:
                    dist[s, v] = dist[s, u] + 1
                    queue.append(v)
    return dist


def _subtree_sizes(parents: np.ndarray) -> np.ndarray:
    size = np.ones(len(parents), dtype=np.int64)
    for j in range(len(parents) - 1, 0, -1):
        size[parents[j]] += size[j]
    return size


def canonical_frames(rig: Rig, frame: CharacterFrame | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Canonical bone frames of ``rig`` (module docstring).

    The root's frame is ``(up, forward, left)`` of the character; a near-vertical bone's second axis is the
    character's left, so knees of differently oriented rigs share coordinates.

    Returns:
        world: frames in world rest coordinates [quat xyzw], shape (J, 4).
        local: the same frames expressed in each joint's rest frame, ``c = W_rest^-1 * F``, shape (J, 4).
    """
    frame = frame or CharacterFrame(rig)
    pos, rot = rig.rest_world_transforms()
    height = max(rig.height(), 1e-9)
    children = rig.children()
    sizes = _subtree_sizes(rig.parents)
    frames = np.zeros((rig.joint_count, 3, 3))
    frames[0] = np.stack([_UP, frame.forward, frame.left], axis=-1)
    for j in range(1, rig.joint_count):
        frames[j] = _frame(_bone_axis(j, pos, rig.parents, children, sizes, height), frame.left)
    world = matrix_to_quat(frames)
    local = quat_multiply(quat_conjugate(rot), world)
    return world, local


def _bone_axis(j: int, pos: np.ndarray, parents: np.ndarray, children: list[list[int]], sizes, height: float):
    """Direction of joint j's bone in world rest coordinates (unit), see the module docstring."""
    tiny = MIN_BONE_FRACTION * height
    axis = np.zeros(3)
    weight = 0.0
    # children weighted by subtree size, so a chest points to the neck-and-arms mass, not one collar
    for c in children[j]:
        d = _first_offset(c, pos, children, tiny, origin=pos[j])
        if d is not None:
            axis += sizes[c] * d / np.linalg.norm(d)
            weight += sizes[c]
    if np.linalg.norm(axis) <= _CANCEL_FRACTION * weight:
        # leaf, or children cancel out (relative to their weight: see _CANCEL_FRACTION): continue the incoming
        # bone (skipping zero-length ancestors), or point up without one
        axis = np.zeros(3)
        k = j
        while k > 0:
            d = pos[k] - pos[parents[k]]
            if np.linalg.norm(d) > tiny:
                axis = d
                break
            k = parents[k]
    if np.linalg.norm(axis) < 1e-6:
        axis = _UP.copy()
    return axis / np.linalg.norm(axis)


def _first_offset(c: int, pos: np.ndarray, children: list[list[int]], tiny: float, origin: np.ndarray):
    """Offset from ``origin`` to child ``c``, descending through zero-length joints (first child first)."""
    d = pos[c] - origin
    if np.linalg.norm(d) > tiny:
        return d
    for g in children[c]:
        out = _first_offset(g, pos, children, tiny, origin)
        if out is not None:
            return out
    return None


def _frame(a: np.ndarray, left: np.ndarray) -> np.ndarray:
    ref = _UP if abs(a @ _UP) < 0.9 else left
    b = ref - (ref @ a) * a
    b /= np.linalg.norm(b)
    return np.stack([a, b, np.cross(a, b)], axis=-1)


def joint_active_mask(rig: Rig) -> np.ndarray:
    """Joints whose rotation changes anything, shape (J,), bool.

    A joint is active when it has children or drives skinned vertices (any non-zero weight); the root always is.
    Inactive joints (e.g. BVH end sites) are left out of the model and kept at rest.
    """
    active = np.zeros(rig.joint_count, dtype=bool)
    active[0] = True
    active[rig.parents[1:]] = True
    for m in rig.meshes:
        active[np.unique(m.influence_joints[m.influence_weights > 0])] = True
    return active


def rig_signature(rig: Rig) -> str:
    """A short stable hash of a skeleton (names, parents, rest offsets relative to height, rest rotations).

    Checkpoints key per-skeleton calibration (joint limits, collision exclusions) by it, and a :class:`PoseSet`
    groups clips by it: two skeletons that differ only in rest rotations have different rest shapes, so neither
    their poses nor their limits can be shared.
    """
    h = _skeleton_hash(rig)
    rot = np.round(quat_to_matrix(rig.rest_rotations), 3) + 0.0  # matrices: q and -q hash alike
    h.update(b"rest-rotations")
    h.update(rot.astype(np.float64).tobytes())
    return h.hexdigest()[:16]


def legacy_rig_signature(rig: Rig) -> str:
    """The signature checkpoints written before rest rotations were hashed key their calibrations by (names,
    parents and rest offsets only); used to find those calibrations, never written."""
    return _skeleton_hash(rig).hexdigest()[:16]


def _skeleton_hash(rig: Rig):
    h = hashlib.sha1()
    h.update("|".join(rig.joint_names).encode())
    h.update(np.asarray(rig.parents, dtype=np.int64).tobytes())
    rel = np.round(rig.rest_translations[1:] / max(rig.height(), 1e-9), 3) + 0.0  # +0.0: no negative zeros
    h.update(rel.astype(np.float64).tobytes())
    return h


def rest_offsets_world(rig: Rig) -> np.ndarray:
    """Offset from each joint's parent in world rest coordinates [m] (zero for the root), shape (J, 3)."""
    pos, rot = rig.rest_world_transforms()
    out = np.zeros_like(pos)
    par = rig.parents[1:]
    out[1:] = quat_rotate(rot[par], rig.rest_translations[1:])
    return out
