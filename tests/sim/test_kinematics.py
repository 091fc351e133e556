"""Warp FK and LBS: forward against the slow NumPy reference, gradients against finite differences."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp
from random_cases import make_rig

import sim
from sim._reference import fk_reference, lbs_normals_reference, lbs_reference
from sim.rotations import quat_normalize, quat_to_matrix

FWD_TOL_F64 = 1e-11
FWD_TOL_F32 = 2e-5
FD_STEP = 1e-6
FD_TOL = 1e-6  # float64 central differences


def random_motion(rng, rig, frames=3):
    return sim.Motion(30, rng.normal(size=(frames, 3)), quat_normalize(rng.normal(size=(frames, rig.joint_count, 4))))


@pytest.mark.parametrize(("precision", "tol"), [("float64", FWD_TOL_F64), ("float32", FWD_TOL_F32)])
def test_forward_matches_reference(rng, precision, tol):
    rig = make_rig(rng)
    motion = random_motion(rng, rig, frames=4)
    ref_world = fk_reference(rig.parents, motion.local_translations(rig), motion.rotations)
    pos, rot = sim.pose_motion(rig, motion, precision=precision)
    np.testing.assert_allclose(pos, ref_world[..., :3, 3], atol=tol * 10)
    np.testing.assert_allclose(quat_to_matrix(rot), ref_world[..., :3, :3], atol=tol)
    points, normals = sim.skin_motion(rig, motion, precision=precision)
    mesh = rig.meshes[0]
    np.testing.assert_allclose(points, lbs_reference(rig, mesh, ref_world), atol=tol * 30)
    np.testing.assert_allclose(normals, lbs_normals_reference(rig, mesh, ref_world), atol=tol * 30)


def test_bind_pose_reproduces_mesh(rng):
    """With IBM = inverse rest world, the rest pose skins every vertex to its bind position."""
    r = make_rig(rng)
    rig = sim.Rig(r.joint_names, r.parents, r.rest_translations, r.rest_rotations, None, r.meshes)
    points, normals = sim.skin_motion(rig, sim.Motion.rest(rig, 2))
    np.testing.assert_allclose(points[1], rig.meshes[0].points, atol=FWD_TOL_F64)
    np.testing.assert_allclose(normals[0], rig.meshes[0].vertex_normals(), atol=FWD_TOL_F64)


def test_normals_follow_a_non_uniform_bind_scale(rng):
    """Inverse bind matrices with a non-uniform scale (Rig accepts any non-singular one) deform the mesh linearly;
    the skinned normals are then the normals of the skinned surface (inverse transpose), not the scaled bind
    normals, which tilted off it (dot with a triangle edge 2.5 before)."""
    from sim.rig import _vertex_normals

    r = make_rig(rng, vertex_count=16, influences=1)
    ibm = np.diag([1.0, 1.0, 3.0, 1.0]) @ np.diag([0.5, 2.0, 1.0, 1.0]) @ r.inverse_bind_matrices
    m = r.meshes[0]
    one = sim.SkinnedMesh("m", m.points, m.triangles, np.zeros_like(m.influence_joints) + 4,
                          np.ones_like(m.influence_weights), joint_count=r.joint_count)  # fmt: skip
    rig = sim.Rig(r.joint_names, r.parents, r.rest_translations, r.rest_rotations, ibm, [one])
    motion = random_motion(rng, rig, frames=3)
    points, normals = sim.skin_motion(rig, motion)
    for f in range(len(points)):
        np.testing.assert_allclose(normals[f], _vertex_normals(points[f], one.triangles), atol=1e-9)
    ref = lbs_normals_reference(rig, one, fk_reference(rig.parents, motion.local_translations(rig), motion.rotations))
    np.testing.assert_allclose(normals, ref, atol=1e-9)


def _loss_and_tape(arrays, lt_np, lq_np, cp, cn):
    lt = wp.array(lt_np, dtype=wp.vec3d, requires_grad=True)
    lq = wp.array(lq_np, dtype=wp.quatd, requires_grad=True)
    tape = wp.Tape()
    with tape:
        world = sim.forward_kinematics(arrays, lt, lq)
        points, normals = sim.skin(arrays, world)
    value = float(np.sum(cp * points.numpy()) + np.sum(cn * normals.numpy()))
    return value, tape, lt, lq, points, normals


def test_warp_tape_gradients_match_finite_differences(rng):
    """d/d(local translations, local quaternions) of a random linear functional of skinned points and normals."""
    rig = make_rig(rng, vertex_count=12)
    arrays = sim.RigArrays(rig, "cpu", "float64")
    n, J, V = 2, rig.joint_count, arrays.vertex_count
    lt_np = rng.normal(size=(n, J, 3))
    lq_np = quat_normalize(rng.normal(size=(n, J, 4)))
    cp, cn = rng.normal(size=(n, V, 3)), rng.normal(size=(n, V, 3))

    _, tape, lt, lq, points, normals = _loss_and_tape(arrays, lt_np, lq_np, cp, cn)
    tape.backward(grads={points: wp.array(cp, dtype=wp.vec3d), normals: wp.array(cn, dtype=wp.vec3d)})
    grads = {"t": lt.grad.numpy().copy(), "q": lq.grad.numpy().copy()}

    for key, base in (("t", lt_np), ("q", lq_np)):
        fd = np.zeros_like(base)
        for idx in np.ndindex(base.shape):
            values = []
            for sign in (1.0, -1.0):
                x = base.copy()
                x[idx] += sign * FD_STEP
                args = (x, lq_np) if key == "t" else (lt_np, x)
                values.append(_loss_and_tape(arrays, *args, cp, cn)[0])
            fd[idx] = (values[0] - values[1]) / (2 * FD_STEP)
        np.testing.assert_allclose(grads[key], fd, atol=FD_TOL * max(1.0, np.abs(fd).max()), err_msg=key)


def test_kernel_inputs_are_validated(rng):
    rig = make_rig(rng)
    arrays = sim.RigArrays(rig, "cpu", "float32")
    good_t = wp.zeros((2, rig.joint_count), dtype=wp.vec3)
    good_q = wp.zeros((2, rig.joint_count), dtype=wp.quat)
    with pytest.raises(ValueError, match="local_rotations: expected dtype quatf"):
        sim.forward_kinematics(arrays, good_t, wp.zeros((2, rig.joint_count), dtype=wp.quatd))
    with pytest.raises(ValueError, match=r"local_rotations: expected shape \(2, 6\)"):
        sim.forward_kinematics(arrays, good_t, wp.zeros((3, rig.joint_count), dtype=wp.quat))
    with pytest.raises(ValueError, match="world: expected shape"):
        sim.skin(arrays, wp.zeros((2, 2), dtype=wp.transform))
    with pytest.raises(ValueError, match="precision must be"):
        sim.RigArrays(rig, "cpu", "float16")
    sim.forward_kinematics(arrays, good_t, good_q)  # the valid call goes through


torch = pytest.importorskip("torch")


def test_torch_ops_gradcheck(rng):
    from sim.torch_ops import TorchRig, rot6d_to_quat

    rig = make_rig(rng, vertex_count=10)
    trig = TorchRig(rig, dtype=torch.float64)
    root = torch.tensor(rng.normal(size=(2, 3)), requires_grad=True)
    r6 = torch.tensor(rng.normal(size=(2, rig.joint_count, 6)), requires_grad=True)
    quats = torch.tensor(rng.normal(size=(2, rig.joint_count, 4)), requires_grad=True)
    trans = torch.tensor(rng.normal(size=(2, rig.joint_count, 3)), requires_grad=True)

    assert torch.autograd.gradcheck(lambda r, q: trig.forward_kinematics(r, q), (root, quats), atol=1e-6)
    assert torch.autograd.gradcheck(lambda r, q, t: trig.forward_kinematics(r, q, t), (root, quats, trans), atol=1e-6)
    world = trig.forward_kinematics(root, quats).detach().requires_grad_()
    assert torch.autograd.gradcheck(trig.skin, (world,), atol=1e-6)
    assert torch.autograd.gradcheck(lambda r, d: trig.skin(trig.forward_kinematics(r, rot6d_to_quat(d))),
                                    (root, r6), atol=1e-6)  # fmt: skip


def test_torch_ops_refuse_double_backward(rng):
    """A backward with create_graph=True through the Warp adjoints raises: second derivatives came back silently
    wrong, the Functions' own second derivatives dropped (only the quaternion normalization's survived)."""
    from sim.torch_ops import TorchRig

    rig = make_rig(rng, vertex_count=10)
    trig = TorchRig(rig, dtype=torch.float64)
    root = torch.tensor(rng.normal(size=(3,)), requires_grad=True)
    quats = torch.tensor(rng.normal(size=(rig.joint_count, 4)), requires_grad=True)
    for out in (
        lambda: trig.forward_kinematics(root, quats),
        lambda: trig.skin(trig.forward_kinematics(root, quats))[0],
    ):
        with pytest.raises(RuntimeError, match=r"second derivatives .* not supported"):
            torch.autograd.grad((out() ** 2).sum(), quats, create_graph=True)
        (g,) = torch.autograd.grad((out() ** 2).sum(), quats)  # first derivatives as before
        assert torch.isfinite(g).all() and g.abs().max() > 0


def test_torch_ops_match_numpy_with_batch_dims(rng):
    from sim.torch_ops import TorchRig

    rig = make_rig(rng)
    motion = random_motion(rng, rig, frames=6)
    trig = TorchRig(rig, dtype=torch.float32)
    root = torch.tensor(motion.root_translations, dtype=torch.float32).reshape(2, 3, 3)
    rot = torch.tensor(motion.rotations, dtype=torch.float32).reshape(2, 3, rig.joint_count, 4)
    points, normals = trig.skin(trig.forward_kinematics(root, rot))
    ref_points, ref_normals = sim.skin_motion(rig, motion)
    assert points.shape == (2, 3, rig.meshes[0].vertex_count, 3)
    np.testing.assert_allclose(points.reshape(6, -1, 3).numpy(), ref_points, atol=1e-4)
    np.testing.assert_allclose(normals.reshape(6, -1, 3).numpy(), ref_normals, atol=1e-4)
    with pytest.raises(ValueError, match="rotations: expected shape"):
        trig.forward_kinematics(root, rot[..., :3])
    with pytest.raises(ValueError, match=r"expected torch\.float32"):
        trig.forward_kinematics(root.double(), rot.double())


def test_torch_rotation_helpers_match_numpy(rng):
    from sim import rotations as R
    from sim import torch_ops as T

    q = R.quat_normalize(rng.normal(size=(50, 4)))
    tq = torch.tensor(q)
    np.testing.assert_allclose(T.quat_to_matrix(tq).numpy(), R.quat_to_matrix(q), atol=1e-12)
    np.testing.assert_allclose(T.rot6d_to_quat(T.quat_to_rot6d(tq)).numpy(), q, atol=1e-10)
    d6 = rng.normal(size=(50, 6))
    np.testing.assert_allclose(T.rot6d_to_matrix(torch.tensor(d6)).numpy(), R.rot6d_to_matrix(d6), atol=1e-12)
    aa = rng.normal(size=(50, 3))
    np.testing.assert_allclose(T.axis_angle_to_quat(torch.tensor(aa)).numpy(), R.axis_angle_to_quat(aa), atol=1e-12)
    a, b = R.quat_normalize(rng.normal(size=(2, 50, 4)))
    np.testing.assert_allclose(
        T.quat_multiply(torch.tensor(a), torch.tensor(b)).numpy(), R.quat_multiply(a, b), atol=1e-12
    )
    v = rng.normal(size=(50, 3))
    np.testing.assert_allclose(T.quat_rotate(torch.tensor(a), torch.tensor(v)).numpy(), R.quat_rotate(a, v), atol=1e-12)


def test_torch_rig_accepts_cpu_index(rng):
    from sim.torch_ops import TorchRig

    rig = make_rig(rng)
    trig = TorchRig(rig, device="cpu:0")
    root = torch.zeros(1, 3, device="cpu:0")
    rot = torch.tensor(rig.rest_rotations, dtype=torch.float32, device="cpu:0")[None]
    points, _ = trig.skin(trig.forward_kinematics(root, rot))
    assert points.device.type == "cpu" and torch.isfinite(points).all()


def test_torch_ops_docstring_example_runs(rng):
    """The module docstring's example runs as written (it mixed a float64 rotation with the float32 default)."""
    import re

    from sim import torch_ops

    code = re.search(r"Typical use::\n\n(.*?)\n\n", torch_ops.__doc__, re.S).group(1)
    code = "\n".join(line[4:] for line in code.splitlines())
    env = {"torch": torch, "rig": make_rig(rng), "F": 3, "loss": lambda p: (p**2).sum(), **vars(torch_ops)}
    exec(code, env)
    assert env["rot6d"].grad is not None and torch.isfinite(env["rot6d"].grad).all()


