"""Slow, obviously-correct torch references for the renderer (tests compare the Warp kernels against these).

Everything is dense over (image, pixel, triangle) and written with plain torch ops, so autograd (in float64)
gives the reference gradients.
"""

from __future__ import annotations

import torch

from .rasterizer import MeshTopology, RasterOutput, RasterSettings, facing_weights

X_MAX = 30.0
TAPER = 0.3


def _cross2(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]


def _segment_dist2(p: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    ab = b - a
    t = (((p - a) * ab).sum(-1) / (ab * ab).sum(-1).clamp_min(1e-12)).clamp(0.0, 1.0)
    d = p - (a + t[..., None] * ab)
    return (d * d).sum(-1)


def rasterize_reference(
    verts: torch.Tensor,
    colors: torch.Tensor,
    topology: MeshTopology,
    height: int,
    width: int,
    settings: RasterSettings | None = None,
) -> RasterOutput:
    """Dense reference of :func:`distill.rasterize` (same formulas, any float dtype). Shapes as there."""
    s = settings or RasterSettings()
    n = verts.shape[0]
    valid = torch.ones(n, topology.triangle_count, dtype=torch.bool, device=verts.device)
    f = facing_weights(verts[..., :2], topology, valid, s)  # (N, T)
    ys, xs = torch.meshgrid(torch.arange(height), torch.arange(width), indexing="ij")
    p = torch.stack([xs, ys], -1).to(verts) + 0.5  # (H, W, 2)
    p = p[None, :, :, None, :]  # (1, H, W, 1, 2)
    tv = verts[:, topology.triangles]  # (N, T, 3, 3)
    tc = colors[:, topology.triangles]
    a, b, c = (tv[:, None, None, :, i, :2] for i in range(3))  # (N, 1, 1, T, 2)
    area = _cross2(b - a, c - a)
    wa = _cross2(c - b, p - b) / area
    wb = _cross2(a - c, p - c) / area
    wc = _cross2(b - a, p - a) / area
    d = torch.stack([_segment_dist2(p, a, b), _segment_dist2(p, b, c), _segment_dist2(p, c, a)], -1)
    inside = (wa >= 0) & (wb >= 0) & (wc >= 0)
    d2 = d.amin(-1)
    x = torch.where(inside, (d2 / s.sigma + s.edge_offset).clamp(max=X_MAX), s.edge_offset - d2 / s.sigma)
    w = torch.stack([wa, wb, wc], -1).clamp_min(0.0)
    w = w / w.sum(-1, keepdim=True)
    zeta = (w * tv[:, None, None, :, :, 2]).sum(-1)  # (N, H, W, T)
    col = (w[..., None] * tc[:, None, None]).sum(-2)  # (N, H, W, T, 3)
    tt = ((x + s.logit_cutoff) / (TAPER * s.logit_cutoff)).clamp(0.0, 1.0)
    fw = f[:, None, None, :] * tt * tt * (3.0 - 2.0 * tt)
    use = (f[:, None, None, :] > 0) & (x > -s.logit_cutoff)
    zmax = torch.where(use, zeta, torch.full_like(zeta, -1e30)).amax(-1, keepdim=True).detach()
    log_d = -torch.nn.functional.softplus(-x)
    arg = torch.where(use, (zeta - zmax) / s.gamma + log_d, torch.full_like(zeta, -1e4))
    e = torch.where(use, fw * torch.exp(arg), torch.zeros_like(zeta))
    weight = e.sum(-1)
    uncovered = (1.0 - fw) + fw * torch.exp(-torch.nn.functional.softplus(x))
    log_t = torch.where(use, torch.log(uncovered.clamp_min(1e-30)), torch.zeros_like(x)).sum(-1)
    safe = torch.where(weight > 0, weight, torch.ones_like(weight))
    rgb = torch.where((weight > 0)[..., None], (e[..., None] * col).sum(-2) / safe[..., None], torch.zeros(3).to(e))
    depth = torch.where(weight > 0, (e * zeta).sum(-1) / safe, torch.zeros_like(weight))
    return RasterOutput(rgb, 1.0 - torch.exp(log_t), depth)
