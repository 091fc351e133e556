"""Bad input to the public kinematics and collision entry points fails early with errors naming the argument.

Regression tests for the Python API walk-through: out-of-range capsule pairs used to read arbitrary memory in the
kernel (garbage penalties, a segfault), NaN points counted as above the ground, a mesh bound to another rig gave a
bare IndexError, and wrong argument types failed deep inside with AttributeErrors.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import warp as wp
from random_cases import make_rig

import sim
from sim._reference import fk_reference, lbs_normals_reference, lbs_reference
from sim._warp_setup import init_warp
from sim.collision import capsule_penetration, capsule_penetration_penalty, ground_penetration, max_capsule_penetration
from sim.rotations import quat_normalize

torch = pytest.importorskip("torch")
from sim.collision_torch import capsule_penetration_penalty as capsule_penalty_torch  # noqa: E402
from sim.collision_torch import ground_penetration_penalty as ground_penalty_torch  # noqa: E402
from sim.torch_ops import TorchRig  # noqa: E402

FWD_TOL = 1e-10
"""Agreement of float64 penalties with closed-form values [m^2] (the kernel's distance carries a 1e-18 m^2
regularizer)."""
SKIN_TOL = 1e-9
"""Float64 skinning against the NumPy reference [m]."""

RADIUS = 0.1
"""Radius of both capsules of the two-capsule case [m]."""
GAP = 0.15
"""Axis distance of the two parallel vertical capsules [m]: they overlap by 2 * RADIUS - GAP = 0.05 m."""
EXPECTED_PENALTY = (2 * RADIUS - GAP) ** 2

BAD_INDICES = [2, 3, 50, 2**30, -1, -1_000_000]
"""Capsule indices outside [0, 2): 2 and 3 used to return a plausible penalty, 50 garbage, 2**30 a segfault."""
WRAPPING_INDEX = 2**32 + 1
"""Out of range, but 1 after a plain int32 cast: must be refused before casting."""


def _two_capsules() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two parallel vertical segments of length 1 m, GAP apart, radius RADIUS: seg_a, seg_b (1, 2, 3), radii (2,)."""
    a = np.array([[[0.0, 0.0, 0.0], [GAP, 0.0, 0.0]]])
    b = a + np.array([0.0, 0.0, 1.0])
    return a, b, np.full(2, RADIUS)


def _two_capsules_torch():
    a, b, r = _two_capsules()
    return torch.tensor(a), torch.tensor(b), torch.tensor(r)


# -- capsule pairs ------------------------------------------------------------------------------------------------
def test_valid_pairs_give_the_closed_form_penalty():
    """Control for the checks below: in-range pairs of several integer dtypes still give (2r - gap)^2."""
    a, b, r = _two_capsules()
    np.testing.assert_allclose(capsule_penetration(a, b, r, [(0, 1)])[1], [EXPECTED_PENALTY], atol=FWD_TOL)
    ta, tb, tr = _two_capsules_torch()
    for dtype in (torch.int64, torch.int32, torch.int16, torch.uint8):
        pen = capsule_penalty_torch(ta, tb, tr, torch.tensor([[0, 1]], dtype=dtype))
        np.testing.assert_allclose(pen.numpy(), [EXPECTED_PENALTY], atol=FWD_TOL)
    empty = capsule_penalty_torch(ta, tb, tr, torch.zeros((0, 2), dtype=torch.int64))
    np.testing.assert_array_equal(empty.numpy(), [0.0])


@pytest.mark.parametrize("index", [*BAD_INDICES, WRAPPING_INDEX])
def test_torch_capsule_pairs_out_of_range_raise(index):
    ta, tb, tr = _two_capsules_torch()
    with pytest.raises(ValueError, match=r"pairs: capsule index out of range \[0, 2\)"):
        capsule_penalty_torch(ta, tb, tr, torch.tensor([[0, 1], [0, index]]))


@pytest.mark.parametrize("index", [*BAD_INDICES, WRAPPING_INDEX])
def test_numpy_capsule_pairs_out_of_range_raise(index):
    a, b, r = _two_capsules()
    pairs = np.array([[0, 1], [index, 1]], dtype=np.int64)
    with pytest.raises(ValueError, match=r"pairs: capsule index out of range \[0, 2\)"):
        capsule_penetration(a, b, r, pairs)
    with pytest.raises(ValueError, match=r"pairs: capsule index out of range \[0, 2\)"):
        max_capsule_penetration(a, b, r, pairs)


