"""glTF node hierarchy: parents, rest TRS, world matrices batched over poses, scale checks."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.rotations import matrix_to_quat, quat_to_matrix

from ._gltf_document import GltfDocument
from ._limits import not_affine

__all__ = ["NodeTree", "read_nodes", "trs_matrices"]

UNIFORM_SCALE_TOLERANCE = 1e-5
"""Relative spread of scale factors (or deviation of a matrix from a scaled rotation) still taken as uniform."""

MAX_NODE_DEPTH = 1000
"""Most ancestors a node may have (character skeletons nest a few dozen deep; a rope or tail chain a few hundred).
The importer walks each joint's ancestor chain, so its cost grows with this depth times the joint count."""

SCALE_RANGE = (1e-6, 1e6)
"""Uniform node scales accepted at or above joints (a centimetre or millimetre file scales by 0.01 or 0.001; a
scale of 1e-300 made a skeleton of zero size)."""


@dataclass
class NodeTree:
    """The node forest of a glTF file.

    Attributes:
        names: node names (None when unnamed), length node_count.
        parents: parent node per node, -1 for roots, shape (node_count,).
        children: child nodes per node, in file order.
        translations: rest translations [file units], shape (node_count, 3).
        rotations: rest rotations [unit quat xyzw], shape (node_count, 4).
        scales: rest scales, shape (node_count, 3).
        matrices: nodes given by ``matrix``: their local 4x4 matrix (row-major, column-vector convention).
        depths: number of ancestors per node (0 for roots), shape (node_count,).
    """

    names: list[str | None]
    parents: np.ndarray
    children: list[list[int]]
    translations: np.ndarray
    rotations: np.ndarray
    scales: np.ndarray
    matrices: dict[int, np.ndarray]
    depths: np.ndarray

    @property
    def node_count(self) -> int:
        return len(self.names)

    def label(self, node: int) -> str:
        """``nodes[i] 'name'`` for messages."""
        name = self.names[node]
        return f"nodes[{node}]" + (f" {name!r}" if name else "")

    def ancestors(self, node: int) -> list[int]:
        """Ancestors of ``node`` from its parent up to its root."""
        out = []
        p = int(self.parents[node])
        while p >= 0:
            out.append(p)
            p = int(self.parents[p])
        return out

    def is_ancestor_or_self(self, top: int, node: int) -> bool:
        return node == top or top in self.ancestors(node)

    def preorder(self, roots: list[int]) -> list[int]:
        """Depth-first preorder from ``roots`` (children in file order)."""
        out: list[int] = []
        stack = list(reversed(roots))
        while stack:
            n = stack.pop()
            out.append(n)
            stack.extend(reversed(self.children[n]))
        return out

    def local_matrices(self, nodes: list[int], translations=None, rotations=None) -> np.ndarray:
        """Local matrices of ``nodes`` at the rest pose or with the given (F, len(nodes), 3/4) channels.

        Returns:
            shape (F, len(nodes), 4, 4) (F = 1 at rest). Matrix nodes keep their fixed matrix.
        """
        t = self.translations[nodes][None] if translations is None else translations
        q = self.rotations[nodes][None] if rotations is None else rotations
        frames = max(t.shape[0], q.shape[0])
        out = trs_matrices(np.broadcast_to(t, (frames, *t.shape[1:])), q, self.scales[nodes][None])
        for k, n in enumerate(nodes):
            if n in self.matrices:
                out[:, k] = self.matrices[n]
        return out

    def world_matrices(self, nodes: list[int], local: np.ndarray) -> np.ndarray:
        """World matrices of ``nodes`` (which must be closed under taking parents) from their local matrices.

        Args:
            nodes: node indices, any order; every parent of a listed node is listed.
            local: local matrices, shape (F, len(nodes), 4, 4).

        Returns:
            shape (F, len(nodes), 4, 4).
        """
        pos = {n: k for k, n in enumerate(nodes)}
        world = np.empty_like(local)
        for k in sorted(range(len(nodes)), key=lambda k: self.depths[nodes[k]]):  # parents first
            p = int(self.parents[nodes[k]])
            world[:, k] = local[:, k] if p < 0 else world[:, pos[p]] @ local[:, k]
        return world

    def uniform_scale(self, doc: GltfDocument, node: int) -> float:
        """The node's local uniform scale factor.

        Raises:
            InputError: non-uniform, sheared, zero or mirroring (negative) scale.
        """
        if node in self.matrices:
            m = self.matrices[node][:3, :3]
            det = float(np.linalg.det(m))
            s = np.cbrt(det) if det > 0 else 0.0
            ok = s > 0 and np.abs(m.T @ m - s * s * np.eye(3)).max() <= UNIFORM_SCALE_TOLERANCE * s * s
            field, shown = f"nodes[{node}].matrix", np.round(np.linalg.svd(m, compute_uv=False), 6).tolist()
        else:
            v = self.scales[node]
            s = float(np.exp(np.log(v).mean())) if np.all(v > 0) else 0.0  # no underflow of the product
            ok = s > 0 and np.abs(v - s).max() <= UNIFORM_SCALE_TOLERANCE * s
            field, shown = f"nodes[{node}].scale", v.tolist()
        if not ok:
            raise doc.error(
                field,
                f"{self.label(node)} has scale {shown}: only uniform positive scale is supported at or above "
                "skeleton joints",
            )
        if not SCALE_RANGE[0] <= s <= SCALE_RANGE[1]:
            raise doc.error(
                field, f"{self.label(node)} has scale {s:g}: outside [{SCALE_RANGE[0]:g}, {SCALE_RANGE[1]:g}]"
            )
        return float(s)


