"""CUDA coverage of the Warp kernels: every op on the device against a NumPy reference or the same op on CPU.

On a GPU machine: ``python -m pytest -s tests/test_cuda.py -rs`` (``-s`` prints each comparison's max abs error).
Without CUDA every test skips. ``KINEDISTILL_TEST_DEVICE=cpu`` runs the same code with the CPU as "the device"
(device-vs-CPU comparisons are then trivial, but every code path and every reference comparison executes), which is
how this module is checked on machines without a GPU. The Newton drop test carries the ``newton`` keyword so a time-
boxed run can put it last (``-k "not newton"`` then ``-k newton``).

Tolerances, by kind of comparison:

* float64 kernels vs float64 NumPy references: 1e-11 (x depth / influence factors as in tests/sim), i.e. round-off;
  CUDA contracts a*b+c into FMA, which changes the last bits only.
* float64 device vs float64 CPU (gradients, where several threads ``atomic_add`` into one entry in a
  nondeterministic order): 1e-10 x the largest entry.
* float32 kernels vs references: the CPU suite's bounds (2e-5 x factors); the device rounds differently (FMA,
  summation order), staying well inside them.
* float32 soft rasterizer: pixels sum a handful of contributions with atomics, so the order (and the last bits)
  differ between CPU and GPU: forward 1e-5 (values in [0, 1]), gradients 2e-3 x the largest entry (the adjoint sums
  thousands of pixel terms into each vertex in a different order). End-to-end renders (float32 FK + projection +
  rasterizer) differ by ~1e-4 px in vertex positions, hence 1e-3 on pixel values and 1e-2 x the largest gradient.
  A real device bug (race, missing synchronization, wrong stream) gives O(1) errors.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
import warp as wp
from mesh_cases import fold, tube, two_boxes
from random_cases import make_rig, random_capsules

import sim
from sim._reference import fk_reference, lbs_normals_reference, lbs_reference
from sim._warp_setup import init_warp
from sim.rotations import quat_normalize, quat_to_matrix

DEVICE = os.environ.get("KINEDISTILL_TEST_DEVICE", "cuda")
"""The device under test: ``cuda`` (default) or ``cpu`` (runs every code path against CPU, for local checks)."""
ON_CUDA = DEVICE.startswith("cuda")
WP_DEVICE = "cuda:0" if ON_CUDA else "cpu"
TORCH_DEVICE = torch.device("cuda:0" if ON_CUDA else "cpu")
BARE_DEVICE = "cuda" if ON_CUDA else "cpu"
"""The device name as user code writes it (``torch.device("cuda")`` has no index)."""


def _warp_has_device() -> bool:
    if not ON_CUDA:
        return True
    init_warp()
    return wp.get_cuda_device_count() > 0


pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not _warp_has_device(),
        reason="no CUDA device for Warp (wp.get_cuda_device_count() == 0); "
        "KINEDISTILL_TEST_DEVICE=cpu runs the same code on CPU",
    ),
]
needs_torch_device = pytest.mark.skipif(
    ON_CUDA and not torch.cuda.is_available(), reason="torch has no CUDA (torch.cuda.is_available() is False)"
)

FWD_TOL_F64 = 1e-11
FWD_TOL_F32 = 2e-5
DEVICE_VS_CPU_F64 = 1e-10
"""float64 device vs CPU, relative to the largest entry (atomic summation order)."""
FD_STEP = 1e-6
FD_TOL = 1e-6
RASTER_FWD_TOL = 1e-5
RASTER_GRAD_RTOL = 2e-3
RENDER_FWD_TOL = 1e-3
RENDER_GRAD_RTOL = 1e-2
GRADCHECK_ATOL = 1e-6
GRADCHECK_NONDET_TOL = 1e-12
"""gradcheck runs backward twice and by default demands bitwise-equal results; on the GPU the adjoints accumulate
with ``atomic_add`` in a nondeterministic order (FK parents, skin joints, capsule ends): float64 round-off differs."""
SINK_TOL_M = 0.01
REST_SPEED_MPS = 0.05


# -- helpers ----------------------------------------------------------------------------------------------
def _np(x) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().numpy()
    elif isinstance(x, wp.array):
        x = x.numpy()
    return np.asarray(x, dtype=np.float64)


def check_close(what: str, got, want, atol: float) -> None:
    """``assert_allclose(got, want, atol)``, printing the max abs error either way."""
    got, want = _np(got), _np(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    err = float(np.max(np.abs(got - want))) if got.size else 0.0
    print(f"[{DEVICE}] {what}: max|err| {err:.3e} (atol {atol:.1e})")
    np.testing.assert_allclose(got, want, atol=atol, rtol=0.0, err_msg=f"{what}: max abs err {err:.3e}")


def check_close_rel(what: str, got, want, rtol: float) -> None:
    """:func:`check_close` with ``atol = rtol x max|want|`` (gradients)."""
    want_np = _np(want)
    scale = float(np.max(np.abs(want_np))) if want_np.size else 0.0
    assert scale > 0, f"{what}: reference is all zero (the case exercises nothing)"
    check_close(what, got, want_np, rtol * scale)


def quadruped(frames: int = 6) -> tuple[sim.Rig, sim.Motion]:
    """The built-in quadruped and ``frames`` frames spread over its walk."""
    from sim.characters import build

    rig, clips = build("quadruped-walk")
    clip = next(iter(clips.values()))
    idx = np.linspace(0, clip.frame_count - 1, frames).round().astype(int)
    trans = None if clip.translations is None else clip.translations[idx]
    motion = sim.Motion(clip.fps, clip.root_translations[idx], clip.rotations[idx], trans, times=clip.times[idx])
    return rig, motion


# -- FK + LBS ---------------------------------------------------------------------------------------------
def _fk_skin(rig: sim.Rig, local_t: np.ndarray, local_q: np.ndarray, precision: str):
    arrays = sim.RigArrays(rig, WP_DEVICE, precision)
    assert arrays.device == WP_DEVICE
    t = wp.array(local_t.astype(arrays.np_dtype), dtype=arrays.vec3, device=WP_DEVICE)
    q = wp.array(local_q.astype(arrays.np_dtype), dtype=arrays.quat, device=WP_DEVICE)
    world = sim.forward_kinematics(arrays, t, q)
    points, normals = sim.skin(arrays, world)
    return _np(world), _np(points), _np(normals)


def _check_fk_lbs(name: str, rig: sim.Rig, local_t: np.ndarray, local_q: np.ndarray, precision: str) -> None:
    tol = FWD_TOL_F64 if precision == "float64" else FWD_TOL_F32
    world, points, normals = _fk_skin(rig, local_t, local_q, precision)
    ref = fk_reference(rig.parents, local_t, local_q)
    mesh = rig.merged_mesh()
    scale = max(1.0, float(np.abs(ref[..., :3, 3]).max()))
    check_close(f"{name} {precision} FK positions", world[..., :3], ref[..., :3, 3], tol * 10 * scale)
    check_close(f"{name} {precision} FK rotations", quat_to_matrix(world[..., 3:]), ref[..., :3, :3], tol * 10)
    pts_scale = max(1.0, float(np.abs(mesh.points).max()), scale)
    check_close(f"{name} {precision} LBS points", points, lbs_reference(rig, mesh, ref), tol * 30 * pts_scale)
    check_close(f"{name} {precision} LBS normals", normals, lbs_normals_reference(rig, mesh, ref), tol * 30)


@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_fk_lbs_random_rig_matches_numpy(precision):
    rng = np.random.default_rng(11)
    rig = make_rig(rng, vertex_count=200, influences=4)
    n = 8
    local_t = rng.normal(size=(n, rig.joint_count, 3))
    local_q = quat_normalize(rng.normal(size=(n, rig.joint_count, 4)))
    _check_fk_lbs("random rig", rig, local_t, local_q, precision)


@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_fk_lbs_quadruped_matches_numpy(precision):
    rig, motion = quadruped()
    _check_fk_lbs("quadruped", rig, motion.local_translations(rig), motion.rotations, precision)


def _tape_grads(rig, device: str, lt_np, lq_np, cp, cn):
    arrays = sim.RigArrays(rig, device, "float64")
    lt = wp.array(lt_np, dtype=wp.vec3d, device=device, requires_grad=True)
    lq = wp.array(lq_np, dtype=wp.quatd, device=device, requires_grad=True)
    tape = wp.Tape()
    with tape:
        world = sim.forward_kinematics(arrays, lt, lq)
        points, normals = sim.skin(arrays, world)
    value = float(np.sum(cp * points.numpy()) + np.sum(cn * normals.numpy()))
    tape.backward(
        grads={
            points: wp.array(cp, dtype=wp.vec3d, device=device),
            normals: wp.array(cn, dtype=wp.vec3d, device=device),
        }
    )
    return value, lt.grad.numpy().copy(), lq.grad.numpy().copy()


def test_warp_tape_gradients_device_vs_cpu_and_finite_differences():
    """d/d(local translations, quaternions) of a random linear functional of skinned points and normals (float64)."""
    rng = np.random.default_rng(12)
    rig = make_rig(rng, vertex_count=64, influences=4)
    n, J, V = 3, rig.joint_count, 64
    lt_np = rng.normal(size=(n, J, 3))
    lq_np = quat_normalize(rng.normal(size=(n, J, 4)))
    cp, cn = rng.normal(size=(n, V, 3)), rng.normal(size=(n, V, 3))
    v_dev, gt_dev, gq_dev = _tape_grads(rig, WP_DEVICE, lt_np, lq_np, cp, cn)
    v_cpu, gt_cpu, gq_cpu = _tape_grads(rig, "cpu", lt_np, lq_np, cp, cn)
    check_close("tape loss device vs cpu", v_dev, v_cpu, FWD_TOL_F64 * max(1.0, abs(v_cpu)))
    check_close_rel("tape d/dt device vs cpu", gt_dev, gt_cpu, DEVICE_VS_CPU_F64)
    check_close_rel("tape d/dq device vs cpu", gq_dev, gq_cpu, DEVICE_VS_CPU_F64)
    # central differences on the device for a few coordinates
    for key, base, grad in (("t", lt_np, gt_dev), ("q", lq_np, gq_dev)):
        for idx in [(0, 0, 0), (1, 2, 1), (2, 4, 2), (2, 5, 0)]:
            values = []
            for sign in (1.0, -1.0):
                x = base.copy()
                x[idx] += sign * FD_STEP
                args = (x, lq_np) if key == "t" else (lt_np, x)
                values.append(_tape_grads(rig, WP_DEVICE, *args, cp, cn)[0])
            fd = (values[0] - values[1]) / (2 * FD_STEP)
            check_close(f"tape d/d{key}{idx} vs central difference", grad[idx], fd, FD_TOL * max(1.0, abs(fd)))


# -- torch bridge -----------------------------------------------------------------------------------------
def _torch_fk_skin(trig, root, quats, trans, up_world, up_points, up_normals):
    root, quats, trans = (x.clone().requires_grad_() for x in (root, quats, trans))
    world = trig.forward_kinematics(root, quats, trans)
    points, normals = trig.skin(world)
    loss = (world * up_world).sum() + (points * up_points).sum() + (normals * up_normals).sum()
    loss.backward()
    return world, points, normals, root.grad, quats.grad, trans.grad


@needs_torch_device
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
def test_torch_rig_forward_backward_device_vs_cpu(dtype):
    from sim.torch_ops import TorchRig

    rng = np.random.default_rng(13)
    rig = make_rig(rng, vertex_count=150, influences=4)
    batch = (2, 3)
    J, V = rig.joint_count, 150
    cpu = [
        torch.tensor(rng.normal(size=(*batch, 3)), dtype=dtype),
        torch.tensor(rng.normal(size=(*batch, J, 4)), dtype=dtype),
        torch.tensor(rng.normal(size=(*batch, J, 3)), dtype=dtype),
        torch.tensor(rng.normal(size=(*batch, J, 7)), dtype=dtype),
        torch.tensor(rng.normal(size=(*batch, V, 3)), dtype=dtype),
        torch.tensor(rng.normal(size=(*batch, V, 3)), dtype=dtype),
    ]
    on_dev = _torch_fk_skin(TorchRig(rig, device=TORCH_DEVICE, dtype=dtype), *(x.to(TORCH_DEVICE) for x in cpu))
    on_cpu = _torch_fk_skin(TorchRig(rig, device="cpu", dtype=dtype), *cpu)
    assert all(x.device == TORCH_DEVICE for x in on_dev)
    names = ("world", "points", "normals", "d/droot", "d/dquats", "d/dtrans")
    f64 = dtype == torch.float64
    for name, a, b in zip(names, on_dev, on_cpu):
        if name.startswith("d/d"):
            check_close_rel(f"TorchRig {dtype} {name} device vs cpu", a, b, DEVICE_VS_CPU_F64 if f64 else 1e-4)
        else:
            tol = FWD_TOL_F64 if f64 else FWD_TOL_F32
            check_close(f"TorchRig {dtype} {name} device vs cpu", a, b, tol * max(1.0, float(b.detach().abs().max())))


@needs_torch_device
def test_torch_rig_gradcheck_on_device():
    from sim.torch_ops import TorchRig, rot6d_to_quat

    rng = np.random.default_rng(14)
    rig = make_rig(rng, vertex_count=8, influences=3)
    trig = TorchRig(rig, device=TORCH_DEVICE, dtype=torch.float64)
    J = rig.joint_count

    def leaf(*shape):
        return torch.tensor(rng.normal(size=shape), device=TORCH_DEVICE, requires_grad=True)

    root, quats, trans, r6 = leaf(2, 3), leaf(2, J, 4), leaf(2, J, 3), leaf(2, J, 6)

    def gradcheck(fn, inputs):
        return torch.autograd.gradcheck(fn, inputs, atol=GRADCHECK_ATOL, nondet_tol=GRADCHECK_NONDET_TOL)

    assert gradcheck(lambda r, q, t: trig.forward_kinematics(r, q, t), (root, quats, trans))
    world = trig.forward_kinematics(root, quats).detach().requires_grad_()
    assert gradcheck(trig.skin, (world,))
    assert gradcheck(lambda r, d: trig.skin(trig.forward_kinematics(r, rot6d_to_quat(d))), (root, r6))


@needs_torch_device
def test_torch_rig_accepts_bare_device_name():
    """``TorchRig(rig, device="cuda")`` must accept tensors made with ``device="cuda"`` (they live on cuda:0), as
    ``distill`` (``--device cuda``/``auto``) and ``PoseValidators(device="cuda")`` create them."""
    from sim.torch_ops import TorchRig

    rig = make_rig(np.random.default_rng(15))
    trig = TorchRig(rig, device=BARE_DEVICE)
    root = torch.zeros(2, 3, device=BARE_DEVICE)
    rot = torch.tensor(rig.rest_rotations, dtype=torch.float32, device=BARE_DEVICE).expand(2, -1, -1)
    points, _ = trig.skin(trig.forward_kinematics(root, rot))
    assert points.device.type == TORCH_DEVICE.type and torch.isfinite(points).all()


# -- collision penalties ----------------------------------------------------------------------------------


def _warp_penalties(device: str, pts, a, b, radii, pairs, up_ground, up_caps):
    """Ground and capsule penalties on ``device`` with their tape gradients for upstream per-frame weights."""
    from sim.collision import capsule_penetration_penalty, ground_penetration_penalty

    p = wp.array(pts, dtype=wp.vec3d, device=device, requires_grad=True)
    sa = wp.array(a, dtype=wp.vec3d, device=device, requires_grad=True)
    sb = wp.array(b, dtype=wp.vec3d, device=device, requires_grad=True)
    r = wp.array(radii, dtype=wp.float64, device=device, requires_grad=True)
    pr = wp.array(pairs, dtype=wp.int32, device=device)
    tape = wp.Tape()
    with tape:
        g_depth, g_pen = ground_penetration_penalty(p, 0.03)
        c_depth, c_pen = capsule_penetration_penalty(sa, sb, r, pr)
    tape.backward(
        grads={
            g_pen: wp.array(up_ground, dtype=wp.float64, device=device),
            c_pen: wp.array(up_caps, dtype=wp.float64, device=device),
        }
    )
    return [_np(x) for x in (g_depth, g_pen, c_depth, c_pen, p.grad, sa.grad, sb.grad, r.grad)]


def test_collision_penalties_device_vs_numpy_and_cpu():
    from sim._collision_reference import capsule_penetration_reference, ground_penetration_reference

    rng = np.random.default_rng(16)
    pts = rng.normal(size=(4, 256, 3)) * 0.1
    a, b, radii, pairs = random_capsules(rng, frames=4, count=9)
    up_ground, up_caps = rng.normal(size=4), rng.normal(size=4)
    dev = _warp_penalties(WP_DEVICE, pts, a, b, radii, pairs, up_ground, up_caps)
    cpu = _warp_penalties("cpu", pts, a, b, radii, pairs, up_ground, up_caps)
    ref_gd, ref_gp = ground_penetration_reference(pts, 0.03)
    ref_cd, ref_cp = capsule_penetration_reference(a, b, radii, pairs)
    assert (ref_gd > 0).any() and (ref_gd == 0).any() and 0 < (ref_cd > 0).mean() < 1  # both branches
    check_close("ground depth vs numpy", dev[0], ref_gd, 1e-10)
    check_close("ground penalty vs numpy", dev[1], ref_gp, 1e-10)
    check_close("capsule depth vs numpy", dev[2], ref_cd, 1e-10)
    check_close("capsule penalty vs numpy", dev[3], ref_cp, 1e-10)
    for name, x, y in zip(("d/dpoints", "d/dseg_a", "d/dseg_b", "d/dradii"), dev[4:], cpu[4:]):
        check_close_rel(f"collision tape {name} device vs cpu", x, y, DEVICE_VS_CPU_F64)


@needs_torch_device
@pytest.mark.parametrize("pairs_on", ["device", "cpu"])
def test_collision_torch_device_vs_numpy_and_cpu(pairs_on):
    """Torch bridge on device tensors. ``pairs_on="cpu"``: the capsule pairs as a CPU tensor with device segments,
    which is how ``distill.losses.SelfCollisionCapsules`` calls it."""
    from sim._collision_reference import capsule_penetration_reference, ground_penetration_reference
    from sim.collision_torch import capsule_penetration_penalty, ground_penetration_penalty

    rng = np.random.default_rng(17)
    pts = rng.normal(size=(2, 3, 64, 3)) * 0.1
    a, b, radii, pairs = random_capsules(rng, frames=4, count=6)
    up_g, up_c = torch.tensor(rng.normal(size=(2, 3))), torch.tensor(rng.normal(size=4))

    def run(device, pairs_device):
        tp = torch.tensor(pts, device=device, requires_grad=True)
        ta = torch.tensor(a, device=device, requires_grad=True)
        tb = torch.tensor(b, device=device, requires_grad=True)
        tr = torch.tensor(radii, device=device, requires_grad=True)
        g = ground_penetration_penalty(tp, 0.03)
        c = capsule_penetration_penalty(ta, tb, tr, torch.tensor(pairs, device=pairs_device))
        ((g * up_g.to(device)).sum() + (c * up_c.to(device)).sum()).backward()
        return g, c, tp.grad, ta.grad, tb.grad, tr.grad

    dev = run(TORCH_DEVICE, TORCH_DEVICE if pairs_on == "device" else "cpu")
    cpu = run("cpu", "cpu")
    assert all(x.device == TORCH_DEVICE for x in dev)
    _, ref_gp = ground_penetration_reference(pts.reshape(6, 64, 3), 0.03)
    _, ref_cp = capsule_penetration_reference(a, b, radii, pairs)
    check_close("torch ground penalty vs numpy", dev[0].reshape(-1), ref_gp, 1e-10)
    check_close("torch capsule penalty vs numpy", dev[1], ref_cp, 1e-10)
    for name, x, y in zip(("d/dpoints", "d/dseg_a", "d/dseg_b", "d/dradii"), dev[2:], cpu[2:]):
        check_close_rel(f"collision torch {name} device vs cpu (pairs on {pairs_on})", x, y, DEVICE_VS_CPU_F64)


@needs_torch_device
def test_collision_torch_gradcheck_on_device():
    from sim.collision_torch import capsule_penetration_penalty

    rng = np.random.default_rng(18)
    a, b, radii, pairs = random_capsules(rng, frames=2, count=5)
    ta, tb, tr = (torch.tensor(x, device=TORCH_DEVICE, requires_grad=True) for x in (a, b, radii))
    tp = torch.tensor(pairs, device=TORCH_DEVICE)
    fn = lambda x, y, z: capsule_penetration_penalty(x, y, z, tp)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (ta, tb, tr), atol=GRADCHECK_ATOL, nondet_tol=GRADCHECK_NONDET_TOL)


# -- mesh self-intersection -------------------------------------------------------------------------------
LENGTH_TOL = 1e-9
"""Relative tolerance (x character size) on intersection lengths, as in tests/sim/test_mesh_intersection.py."""


def _check_frames_equal(what: str, got, want) -> None:
    np.testing.assert_array_equal(got.pairs, want.pairs, err_msg=f"{what}: pairs")
    check_close(f"{what} lengths", got.lengths, want.lengths, 1e-12)
    check_close(f"{what} pair depths", got.depths, want.depths, 1e-12)
    np.testing.assert_array_equal(got.face_hit, want.face_hit, err_msg=f"{what}: face_hit")
    order_g, order_w = np.argsort(got.inside_vertices), np.argsort(want.inside_vertices)
    np.testing.assert_array_equal(got.inside_vertices[order_g], want.inside_vertices[order_w], err_msg=what)
    check_close(f"{what} inside depths", got.inside_depths[order_g], want.inside_depths[order_w], 1e-12)


@pytest.mark.parametrize("case", ["boxes", "folded_tube"])
def test_mesh_self_intersection_device_vs_brute_force_reference(case):
    from mesh_intersection_reference import self_intersections_reference

    from sim.mesh_intersection import MeshSelfIntersection

    if case == "boxes":
        tris, rest, pts = two_boxes(0.1)
    else:
        rest, tris = tube(2.0, 0.1, 41, 12)
        pts = fold(rest, 2.0, 0.1)
    checker = MeshSelfIntersection(tris, rest, device=WP_DEVICE)
    assert checker.device == WP_DEVICE
    tol = LENGTH_TOL * checker.size
    ref_pairs, ref_len = self_intersections_reference(checker.triangles, pts, checker.excluded, min_length=tol)
    assert len(ref_pairs) > 0
    on_cpu = MeshSelfIntersection(tris, rest, device="cpu")
    np.testing.assert_array_equal(checker.excluded, on_cpu.excluded)
    for method in ("bvh", "brute_force"):
        got = checker.frame(pts, method)
        keep = got.lengths > tol
        np.testing.assert_array_equal(got.pairs[keep], ref_pairs, err_msg=f"{case} {method}")
        check_close(f"mesh intersection {case} {method} lengths vs reference", got.lengths[keep], ref_len, tol)
        _check_frames_equal(f"mesh intersection {case} {method} device vs cpu", got, on_cpu.frame(pts, method))
        assert len(checker.frame(rest, method).pairs) == 0
    if case == "boxes":  # B's four vertices at x = 0.9 lie exactly 0.1 behind A's face x = 1
        frame = checker.frame(pts)
        np.testing.assert_array_equal(np.sort(frame.inside_vertices), [8, 9, 10, 11])
        check_close("mesh intersection boxes inside depths (known 0.1)", frame.inside_depths, np.full(4, 0.1), 1e-9)


def test_mesh_self_intersection_quadruped_device_vs_cpu():
    """The built-in quadruped's skinned walk frames, with the joints bent further so limbs cross."""
    from sim.mesh_intersection import MeshSelfIntersection
    from sim.rotations import axis_angle_to_quat, quat_multiply

    rig, motion = quadruped(frames=2)
    rot = motion.rotations.copy()
    bend = axis_angle_to_quat(np.array([0.0, 1.2, 0.4]))
    rot[:, 1:] = quat_multiply(rot[:, 1:], np.broadcast_to(bend, rot[:, 1:].shape))
    bent = sim.Motion(motion.fps, motion.root_translations, rot, motion.translations, times=motion.times)
    mesh = rig.merged_mesh()
    points, _ = sim.skin_motion(rig, bent)
    dev = MeshSelfIntersection(mesh.triangles, mesh.points, device=WP_DEVICE)
    cpu = MeshSelfIntersection(mesh.triangles, mesh.points, device="cpu")
    np.testing.assert_array_equal(dev.excluded, cpu.excluded)
    hits = 0
    for f, p in enumerate(points):
        for method in ("bvh", "brute_force"):
            got = dev.frame(p, method)
            _check_frames_equal(f"quadruped frame {f} {method} device vs cpu", got, cpu.frame(p, method))
            hits += len(got.pairs)
    assert hits > 0, "the bent quadruped should intersect itself somewhere"


