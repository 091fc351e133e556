"""Soft rasterizer: Warp kernels against the dense torch reference (forward and backward), the reference against
finite differences, and the Warp path against finite differences directly."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from distill import MeshTopology, RasterOutput, RasterSettings, rasterize
from distill._reference import rasterize_reference
from distill.rasterizer import MIN_GAMMA, facing_weights

FWD_TOL = 2e-6  # float32 Warp vs float64 reference, values in [0, 1]
GRAD_RTOL = 2e-4  # float32 adjoint vs float64 autograd, relative to the largest gradient
FD_STEP_F64 = 1e-6
FD_TOL_F64 = 1e-6
FD_STEP_F32 = 2e-3  # [px] central differences of the float32 Warp path
FD_TOL_F32 = 2e-2  # relative to the largest gradient entry
H, W = 24, 20
SETTINGS = RasterSettings(sigma=0.7, gamma=0.05, tile_size=4)

# an octahedron, counter-clockwise seen from outside
OCT_P = np.array([[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]], float)
OCT_T = np.array([[0, 2, 4], [2, 1, 4], [1, 3, 4], [3, 0, 4], [2, 0, 5], [1, 2, 5], [3, 1, 5], [0, 3, 5]])


def _screen(points: np.ndarray, scale: float = 7.0) -> np.ndarray:
    """Orthographic camera on +z looking down -z: x right, y up -> pixels with y down; zeta from z."""
    return np.stack([W / 2 + scale * points[:, 0], H / 2 - scale * points[:, 1], 0.5 + 0.2 * points[:, 2]], -1)


def _scene(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, MeshTopology]:
    """Two images: a rotated octahedron, and a smaller one offset towards the camera (overlaps and edges)."""
    g = torch.Generator().manual_seed(seed)
    c, s = np.cos(0.3), np.sin(0.3)
    rot = np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])
    verts = np.stack([_screen(OCT_P @ rot.T), _screen(OCT_P * 0.6 + [0.5, 0.3, 0.8])])
    v = torch.tensor(verts) + 0.05 * torch.randn(2, 6, 3, generator=g, dtype=torch.float64) * torch.tensor(
        [1.0, 1.0, 0.1], dtype=torch.float64
    )
    colors = torch.rand(2, 6, 3, generator=g, dtype=torch.float64)
    return v, colors, MeshTopology(OCT_T)


def _weighted_sum(out, grads) -> torch.Tensor:
    return (out.rgb * grads[0]).sum() + (out.alpha * grads[1]).sum() + (out.depth * grads[2]).sum()


def _upstream(dtype=torch.float64):
    g = torch.Generator().manual_seed(7)
    return [torch.randn(s, generator=g, dtype=dtype) for s in ((2, H, W, 3), (2, H, W), (2, H, W))]


def test_forward_matches_reference():
    v, c, topo = _scene()
    ref = rasterize_reference(v, c, topo, H, W, SETTINGS)
    out = rasterize(v.float(), c.float(), topo, H, W, SETTINGS)
    for name in ("rgb", "alpha", "depth"):
        np.testing.assert_allclose(getattr(out, name).double(), getattr(ref, name), atol=FWD_TOL, err_msg=name)
    assert ref.alpha.max() > 0.999 and ref.alpha.min() == 0.0, "the scene has covered and empty pixels"


def test_closed_surface_has_no_wireframe():
    """Inside a closed mesh coverage is ~1 across interior edges thanks to the edge offset; without it (plain
    SoftRas) two triangles meeting at an edge cover it only 1 - 0.5^2 = 0.75."""
    v, c, topo = _scene()
    centre = (0, slice(H // 2 - 1, H // 2 + 2), slice(W // 2 - 1, W // 2 + 2))  # where 4 interior edges meet
    out = rasterize(v.float(), c.float(), topo, H, W, RasterSettings(sigma=0.3, gamma=0.05))
    assert out.alpha[centre].min() > 0.997
    plain = rasterize(v.float(), c.float(), topo, H, W, RasterSettings(sigma=0.3, gamma=0.05, edge_offset=0.0))
    assert plain.alpha[centre].min() < 0.9


def test_backward_matches_reference_autograd():
    v, c, topo = _scene()
    grads = _upstream()
    vr, cr = v.clone().requires_grad_(), c.clone().requires_grad_()
    _weighted_sum(rasterize_reference(vr, cr, topo, H, W, SETTINGS), grads).backward()
    vw, cw = v.float().requires_grad_(), c.float().requires_grad_()
    _weighted_sum(rasterize(vw, cw, topo, H, W, SETTINGS), [g.float() for g in grads]).backward()
    for mine, ref in ((vw.grad, vr.grad), (cw.grad, cr.grad)):
        np.testing.assert_allclose(mine.double(), ref, atol=GRAD_RTOL * ref.abs().max().item())
    assert vr.grad[..., :2].abs().max() > 1.0 and vr.grad[..., 2].abs().max() > 0.01
    # second derivatives through the Warp kernels would treat their gradients as constants: refused, not wrong
    with pytest.raises(RuntimeError, match=r"second derivatives .* not supported"):
        torch.autograd.grad(_weighted_sum(rasterize(vw, cw, topo, H, W, SETTINGS), [g.float() for g in grads]), vw,
                            create_graph=True)  # fmt: skip


def test_reference_gradient_matches_finite_differences():
    v, c, topo = _scene(1)
    grads = _upstream()
    vr = v.clone().requires_grad_()
    _weighted_sum(rasterize_reference(vr, c, topo, H, W, SETTINGS), grads).backward()
    f = lambda x: _weighted_sum(rasterize_reference(x, c, topo, H, W, SETTINGS), grads).item()  # noqa: E731
    for idx in [(0, 0, 0), (0, 2, 1), (1, 4, 0), (1, 4, 2), (0, 5, 1)]:
        vp, vm = v.clone(), v.clone()
        vp[idx] += FD_STEP_F64
        vm[idx] -= FD_STEP_F64
        fd = (f(vp) - f(vm)) / (2 * FD_STEP_F64)
        np.testing.assert_allclose(vr.grad[idx].item(), fd, atol=FD_TOL_F64 * max(1.0, abs(fd)), err_msg=str(idx))


def test_warp_gradient_matches_finite_differences():
    """Central differences of the float32 Warp path itself w.r.t. screen positions, depth and colours."""
    v, c, topo = _scene(2)
    grads = [g.float() for g in _upstream()]
    v32, c32 = v.float(), c.float()
    vw, cw = v32.clone().requires_grad_(), c32.clone().requires_grad_()
    _weighted_sum(rasterize(vw, cw, topo, H, W, SETTINGS), grads).backward()

    def f(vv, cc):
        return _weighted_sum(rasterize(vv, cc, topo, H, W, SETTINGS), grads).double().item()

    scale = vw.grad.abs().max().item()
    for idx in [(0, 0, 0), (0, 1, 1), (0, 3, 0), (1, 2, 1), (1, 5, 0)]:
        vp, vm = v32.clone(), v32.clone()
        vp[idx] += FD_STEP_F32
        vm[idx] -= FD_STEP_F32
        fd = (f(vp, c32) - f(vm, c32)) / (2 * FD_STEP_F32)
        np.testing.assert_allclose(vw.grad[idx].item(), fd, atol=FD_TOL_F32 * scale, err_msg=str(idx))
    for idx in [(0, 0, 0), (1, 3, 2)]:
        cp, cm = c32.clone(), c32.clone()
        cp[idx] += FD_STEP_F32
        cm[idx] -= FD_STEP_F32
        fd = (f(v32, cp) - f(v32, cm)) / (2 * FD_STEP_F32)
        np.testing.assert_allclose(cw.grad[idx].item(), fd, atol=FD_TOL_F32 * cw.grad.abs().max().item())


@pytest.mark.parametrize("tile_size", [1, 3, 16])
def test_tile_size_does_not_change_the_image(tile_size):
    v, c, topo = _scene()
    a = rasterize(v.float(), c.float(), topo, H, W, SETTINGS)
    b = rasterize(v.float(), c.float(), topo, H, W, RasterSettings(sigma=0.7, gamma=0.05, tile_size=tile_size))
    for name in ("rgb", "alpha", "depth"):
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), atol=FWD_TOL)


def test_backfaces_are_culled_and_front_faces_kept():
    """The octahedron's +z half (an open cap) faces the camera on +z; with its winding flipped it faces away."""
    v, c, _ = _scene()
    cap = OCT_T[:4]
    hard = RasterSettings(sigma=0.05, gamma=0.05)
    front = rasterize(v[:1].float(), c[:1].float(), MeshTopology(cap), H, W, hard)
    flipped = MeshTopology(cap[:, ::-1].copy())
    back = rasterize(v[:1].float(), c[:1].float(), flipped, H, W, hard)
    both = rasterize(v[:1].float(), c[:1].float(), flipped, H, W, RasterSettings(sigma=0.05, cull_backfaces=False))
    assert front.alpha.sum() > 50
    assert back.alpha.sum() == 0, "inverted winding: the camera sees only back faces"
    np.testing.assert_allclose(both.alpha, front.alpha, atol=FWD_TOL)  # tilted faces fade alike on either side