def trs_matrices(t: np.ndarray, q: np.ndarray, s: np.ndarray) -> np.ndarray:
    """``T @ R @ S`` matrices, broadcast over leading dims; shape (..., 4, 4)."""
    shape = np.broadcast_shapes(t.shape[:-1], q.shape[:-1], s.shape[:-1])
    m = np.zeros((*shape, 4, 4))
    m[..., :3, :3] = quat_to_matrix(q) * s[..., None, :]
    m[..., :3, 3] = t
    m[..., 3, 3] = 1.0
    return m


def read_nodes(doc: GltfDocument) -> NodeTree:
    """Reads and validates ``nodes`` (indices, single parent, no cycles, finite TRS / affine matrices)."""
    nodes = doc.table("nodes")
    count = len(nodes)
    parents = np.full(count, -1, dtype=np.int64)
    children: list[list[int]] = []
    names: list[str | None] = []
    t = np.zeros((count, 3))
    q = np.zeros((count, 4))
    s = np.ones((count, 3))
    matrices: dict[int, np.ndarray] = {}
    for i, node in enumerate(nodes):
        where = f"nodes[{i}]"
        names.append(doc.get_str(node, "name", where, None))
        kids = doc.get_index_list(node, "children", where, "nodes", [])
        for c in kids:
            if c == i:
                raise doc.error(f"{where}.children", f"node {i} lists itself as a child")
            if parents[c] >= 0:
                raise doc.error(f"{where}.children", f"node {c} already has parent node {parents[c]}")
            parents[c] = i
        children.append(kids)
        if "matrix" in node:
            m = doc.get_floats(node, "matrix", where, 16).reshape(4, 4).T  # stored column-major
            if not_affine(m):
                raise doc.error(f"{where}.matrix", f"last row {m[3].tolist()} is not [0, 0, 0, 1]")
            m[3] = [0.0, 0.0, 0.0, 1.0]
            matrices[i] = m
            q[i] = [0.0, 0.0, 0.0, 1.0]
            t[i] = m[:3, 3]
            continue
        t[i] = doc.get_floats(node, "translation", where, 3, [0.0, 0.0, 0.0])
        rot = doc.get_floats(node, "rotation", where, 4, [0.0, 0.0, 0.0, 1.0])
        norm = np.linalg.norm(rot)
        if norm < 1e-12:
            raise doc.error(f"{where}.rotation", "zero-length quaternion")
        q[i] = rot / norm
        s[i] = doc.get_floats(node, "scale", where, 3, [1.0, 1.0, 1.0])
    depths = _depths(doc, parents)
    tree = NodeTree(names, parents, children, t, q, s, matrices, depths)
    if count and depths.max() > MAX_NODE_DEPTH:
        deep = int(np.argmax(depths))
        raise doc.error(f"nodes[{deep}]", f"{tree.label(deep)} has {int(depths[deep])} ancestors: node hierarchies "
                        f"deeper than {MAX_NODE_DEPTH} are not supported")  # fmt: skip
    return tree


def _depths(doc: GltfDocument, parents: np.ndarray) -> np.ndarray:
    """Ancestor count per node, in time linear in the node count; InputError on a cycle of parents."""
    depth = np.full(len(parents), -1, dtype=np.int64)
    on_path = np.zeros(len(parents), dtype=bool)
    for i in range(len(parents)):
        path, p = [], i
        while p >= 0 and depth[p] < 0:  # up to a root or a node already measured
            if on_path[p]:
                raise doc.error(f"nodes[{p}]", "the node hierarchy has a cycle")
            on_path[p] = True
            path.append(p)
            p = int(parents[p])
        d = int(depth[p]) if p >= 0 else -1
        for n in reversed(path):
            d += 1
            depth[n] = d
            on_path[n] = False
    return depth


def rigid_frames(world: np.ndarray, scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Splits ``world = [R | t] @ S(scale)`` into rotations and translations.

    Args:
        world: matrices with a uniform scale, shape (..., 4, 4).
        scales: the uniform scale factor per matrix, shape (...,).

    Returns:
        rotations [unit quat xyzw] (..., 4) (orthonormalized by polar decomposition) and translations (..., 3).
    """
    r = world[..., :3, :3] / scales[..., None, None]
    u, _, vt = np.linalg.svd(r)
    return matrix_to_quat(u @ vt), world[..., :3, 3].copy()
