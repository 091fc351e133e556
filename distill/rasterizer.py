"""Differentiable soft mesh rasterizer: Warp kernels behind a torch autograd function.

Screen-space vertices ``(x, y, zeta)`` (pixels, y down; ``zeta`` normalized inverse depth, nominally in [0, 1],
larger is closer) and per-vertex colours go in; per-pixel character colour, soft coverage (alpha) and soft depth
come out. The formulation (see :mod:`distill._render_kernels`) is SoftRas's (Liu et al. 2019: sigmoid coverage of
the squared edge distance, softmax over depth) with an edge offset, so closed meshes render without their wireframe,
and smooth facing weights, so the image stays continuous when triangles turn away from the camera.

Work is organized as (image, triangle, tile) pairs: each front-facing triangle is binned to the square tiles its
dilated screen box overlaps (torch, vectorized), then one Warp thread per pair and tile pixel evaluates the triangle
there, in two passes: the first (no gradient) takes each pixel's depth-softmax shift, the log-weight of its largest
term, and marks the threads that contribute; the second adds the marked contributions. Backward replays the second
kernel's Warp-generated adjoint. The shift is per pixel, so the image does not depend on the tile size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import warp as wp

from sim._numbers import is_finite_real, is_integer, is_real
from sim._warp_setup import init_warp
from sim.torch_ops import refuse_double_backward

from . import _render_kernels as K

__all__ = ["MeshTopology", "RasterOutput", "RasterSettings", "facing_weights", "rasterize"]

MIN_FACING_WEIGHT = 1e-6
"""Triangles whose facing weight is below this are dropped: a triangle seen edge-on has a round-off screen area
(~1e-6 px^2 for a 10 px triangle in float32) whose barycentric gradients overflow (inf * 0 = NaN)."""
MIN_RELATIVE_AREA = 1e-5
"""Triangles whose screen area is below this fraction of their summed squared edge lengths are degenerate (an
equilateral triangle seen head-on has 0.29; float32 round-off of a 100 px triangle is ~1e-7)."""
MIN_GAMMA = 1e-4
"""Smallest depth softmax temperature [normalized inverse depth]. The per-pixel shift makes each covered pixel's
largest softmax term exp(r) with |r| <= ~ulp(zeta) / (2 gamma) (float32 round-off of the shift): at this gamma ~6e-4
at zeta 1 and ~0.3 at zeta 1000 (a vertex at ~1e-3 of the near plane's distance). Below it the softmax is a
z-buffer hard to float32 resolution, its zeta gradients (~1 / gamma) no longer smooth anything, and the round-off
grows unbounded."""


MAX_TILE_SIZE = 64
"""Largest binning tile edge [px]: the first pass keeps one byte per (triangle, tile) pair and tile pixel, so a
tile of 4096 px asked for 16 MiB per pair (out of memory on any mesh, where 8 px is 64 B)."""


@dataclass(frozen=True)
class RasterSettings:
    """Soft rasterization parameters."""

    sigma: float = 0.5
    """Edge softness [px^2]: coverage is sigmoid(offset - d^2 / sigma) at distance d outside a triangle."""
    edge_offset: float = 3.0
    """Coverage logit on a triangle's edge (3: 0.95), so shared edges of a closed surface stay covered."""
    gamma: float = 0.01
    """Depth softmax temperature [normalized inverse depth], >= :data:`MIN_GAMMA`: smaller is a harder z-buffer. The
    softmax is shifted per pixel, so no value in range under- or overflows, whatever the depth range of the scene."""
    coverage_cutoff: float = 1e-4
    """Contributions with coverage below this are skipped (bounds each triangle's reach)."""
    tile_size: int = 8
    """Binning tile edge [px], at most :data:`MAX_TILE_SIZE`."""
    cull_backfaces: bool = True
    """Skip triangles facing away from the camera (closed meshes)."""
    facing_ramp: float = 0.05
    """Normalized screen area (0.29 = equilateral, head-on) over which a triangle turning edge-on fades out (keeps
    the image continuous as faces flip)."""

    def __post_init__(self):
        positive = ("sigma", "gamma", "facing_ramp")
        for name in (*positive, "edge_offset"):
            value = getattr(self, name)
            if not is_finite_real(value):
                raise ValueError(f"RasterSettings.{name}: must be a finite number, got {value!r}")
            if name in positive and value <= 0:
                raise ValueError(f"RasterSettings.{name}: must be > 0, got {value!r}")
        if self.gamma < MIN_GAMMA:
            raise ValueError(f"RasterSettings.gamma: must be >= MIN_GAMMA = {MIN_GAMMA} [normalized inverse depth], "
                             f"got {self.gamma!r}")  # fmt: skip
        c = self.coverage_cutoff
        if not (is_real(c) and 0.0 < c < 0.5):
            raise ValueError(f"RasterSettings.coverage_cutoff: must be in (0, 0.5), got {c!r}")
        t = self.tile_size
        if not is_integer(t) or not 1 <= t <= MAX_TILE_SIZE:
            raise ValueError(f"RasterSettings.tile_size: must be an integer in [1, {MAX_TILE_SIZE}] [px], got {t!r}")
        lo, hi = -self.logit_cutoff, K.X_MAX
        if not lo < self.edge_offset < hi:
            raise ValueError(
                f"RasterSettings.edge_offset: must be in ({lo:.4g}, {hi:g}) [logit], got {self.edge_offset!r}: at or "
                f"below -log(1 / coverage_cutoff - 1) no pixel reaches the cutoff; at or above the kernel's logit "
                f"clamp X_MAX a triangle's inside reads less covered than its edge"
            )

    @property
    def logit_cutoff(self) -> float:
        """``x`` below which a contribution is skipped, log(1/cutoff - 1)."""
        return math.log(1.0 / self.coverage_cutoff - 1.0)

    @property
    def reach(self) -> float:
        """Distance [px] beyond a triangle's edges at which its coverage falls to ``coverage_cutoff``."""
        return math.sqrt(self.sigma * (self.logit_cutoff + self.edge_offset))


class MeshTopology:
    """A mesh's triangles on a torch device (and, lazily, on Warp's).

    Attributes:
        triangles: vertex indices, counter-clockwise seen from outside, shape (T, 3), int64 torch.
    """

    def __init__(self, triangles, device: str | torch.device = "cpu"):
        tris = np.asarray(triangles, dtype=np.int64).reshape(-1, 3)
        self.device = torch.device(device)
        self.triangles = torch.as_tensor(tris, device=self.device)
        self._wp_tris = None

    @property
    def triangle_count(self) -> int:
        return int(self.triangles.shape[0])

    def warp_triangles(self) -> wp.array:
        if self._wp_tris is None:
            self._wp_tris = wp.from_torch(self.triangles.to(torch.int32).contiguous(), dtype=wp.int32)
        return self._wp_tris


@dataclass
class RasterOutput:
    """Rasterized images, N = batch of images.

    Attributes:
        rgb: character colour where covered (premultiplied by nothing), shape (N, H, W, 3).
        alpha: soft coverage in [0, 1], shape (N, H, W).
        depth: soft normalized inverse depth of the character (0 where uncovered), shape (N, H, W); outside [0, 1]
            where the covering surface's ``zeta`` is (see :func:`rasterize`).
    """

    rgb: torch.Tensor
    alpha: torch.Tensor
    depth: torch.Tensor


def facing_weights(xy: torch.Tensor, topo: MeshTopology, valid: torch.Tensor, settings: RasterSettings) -> torch.Tensor:
    """Smooth per-triangle coverage weights from screen positions (differentiable).

    The facing ``phi`` of a triangle is its signed screen area normalized by its squared edge lengths (an
    equilateral triangle seen head-on has 0.29) over ``settings.facing_ramp``, clamped to [0, 1] and smoothed
    (``t^2 (3 - 2 t)``); it is positive for triangles facing the camera (counter-clockwise from outside; y points
    down). Without culling the same ramp applies to the unsigned area, so both sides face the camera and fade out
    alike as they turn edge-on (the image stays continuous there too).

    Args:
        xy: screen positions [px], shape (N, V, 2).
        valid: triangles to keep, shape (N, T).

    Returns:
        Weights in [0, 1], shape (N, T); 0 for invalid, degenerate (:data:`MIN_RELATIVE_AREA`), edge-on
        (:data:`MIN_FACING_WEIGHT`) or (with culling) back-facing triangles.
    """
    tri_xy = xy[:, topo.triangles]  # (N, T, 3, 2)
    e0 = tri_xy[:, :, 1] - tri_xy[:, :, 0]
    e1 = tri_xy[:, :, 2] - tri_xy[:, :, 1]
    e2 = tri_xy[:, :, 0] - tri_xy[:, :, 2]
    area = e0[..., 0] * (-e2[..., 1]) - e0[..., 1] * (-e2[..., 0])
    norm = ((e0 * e0).sum(-1) + (e1 * e1).sum(-1) + (e2 * e2).sum(-1)).clamp_min(1e-12)
    keep = valid & (area.abs() > MIN_RELATIVE_AREA * norm)
    # culling fades back faces out by the signed area; without it both sides fade alike as they turn edge-on, so
    # a triangle never pops out at MIN_RELATIVE_AREA while still drawing a soft line
    facing = -area if settings.cull_backfaces else area.abs()
    t = (facing / norm / settings.facing_ramp).clamp(0.0, 1.0)
    f = t * t * (3.0 - 2.0 * t)
    keep = keep & (f >= MIN_FACING_WEIGHT)
    return torch.where(keep, f, torch.zeros_like(f))


def _bin(xy: torch.Tensor, topo: MeshTopology, front: torch.Tensor, height: int, width: int, s: RasterSettings):
    """(image, triangle, tile) pairs of every triangle with ``front`` set and the tiles its dilated box overlaps."""
    ts = s.tile_size
    tiles_x, tiles_y = -(-width // ts), -(-height // ts)
    tri_xy = xy[:, topo.triangles]  # (N, T, 3, 2)
    lo = tri_xy.amin(2) - s.reach - 0.5
    hi = tri_xy.amax(2) + s.reach - 0.5
    on_screen = (hi[..., 0] >= 0) & (lo[..., 0] <= width) & (hi[..., 1] >= 0) & (lo[..., 1] <= height)
    n_idx, t_idx = torch.nonzero(front & on_screen, as_tuple=True)
    lo, hi = lo[n_idx, t_idx], hi[n_idx, t_idx]
    tx0 = torch.floor(lo[:, 0] / ts).clamp(0, tiles_x - 1).long()
    tx1 = torch.floor(hi[:, 0] / ts).clamp(0, tiles_x - 1).long()
    ty0 = torch.floor(lo[:, 1] / ts).clamp(0, tiles_y - 1).long()
    ty1 = torch.floor(hi[:, 1] / ts).clamp(0, tiles_y - 1).long()
    nx = tx1 - tx0 + 1
    count = nx * (ty1 - ty0 + 1)
    owner = torch.repeat_interleave(torch.arange(len(count), device=xy.device), count)
    start = torch.cumsum(count, 0) - count
    local = torch.arange(int(count.sum()), device=xy.device) - start[owner]
    tile = (ty0[owner] + local // nx[owner]) * tiles_x + tx0[owner] + local % nx[owner]
    i32 = torch.int32
    return n_idx[owner].to(i32).contiguous(), t_idx[owner].to(i32).contiguous(), tile.to(i32).contiguous(), tiles_x


class _Accumulate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, verts: torch.Tensor, colors: torch.Tensor, weight: torch.Tensor, setup: dict):
        ins = [
            wp.from_torch(verts.detach().contiguous(), dtype=wp.vec3, requires_grad=True),
            wp.from_torch(colors.detach().contiguous(), dtype=wp.vec3, requires_grad=True),
            wp.from_torch(weight.detach().contiguous(), dtype=wp.float32, requires_grad=True),
        ]
        n, h, w = setup["shape"]
        dev = ins[0].device
        outs = [
            wp.zeros((n, h, w), dtype=wp.float32, device=dev, requires_grad=True),
            wp.zeros((n, h, w), dtype=wp.vec3, device=dev, requires_grad=True),
            wp.zeros((n, h, w), dtype=wp.float32, device=dev, requires_grad=True),
            wp.zeros((n, h, w), dtype=wp.float32, device=dev, requires_grad=True),
        ]
        tape = wp.Tape()
        with tape:
            wp.launch(
                K.accumulate_kernel,
                dim=setup["active_count"],
                inputs=[*setup["pairs"], *ins, *setup["consts"]],
                outputs=outs,
                device=dev,
            )
        ctx.saved = (tape, ins, outs)
        return tuple(wp.to_torch(o).clone() for o in outs)

    @staticmethod
    def backward(ctx, *grads):
        refuse_double_backward("rasterizer")
        tape, ins, outs = ctx.saved
        adj = {o: wp.from_torch(g.contiguous(), dtype=o.dtype) for o, g in zip(outs, grads) if g is not None}
        tape.backward(grads=adj)
        result = tuple(wp.to_torch(a.grad).clone() for a in ins)
        tape.zero()  # a second backward (retain_graph=True) replays the same tape from zeroed adjoints
        return (*result, None)


def rasterize(
    verts: torch.Tensor,
    colors: torch.Tensor,
    topology: MeshTopology,
    height: int,
    width: int,
    settings: RasterSettings | None = None,
    valid: torch.Tensor | None = None,
) -> RasterOutput:
    """Soft-rasterizes a batch of images of one mesh.

    Args:
        verts: screen-space vertices, shape (N, V, 3): x [px] (right), y [px] (down), zeta (normalized inverse
            depth, larger is closer: 1 at the near plane, 0 at the far plane). Pixel (row i, column j) has its
            centre at (j + 0.5, i + 0.5). ``zeta`` outside [0, 1] (a vertex in front of the near plane, or beyond
            the far plane) is used as is, not clamped, so depth order and gradients stay right there: the softmax
            shift is per pixel, so such a surface changes no pixel it does not cover, and ``depth`` leaves [0, 1]
            only where it does.
        colors: per-vertex colours, shape (N, V, 3).
        topology: the mesh's triangles and adjacency.
        height, width: image size [px].
        settings: softness and binning.
        valid: optional per-triangle mask (N, T), False for triangles to drop (e.g. behind the camera).

    Returns:
        Colour, alpha and depth images; differentiable w.r.t. ``verts`` and ``colors``.
    """
    s = settings or RasterSettings()
    if verts.dim() != 3 or verts.shape[-1] != 3:
        raise ValueError(f"verts: expected shape (N, V, 3), got {tuple(verts.shape)}")
    if colors.shape != verts.shape:
        raise ValueError(f"colors: expected shape {tuple(verts.shape)}, got {tuple(colors.shape)}")
    if verts.dtype != torch.float32 or colors.dtype != torch.float32:
        raise ValueError(f"verts, colors: expected float32, got {verts.dtype}, {colors.dtype}")
    if height <= 0 or width <= 0:
        raise ValueError(f"height, width: must be positive, got {height}x{width}")
    init_warp()
    n = verts.shape[0]
    if valid is None:
        valid = torch.ones(n, topology.triangle_count, dtype=torch.bool, device=verts.device)
    tri_weight = facing_weights(verts[..., :2], topology, valid, s)
    xy = verts.detach()[..., :2]
    pair_image, pair_tri, pair_tile, tiles_x = _bin(xy, topology, tri_weight.detach() > 0, height, width, s)
    if len(pair_image) == 0:
        zero = verts.sum() * 0.0 + colors.sum() * 0.0 + tri_weight.sum() * 0.0
        z = torch.zeros(n, height, width, device=verts.device) + zero
        return RasterOutput(z[..., None].expand(n, height, width, 3), z, z)
    pairs = [wp.from_torch(a, dtype=wp.int32) for a in (pair_image, pair_tri, pair_tile)]
    tris = topology.warp_triangles()
    inv_sigma, x_cut, ts = 1.0 / s.sigma, s.logit_cutoff, s.tile_size
    pair_count = len(pair_image)
    # first pass (no gradient): the softmax shift per pixel and the (pair, pixel) threads that contribute
    v_wp = wp.from_torch(verts.detach().contiguous(), dtype=wp.vec3)
    f_wp = wp.from_torch(tri_weight.detach().float().contiguous(), dtype=wp.float32)
    zshift = wp.from_torch(torch.full((n, height, width), -1.0e30, device=verts.device), dtype=wp.float32)
    contributes_t = torch.zeros((pair_count, ts * ts), dtype=torch.uint8, device=verts.device)
    contributes = wp.from_torch(contributes_t, dtype=wp.uint8)
    wp.launch(
        K.shift_kernel,
        dim=(pair_count, ts * ts),
        inputs=[*pairs, v_wp, f_wp, tris, inv_sigma, s.edge_offset, s.gamma, x_cut, s.reach, ts, tiles_x],
        outputs=[zshift, contributes],
        device=v_wp.device,
    )
    active_t = torch.nonzero(contributes_t.view(-1)).view(-1).to(torch.int32)
    active = wp.from_torch(active_t, dtype=wp.int32)
    setup = {
        "shape": (n, height, width),
        "active_count": len(active_t),
        "pairs": pairs,
        "consts": [tris, zshift, active, inv_sigma, s.edge_offset, 1.0 / s.gamma, x_cut, ts, tiles_x],
    }
    weight, color, depth, log_t = _Accumulate.apply(verts, colors, tri_weight.float(), setup)
    # a pixel with any contribution has weight >= ~1 (its largest term is exp(0) to round-off, >= 0.7 at MIN_GAMMA,
    # see _render_kernels), one without has exactly 0: covered pixels are those with a contribution, and 1 / weight
    # and its backward (colour / weight^2) stay within a few times the colour
    covered = weight > 0
    safe = torch.where(covered, weight, torch.ones_like(weight))
    rgb = torch.where(covered.unsqueeze(-1), color / safe.unsqueeze(-1), torch.zeros_like(color))
    alpha = 1.0 - torch.exp(log_t)
    return RasterOutput(rgb, alpha, torch.where(covered, depth / safe, torch.zeros_like(depth)))