def test_empty_and_offscreen_images_are_zero_and_differentiable():
    v, c, topo = _scene()
    far = (v.float() + torch.tensor([1000.0, 0.0, 0.0])).requires_grad_()
    out = rasterize(far, c.float(), topo, H, W, SETTINGS)
    assert out.alpha.abs().max() == 0 and out.rgb.abs().max() == 0
    out.alpha.sum().backward()
    assert far.grad is not None and far.grad.abs().max() == 0


def test_binned_triangle_that_reaches_no_pixel_is_zero_and_differentiable():
    """Its dilated box overlaps the image's last tile, its reach does not: pairs, but no contributing thread."""
    v = torch.tensor([[[17.5, 30.0, 0.5], [30.0, 30.0, 0.5], [30.0, 17.5, 0.5]]], requires_grad=True)
    c = torch.full((1, 3, 3), 0.5, requires_grad=True)
    out = rasterize(v, c, MeshTopology([[0, 1, 2]]), 16, 16, RasterSettings(cull_backfaces=False))
    assert out.alpha.abs().max() == 0 and out.rgb.abs().max() == 0 and out.depth.abs().max() == 0
    (out.rgb.sum() + out.alpha.sum() + out.depth.sum()).backward()
    assert v.grad.abs().max() == 0 and c.grad.abs().max() == 0


