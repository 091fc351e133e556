"""The body the validators look at: the skinned mesh (or a tube proxy for meshless rigs), split into parts.

* Parts: every vertex belongs to the joint with its largest skin weight; a joint's part is the skinned region
  that bone drives. Region statistics (vertex share, thickness, extent, centroid) are joint features of the model.
* Collision spheres: each part is covered by a short chain of spheres inscribed along its principal axis
  (radius = a fraction of the median distance of the region's vertices to that axis). They ride rigidly on
  their joint, so the skinned sphere centres come from the same Warp LBS kernel as the mesh.
* Blend pairs: joints that share vertices (a vertex's two largest influences). Linear blend skinning collapses
  such a region when the two joints twist apart (the "candy wrapper"): a vertex blended ``w_a : w_b`` keeps
  ``|w_a + w_b e^{i theta}| / (w_a + w_b)`` of its distance to the bone under a relative twist ``theta``. Each
  pair keeps its most balanced split (the first to collapse) and the bone axis it twists about.

Meshless rigs (BVH) get a proxy: one tube per bone, radius proportional to the bone (clamped by the height),
driven by the bone's parent joint and blended half-and-half at both ends, like a typical character skin.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from sim import Rig, RigWarning, SkinnedMesh
from sim.rotations import matrix_to_quat

from .skeleton import MIN_BONE_FRACTION, _bone_axis, _subtree_sizes

__all__ = ["BodyConfig", "BodyModel"]


@dataclass(frozen=True)
class BodyConfig:
    """How collision spheres and proxy tubes are fitted."""

    sphere_shrink: float = 0.8
    """Sphere radius as a fraction of the median vertex distance to the part's axis (inscribed: < 1)."""
    max_spheres_per_part: int = 5
    """Longest sphere chain per part."""
    min_part_vertices: int = 3
    """Parts with fewer vertices get no sphere."""
    proxy_radius_fraction: float = 0.2
    """Proxy tube radius as a fraction of the bone length (meshless rigs)."""
    proxy_radius_min: float = 0.012
    """Smallest proxy tube radius [fraction of rig height]."""
    proxy_radius_max: float = 0.035
    """Largest proxy tube radius [fraction of rig height]."""
    proxy_ring: int = 8
    """Vertices per proxy tube ring."""
    proxy_stations: int = 5
    """Rings per proxy tube."""
    min_blend_balance: float = 0.1
    """A vertex counts for a blend pair when its smaller of two largest weights is at least this share."""


def _unit_rotation(m: np.ndarray) -> np.ndarray:
    """Rotation quaternions of 4x4 matrices that may carry a uniform scale, shape (N, 4)."""
    r = m[:, :3, :3]
    s = np.cbrt(np.linalg.det(r))
    return matrix_to_quat(r / s[:, None, None])


