"""Collision penalties: Warp forward vs the NumPy references, Warp Jacobians vs finite differences, torch gradcheck."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp
import warp.autograd
from random_cases import random_capsules

from sim import _collision_kernels as K
from sim._collision_reference import (
    capsule_penetration_reference,
    ground_penetration_reference,
    segment_distance_reference,
)
from sim._warp_setup import init_warp
from sim.collision import capsule_penetration, ground_penetration, max_capsule_penetration

FWD_TOL = 1e-10
"""Forward agreement with the float64 references [m] (the kernel's distance carries a 1e-18 m^2 regularizer)."""
JAC_TOL = 1e-5
"""Analytic vs central-difference Jacobians (float64, step 1e-7)."""
FD_EPS = 1e-7


def test_ground_forward_matches_reference(rng):
    points = rng.normal(size=(4, 64, 3)) * 0.1
    depth, penalty = ground_penetration(points, ground_height=0.03)
    ref_depth, ref_penalty = ground_penetration_reference(points, 0.03)
    np.testing.assert_allclose(depth, ref_depth, atol=FWD_TOL)
    np.testing.assert_allclose(penalty, ref_penalty, atol=FWD_TOL)
    assert (depth > 0).any() and (depth == 0).any()


def test_capsule_forward_matches_reference(rng):
    a, b, radii, pairs = random_capsules(rng)
    depth, penalty = capsule_penetration(a, b, radii, pairs)
    ref_depth, ref_penalty = capsule_penetration_reference(a, b, radii, pairs)
    np.testing.assert_allclose(depth, ref_depth, atol=FWD_TOL)
    np.testing.assert_allclose(penalty, ref_penalty, atol=FWD_TOL)
    assert 0 < (depth > 0).mean() < 1  # the sample exercises both branches


@pytest.mark.parametrize(
    ("p0", "p1", "q0", "q1", "distance"),
    [
        # parallel, overlapping in extent, 0.3 apart
        ((0, 0, 0), (1, 0, 0), (0.5, 0.3, 0), (1.5, 0.3, 0), 0.3),
        # crossing segments, 0.2 apart in z
        ((-1, 0, 0), (1, 0, 0), (0, -1, 0.2), (0, 1, 0.2), 0.2),
        # collinear, gap 0.5 between the ends
        ((0, 0, 0), (1, 0, 0), (1.5, 0, 0), (2.5, 0, 0), 0.5),
        # a point (sphere) against a segment
        ((0.3, 0.4, 0), (0.3, 0.4, 0), (0, 0, 0), (1, 0, 0), 0.4),
        # two points
        ((0, 0, 0), (0, 0, 0), (0, 0.6, 0.8), (0, 0.6, 0.8), 1.0),
        # intersecting segments
        ((-1, 0, 0), (1, 0, 0), (0, -1, 0), (0, 1, 0), 0.0),
    ],
)
def test_capsule_known_geometry(p0, p1, q0, q1, distance):
    """Hand-computed distances: overlap = r1 + r2 - distance."""
    a = np.array([[p0, q0]], dtype=np.float64)
    b = np.array([[p1, q1]], dtype=np.float64)
    radii = np.array([0.4, 0.35])
    depth, penalty = capsule_penetration(a, b, radii, [(0, 1)])
    want = max(0.0, 0.75 - distance)
    np.testing.assert_allclose(depth[0, 0], want, atol=2e-9)
    np.testing.assert_allclose(penalty[0], want**2, atol=1e-9)
    np.testing.assert_allclose(segment_distance_reference(p0, p1, q0, q1), distance, atol=1e-12)


def test_max_capsule_penetration_reports_frame_and_pair():
    a = np.zeros((3, 3, 3))
    b = np.zeros((3, 3, 3))
    a[:, 1, 0] = b[:, 1, 0] = [1.0, 0.5, 1.0]  # capsule 1 comes close to 0 in frame 1 only
    a[:, 2, 0] = b[:, 2, 0] = 5.0
    a[:, :, 1] -= 0.1
    b[:, :, 1] += 0.1
    depth, frame, pair = max_capsule_penetration(a, b, [0.3, 0.3, 0.3], [(0, 1), (1, 2), (0, 2)])
    np.testing.assert_allclose(depth, 0.1, atol=1e-9)
    assert (frame, pair) == (1, 0)


def test_validation_names_argument():
    with pytest.raises(ValueError, match="points"):
        ground_penetration(np.zeros((2, 4)))
    with pytest.raises(ValueError, match="radii"):
        capsule_penetration(np.zeros((1, 3, 3)), np.zeros((1, 3, 3)), [0.1, 0.1], [(0, 1)])
    with pytest.raises(ValueError, match="pairs"):
        capsule_penetration(np.zeros((1, 3, 3)), np.zeros((1, 3, 3)), [0.1] * 3, [(0, 3)])


def _jacobians(kernel, dim, inputs, outputs):
    jac = wp.autograd.jacobian(kernel, dim=dim, inputs=inputs, outputs=outputs, device="cpu")
    fd = wp.autograd.jacobian_fd(kernel, dim=dim, inputs=inputs, outputs=outputs, device="cpu", eps=FD_EPS)
    return jac, fd


def test_ground_penalty_jacobian_matches_finite_differences(rng):
    init_warp()
    pts = rng.normal(size=(2, 16, 3)) * 0.1
    pts[..., 2] += np.where(np.abs(pts[..., 2]) < 1e-3, 1e-2, 0.0)  # keep points off the kink at the plane
    points = wp.array(pts, dtype=wp.vec3d, device="cpu", requires_grad=True)
    depth = wp.zeros((2, 16), dtype=wp.float64, device="cpu", requires_grad=True)
    penalty = wp.zeros(2, dtype=wp.float64, device="cpu", requires_grad=True)
    jac, fd = _jacobians(K.ground_penetration_kernel, (2, 16), [points, wp.float64(0.0)], [depth, penalty])
    for key in jac:
        if key[0] == 0:  # d(outputs)/d(points)
            np.testing.assert_allclose(jac[key].numpy(), fd[key].numpy(), atol=JAC_TOL)


def test_capsule_penalty_jacobian_matches_finite_differences(rng):
    init_warp()
    a, b, radii, pairs = random_capsules(rng, frames=2, count=5)
    F, P = a.shape[0], len(pairs)
    seg_a = wp.array(a, dtype=wp.vec3d, device="cpu", requires_grad=True)
    seg_b = wp.array(b, dtype=wp.vec3d, device="cpu", requires_grad=True)
    r = wp.array(radii, dtype=wp.float64, device="cpu", requires_grad=True)
    pr = wp.array(pairs, dtype=wp.int32, device="cpu")
    depth = wp.zeros((F, P), dtype=wp.float64, device="cpu", requires_grad=True)
    penalty = wp.zeros(F, dtype=wp.float64, device="cpu", requires_grad=True)
    jac, fd = _jacobians(K.capsule_penetration_kernel, (F, P), [seg_a, seg_b, r, pr], [depth, penalty])
    checked = 0
    for key, j in jac.items():
        if key[0] in (0, 1, 2):
            np.testing.assert_allclose(j.numpy(), fd[key].numpy(), atol=JAC_TOL)
            checked += 1
    assert checked == 6
    assert np.abs(jac[(0, 1)].numpy()).max() > 0  # the penalty actually depends on the segments here


def test_torch_penalties_gradcheck(rng):
    torch = pytest.importorskip("torch")
    from sim.collision_torch import capsule_penetration_penalty, ground_penetration_penalty

    a, b, radii, pairs = random_capsules(rng, frames=2, count=5)
    ta = torch.tensor(a, requires_grad=True)
    tb = torch.tensor(b, requires_grad=True)
    tr = torch.tensor(radii, requires_grad=True)
    tp = torch.tensor(pairs)
    assert torch.autograd.gradcheck(lambda x, y, z: capsule_penetration_penalty(x, y, z, tp), (ta, tb, tr), atol=1e-6)
    pts = torch.tensor(rng.normal(size=(2, 3, 10, 3)) * 0.1, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: ground_penetration_penalty(x, 0.01), (pts,), atol=1e-6)
    # forward equals the NumPy level and keeps the leading dimensions
    out = ground_penetration_penalty(pts, 0.01)
    assert out.shape == (2, 3)
    np.testing.assert_allclose(
        out.detach().numpy().ravel(), ground_penetration(pts.detach().numpy().reshape(6, 10, 3), 0.01)[1]
    )


def test_torch_penalties_refuse_double_backward():
    """create_graph=True through the Warp penalties raises (the penalty's own second derivative was dropped: d/dz of
    (dpen/dz + z^2) came back -0.2 instead of 1.8)."""
    torch = pytest.importorskip("torch")
    from sim.collision_torch import capsule_penetration_penalty, ground_penetration_penalty

    ta = torch.tensor([[[0.0, 0.0, 0.0], [0.1, 0.0, 0.0]]], dtype=torch.float64, requires_grad=True)  # overlapping
    tb, tr, tp = ta.detach() + torch.tensor([0.0, 0.0, 1.0]), torch.tensor([0.1, 0.1]), torch.tensor([[0, 1]])
    pts = torch.tensor([[[0.0, 0.0, -0.1]]], dtype=torch.float64, requires_grad=True)
    cases = ((lambda: ground_penetration_penalty(pts).sum(), pts),
             (lambda: capsule_penetration_penalty(ta, tb, tr, tp).sum(), ta))  # fmt: skip
    for value, x in cases:
        with pytest.raises(RuntimeError, match=r"second derivatives .* not supported"):
            torch.autograd.grad(value(), x, create_graph=True)
        assert torch.autograd.grad(value(), x)[0].abs().max() > 0  # first derivatives as before


def test_torch_penalties_pass_nan_through():
    """A NaN point or segment makes its frame's penalty NaN (it used to read as no penetration, penalty 0 and
    gradient 0, hiding a diverging optimization); the other frames keep their values."""
    torch = pytest.importorskip("torch")
    from sim.collision_torch import capsule_penetration_penalty, ground_penetration_penalty

    pts = torch.tensor([[[0.0, 0.0, -0.5], [0.0, 0.0, 1.0]], [[0.0, 0.0, float("nan")], [0.0, 0.0, 1.0]]])
    pen = ground_penetration_penalty(pts)
    assert pen[0].item() == pytest.approx(0.25) and torch.isnan(pen[1])
    seg_a = torch.tensor([[[0.0, 0.0, 0.0], [0.1, 0.0, 0.0]], [[float("nan"), 0.0, 0.0], [0.1, 0.0, 0.0]]])
    seg_b = seg_a + torch.tensor([0.0, 0.0, 1.0])
    pen = capsule_penetration_penalty(seg_a, seg_b, torch.tensor([0.1, 0.1]), torch.tensor([[0, 1]]))
    assert pen[0].item() == pytest.approx(0.01, rel=1e-6) and torch.isnan(pen[1])


def _torch_capsule_grad(a, b, radii):
    torch = pytest.importorskip("torch")
    from sim.collision_torch import capsule_penetration_penalty

    ta = torch.tensor(a, dtype=torch.float64, requires_grad=True)
    tb = torch.tensor(b, dtype=torch.float64, requires_grad=True)
    pen = capsule_penetration_penalty(ta, tb, torch.tensor(radii, dtype=torch.float64), torch.tensor([[0, 1]]))
    pen.sum().backward()
    return float(pen.detach().sum()), ta.grad.numpy(), tb.grad.numpy()


@pytest.mark.parametrize(
    ("p0", "p1", "q0", "q1"),
    [
        ((-1, 0, 0), (1, 0, 0), (0, -1, 0), (0, 1, 0)),  # axes crossing at one point
        ((0, 0, 0), (1, 0, 0), (0.5, 0, 0), (1.5, 0, 0)),  # collinear, overlapping
        ((0.2, 0.1, 0.3), (0.2, 0.1, 0.3), (0.2, 0.1, 0.3), (0.2, 0.1, 0.3)),  # two spheres at one centre
        ((0.2, 0.1, 0.3), (0.2, 0.1, 0.3), (0, 0.1, 0.3), (1, 0.1, 0.3)),  # a sphere's centre on a segment
    ],
)
def test_coincident_closest_points_get_a_gradient_that_separates_them(p0, p1, q0, q1):
    """Where two capsules' axes meet (the deepest overlap), the distance's gradient was delta / |delta| = 0 / eps = 0:
    the optimizer could not undo the worst pose. Now it is a unit vector normal to the segments, and a small rigid
    step of each capsule along minus its translation gradient lowers the penalty."""
    a = np.array([[p0, q0]], dtype=np.float64)
    b = np.array([[p1, q1]], dtype=np.float64)
    radii = [0.1, 0.1]
    value, ga, gb = _torch_capsule_grad(a, b, radii)
    assert value == pytest.approx(0.04, abs=1e-12)  # overlap 0.2, squared
    g = ga + gb  # gradient w.r.t. each capsule's translation, shape (1, 2, 3)
    assert np.linalg.norm(g) > 0.1
    step = 1e-3 * g / np.linalg.norm(g)
    lower, _, _ = _torch_capsule_grad(a - step, b - step, radii)  # each capsule moved rigidly
    assert lower < value - 1e-4


def test_short_segments_crossing_are_not_treated_as_parallel():
    """Two perpendicular 0.1 mm segments crossing at their centres: the absolute parallel threshold (1e-14 m^4)
    forced s = 0 in the kernel and skipped the interior point in the reference; both read 5e-5 m instead of 0."""
    h = 5e-5
    p0, p1, q0, q1 = (-h, 0, 0), (h, 0, 0), (0, -h, 0), (0, h, 0)
    assert segment_distance_reference(p0, p1, q0, q1) == pytest.approx(0.0, abs=1e-15)
    a = np.array([[p0, q0]], dtype=np.float64)
    b = np.array([[p1, q1]], dtype=np.float64)
    depth, _ = capsule_penetration(a, b, np.array([1e-5, 1e-5]), [(0, 1)])
    assert depth[0, 0] == pytest.approx(2e-5, abs=1e-12)


def test_negative_radii_and_empty_sets_are_handled():
    """The torch and Warp levels took a negative radius silently (a pair 0.3 apart with radii -0.4, 0.35 read as
    no overlap); zero points or capsules raised torch's 'cannot reshape tensor of 0 elements'."""
    torch = pytest.importorskip("torch")
    from sim.collision import capsule_penetration_penalty as warp_penalty
    from sim.collision_torch import capsule_penetration_penalty, ground_penetration_penalty

    seg = torch.tensor([[[0.0, 0.0, 0.0], [0.3, 0.0, 0.0]]])
    with pytest.raises(ValueError, match=r"radii: must be >= 0 \[m\], capsule 0 has -0.4"):
        capsule_penetration_penalty(seg, seg, torch.tensor([-0.4, 0.35]), torch.tensor([[0, 1]]))
    init_warp()
    wa = wp.array(seg.numpy().astype(np.float64), dtype=wp.vec3d, device="cpu")
    with pytest.raises(ValueError, match=r"radii: must be >= 0"):
        warp_penalty(wa, wa, wp.array([-0.4, 0.35], dtype=wp.float64), wp.array([[0, 1]], dtype=wp.int32))
    assert ground_penetration_penalty(torch.zeros(2, 0, 3)).tolist() == [0.0, 0.0]
    empty = torch.zeros(2, 0, 3)
    out = capsule_penetration_penalty(empty, empty, torch.zeros(0), torch.zeros((0, 2), dtype=torch.int64))
    assert out.tolist() == [0.0, 0.0]


def test_torch_penalties_are_not_fooled_by_an_input_edited_after_the_forward_pass():
    """The Warp tape re-read a view of a contiguous float64 input: moving a point in place after the forward pass
    gave the gradient at the moved point (z-gradient -2.2 instead of -0.2)."""
    import torch

    from sim.collision_torch import ground_penetration_penalty

    p = torch.tensor([[[0.0, 0.0, -0.1], [1.0, 0.0, 0.5]]], dtype=torch.float64, requires_grad=True)
    x = p * 1.0  # a non-leaf the caller may edit
    pen = ground_penetration_penalty(x, 0.0)
    with torch.no_grad():
        x[..., 2] -= 1.0
    pen.sum().backward()
    np.testing.assert_allclose(p.grad[0, :, 2].numpy(), [-0.2, 0.0], atol=1e-12)