def test_bad_inputs_name_the_argument():
    v, c, topo = _scene()
    with pytest.raises(ValueError, match="verts"):
        rasterize(v.float()[0], c.float(), topo, H, W)
    with pytest.raises(ValueError, match="colors"):
        rasterize(v.float(), c.float()[:, :3], topo, H, W)
    with pytest.raises(ValueError, match="float32"):
        rasterize(v, c, topo, H, W)


# a triangle of the SimpleSkin sheet seen exactly edge-on (azimuth 0): two vertices share x = 16 px, the third is
# one float32 step off; its round-off screen area (~1e-6 px^2) gave NaN gradients (inf * 0 in the barycentrics)
EDGE_ON = [[16.0, 8.338920593261719, 0.12361832708120346], [16.0, 11.102283477783203, 0.5421072244644165],
           [16.000001907348633, -5.588550567626953, 0.6450541615486145]]  # fmt: skip


@pytest.mark.parametrize("cull", [True, False])
@pytest.mark.parametrize("winding", [(0, 1, 2), (0, 2, 1)])
def test_edge_on_triangle_gives_finite_gradients(cull, winding):
    verts = torch.tensor([EDGE_ON], dtype=torch.float32)[:, list(winding)].requires_grad_()
    colors = torch.full((1, 3, 3), 0.5, requires_grad=True)
    out = rasterize(verts, colors, MeshTopology([[0, 1, 2]]), 32, 32, RasterSettings(cull_backfaces=cull))
    loss = out.rgb.sum() + out.alpha.sum() + out.depth.sum()
    g_verts, g_colors = torch.autograd.grad(loss, (verts, colors))
    assert torch.isfinite(g_verts).all() and torch.isfinite(g_colors).all()
    assert torch.isfinite(out.alpha).all() and out.alpha.max() < 1e-3  # a line of zero width covers nothing


# -- without culling, a triangle turning edge-on fades out (symmetric facing ramp) instead of popping out --------------

NO_CULL = RasterSettings(cull_backfaces=False)