# -- soft rasterizer and renderer -------------------------------------------------------------------------
RH, RW = 24, 20
OCT_P = np.array([[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]], float)
OCT_T = np.array([[0, 2, 4], [2, 1, 4], [1, 3, 4], [3, 0, 4], [2, 0, 5], [1, 2, 5], [3, 1, 5], [0, 3, 5]])


def _raster_scene(device):
    """Two images of octahedra (one rotated, one smaller and offset towards the camera), as tests/distill."""
    from distill import MeshTopology

    g = torch.Generator().manual_seed(0)
    c, s = np.cos(0.3), np.sin(0.3)
    rot = np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])

    def screen(p, scale=7.0):
        return np.stack([RW / 2 + scale * p[:, 0], RH / 2 - scale * p[:, 1], 0.5 + 0.2 * p[:, 2]], -1)

    verts = torch.tensor(np.stack([screen(OCT_P @ rot.T), screen(OCT_P * 0.6 + [0.5, 0.3, 0.8])]))
    verts = verts + 0.05 * torch.randn(2, 6, 3, generator=g, dtype=torch.float64) * torch.tensor([1.0, 1.0, 0.1])
    colors = torch.rand(2, 6, 3, generator=g, dtype=torch.float64)
    upstream = [torch.randn(s, generator=g, dtype=torch.float64) for s in ((2, RH, RW, 3), (2, RH, RW), (2, RH, RW))]
    return verts, colors, MeshTopology(OCT_T, device=device), upstream