def test_capsule_paired_with_itself_is_refused():
    """A pair (i, i) was accepted and counted a 2r overlap no pose can remove."""
    a, b, r = _two_capsules()
    with pytest.raises(ValueError, match=r"pairs: pair 1 pairs capsule 1 with itself"):
        capsule_penetration(a, b, r, np.array([[0, 1], [1, 1]]))
    ta, tb, tr = _two_capsules_torch()
    with pytest.raises(ValueError, match=r"pairs: pair 0 pairs capsule 0 with itself"):
        capsule_penalty_torch(ta, tb, tr, torch.tensor([[0, 0]]))


@pytest.mark.parametrize("index", [2, 50, -1])
def test_warp_capsule_pairs_out_of_range_raise(index):
    init_warp()
    a, b, r = _two_capsules()
    args = (
        wp.array(a, dtype=wp.vec3d, device="cpu"),
        wp.array(b, dtype=wp.vec3d, device="cpu"),
        wp.array(r, dtype=wp.float64, device="cpu"),
    )
    with pytest.raises(ValueError, match=r"pairs: capsule index out of range \[0, 2\)"):
        capsule_penetration_penalty(*args, wp.array([[0, index]], dtype=wp.int32, device="cpu"))
    # in range: the closed form
    _, pen = capsule_penetration_penalty(*args, wp.array([[0, 1]], dtype=wp.int32, device="cpu"))
    np.testing.assert_allclose(pen.numpy(), [EXPECTED_PENALTY], atol=FWD_TOL)


def test_torch_capsule_arguments_of_the_wrong_type_raise():
    ta, tb, tr = _two_capsules_torch()
    pairs = torch.tensor([[0, 1]])
    with pytest.raises(TypeError, match=r"pairs: expected an integer torch.Tensor.*got dtype torch.float32"):
        capsule_penalty_torch(ta, tb, tr, torch.tensor([[0.0, 1.0]]))
    with pytest.raises(TypeError, match=r"pairs: expected an integer torch.Tensor.*got numpy.ndarray"):
        capsule_penalty_torch(ta, tb, tr, np.array([[0, 1]]))
    with pytest.raises(ValueError, match=r"pairs: expected shape \(P, 2\), got \(1, 3\)"):
        capsule_penalty_torch(ta, tb, tr, torch.tensor([[0, 1, 1]]))
    with pytest.raises(TypeError, match=r"seg_a: expected a floating-point torch.Tensor.*got numpy.ndarray"):
        capsule_penalty_torch(ta.numpy(), tb, tr, pairs)
    with pytest.raises(TypeError, match=r"seg_b: expected a floating-point torch.Tensor.*got list"):
        capsule_penalty_torch(ta, tb.tolist(), tr, pairs)
    with pytest.raises(TypeError, match=r"radii: expected a floating-point torch.Tensor.*got float"):
        capsule_penalty_torch(ta, tb, RADIUS, pairs)


def test_numpy_capsule_bad_values_raise():
    a, b, r = _two_capsules()
    with pytest.raises(ValueError, match=r"pairs: expected integer capsule indices, got dtype float64"):
        capsule_penetration(a, b, r, [(0.0, 1.5)])
    nan_a = a.copy()
    nan_a[0, 1, 2] = np.nan
    with pytest.raises(ValueError, match=r"seg_a: non-finite value at index \(0, 1, 2\)"):
        capsule_penetration(nan_a, b, r, [(0, 1)])
    with pytest.raises(ValueError, match=r"seg_b: non-finite value at index \(0, 1, 2\)"):
        capsule_penetration(a, nan_a + 1.0, r, [(0, 1)])
    with pytest.raises(ValueError, match=r"radii: non-finite value at index \(1,\)"):
        capsule_penetration(a, b, [RADIUS, np.inf], [(0, 1)])
    with pytest.raises(ValueError, match=r"radii: must be >= 0"):
        capsule_penetration(a, b, [RADIUS, -RADIUS], [(0, 1)])


