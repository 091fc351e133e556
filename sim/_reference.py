"""Slow, obviously-correct NumPy references for the Warp kernels (tests compare against these)."""

from __future__ import annotations

import numpy as np

from .rig import Rig, SkinnedMesh
from .rotations import transform_matrix


def fk_reference(parents: np.ndarray, local_translations: np.ndarray, local_rotations: np.ndarray) -> np.ndarray:
    """World 4x4 joint matrices by a Python loop over poses and joints.

    Args:
        parents: shape (J,), parents-first.
        local_translations: shape (N, J, 3).
        local_rotations: [quat xyzw], shape (N, J, 4).

    Returns:
        shape (N, J, 4, 4).
    """
    n, count = local_rotations.shape[:2]
    world = np.zeros((n, count, 4, 4))
    for i in range(n):
        for j in range(count):
            local = transform_matrix(local_translations[i, j], local_rotations[i, j])
            world[i, j] = local if parents[j] < 0 else world[i, parents[j]] @ local
    return world


def lbs_reference(rig: Rig, mesh: SkinnedMesh, world: np.ndarray) -> np.ndarray:
    """Skinned points ``sum_k w W[j] IBM[j] p`` by a Python loop over influences.

    Args:
        world: world joint matrices, shape (N, J, 4, 4).

    Returns:
        shape (N, V, 3).
    """
    skinning = world @ rig.inverse_bind_matrices  # (N, J, 4, 4)
    hom = np.concatenate([mesh.points, np.ones((mesh.vertex_count, 1))], axis=1)
    out = np.zeros((world.shape[0], mesh.vertex_count, 3))
    for k in range(mesh.influence_count):
        m = skinning[:, mesh.influence_joints[:, k]]  # (N, V, 4, 4)
        out += mesh.influence_weights[None, :, k, None] * np.einsum("nvab,vb->nva", m, hom)[..., :3]
    return out


def lbs_normals_reference(rig: Rig, mesh: SkinnedMesh, world: np.ndarray) -> np.ndarray:
    """Skinned unit normals: bind-local normals (the inverse transpose of each inverse bind matrix's 3x3 part applied,
    normalized), rotated by their joints, blended, normalized. Shape (N, V, 3)."""
    ibm_inv_t = np.swapaxes(np.linalg.inv(rig.inverse_bind_matrices[:, :3, :3]), -1, -2)  # normals: inverse transpose
    normals = mesh.vertex_normals()
    out = np.zeros((world.shape[0], mesh.vertex_count, 3))
    for k in range(mesh.influence_count):
        j = mesh.influence_joints[:, k]
        local = np.einsum("vab,vb->va", ibm_inv_t[j], normals)
        local /= np.linalg.norm(local, axis=-1, keepdims=True)
        out += mesh.influence_weights[None, :, k, None] * np.einsum("nvab,vb->nva", world[:, j, :3, :3], local)
    return out / np.linalg.norm(out, axis=-1, keepdims=True)