def _raster(device):
    from distill import RasterSettings, rasterize

    verts, colors, topo, up = _raster_scene(device)
    v = verts.float().to(device).requires_grad_()
    c = colors.float().to(device).requires_grad_()
    out = rasterize(v, c, topo, RH, RW, RasterSettings(sigma=0.7, gamma=0.05, tile_size=4))
    up = [u.float().to(device) for u in up]
    ((out.rgb * up[0]).sum() + (out.alpha * up[1]).sum() + (out.depth * up[2]).sum()).backward()
    return out, v.grad, c.grad


@needs_torch_device
def test_rasterizer_device_vs_reference_and_cpu():
    from distill import RasterSettings
    from distill._reference import rasterize_reference

    out, gv, gc = _raster(TORCH_DEVICE)
    out_cpu, gv_cpu, gc_cpu = _raster(torch.device("cpu"))
    assert out.alpha.device == TORCH_DEVICE
    verts, colors, topo_cpu, _ = _raster_scene("cpu")
    ref = rasterize_reference(verts, colors, topo_cpu, RH, RW, RasterSettings(sigma=0.7, gamma=0.05, tile_size=4))
    assert ref.alpha.max() > 0.999 and ref.alpha.min() == 0.0, "the scene has covered and empty pixels"
    for name in ("rgb", "alpha", "depth"):
        check_close(f"raster {name} device vs float64 reference", getattr(out, name), getattr(ref, name), 2e-5)
        check_close(f"raster {name} device vs cpu", getattr(out, name), getattr(out_cpu, name), RASTER_FWD_TOL)
    check_close_rel("raster d/dverts device vs cpu", gv, gv_cpu, RASTER_GRAD_RTOL)
    check_close_rel("raster d/dcolors device vs cpu", gc, gc_cpu, RASTER_GRAD_RTOL)