def _sliver(heights, winding=(0, 1, 2)) -> torch.Tensor:
    """One 16 px wide triangle per image across a 16 x 16 image, its apex ``heights`` [px] off its base (N, 3, 3)."""
    h = torch.as_tensor(heights, dtype=torch.float32)
    v = torch.tensor([[0.5, 8.0, 0.5], [16.5, 8.0, 0.5], [8.0, 8.0, 0.5]]).repeat(len(h), 1, 1)
    v[:, 2, 1] += h
    return v[:, list(winding)].contiguous()


@pytest.mark.parametrize("winding", [(0, 1, 2), (0, 2, 1)])
def test_sliver_fades_out_continuously_without_culling(winding):
    """Weight 1 down to the degenerate-area drop (MIN_RELATIVE_AREA) made a sliver that still drew a soft line
    (alpha sum ~35) vanish in one step; now its alpha sum falls continuously to 0 as its area does."""
    norm = 16.0**2 + 2 * 8.0**2  # summed squared edge lengths as the apex height -> 0
    rel = torch.cat([torch.zeros(1), torch.logspace(-7, -3, 41), torch.linspace(1e-3, 0.08, 80)[1:]])  # area / norm
    heights = rel * norm / 16.0
    out = rasterize(_sliver(heights, winding), torch.ones(len(rel), 3, 3), MeshTopology([[0, 1, 2]]), 16, 16, NO_CULL)
    total = out.alpha.sum((1, 2)).double()
    assert torch.isfinite(total).all()
    full = total[-1].item()
    assert full > 30, "head-on enough, the sliver is fully weighted"
    assert total[0] == 0 and total[1] == 0, "an edge-on sliver covers nothing"
    steps = total.diff()
    assert steps.min() > -1e-4 * full, "coverage grows with area"
    assert steps.max() < 0.05 * full, f"alpha sum jumps by {steps.max():.3g} of {full:.3g} between neighbouring areas"
    near_drop = (rel > 0.5e-5) & (rel < 2e-5)  # the old degenerate-area threshold (1e-5) and either side of it
    assert total[near_drop].max() < 1e-3 * full


@pytest.mark.parametrize("winding", [(0, 1, 2), (0, 2, 1)])
def test_partly_faded_triangle_without_culling_matches_finite_differences(winding):
    """A thin triangle halfway down the facing ramp: the gradient of its weight (through |area|) is right on either
    side."""
    v = torch.tensor([[[3.3, 9.1, 0.4], [17.6, 8.7, 0.6], [10.2, 9.45, 0.5]]])[:, list(winding)].contiguous()
    c = torch.rand(1, 3, 3, generator=torch.Generator().manual_seed(5))
    topo = MeshTopology([[0, 1, 2]])
    f = facing_weights(v[..., :2], topo, torch.ones(1, 1, dtype=torch.bool), NO_CULL).item()
    assert 0.2 < f < 0.8, f"weight {f}: the triangle should be partly faded"
    g = torch.Generator().manual_seed(6)
    up = [torch.randn(shape, generator=g) for shape in ((1, 20, 20, 3), (1, 20, 20), (1, 20, 20))]
    vw = v.clone().requires_grad_()
    _weighted_sum(rasterize(vw, c, topo, 20, 20, NO_CULL), up).backward()

    def loss(vv):
        return _weighted_sum(rasterize(vv, c, topo, 20, 20, NO_CULL), up).double().item()

    scale = vw.grad.abs().max().item()
    for idx in [(0, 0, 0), (0, 0, 1), (0, 1, 1), (0, 2, 0), (0, 2, 1), (0, 1, 2)]:
        vp, vm = v.clone(), v.clone()
        vp[idx] += FD_STEP_F32
        vm[idx] -= FD_STEP_F32
        fd = (loss(vp) - loss(vm)) / (2 * FD_STEP_F32)
        np.testing.assert_allclose(vw.grad[idx].item(), fd, atol=FD_TOL_F32 * scale, err_msg=str(idx))


# -- depth softmax shift: per pixel, so no surface underflows next to a much nearer one --------------------------------

# two disjoint triangles in one 8 x 8 tile, a near one (zeta ~0.9) on the left and a far one (zeta ~0) on the right,
# within each other's reach (the near one's faint fringe meets the far one); vertices off pixel centres (kinks)
TWO_DEPTHS = [[0.3, 0.2, 0.9], [0.7, 7.6, 0.92], [2.6, 0.4, 0.88], [5.1, 0.3, 0.0], [4.9, 7.7, 0.03], [7.6, 0.6, 0.01]]
TWO_DEPTHS_TOPO = [[0, 1, 2], [3, 4, 5]]
HARD = RasterSettings(sigma=0.5, gamma=0.004, cull_backfaces=False)  # the hard z-buffer that killed distillation