def test_torch_ops_detect_inputs_modified_in_place(rng):
    """Editing a tensor the Warp adjoint replays from, between forward and backward, raises as torch's own ops do
    (the gradient was computed from the edited values silently)."""
    from sim.torch_ops import TorchRig

    rig = make_rig(rng, vertex_count=10)
    trig = TorchRig(rig, dtype=torch.float64)
    root = torch.tensor(rng.normal(size=(2, 3)), requires_grad=True)
    quats = torch.tensor(rng.normal(size=(2, rig.joint_count, 4)), requires_grad=True)
    world = trig.forward_kinematics(root, quats).detach().requires_grad_()
    w = world * 1.0
    points, _ = trig.skin(w)
    with torch.no_grad():
        w[..., :3] += 1.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        points.sum().backward()
    points, _ = trig.skin(world * 1.0)  # unedited: fine
    points.sum().backward()
    assert torch.isfinite(world.grad).all()


def test_torch_forward_kinematics_checks_the_translations_batch(rng):
    from sim.torch_ops import TorchRig

    rig = make_rig(rng)
    trig = TorchRig(rig, dtype=torch.float64)
    root = torch.zeros(2, 3, dtype=torch.float64)
    rot = torch.tensor(np.broadcast_to(rig.rest_rotations, (2, rig.joint_count, 4)).copy())
    trans = torch.tensor(rig.rest_translations)
    with pytest.raises(ValueError, match=r"translations: batch shape \(\) != \(2,\)"):
        trig.forward_kinematics(root, rot, trans)
    assert trig.forward_kinematics(root, rot, trans.expand(2, -1, -1)).shape == (2, rig.joint_count, 7)