def _render(device, bare: bool = False):
    """Full differentiable path on ``device``: trajectory -> TorchRig FK + skin -> follow cameras -> raster."""
    from distill import CameraConfig, RasterSettings, RenderConfig, Trajectory, VideoRenderer
    from sim.torch_ops import TorchRig

    rig, motion = quadruped(frames=3)
    dev = torch.device(BARE_DEVICE) if bare else device
    cfg = RenderConfig(
        width=32,
        height=32,
        albedo="position",
        albedo_frequency=6.0,
        camera=CameraConfig(azimuths_deg=(20.0, 110.0), distance=1.0, follow_smoothing_s=0.2),
        raster=RasterSettings(sigma=1.0, gamma=0.02),
    )
    traj = Trajectory(rig, motion).to(dev)
    trig = TorchRig(rig, device=dev)
    renderer = VideoRenderer(rig, cfg, device=dev)
    weights = torch.rand(2, 3, 3, 32, 32, generator=torch.Generator().manual_seed(3)).to(dev)
    world = traj.world(trig)
    points, normals = trig.skin(world)
    result = renderer.render(points, normals, world[:, traj.body_root], traj.times)  # root pose: the camera turns
    (result.video * weights).sum().backward()
    return result.video, result.alpha, traj.rotations_6d.grad, traj.translation.grad


