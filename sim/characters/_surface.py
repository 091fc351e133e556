"""The skin surface: a smooth union of signed distance functions, meshed by marching cubes.

The field is the log-sum-exp smooth minimum of the solids' (approximate) signed distances,

    f(p) = -k log( sum_i exp(-d_i(p) / k) ),

which is order-independent, infinitely differentiable, and fills the creases where solids meet with fillets of
size ~k. Its zero level set is one closed surface as long as the solids overlap in a connected way; marching
cubes (scikit-image, Lewiner's topology-consistent variant) turns it into a watertight manifold triangle mesh.
"""

from __future__ import annotations

import numpy as np

from ._shapes import CharacterSpec, Ellipsoid, RoundCone, Shape, shape_bounds

__all__ = ["check_every_bone_skinned", "grid_axes", "shape_distance", "skin_mesh"]

_CUTOFF_BLENDS = 8.0
"""Each solid is evaluated only within this many blend radii of its box (exp(-8) ~ 3e-4 beyond)."""

MAX_DISCARDED_SHARE = 0.01
"""Largest share of the triangles that the pieces of skin apart from the main one may hold; beyond it the grid is
too coarse to join the solids (a hand or paw would be dropped) and the skin is refused."""


def shape_distance(shape: Shape, points: np.ndarray) -> np.ndarray:
    """Approximate signed distance [m] from ``points`` (..., 3) to one solid (negative inside), shape (...)."""
    p = np.asarray(points, dtype=np.float64)
    if isinstance(shape, RoundCone):
        a, b = np.asarray(shape.a), np.asarray(shape.b)
        ab = b - a
        length2 = float(ab @ ab)
        t = np.clip(((p - a) @ ab) / length2, 0.0, 1.0) if length2 > 0 else np.zeros(p.shape[:-1])
        closest = a + t[..., None] * ab
        radius = shape.radius_a + t * (shape.radius_b - shape.radius_a)
        return np.linalg.norm(p - closest, axis=-1) - radius
    if isinstance(shape, Ellipsoid):
        axes = np.asarray(shape.axes, dtype=np.float64)  # rows = semi-axis directions
        local = (p - np.asarray(shape.center)) @ axes.T
        r = np.asarray(shape.radii)
        # Inigo Quilez's ellipsoid bound: exact on the surface, first-order accurate near it
        k0 = np.linalg.norm(local / r, axis=-1)
        k1 = np.linalg.norm(local / (r * r), axis=-1)
        return np.where(k1 > 1e-12, k0 * (k0 - 1.0) / np.maximum(k1, 1e-12), -float(r.min()))
    raise TypeError(f"unknown shape type {type(shape).__name__}")


def _field(spec: CharacterSpec, axes: list[np.ndarray], spacing: float) -> np.ndarray:
    """Smooth-union field on the grid of node coordinates ``axes`` (x, y, z; each evenly spaced by ``spacing``)."""
    k = spec.blend_radius
    cutoff = _CUTOFF_BLENDS * k
    shape = tuple(len(a) for a in axes)
    origin = [float(a[0]) for a in axes]
    total = np.zeros(shape)
    for sh in spec.shapes:
        lo, hi = shape_bounds(sh)
        i0 = [max(0, int(np.floor((lo[d] - cutoff - origin[d]) / spacing))) for d in range(3)]
        i1 = [min(shape[d], int(np.ceil((hi[d] + cutoff - origin[d]) / spacing)) + 1) for d in range(3)]
        if any(a >= b for a, b in zip(i0, i1)):
            continue
        grid = np.stack(np.meshgrid(*(axes[d][i0[d] : i1[d]] for d in range(3)), indexing="ij"), axis=-1)
        d = shape_distance(sh, grid)
        total[i0[0] : i1[0], i0[1] : i1[1], i0[2] : i1[2]] += np.exp(-np.minimum(d, cutoff) / k)
    # the floor exp(-cutoff/k) caps the field at +cutoff far from every solid
    return -k * np.log(total + np.exp(-cutoff / k))


def grid_axes(spec: CharacterSpec, cells_per_height: int) -> tuple[list[np.ndarray], float]:
    """Node coordinates [m] of the marching-cubes grid along x, y, z, and its spacing [m].

    The grid spans the solids' box plus a margin. Along y its nodes are symmetric about the mirror plane y = 0
    (``spacing * (j - half)``, exact negatives of each other), so a left-right symmetric character gets a
    left-right symmetric skin.
    """
    lo, hi = spec.bounds()
    spacing = float(hi[2] - lo[2]) / float(cells_per_height)
    pad = 2.0 * spacing + 2.0 * spec.blend_radius  # the smooth union bulges out by up to k log(n)
    axes = []
    for d in range(3):
        if d == 1:
            half = int(np.ceil(max(pad - lo[1], hi[1] + pad) / spacing))
            axes.append(spacing * np.arange(-half, half + 1, dtype=np.float64))
        else:
            count = int(np.ceil((hi[d] - lo[d] + 2.0 * pad) / spacing)) + 1
            axes.append(lo[d] - pad + spacing * np.arange(count))
    return axes, spacing


