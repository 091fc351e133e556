"""From glTF skins to one rig skeleton: joint selection and order, folded ancestors, scale and axis conversion.

Frames. glTF skins a vertex as ``p' = sum_k w_k M[j_k] @ IBM[j_k] @ p`` with ``M[j]`` the joint node's full world
matrix (every ancestor included, the skinned mesh node's own transform ignored). Our rig skins in skeleton space
(Z-up) with rigid joint transforms. With ``C`` = +90 deg about X (glTF +Y -> our +Z) and ``M[j] = W'[j] @ S(s_j)``
(``W'`` rigid, ``s_j`` the product of the uniform scales on the path to the joint):

* our joint world transform is ``W[j] = C @ W'[j]``: every ancestor above the root joint, non-joint nodes between
  joints and ``C`` are folded into the root's transform and the joints' local transforms; since
  ``S(s) R = R S(s)`` and ``S(s) T(t) = T(s t) S(s)``, uniform scales turn into scaled translations;
* our inverse bind matrix is ``IBM'[j] = S(s_j) @ IBM[j] @ C^-1`` and our bind points are ``C @ p``, so that
  ``W[j] @ IBM'[j] @ (C p) = C @ M[j] @ IBM[j] @ p``: glTF skinning exactly, rotated by ``C``.

Joint set: the union of the joints of the skins in use. Their tree must have one root; when the skin joints form
a forest whose roots share a non-joint ancestor node, the lowest such node is promoted to the root joint (its
inverse bind matrix is that of its rest pose). Joints are ordered by a depth-first preorder of the node tree
(children in file order), so parents come first; unnamed joints are called ``node<i>`` and repeated names get
``_1``, ``_2``... suffixes in that order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.rotations import quat_conjugate, quat_multiply, quat_rotate

from ._gltf_accessors import read_accessor
from ._gltf_document import GltfDocument
from ._gltf_nodes import NodeTree, rigid_frames
from ._limits import MAX_MAGNITUDE, not_affine, too_large

__all__ = ["Y_UP_TO_Z_UP", "Skeleton", "build_skeleton", "unique_names"]

Y_UP_TO_Z_UP = np.array([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, -1.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]])
"""``C``: +90 deg about X, mapping glTF +Y (up) to +Z and glTF +Z (forward) to -Y, shape (4, 4)."""

_C_QUAT = np.array([np.sqrt(0.5), 0.0, 0.0, np.sqrt(0.5)])
IBM_CONSISTENCY_TOLERANCE = 1e-5
"""Relative difference under which two skins' inverse bind matrices for one joint count as the same."""