@needs_torch_device
def test_renderer_end_to_end_device_vs_cpu():
    video, alpha, g_rot, g_trans = _render(TORCH_DEVICE)
    video_c, alpha_c, g_rot_c, g_trans_c = _render(torch.device("cpu"))
    assert video.device == TORCH_DEVICE and alpha_c.max() > 0.9, "the character is in view"
    check_close("render video device vs cpu", video, video_c, RENDER_FWD_TOL)
    check_close("render alpha device vs cpu", alpha, alpha_c, RENDER_FWD_TOL)
    check_close_rel("render d/drotations_6d device vs cpu", g_rot, g_rot_c, RENDER_GRAD_RTOL)
    check_close_rel("render d/droot translation device vs cpu", g_trans, g_trans_c, RENDER_GRAD_RTOL)


@needs_torch_device
def test_renderer_accepts_bare_device_name():
    """The distill CLI passes ``torch.device("cuda")`` (no index) to TorchRig, Trajectory and VideoRenderer."""
    video, _, g_rot, _ = _render(TORCH_DEVICE, bare=True)
    assert video.device.type == TORCH_DEVICE.type and torch.isfinite(g_rot).all()


# -- pose-space validators --------------------------------------------------------------------------------
def _validator_measures(pr, calibration, device, x_np):
    from posespace import PoseValidators

    val = PoseValidators(pr, calibration, device=device, dtype=torch.float64)
    x = torch.tensor(x_np, device=val.device, requires_grad=True)
    m = val.measures(x)
    loss = val.loss(x, m).sum() + (1.0 - m["collapse"]).sum()
    loss.backward()
    report = val.check(torch.tensor(x_np, device=val.device))
    return {k: _np(v) for k, v in m.items()}, _np(x.grad), report