def skin_mesh(
    spec: CharacterSpec, cells_per_height: int, field: str = "cells_per_height"
) -> tuple[np.ndarray, np.ndarray]:
    """Meshes the character's skin.

    Args:
        spec: the character.
        cells_per_height: grid cells along the solids' vertical extent [count].
        field: how messages name ``cells_per_height`` (e.g. ``"BipedConfig.cells_per_height"``).

    Returns:
        points [m], shape (V, 3), and triangles (counter-clockwise seen from outside), shape (T, 3), of the
        largest connected component of the zero level set. The grid's nodes are symmetric about y = 0, and the
        mesh of a left-right symmetric character is exactly symmetric (vertices and triangles).

    Raises:
        ValueError: the grid is too coarse: no surface at all, or pieces apart from the largest one holding more
            than :data:`MAX_DISCARDED_SHARE` of the triangles (the message suggests a finer grid).
    """
    from skimage.measure import marching_cubes

    axes, spacing = grid_axes(spec, cells_per_height)
    origin = np.array([a[0] for a in axes])
    field_values = _field(spec, axes, spacing)
    # a grid value of exactly zero makes marching cubes emit coincident vertices (degenerate triangles)
    field_values[field_values == 0.0] = 1e-12
    if not (field_values.min() < 0.0 < field_values.max()):
        raise ValueError(
            f"{field}: {cells_per_height} cells are too coarse to mesh the skin (no grid node lies inside it); "
            f"use at least {suggested_cells(spec, cells_per_height, spec.bone_names())}"
        )
    index_verts, faces, _, _ = marching_cubes(field_values, level=0.0, method="lewiner")
    verts = origin + spacing * _on_edges(index_verts, field_values)
    faces = faces.astype(np.int64)
    verts, faces = _mirror_left_half(verts, faces)
    total = len(faces)
    verts, faces = _largest_component(verts, faces)
    dropped = 1.0 - len(faces) / total
    if dropped > MAX_DISCARDED_SHARE:
        raise ValueError(
            f"{field}: {cells_per_height} cells are too coarse: the skin falls apart and pieces holding "
            f"{100.0 * dropped:.1f}% of its triangles would be dropped; use at least "
            f"{suggested_cells(spec, cells_per_height, spec.bone_names())}"
        )
    if _signed_volume(verts, faces) < 0.0:
        faces = faces[:, ::-1]
    return verts, np.ascontiguousarray(faces)


def suggested_cells(spec: CharacterSpec, cells_per_height: int, bones: list[str]) -> int:
    """A grid fine enough for the solids of ``bones``: 1.25 cells across the thinnest of them, and finer than now.

    A solid's thickness is its smallest diameter (a round cone's larger end); a bone's, that of its thickest
    solid (its other solids blend into it).
    """
    lo, hi = spec.bounds()
    thickness = {}
    for sh in spec.shapes:
        if sh.bone in bones:
            t = 2.0 * (max(sh.radius_a, sh.radius_b) if isinstance(sh, RoundCone) else min(sh.radii))
            thickness[sh.bone] = max(thickness.get(sh.bone, 0.0), t)
    thinnest = min(thickness.values(), default=float(hi[2] - lo[2]))
    return max(int(np.ceil(1.25 * float(hi[2] - lo[2]) / thinnest)), int(cells_per_height) + 1)


def check_every_bone_skinned(
    spec: CharacterSpec, dominant: np.ndarray, cells_per_height: int, field: str = "cells_per_height"
) -> None:
    """Refuses a skin in which some bone (they all have solids) dominates no vertex: the grid lost its part.

    Args:
        spec: the character (bones in joint order).
        dominant: the joint with the largest weight of each vertex, shape (V,).
        cells_per_height, field: the grid resolution and how messages name it.
    """
    names = spec.bone_names()
    count = np.bincount(dominant, minlength=len(names))
    lost = [n for n, c in zip(names, count, strict=True) if c == 0]
    if lost:
        raise ValueError(
            f"{field}: {cells_per_height} cells are too coarse: no skin vertex follows {', '.join(lost)}; use at "
            f"least {suggested_cells(spec, cells_per_height, lost)}"
        )