def test_a_world_out_without_gradient_is_refused_on_a_tape(rng):
    # the tape carried no gradient back through a world_out without one: every input gradient stayed 0, silently
    rig = make_rig(rng)
    arrays = sim.RigArrays(rig, "cpu", "float64")
    J = rig.joint_count
    lt = wp.array(rng.normal(size=(2, J, 3)), dtype=wp.vec3d, requires_grad=True)
    lq = wp.array(quat_normalize(rng.normal(size=(2, J, 4))), dtype=wp.quatd, requires_grad=True)
    with wp.Tape(), pytest.raises(ValueError, match=r"world_out: needs a gradient array \(requires_grad=True\)"):
        sim.forward_kinematics(arrays, lt, lq, wp.zeros((2, J), dtype=wp.transformd))
    sim.forward_kinematics(arrays, lt, lq, wp.zeros((2, J), dtype=wp.transformd))  # no tape: no gradient needed
    tape = wp.Tape()
    with tape:
        world = sim.forward_kinematics(arrays, lt, lq, wp.zeros((2, J), dtype=wp.transformd, requires_grad=True))
    tape.backward(grads={world: wp.array(np.ones((2, J, 7)), dtype=wp.transformd)})
    assert np.abs(lt.grad.numpy()).sum() > 0


def test_torch_ops_take_an_empty_batch(rng):
    # skinning a batch of 0 poses raised in the Warp tape (no gradient arrays of size 0), backward too
    from sim.torch_ops import TorchRig

    rig = make_rig(rng, vertex_count=12)
    trig = TorchRig(rig, dtype=torch.float64)
    J, V = rig.joint_count, trig.arrays.vertex_count
    rot = torch.tensor(np.broadcast_to(rig.rest_rotations, (0, J, 4)).copy(), requires_grad=True)
    root = torch.zeros(0, 3, dtype=torch.float64, requires_grad=True)
    points, normals = trig.skin(trig.forward_kinematics(root, rot))
    assert points.shape == normals.shape == (0, V, 3)
    (points.sum() + normals.sum()).backward()
    assert rot.grad.shape == (0, J, 4) and root.grad.shape == (0, 3)
    points, _ = trig.skin(
        trig.forward_kinematics(torch.zeros(2, 0, 3, dtype=torch.float64), rot.detach().expand(2, 0, J, 4))
    )
    assert points.shape == (2, 0, V, 3)


def test_torch_forward_kinematics_turns_a_zero_quaternion_into_nan_below_it(rng):
    # a zero rotation mirrored its subtree through the joint (Warp rotates by a zero quaternion as v -> -v): finite
    # garbage; now the joint and its subtree are NaN, the rest of the skeleton as it was
    from sim.torch_ops import TorchRig

    rig = make_rig(rng)
    trig = TorchRig(rig, dtype=torch.float64)
    rot = torch.tensor(quat_normalize(rng.normal(size=(1, rig.joint_count, 4))))
    j = next(j for j in range(rig.joint_count) if any(p == j for p in rig.parents))  # a joint with children
    below = {j}
    for k in range(rig.joint_count):  # parents come first
        if rig.parents[k] in below:
            below.add(k)
    good = trig.forward_kinematics(torch.zeros(1, 3, dtype=torch.float64), rot)[0]
    rot[0, j] = 0.0
    world = trig.forward_kinematics(torch.zeros(1, 3, dtype=torch.float64), rot)[0]
    nan = torch.isnan(world).any(dim=-1)
    assert nan[sorted(below)].all() and len(below) > 1
    others = [k for k in range(rig.joint_count) if k not in below]
    assert not nan[others].any() and torch.allclose(world[others], good[others])