@needs_torch_device
def test_posespace_validators_device_vs_cpu():
    from posespace import PoseRig, calibrate
    from sim.rotations import axis_angle_to_quat, quat_to_rot6d

    rig, _ = quadruped()
    from sim.characters import build

    _, clips = build("quadruped-walk")
    pr = PoseRig(rig)
    cal = calibrate(pr, pr.encode(next(iter(clips.values()))))
    rng = np.random.default_rng(19)
    x = quat_to_rot6d(axis_angle_to_quat(rng.normal(scale=np.radians(60.0), size=(16, pr.joint_count, 3))))
    m_dev, g_dev, rep_dev = _validator_measures(pr, cal, TORCH_DEVICE, x)
    m_cpu, g_cpu, rep_cpu = _validator_measures(pr, cal, "cpu", x)
    assert m_cpu["swing"].max() > 0 and m_cpu["penetration"].max() > 0, "the random poses violate the validators"
    for k in m_cpu:
        check_close(f"validators {k} device vs cpu", m_dev[k], m_cpu[k], FWD_TOL_F64 * 10)
    check_close_rel("validators d(loss)/dx device vs cpu", g_dev, g_cpu, DEVICE_VS_CPU_F64)
    for k in rep_cpu.passed:
        np.testing.assert_array_equal(rep_dev.passed[k], rep_cpu.passed[k], err_msg=k)
    np.testing.assert_array_equal(rep_dev.valid, rep_cpu.valid)