def _grads_vs_reference(v: torch.Tensor, c: torch.Tensor, topo: MeshTopology, h: int, w: int, s: RasterSettings):
    """(Warp output, float64 reference output, [(warp grad, reference grad) for verts and colors])."""
    g = torch.Generator().manual_seed(3)
    up = [torch.randn(shape, generator=g, dtype=torch.float64) for shape in ((1, h, w, 3), (1, h, w), (1, h, w))]
    vr, cr = v.clone().requires_grad_(), c.clone().requires_grad_()
    ref = rasterize_reference(vr, cr, topo, h, w, s)
    _weighted_sum(ref, up).backward()
    vw, cw = v.float().requires_grad_(), c.float().requires_grad_()
    out = rasterize(vw, cw, topo, h, w, s)
    _weighted_sum(out, [u.float() for u in up]).backward()
    detached = [RasterOutput(o.rgb.detach(), o.alpha.detach(), o.depth.detach()) for o in (out, ref)]
    return *detached, [(vw.grad, vr.grad), (cw.grad, cr.grad)]


def test_far_surface_next_to_near_one_in_a_tile_has_finite_gradients_matching_the_reference():
    """A per-tile shift (the tile's largest zeta) weighted the far triangle exp(-0.9 / gamma): it rendered black and
    the backward of colour / weight overflowed to inf."""
    v = torch.tensor([TWO_DEPTHS], dtype=torch.float64)
    c = torch.rand(1, 6, 3, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    out, ref, grads = _grads_vs_reference(v, c, MeshTopology(TWO_DEPTHS_TOPO), 8, 8, HARD)
    for name in ("rgb", "alpha", "depth"):
        np.testing.assert_allclose(getattr(out, name).double(), getattr(ref, name), atol=FWD_TOL, err_msg=name)
    for mine, want in grads:
        assert torch.isfinite(mine).all()
        np.testing.assert_allclose(mine.double(), want, atol=GRAD_RTOL * want.abs().max().item())
    assert grads[0][1][0, 3:, :2].abs().max() > 0.1, "the far triangle's vertices get a gradient"
    assert out.alpha[0, 1:5, 5].min() > 0.9 and out.rgb[0, 1:5, 5].min() > 0.01, "the far triangle is not black"


@pytest.mark.parametrize("tile_size", [16, 32])
def test_tile_size_does_not_change_the_image_of_surfaces_far_apart_in_depth(tile_size):
    """32 x 32 px: a near triangle on the left (in the first 8 px tile only) and a far one on the right. With 8 px
    tiles they never share a tile; with 16 px the far one's fringe, with 32 px all of it, shares the near one's."""
    pts = [[1.2, 1.3, 0.9], [1.4, 30.6, 0.92], [5.1, 1.6, 0.88],
           [17.3, 1.2, 0.02], [17.6, 30.7, 0.0], [30.4, 1.5, 0.05]]  # fmt: skip
    v = torch.tensor([pts], dtype=torch.float32)
    c = torch.rand(1, 6, 3, generator=torch.Generator().manual_seed(5))
    topo = MeshTopology(TWO_DEPTHS_TOPO)
    s8 = RasterSettings(sigma=0.5, gamma=0.005, cull_backfaces=False, tile_size=8)
    a = rasterize(v, c, topo, 32, 32, s8)
    b = rasterize(v, c, topo, 32, 32, RasterSettings(sigma=0.5, gamma=0.005, cull_backfaces=False, tile_size=tile_size))
    ref = rasterize_reference(v.double(), c.double(), topo, 32, 32, s8)
    for name in ("rgb", "alpha", "depth"):
        np.testing.assert_allclose(getattr(b, name), getattr(a, name), atol=FWD_TOL, err_msg=name)
        np.testing.assert_allclose(getattr(b, name).double(), getattr(ref, name), atol=FWD_TOL, err_msg=name)
    assert a.alpha[0, :, 20:].max() > 0.99 and a.rgb[0, :, 20:].amax(-1).max() > 0.1


def test_vertex_inside_the_near_plane_blackens_no_other_surface():
    """A vertex inside the near plane has zeta > 1 (here 5). With a per-tile shift every other surface in its tiles
    underflowed to weight 0 and rendered black; zeta is not clamped, so the near triangle still wins where it
    overlaps the far quad and its depth order and gradients stay right."""
    near = [[1.3, 1.2, 5.0], [2.2, 14.7, 0.95], [9.6, 1.4, 0.95]]
    quad = [[6.1, 2.3, 0.3], [6.4, 14.6, 0.32], [14.7, 14.2, 0.35], [14.5, 2.6, 0.33]]
    v = torch.tensor([near + quad], dtype=torch.float64)
    c = 0.2 + 0.8 * torch.rand(1, 7, 3, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    topo = MeshTopology([[0, 1, 2], [3, 4, 5], [3, 5, 6]])
    s = RasterSettings(sigma=0.5, gamma=0.01, cull_backfaces=False)
    out, ref, grads = _grads_vs_reference(v, c, topo, 16, 16, s)
    covered = out.alpha[0] > 0.5
    assert covered.sum() > 100
    assert out.rgb[0][covered].amax(-1).min() > 0.15, "covered pixels keep their colour (all channels >= 0.2)"
    for name in ("rgb", "alpha"):
        np.testing.assert_allclose(getattr(out, name).double(), getattr(ref, name), atol=FWD_TOL, err_msg=name)
    np.testing.assert_allclose(out.depth.double(), ref.depth, atol=FWD_TOL * 5.0)  # zeta up to 5
    assert out.depth.max() > 1.0, "zeta > 1 is not clamped"
    for mine, want in grads:
        assert torch.isfinite(mine).all()
        np.testing.assert_allclose(mine.double(), want, atol=GRAD_RTOL * want.abs().max().item())


def test_gamma_below_its_float32_floor_is_rejected():
    with pytest.raises(ValueError, match=r"RasterSettings.gamma: must be >= MIN_GAMMA"):
        RasterSettings(gamma=1e-5)
    with pytest.raises(ValueError, match=r"RasterSettings.gamma: must be > 0"):
        RasterSettings(gamma=0.0)
    assert RasterSettings(gamma=MIN_GAMMA).gamma == MIN_GAMMA


def test_edge_offset_outside_its_working_range_is_refused_naming_the_field():
    """Below -logit_cutoff the reach was the square root of a negative number (a bare 'math domain error' at the
    first render); at or above the kernel's logit clamp (30) a triangle's inside read less covered than its edge."""
    cutoff = RasterSettings().logit_cutoff
    for bad in (-cutoff - 1.0, 30.0, 45.0):
        with pytest.raises(ValueError, match=r"RasterSettings\.edge_offset: must be in"):
            RasterSettings(edge_offset=bad)
    assert RasterSettings(edge_offset=-cutoff + 0.5).reach > 0


def test_numpy_scalars_are_accepted_as_settings():
    """A value read from a NumPy array (np.float32 sigma, np.int64 tile size) was refused as 'not a number'."""
    s = RasterSettings(sigma=np.float32(0.7), gamma=np.float64(0.05), tile_size=np.int64(4))
    v, c, topo = _scene()
    a = rasterize(v.float(), c.float(), topo, H, W, s)
    b = rasterize(v.float(), c.float(), topo, H, W, SETTINGS)
    torch.testing.assert_close(a.rgb, b.rgb)
    with pytest.raises(ValueError, match=r"RasterSettings\.tile_size"):
        RasterSettings(tile_size=np.float64(4.0))
    with pytest.raises(ValueError, match=r"RasterSettings\.sigma"):
        RasterSettings(sigma=np.bool_(True))


def test_second_backward_with_retained_graph_gives_the_same_gradient():
    """backward(retain_graph=True) then backward() failed with 'cannot unpack non-iterable NoneType': the op
    dropped its tape after the first call."""
    v, c, topo = _scene()
    v = v.float().requires_grad_(True)
    out = rasterize(v, c.float(), topo, H, W, SETTINGS)
    grads = _upstream(torch.float32)
    loss = _weighted_sum(out, grads)
    loss.backward(retain_graph=True)
    first = v.grad.clone()
    assert first.abs().max() > 0
    loss.backward()
    torch.testing.assert_close(v.grad, 2.0 * first)