# -- ground ---------------------------------------------------------------------------------------------------------
def test_ground_nan_points_raise():
    """A NaN coordinate used to count as above the ground (depth 0)."""
    with pytest.raises(ValueError, match=r"points: non-finite value at index \(0, 0, 2\)"):
        ground_penetration([[0.0, 0.0, np.nan]])
    with pytest.raises(ValueError, match=r"points: non-finite value at index \(1, 0, 0\)"):
        ground_penetration(np.array([[[0.0, 0.0, -1.0]], [[-np.inf, 0.0, 0.0]]]))
    with pytest.raises(ValueError, match=r"ground_height: must be finite, got nan"):
        ground_penetration([[0.0, 0.0, -1.0]], ground_height=np.nan)
    with pytest.raises(ValueError, match=r"ground_height: must be finite, got nan"):
        ground_penalty_torch(torch.zeros(1, 1, 3), float("nan"))
    with pytest.raises(TypeError, match=r"points: expected a floating-point torch.Tensor.*got numpy.ndarray"):
        ground_penalty_torch(np.zeros((1, 1, 3)))
    # control: a finite point 1 m below the ground
    np.testing.assert_allclose(ground_penetration([[0.0, 0.0, -1.0]])[1], [1.0], atol=FWD_TOL)


# -- kinematics: meshes ---------------------------------------------------------------------------------------------
def _mesh(name: str, rng: np.random.Generator, joints: np.ndarray) -> sim.SkinnedMesh:
    """A triangle-fan mesh with the given influence joints (V, K), no joint-count check at construction."""
    v = len(joints)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sim.RigWarning)
        return sim.SkinnedMesh(
            name,
            rng.normal(size=(v, 3)),
            [[0, i, i + 1] for i in range(1, v - 1)],
            joints,
            rng.random(joints.shape) + 0.1,
        )


def test_mesh_with_out_of_range_joints_raises_rig_error(rng):
    """A mesh whose influences index joints the rig lacks (a mesh of a bigger rig) used to give a bare IndexError."""
    rig = make_rig(rng)
    joints = rng.integers(0, rig.joint_count, (10, 2))
    joints[4, 1] = rig.joint_count + 3
    mesh = _mesh("other_body", rng, joints)
    motion = sim.Motion.rest(rig, 2)
    pattern = rf"mesh 'other_body' influence_joints: joint index {rig.joint_count + 3} out of range \[0, 6\)"
    with pytest.raises(sim.RigError, match=pattern):
        sim.skin_motion(rig, motion, mesh=mesh)
    with pytest.raises(sim.RigError, match=pattern):
        sim.RigArrays(rig, mesh=mesh)


def test_extra_mesh_that_fits_the_rig_is_skinned(rng):
    """A mesh that is not one of rig.meshes but indexes only the rig's joints is allowed, and skinned right."""
    rig = make_rig(rng)
    mesh = _mesh("extra", rng, rng.integers(0, rig.joint_count, (12, 3)))
    assert all(mesh is not m for m in rig.meshes)
    motion = sim.Motion(30, rng.normal(size=(2, 3)), quat_normalize(rng.normal(size=(2, rig.joint_count, 4))))
    points, normals = sim.skin_motion(rig, motion, mesh=mesh)
    world = fk_reference(rig.parents, motion.local_translations(rig), motion.rotations)
    np.testing.assert_allclose(points, lbs_reference(rig, mesh, world), atol=SKIN_TOL)
    np.testing.assert_allclose(normals, lbs_normals_reference(rig, mesh, world), atol=SKIN_TOL)


def test_mesh_of_the_wrong_type_raises(rng):
    rig = make_rig(rng)
    with pytest.raises(TypeError, match=r"mesh: expected sim.SkinnedMesh, 'merged' or None, got int"):
        sim.skin_motion(rig, sim.Motion.rest(rig, 1), mesh=3)


# -- kinematics: argument types ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def quadruped():
    usd_io = pytest.importorskip("usd_io")
    return usd_io.load_asset("procedural:quadruped")