@needs_torch_device
def test_posespace_validators_accept_bare_device_name():
    from posespace import PoseRig, PoseValidators

    rig, _ = quadruped()
    pr = PoseRig(rig)
    val = PoseValidators(pr, device=BARE_DEVICE, dtype=torch.float32)
    report = val.check(pr.rest_pose(2))
    assert report.valid.all()


# -- Newton -----------------------------------------------------------------------------------------------
IN_AIR_TOL_M = 1e-3
"""Device vs CPU body positions while nothing touches (float32 Newton states, different summation order)."""
TRACKING_ERROR_SLACK = 0.02
"""Device vs CPU PD tracking: the device's body error may exceed the CPU's by this much (contact events make the
two float32 runs diverge slowly; a broken device path errs by O(1))."""


def _physics(device: str):
    from sim.physics import SolverConfig, TrackingConfig

    return TrackingConfig(solver=SolverConfig(device=device))


def test_newton_drop_on_device():
    """A four-legged table character dropped from 0.5 m comes to rest on its feet without sinking more than 1 cm,
    tracked by ``sim.physics.track`` with the simulation on the device (Steel, a CUDA graph per frame); while it
    falls through the air its bodies follow the CPU run's."""
    pytest.importorskip("newton")
    from physics_rigs import hold, table_quadruped

    from sim.physics import build_character, track

    ch = build_character(table_quadruped())
    motion = hold(ch.rig, 75, fps=30.0, root_offset=(0.0, 0.0, 0.5))  # 2.5 s, dropped from 0.5 m
    res = track(ch, motion, _physics(WP_DEVICE))
    cpu = track(ch, motion, _physics("cpu"))
    assert res.blowup is None and len(res.body_pos) == 75
    a, b = ch.capsule_world(res.body_pos, res.body_rot)
    low = (np.minimum(a[..., 2], b[..., 2]) - ch.capsule_radii).min(axis=-1)
    speed = float(np.linalg.norm(res.body_vel[-1, :, :3], axis=-1).max())
    print(
        f"[{DEVICE}] newton drop via sim.physics.track: start {low[0]:.3f} m, lowest {low.min():.4f} m, final speed "
        f"{speed:.4f} m/s, torso z {res.body_pos[-1, 0, 2]:.4f} (rest {ch.rig.rest_translations[0, 2]:.4f}), "
        f"realtime factor {res.realtime_factor:.1f}x (cpu {cpu.realtime_factor:.1f}x)"
    )
    assert low[0] > 0.45, "it starts in the air"
    assert low.min() >= -SINK_TOL_M, f"sank {-low.min():.4f} m"
    assert speed < REST_SPEED_MPS, f"still moving at {speed:.3f} m/s"
    np.testing.assert_allclose(res.body_pos[-1, 0, 2], ch.rig.rest_translations[0, 2], atol=0.02)
    in_air = int(np.argmax(low < 0.05))  # frames before the feet come near the ground
    assert in_air >= 5
    check_close("newton in-air body positions device vs cpu", res.body_pos[:in_air], cpu.body_pos[:in_air],
                IN_AIR_TOL_M)  # fmt: skip


def test_newton_tracking_and_parallel_worlds_on_device():
    """PD tracking of the procedural quadruped's walk on the device: not fallen, no blow-up, body error within
    :data:`TRACKING_ERROR_SLACK` of the CPU run's; and identical targets in 8 parallel device worlds give 8
    identical rollouts (no cross-world races)."""
    pytest.importorskip("newton")
    import usd_io
    from sim.physics import CharacterSimulation, build_character, prepare_reference, reference_trajectory, track
    from sim.physics.tracking import initial_state

    asset = usd_io.load_asset("procedural:quadruped-walk")
    prep = prepare_reference(asset.rig, asset.clip())
    ch = build_character(prep.rig, prep.motion)
    ref = reference_trajectory(ch, prep.motion)
    errors = {}
    for name, device in (("device", WP_DEVICE), ("cpu", "cpu")):
        res = track(ch, ref, _physics(device))
        assert res.blowup is None and res.fell_frame is None, f"{name}: {res.blowup} fell at {res.fell_frame}"
        errors[name] = float(np.linalg.norm(res.body_pos - ref.body_pos, axis=-1).mean() / ch.height)
    print(f"[{DEVICE}] newton quadruped PD tracking body error: device {errors['device']:.4f}, cpu {errors['cpu']:.4f}")
    assert errors["device"] <= errors["cpu"] + TRACKING_ERROR_SLACK

    F, W = 20, 8
    sim_w = CharacterSimulation(ch, ref.fps, F, W, _physics(WP_DEVICE).solver)
    sim_w.set_targets(ref.coords[:F].reshape(F, -1), ref.coord_rates[:F].reshape(F, -1))
    sim_w.set_state(**initial_state(ref))
    for _ in range(F - 1):
        sim_w.step_frame()
    pos, _, _ = sim_w.body_state()
    assert np.isfinite(pos).all()
    check_close("newton 8 identical worlds on the device", pos - pos[:1], np.zeros_like(pos), 1e-6)


