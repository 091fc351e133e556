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

__all__ = ["shape_distance", "skin_mesh"]

_CUTOFF_BLENDS = 8.0
"""Each solid is evaluated only within this many blend radii of its box (exp(-8) ~ 3e-4 beyond)."""


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


def _field(spec: CharacterSpec, origin: np.ndarray, spacing: float, shape: tuple[int, int, int]) -> np.ndarray:
    """Smooth-union field on the grid ``origin + spacing * (i, j, k)``, shape ``shape``."""
    k = spec.blend_radius
    cutoff = _CUTOFF_BLENDS * k
    total = np.zeros(shape)
    axes = [origin[d] + spacing * np.arange(shape[d]) for d in range(3)]
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


def skin_mesh(spec: CharacterSpec, cells_per_height: int) -> tuple[np.ndarray, np.ndarray]:
    """Meshes the character's skin.

    Args:
        spec: the character.
        cells_per_height: grid cells along the solids' vertical extent [count].

    Returns:
        points [m], shape (V, 3), and triangles (counter-clockwise seen from outside), shape (T, 3), of the
        largest connected component of the zero level set.
    """
    from skimage.measure import marching_cubes

    lo, hi = spec.bounds()
    spacing = float(hi[2] - lo[2]) / float(cells_per_height)
    pad = 2.0 * spacing + 2.0 * spec.blend_radius  # the smooth union bulges out by up to k log(n)
    origin = lo - pad
    shape = tuple(int(np.ceil((hi[d] + pad - origin[d]) / spacing)) + 1 for d in range(3))
    field = _field(spec, origin, spacing, shape)
    # a grid value of exactly zero makes marching cubes emit coincident vertices (degenerate triangles)
    field[field == 0.0] = 1e-12
    verts, faces, _, _ = marching_cubes(field, level=0.0, spacing=(spacing,) * 3, method="lewiner")
    verts = verts + origin
    faces = faces.astype(np.int64)
    verts, faces = _largest_component(verts, faces)
    if _signed_volume(verts, faces) < 0.0:
        faces = faces[:, ::-1]
    return verts, np.ascontiguousarray(faces)


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
