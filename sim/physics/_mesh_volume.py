"""The volume a closed triangle mesh encloses (mass from the skin rather than from overlapping colliders)."""

from __future__ import annotations

import numpy as np

__all__ = ["enclosed_volume"]


def enclosed_volume(points: np.ndarray, triangles: np.ndarray) -> float | None:
    """Volume enclosed by a triangle mesh [m^3], or None when the mesh does not enclose one.

    Vertices at the same position are merged first (glTF and UsdSkel meshes split vertices along UV and normal
    seams), so a skin that is closed but split at its seams counts as closed. The volume is the divergence-theorem
    sum of signed tetrahedra, per closed shell (either winding); several shells add up, nested ones too
    (eyes inside a head add their volume).

    Args:
        points: vertex positions [m], shape (V, 3).
        triangles: vertex indices, shape (T, 3).

    Returns:
        the enclosed volume (> 0), or None when, after merging, some edge is not shared by exactly two triangles
        of consistent winding (an open or non-manifold mesh), or the mesh has no triangles.
    """
    import trimesh

    points = np.asarray(points, dtype=np.float64)
    triangles = np.asarray(triangles, dtype=np.int64)
    if len(triangles) == 0 or not np.isfinite(points).all():
        return None
    mesh = trimesh.Trimesh(vertices=points, faces=triangles, process=True)
    if not (mesh.is_watertight and mesh.is_winding_consistent):
        return None
    # per closed shell: an inward-facing shell gives its volume with a negative sign (a body and a separate shell of
    # the other winding subtracted, or cancelled out to no volume at all)
    shells = mesh.split(only_watertight=False) if mesh.body_count > 1 else [mesh]
    volume = float(sum(abs(float(m.volume)) for m in shells))
    return volume if np.isfinite(volume) and volume > 0.0 else None