class BodyModel:
    """Parts, collision spheres and blend pairs of a rig's skinned body (module docstring).

    Attributes:
        mesh: the skinned mesh used (the rig's merged mesh, or the tube proxy).
        proxy: True when ``mesh`` is the generated tube proxy.
        height: rig height [m].
        dominant: joint with the largest weight per vertex, shape (V,).
        region_share: vertex share of each joint's part, shape (J,).
        region_radius: median vertex distance to the part's axis [m], shape (J,).
        region_extent: part length along its axis (5-95% quantiles) [m], shape (J,).
        region_centroid: part centroid minus the joint's bind position, world [m], shape (J, 3).
        sphere_joint: joint carrying each sphere, shape (S,).
        sphere_center: sphere centres in bind-pose world coordinates [m], shape (S, 3).
        sphere_radius: [m], shape (S,).
        touching: part pairs ``(a, b)``, ``a < b``, whose regions share a mesh triangle (adjacent on the skin) or,
            on the tube proxy, whose tubes share an end point (bones joined through zero-length joints, like the
            collars and neck of a BVH chest hub: their tubes start at one point, a pose bending one cannot part
            them).
        blend_joints: (outer, inner) joint per blend pair, the inner one deeper in the tree, shape (B, 2).
        blend_weights: the pair's most balanced weight split (sums to 1), shape (B, 2).
        blend_axis: bone axis the pair twists about, bind-pose world coordinates (unit), shape (B, 3).
        bind_rotations: joint bind rotations (scale removed) [quat xyzw], shape (J, 4).
    """

    def __init__(self, rig: Rig, config: BodyConfig | None = None):
        self.config = cfg = config or BodyConfig()
        self.height = max(rig.height(), 1e-9)
        bind = rig.bind_world_matrices()
        self.bind_positions = bind[:, :3, 3].copy()
        self.bind_rotations = _unit_rotation(bind)
        has_mesh = bool(rig.meshes) and sum(m.vertex_count for m in rig.meshes) > 0
        self.proxy = not has_mesh
        self.mesh = rig.merged_mesh() if has_mesh else _proxy_tubes(rig, self.bind_positions, self.height, cfg)
        self._fit_parts(rig)
        if self.proxy:
            self.touching |= _shared_tube_ends(rig, self.bind_positions, self.height)
        self._fit_blend_pairs(rig)

    # -- parts and spheres --------------------------------------------------------------------------------
    def _fit_parts(self, rig: Rig) -> None:
        cfg, mesh, count = self.config, self.mesh, rig.joint_count
        w = mesh.influence_weights
        self.dominant = mesh.influence_joints[np.arange(mesh.vertex_count), np.argmax(w, axis=1)]
        self.region_share = np.bincount(self.dominant, minlength=count)[:count] / max(mesh.vertex_count, 1)
        self.region_radius = np.zeros(count)
        self.region_extent = np.zeros(count)
        self.region_centroid = np.zeros((count, 3))
        sj, sc, sr = [], [], []
        for j in range(count):
            pts = mesh.points[self.dominant == j]
            if len(pts) < cfg.min_part_vertices:
                continue
            c0 = pts.mean(axis=0)
            self.region_centroid[j] = c0 - self.bind_positions[j]
            centred = pts - c0
            _, _, vt = np.linalg.svd(centred, full_matrices=False)
            u = vt[0]
            t = centred @ u
            r = np.linalg.norm(centred - t[:, None] * u, axis=-1)
            lo, hi = np.quantile(t, [0.05, 0.95])
            r_med = float(np.median(r))
            self.region_radius[j] = r_med
            self.region_extent[j] = hi - lo
            n = int(np.clip(np.ceil((hi - lo) / max(2.0 * r_med, 1e-9)), 1, cfg.max_spheres_per_part))
            slab = (hi - lo) / (2 * n) if hi > lo else np.inf
            for k in range(n):
                tk = lo + (k + 0.5) * (hi - lo) / n if n > 1 else 0.5 * (lo + hi)
                near = np.abs(t - tk) <= slab
                rk = float(np.median(r[near])) if near.sum() >= cfg.min_part_vertices else r_med
                if rk <= 0:
                    continue
                sj.append(j)
                sc.append(c0 + tk * u)
                sr.append(cfg.sphere_shrink * rk)
        tri_parts = np.sort(self.dominant[mesh.triangles], axis=1) if len(mesh.triangles) else np.zeros((0, 3), int)
        edges = np.concatenate([tri_parts[:, [0, 1]], tri_parts[:, [1, 2]], tri_parts[:, [0, 2]]])
        edges = np.unique(edges[edges[:, 0] != edges[:, 1]], axis=0)
        self.touching = {(int(a), int(b)) for a, b in edges}
        self.sphere_joint = np.asarray(sj, dtype=np.int32)
        self.sphere_center = np.asarray(sc, dtype=np.float64).reshape(-1, 3)
        self.sphere_radius = np.asarray(sr, dtype=np.float64)

    def sphere_rig(self, rig: Rig) -> Rig:
        """``rig`` with one mesh whose vertices are the sphere centres, bound rigidly to their joints.

        Skinning it with :class:`sim.torch_ops.TorchRig` moves the spheres with the pose.
        """
        n = len(self.sphere_center)
        mesh = SkinnedMesh(
            "collision_spheres", self.sphere_center, np.zeros((0, 3), dtype=np.int32),
            self.sphere_joint[:, None], np.ones((n, 1)), joint_count=rig.joint_count,
        )  # fmt: skip
        return Rig(rig.joint_names, rig.parents, rig.rest_translations, rig.rest_rotations,
                   rig.inverse_bind_matrices, [mesh], name=rig.name)  # fmt: skip

    # -- blend pairs --------------------------------------------------------------------------------------
    def _fit_blend_pairs(self, rig: Rig) -> None:
        mesh, cfg = self.mesh, self.config
        order = np.argsort(-mesh.influence_weights, axis=1)
        rows = np.arange(mesh.vertex_count)
        depths = rig.depths()
        best: dict[tuple[int, int], tuple[float, float, float]] = {}
        if mesh.influence_count >= 2:
            j1, j2 = mesh.influence_joints[rows, order[:, 0]], mesh.influence_joints[rows, order[:, 1]]
            w1, w2 = mesh.influence_weights[rows, order[:, 0]], mesh.influence_weights[rows, order[:, 1]]
            for a, b, wa, wb in zip(j1, j2, w1, w2):
                if a == b or wb <= 0:
                    continue
                balance = wb / (wa + wb)
                if balance < cfg.min_blend_balance:
                    continue
                # outer = shallower joint first
                if depths[a] > depths[b] or (depths[a] == depths[b] and a > b):
                    a, b, wa, wb = b, a, wb, wa
                key = (int(a), int(b))
                if key not in best or balance > best[key][0]:
                    best[key] = (balance, wa / (wa + wb), wb / (wa + wb))
        keys = sorted(best)
        self.blend_joints = np.asarray(keys, dtype=np.int32).reshape(-1, 2)
        self.blend_weights = np.asarray([best[k][1:] for k in keys], dtype=np.float64).reshape(-1, 2)
        # the inner joint's bone as the bind pose lays it out (toward its children, or continuing the incoming
        # bone for a leaf): rotating a rest-frame axis by the bind rotation would turn a leaf's axis with the leaf's
        # own bind rotation, which does not move its bone
        children, sizes = rig.children(), _subtree_sizes(rig.parents)
        inner = self.blend_joints[:, 1]
        axes = [_bone_axis(int(j), self.bind_positions, rig.parents, children, sizes, self.height) for j in inner]
        self.blend_axis = np.asarray(axes, dtype=np.float64).reshape(-1, 3)