def _on_edges(index_verts: np.ndarray, field: np.ndarray) -> np.ndarray:
    """Marching-cubes vertices (grid index coordinates, float32) placed again in float64 on their grid edges.

    scikit-image meshes a float32 copy of the field and returns float32 coordinates, whose rounding depends on the
    index (so mirror-image vertices are rounded differently). Each vertex lies on the grid edge along which it
    has a fractional coordinate; it is put back where linear interpolation of the float64 field crosses zero.
    A vertex whose coordinates all came out whole sits (to float32 precision) on a node: of that node's edges
    with a sign change, the one whose crossing is nearest the node is used.
    """
    v = index_verts.astype(np.float64)
    base = np.floor(v)
    fractional = v > base
    out = v.copy()
    on_edge = fractional.sum(axis=1) == 1
    axis = np.argmax(fractional, axis=1)
    rows = np.flatnonzero(on_edge)
    if rows.size:
        i0 = base[rows].astype(np.int64)
        i1 = i0.copy()
        i1[np.arange(rows.size), axis[rows]] += 1
        f0, f1 = field[tuple(i0.T)], field[tuple(i1.T)]
        out[rows, axis[rows]] = i0[np.arange(rows.size), axis[rows]] + f0 / (f0 - f1)
    rows = np.flatnonzero(~fractional.any(axis=1))
    if rows.size:
        node = v[rows].astype(np.int64)
        f0 = field[tuple(node.T)]
        best_t = np.full(rows.size, np.inf)
        best = np.zeros((rows.size, 3))
        for d in range(3):
            for step in (-1, 1):
                other = node.copy()
                other[:, d] += step
                inside = (other[:, d] >= 0) & (other[:, d] < field.shape[d])
                f1 = np.where(inside, field[tuple(np.clip(other, 0, np.array(field.shape) - 1).T)], f0)
                crossing = inside & ((f0 < 0.0) != (f1 < 0.0))
                t = np.where(crossing, f0 / np.where(crossing, f0 - f1, 1.0), np.inf)
                take = t < best_t
                best_t = np.where(take, t, best_t)
                offset = np.zeros(3)
                offset[d] = step
                best = np.where(take[:, None], offset * t[:, None], best)
        out[rows] = node + np.where(np.isfinite(best_t)[:, None], best, 0.0)
    return out


def _mirror_left_half(verts: np.ndarray, faces: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Makes a mesh of a mirror-symmetric field exactly symmetric: the right half (y < 0) becomes the mirror image
    of the left.

    With grid nodes symmetric about y = 0 the vertices already pair up (to rounding), but marching cubes'
    triangulation tables are not mirror-symmetric, so the triangles of the two halves differ. A node plane lies at
    y = 0, so every triangle lies on one side of it; the left ones are kept and mirrored (their winding reversed)
    onto the partners of their vertices, and each right vertex is set to the exact mirror image of its partner.
    Returned unchanged when the vertices do not pair up (an asymmetric character) or a triangle lies in the plane.
    """
    from scipy.spatial import cKDTree

    mirror = np.array([1.0, -1.0, 1.0])
    extent = float(np.ptp(verts, axis=0).max()) if len(verts) else 0.0
    distance, partner = cKDTree(verts).query(verts * mirror)
    y = verts[faces, 1]
    if len(verts) == 0 or distance.max() > 1e-9 * max(extent, 1.0) or np.any(np.all(y == 0.0, axis=1)):
        return verts, faces
    left = faces[np.all(y >= 0.0, axis=1)]
    faces = np.concatenate([left, partner[left][:, ::-1]])
    verts = verts.copy()
    right = verts[:, 1] < 0.0
    verts[right] = verts[partner[right]] * mirror
    return verts, faces


def _largest_component(verts: np.ndarray, faces: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Keeps the connected component with the most triangles and drops unreferenced vertices."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    n = len(verts)
    rows = np.concatenate([faces[:, 0], faces[:, 1], faces[:, 2]])
    cols = np.concatenate([faces[:, 1], faces[:, 2], faces[:, 0]])
    graph = coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))
    count, labels = connected_components(graph, directed=False)
    if count > 1:
        face_label = labels[faces[:, 0]]
        keep = np.argmax(np.bincount(face_label, minlength=count))
        faces = faces[face_label == keep]
    used = np.zeros(n, dtype=bool)
    used[faces.ravel()] = True
    remap = np.cumsum(used) - 1
    return verts[used], remap[faces]


def _signed_volume(verts: np.ndarray, faces: np.ndarray) -> float:
    a, b, c = (verts[faces[:, i]] for i in range(3))
    return float(np.einsum("ij,ij->i", a, np.cross(b, c)).sum() / 6.0)