@dataclass
class Skeleton:
    """The rig's joints as glTF nodes.

    Attributes:
        nodes: glTF node of each joint, parents-first (root first), length joint_count.
        parents: parent joint index, -1 for the root, shape (joint_count,).
        names: unique joint names.
        scales: uniform world scale ``s_j`` of each joint at rest, shape (joint_count,).
        pose_nodes: the joint nodes and all their ancestors (every node whose transform moves a joint).
        promoted: the non-joint node promoted to the root joint, or None.
    """

    nodes: list[int]
    parents: np.ndarray
    names: list[str]
    scales: np.ndarray
    pose_nodes: list[int]
    promoted: int | None

    @property
    def joint_count(self) -> int:
        return len(self.nodes)

    def index(self) -> dict[int, int]:
        """glTF node -> joint index."""
        return {n: j for j, n in enumerate(self.nodes)}

    def world_frames(self, tree: NodeTree, local: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Joint world transforms in skeleton space (Z-up, scales pushed down) from pose-node local matrices.

        Args:
            tree: the node tree.
            local: local matrices of :attr:`pose_nodes`, shape (F, len(pose_nodes), 4, 4).

        Returns:
            world rotations [unit quat xyzw] (F, J, 4) and positions [file units] (F, J, 3).
        """
        world = tree.world_matrices(self.pose_nodes, local)
        pos = {n: k for k, n in enumerate(self.pose_nodes)}
        joint_world = Y_UP_TO_Z_UP @ world[:, [pos[n] for n in self.nodes]]
        return rigid_frames(joint_world, np.broadcast_to(self.scales, joint_world.shape[:2]))

    def local_frames(self, rotations: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Local rotations (F, J, 4) and translations (F, J, 3) from world ones (the root's stay world)."""
        rot, trans = rotations.copy(), positions.copy()
        p = self.parents[1:]
        inv = quat_conjugate(rotations[:, p])
        rot[:, 1:] = quat_multiply(inv, rotations[:, 1:])
        trans[:, 1:] = quat_rotate(inv, positions[:, 1:] - positions[:, p])
        return rot, trans


def build_skeleton(doc: GltfDocument, tree: NodeTree, skins: list[int]) -> Skeleton:
    """Selects, orders and names the joints of ``skins`` and checks their scales.

    Raises:
        InputError: empty skin, joint trees with no common ancestor, non-uniform scale at or above a joint.
    """
    joint_set: set[int] = set()
    for s in skins:
        where = f"skins[{s}]"
        joints = doc.get_index_list(doc.table("skins")[s], "joints", where, "nodes")
        if not joints:
            raise doc.error(f"{where}.joints", "a skin needs at least one joint")
        joint_set.update(joints)
    roots = sorted(n for n in joint_set if not any(a in joint_set for a in tree.ancestors(n)))
    promoted = None
    if len(roots) > 1:
        promoted = _common_ancestor(tree, roots)
        if promoted is None:
            listed = ", ".join(tree.label(r) for r in roots[:4])
            raise doc.error(
                f"skins[{skins[0]}].joints" if len(skins) == 1 else "skins",
                f"the joints form {len(roots)} separate trees (roots {listed}) with no common ancestor node",
            )
        joint_set.add(promoted)
    root = promoted if promoted is not None else roots[0]
    nodes = [n for n in tree.preorder([root]) if n in joint_set]
    index = {n: j for j, n in enumerate(nodes)}
    parents = np.full(len(nodes), -1, dtype=np.int64)
    for j, n in enumerate(nodes[1:], start=1):
        parents[j] = next(index[a] for a in tree.ancestors(n) if a in index)
    pose_nodes = sorted({a for n in nodes for a in tree.ancestors(n)} | set(nodes))
    local_scale = {n: tree.uniform_scale(doc, n) for n in pose_nodes}
    scales = np.array([np.prod([local_scale[a] for a in [n, *tree.ancestors(n)]]) for n in nodes])
    with np.errstate(over="ignore", divide="ignore"):
        bad = ~np.isfinite(scales) | too_large(scales) | too_large(1.0 / scales)
    if bad.any():  # each node's scale is bounded, their product down a deep chain is not
        n = nodes[int(np.argmax(bad))]
        chain = [tree.label(a) for a in [n, *tree.ancestors(n)] if local_scale[a] != 1.0]
        raise doc.error(
            f"nodes[{n}].scale",
            f"the scales down to {tree.label(n)} multiply to {scales[bad][0]:.3g}, out of range (1/{MAX_MAGNITUDE:g}"
            f" .. {MAX_MAGNITUDE:g}); scaled nodes: {', '.join(chain[:6])}",
        )
    names = unique_names([tree.names[n] or f"node{n}" for n in nodes])
    return Skeleton(nodes, parents, names, scales, pose_nodes, promoted)


def inverse_bind_matrices(
    doc: GltfDocument, tree: NodeTree, skeleton: Skeleton, skins: list[int], rest_world: np.ndarray
) -> np.ndarray:
    """Skeleton-space inverse bind matrices ``S(s_j) @ IBM[j] @ C^-1``, shape (joint_count, 4, 4).

    Args:
        rest_world: our rest world matrices, shape (joint_count, 4, 4); used for the promoted root.

    Raises:
        InputError: an accessor of the wrong type or count, or one joint bound differently by two skins.
    """
    index = skeleton.index()
    out = np.full((skeleton.joint_count, 4, 4), np.nan)
    source: dict[int, int] = {}
    c_inv = Y_UP_TO_Z_UP.T
    for s in skins:
        where = f"skins[{s}]"
        skin = doc.table("skins")[s]
        joints = skin["joints"]
        acc = doc.get_index(skin, "inverseBindMatrices", where, "accessors", None)
        if acc is None:
            ibm = np.broadcast_to(np.eye(4), (len(joints), 4, 4))
        else:
            ibm = np.asarray(read_accessor(doc, acc), dtype=np.float64)
            if ibm.shape[1:] != (4, 4) or len(ibm) < len(joints):
                raise doc.error(
                    f"{where}.inverseBindMatrices",
                    f"accessors[{acc}] must hold {len(joints)} MAT4, got {len(ibm)} of shape {ibm.shape[1:]}",
                )
            if not np.all(np.isfinite(ibm)):
                raise doc.error(f"{where}.inverseBindMatrices", f"accessors[{acc}] holds non-finite values")
            if too_large(ibm).any():
                raise doc.error(
                    f"{where}.inverseBindMatrices", f"accessors[{acc}] holds values out of range (> {MAX_MAGNITUDE:g})"
                )
            off = not_affine(ibm[: len(joints)])
            if off.any():
                k = int(np.argmax(off))
                raise doc.error(f"{where}.inverseBindMatrices", f"accessors[{acc}] matrix {k}: last row"
                                f" {ibm[k, 3].tolist()} is not [0, 0, 0, 1] (not an affine transform)")  # fmt: skip
        for k, n in enumerate(joints):
            j = index[n]
            scaled = np.diag([skeleton.scales[j]] * 3 + [1.0]) @ ibm[k] @ c_inv
            if j in source:
                ref = out[j]
                if np.abs(scaled - ref).max() > IBM_CONSISTENCY_TOLERANCE * max(1.0, np.abs(ref).max()):
                    raise doc.error(
                        f"{where}.inverseBindMatrices",
                        f"joint {tree.label(n)} has a different inverse bind matrix in skins[{source[j]}]"
                        " (one rig cannot hold both bindings)",
                    )
                continue
            out[j], source[j] = scaled, s
    for j in range(skeleton.joint_count):
        if j not in source:
            out[j] = np.linalg.inv(rest_world[j])
    return out


def _common_ancestor(tree: NodeTree, nodes: list[int]) -> int | None:
    """The lowest node that is a proper ancestor of all ``nodes``, or None."""
    shared = None
    for n in nodes:
        chain = tree.ancestors(n)
        shared = chain if shared is None else [a for a in shared if a in set(chain)]
    return shared[0] if shared else None


def unique_names(names: list[str]) -> list[str]:
    """Names made unique in order: a repeat of ``a`` becomes ``a_1`` (then ``a_2``...), skipping taken names."""
    taken: set[str] = set()
    out = []
    for name in names:
        candidate, k = name, 0
        while candidate in taken:
            k += 1
            candidate = f"{name}_{k}"
        taken.add(candidate)
        out.append(candidate)
    return out