@pytest.mark.parametrize("fn", [sim.pose_motion, sim.skin_motion])
def test_asset_or_swapped_arguments_raise_type_error(quadruped, fn):
    motion = quadruped.clip("walk").slice(0, 2)
    with pytest.raises(TypeError, match=r"^rig: expected sim.Rig, got usd_io.Asset \(use asset.rig\)$"):
        fn(quadruped, motion)
    with pytest.raises(TypeError, match=r"^rig: expected sim.Rig, got sim.Motion \(the rig comes first"):
        fn(motion, quadruped.rig)
    with pytest.raises(TypeError, match=r"^motion: expected sim.Motion, got usd_io.Asset \(use asset.clip"):
        fn(quadruped.rig, quadruped)
    with pytest.raises(TypeError, match=r"^motion: expected sim.Motion, got NoneType$"):
        fn(quadruped.rig, None)


def test_warp_level_functions_want_rig_arrays(rng):
    init_warp()
    rig = make_rig(rng)
    t = wp.zeros((1, rig.joint_count), dtype=wp.vec3d)
    q = wp.zeros((1, rig.joint_count), dtype=wp.quatd)
    with pytest.raises(TypeError, match=r"arrays: expected sim.RigArrays .*got sim.Rig"):
        sim.forward_kinematics(rig, t, q)
    with pytest.raises(TypeError, match=r"arrays: expected sim.RigArrays .*got sim.Rig"):
        sim.skin(rig, wp.zeros((1, rig.joint_count), dtype=wp.transformd))
    with pytest.raises(TypeError, match=r"^rig: expected sim.Rig, got dict$"):
        sim.RigArrays({"parents": rig.parents})


def test_torch_rig_wants_tensors(rng, quadruped):
    rig = make_rig(rng)
    trig = TorchRig(rig, dtype=torch.float64)
    J = rig.joint_count
    root, rot = np.zeros(3), np.tile([0.0, 0.0, 0.0, 1.0], (J, 1))
    with pytest.raises(TypeError, match=rf"rotations: expected a torch.Tensor of shape \(\.\.\., {J}, 4\).*numpy"):
        trig.forward_kinematics(torch.as_tensor(root), rot)
    with pytest.raises(TypeError, match=r"root_translation: expected a torch.Tensor of shape \(\.\.\., 3\).*got list"):
        trig.forward_kinematics([0.0, 0.0, 0.0], torch.as_tensor(rot))
    with pytest.raises(TypeError, match=rf"translations: expected a torch.Tensor of shape \(\.\.\., {J}, 3\)"):
        trig.forward_kinematics(torch.as_tensor(root), torch.as_tensor(rot), translations=rig.rest_translations)
    with pytest.raises(TypeError, match=rf"world: expected a torch.Tensor of shape \(\.\.\., {J}, 7\).*numpy"):
        trig.skin(np.zeros((1, J, 7)))
    with pytest.raises(TypeError, match=r"^rig: expected sim.Rig, got usd_io.Asset \(use asset.rig\)$"):
        TorchRig(quadruped)
    # control: tensors work, and the rest pose puts the root at the given root translation
    world = trig.forward_kinematics(torch.as_tensor(root), torch.as_tensor(rot))
    np.testing.assert_allclose(world[0, :3].numpy(), root, atol=SKIN_TOL)


def test_a_rig_without_extent_is_refused_naming_it():
    """A meshless rig whose joints all sit at one point (a one-joint BVH, an End Site at OFFSET 0 0 0) has no
    height to scale to a real size and no size for the audit's contact bands: RigErrors naming the rig, not a
    ZeroDivisionError."""
    from sim.audit import audit_motion
    from sim.physics import prepare_reference

    flat = sim.Rig(["root", "root_end"], [-1, 0], [[0, 0, 1.0], [0, 0, 0]], [[0, 0, 0, 1]] * 2, name="flat")
    motion = sim.Motion.rest(flat, 5)
    assert flat.height() == 0.0
    with pytest.raises(sim.RigError, match="rig 'flat': no height to scale to target_height_m"):
        prepare_reference(flat, motion, target_height_m=1.7)
    with pytest.raises(sim.RigError, match="rig 'flat': its bind-pose skeleton has no extent"):
        audit_motion(flat, motion)