def _shared_tube_ends(rig: Rig, positions: np.ndarray, height: float) -> set[tuple[int, int]]:
    """Part pairs ``(a, b)``, ``a < b``, of the tube proxy whose tubes share an end point (within the zero-length
    bone length): a tube ``p -> j`` belongs to part ``p`` and ends at the bind positions of ``p`` and ``j``, so
    parts meeting through zero-length joints (a hub joint with zero-offset children has no tube of its own) touch
    like a parent and its child."""
    tiny = MIN_BONE_FRACTION * height
    ends: dict[int, list[int]] = {}  # part -> joints at its tubes' end points
    for j in range(1, rig.joint_count):
        p = int(rig.parents[j])
        if np.linalg.norm(positions[j] - positions[p]) >= tiny:  # the tubes _proxy_tubes builds
            ends.setdefault(p, []).extend((p, j))
    parts = sorted(ends)
    out = set()
    for i, a in enumerate(parts):
        pa = positions[ends[a]]
        for b in parts[i + 1 :]:
            gap = np.linalg.norm(pa[:, None] - positions[ends[b]][None], axis=-1)
            if gap.min() < tiny:
                out.add((a, b))
    return out


def _proxy_tubes(rig: Rig, positions: np.ndarray, height: float, cfg: BodyConfig) -> SkinnedMesh:
    """A tube per bone (parent -> child) between bind positions, skinned to the parent and blended at the ends."""
    tiny = MIN_BONE_FRACTION * height
    points, tris, joints, weights = [], [], [], []
    ring, stations = cfg.proxy_ring, cfg.proxy_stations
    angles = 2 * np.pi * np.arange(ring) / ring
    for j in range(1, rig.joint_count):
        p = int(rig.parents[j])
        d = positions[j] - positions[p]
        length = np.linalg.norm(d)
        if length < tiny:
            continue
        a = d / length
        ref = np.array([0.0, 0.0, 1.0]) if abs(a[2]) < 0.9 else np.array([1.0, 0.0, 0.0])
        b = ref - (ref @ a) * a
        b /= np.linalg.norm(b)
        c = np.cross(a, b)
        radius = np.clip(cfg.proxy_radius_fraction * length, cfg.proxy_radius_min * height,
                         cfg.proxy_radius_max * height)  # fmt: skip
        g = int(rig.parents[p]) if p > 0 else p
        base = sum(len(x) for x in points)
        for k, s in enumerate(np.linspace(0.0, 1.0, stations)):
            centre = positions[p] + s * d
            points.append(centre + radius * (np.cos(angles)[:, None] * b + np.sin(angles)[:, None] * c))
            w_child, w_grand = max(0.0, s - 0.5), max(0.0, 0.5 - s) if g != p else 0.0
            joints.append(np.tile([p, j, g], (ring, 1)))
            weights.append(np.tile([1.0 - w_child - w_grand, w_child, w_grand], (ring, 1)))
            if k:
                for i in range(ring):
                    i2 = (i + 1) % ring
                    r0, r1 = base + (k - 1) * ring, base + k * ring
                    tris += [[r0 + i, r0 + i2, r1 + i2], [r0 + i, r1 + i2, r1 + i]]
    if not points:
        raise ValueError(f"rig {rig.name!r}: no bone longer than {MIN_BONE_FRACTION} x height to build a body from")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RigWarning)
        return SkinnedMesh("proxy_tubes", np.concatenate(points), np.asarray(tris), np.concatenate(joints),
                           np.concatenate(weights), joint_count=rig.joint_count)  # fmt: skip