def test_newton_projection_on_device():
    """The physics projection with its rollout worlds on the device (one batch there): no blow-up, not fallen,
    better than plain PD on body error, and reproducible."""
    pytest.importorskip("newton")
    import usd_io
    from sim.physics import ProjectionConfig, build_character, prepare_reference, project, reference_trajectory, track

    asset = usd_io.load_asset("procedural:quadruped-walk")
    prep = prepare_reference(asset.rig, asset.clip())
    ch = build_character(prep.rig, prep.motion)
    ref = reference_trajectory(ch, prep.motion.slice(0, 25))
    cfg = ProjectionConfig(samples=16, iterations=3, passes=1, ilc_passes=1)
    a = project(ch, ref, _physics(WP_DEVICE), cfg)
    assert a.ok, f"{a.blowup} fell at {a.fell_frame}"
    assert a.info["rollout_batches"] == (1 if ON_CUDA else cfg.rollout_batches)
    pd = track(ch, ref, _physics(WP_DEVICE))

    def err(r):
        return float(np.linalg.norm(r.body_pos - ref.body_pos[: len(r.body_pos)], axis=-1).mean() / ch.height)

    print(f"[{DEVICE}] newton projection body error {err(a):.4f} vs PD {err(pd):.4f}")
    assert err(a) < err(pd)
    b = project(ch, ref, _physics(WP_DEVICE), cfg)
    check_close("newton projection rerun on the device", b.body_pos, a.body_pos, 1e-6)


@needs_torch_device
def test_pose_prior_on_device_matches_cpu(tmp_path):
    """``PoseSpace.pose_prior`` takes device rotations (distill --device cuda), returns its value there, and its
    value and gradient equal the CPU call's."""
    from posespace import ModelConfig, PoseSet, TrainConfig, train
    from sim.characters import build

    rig, clips = build("quadruped")
    poses = PoseSet()
    for name, clip in clips.items():
        poses.add(rig, clip, name, fps=None)
    cfg = TrainConfig(output=tmp_path, steps=2, batch_size=8, model=ModelConfig(width=16, depth=1), progress=False,
                      heldout=(), validator_poses=4)  # fmt: skip
    prior = train(cfg, poses).pose_prior(rig, manifold_weight=0.5)
    rng = np.random.default_rng(23)
    q = rng.normal(size=(6, rig.joint_count, 4))
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    out = {}
    for device in (TORCH_DEVICE, torch.device("cpu")):
        t = torch.tensor(q, dtype=torch.float32, device=device, requires_grad=True)
        value = prior(t, None)
        assert value.device == t.device
        value.backward()
        out[device.type] = (_np(value), _np(t.grad))
    check_close("pose prior value device vs cpu", out[TORCH_DEVICE.type][0], out["cpu"][0], 1e-6)
    check_close_rel("pose prior gradient device vs cpu", out[TORCH_DEVICE.type][1], out["cpu"][1], 1e-6)


@needs_torch_device
def test_distill_with_the_video_model_on_the_device_and_the_trajectory_on_cpu(tmp_path):
    """``--guidance-device cuda --device cpu``: the renders move to the model's device, the SDS gradient comes back
    to the CPU trajectory (the split a user with a small GPU picks for the 5B model)."""
    from distill import CameraConfig, RasterSettings, RenderConfig, sample_clip
    from distill.guidance import GuidanceConfig, TimestepSchedule
    from distill.optimize import DistillConfig, Distiller, OptimConfig
    from sim.characters import build

    rig, clips = build("quadruped")
    cfg = DistillConfig(
        prompt="a dog walking",
        frames=5,
        fps=12.0,
        render=RenderConfig(
            width=32, height=32, camera=CameraConfig(azimuths_deg=(30.0,)), raster=RasterSettings(sigma=1.0)
        ),
        guidance=GuidanceConfig(kind="tiny", device=BARE_DEVICE, schedule=TimestepSchedule(min=0.1, max_start=0.9)),
        optim=OptimConfig(steps=2, checkpoint_every=1, preview_every=0),
    )
    init = sample_clip(next(iter(clips.values())), cfg.frames, cfg.fps, rig=rig)
    d = Distiller(rig, cfg, tmp_path / "run", init=init, device="cpu")
    assert next(d.guidance.parameters()).device.type == TORCH_DEVICE.type
    before = d.trajectory.rotations_6d.detach().clone()
    result = d.run(progress=False)
    assert result.steps_run == 2 and all(np.isfinite(row["total"]) for row in result.log)
    after = d.trajectory.rotations_6d.detach()
    assert after.device.type == "cpu" and torch.isfinite(after).all()
    assert (after - before).abs().max() > 0, "no gradient reached the CPU trajectory"
