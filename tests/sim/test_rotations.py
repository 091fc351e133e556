"""Rotation conversions against closed-form facts and each other."""

from __future__ import annotations

import numpy as np
import pytest

from sim import rotations as R

TOL = 1e-12


def random_quats(rng, n):
    return R.quat_normalize(rng.normal(size=(n, 4)))


def test_quarter_turn_about_z_maps_x_to_y():
    q = R.axis_angle_to_quat([0.0, 0.0, np.pi / 2])
    np.testing.assert_allclose(R.quat_rotate(q, [1.0, 0.0, 0.0]), [0.0, 1.0, 0.0], atol=TOL)
    np.testing.assert_allclose(R.quat_to_matrix(q) @ [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], atol=TOL)
    np.testing.assert_allclose(q, [0.0, 0.0, np.sin(np.pi / 4), np.cos(np.pi / 4)], atol=TOL)


def test_matrix_round_trip_covers_every_branch(rng):
    # rotations by ~pi about each axis exercise the diagonal branches of matrix_to_quat
    qs = np.concatenate(
        [random_quats(rng, 200), R.axis_angle_to_quat(np.eye(3) * (np.pi - 1e-3)), R.quat_identity((1,))]
    )
    back = R.matrix_to_quat(R.quat_to_matrix(qs))
    np.testing.assert_allclose(back, qs, atol=1e-9)


def test_matrices_are_proper_rotations(rng):
    m = R.quat_to_matrix(rng.normal(size=(50, 4)))  # non-unit input is normalized
    np.testing.assert_allclose(m @ np.swapaxes(m, -1, -2), np.broadcast_to(np.eye(3), m.shape), atol=1e-12)
    np.testing.assert_allclose(np.linalg.det(m), 1.0, atol=1e-12)


def test_multiply_composes_like_matrices(rng):
    a, b = random_quats(rng, 20), random_quats(rng, 20)
    np.testing.assert_allclose(
        R.quat_to_matrix(R.quat_multiply(a, b)), R.quat_to_matrix(a) @ R.quat_to_matrix(b), atol=1e-12
    )
    np.testing.assert_allclose(
        R.quat_multiply(a, R.quat_conjugate(a)), np.broadcast_to([0, 0, 0, 1.0], a.shape), atol=1e-12
    )


def test_axis_angle_round_trip_and_small_angles(rng):
    aa = rng.normal(size=(100, 3))
    aa *= (rng.uniform(0, np.pi - 1e-3, size=(100, 1))) / np.linalg.norm(aa, axis=-1, keepdims=True)
    np.testing.assert_allclose(R.quat_to_axis_angle(R.axis_angle_to_quat(aa)), aa, atol=1e-9)
    tiny = np.array([[1e-10, -2e-10, 3e-10]])
    np.testing.assert_allclose(R.quat_to_axis_angle(R.axis_angle_to_quat(tiny)), tiny, rtol=1e-6)


def test_rot6d_round_trip_and_gram_schmidt(rng):
    q = random_quats(rng, 100)
    np.testing.assert_allclose(R.rot6d_to_quat(R.quat_to_rot6d(q)), q, atol=1e-10)
    # any non-degenerate 6D vector maps to a proper rotation whose first column is the normalized first 3
    d6 = rng.normal(size=(100, 6))
    m = R.rot6d_to_matrix(d6)
    np.testing.assert_allclose(np.linalg.det(m), 1.0, atol=1e-12)
    np.testing.assert_allclose(m[..., 0], d6[:, :3] / np.linalg.norm(d6[:, :3], axis=-1, keepdims=True), atol=1e-12)


@pytest.mark.parametrize("order", ["ZYX", "XYZ", "YXZ", "ZXY"])
def test_euler_is_product_of_axis_rotations_in_listed_order(rng, order):
    angles = rng.uniform(-np.pi, np.pi, size=(10, 3))
    basis = {"X": 0, "Y": 1, "Z": 2}

    def axis_matrix(axis, a):
        c, s = np.cos(a), np.sin(a)
        i, j = [k for k in range(3) if k != basis[axis]]
        m = np.eye(3)
        m[i, i], m[i, j], m[j, i], m[j, j] = c, -s, s, c
        if axis == "Y":  # (z, x) plane
            m[i, j], m[j, i] = s, -s
        return m

    for a in angles:
        expected = axis_matrix(order[0], a[0]) @ axis_matrix(order[1], a[1]) @ axis_matrix(order[2], a[2])
        np.testing.assert_allclose(R.quat_to_matrix(R.euler_to_quat(a, order)), expected, atol=1e-12)


def test_slerp_endpoints_midpoint_and_shortest_arc():
    a = R.quat_identity()
    b = R.axis_angle_to_quat([0.0, 0.0, np.pi / 2])
    np.testing.assert_allclose(R.quat_slerp(a, b, 0.0), a, atol=TOL)
    np.testing.assert_allclose(R.quat_slerp(a, b, 1.0), b, atol=TOL)
    np.testing.assert_allclose(R.quat_slerp(a, b, 0.5), R.axis_angle_to_quat([0, 0, np.pi / 4]), atol=1e-12)
    # -b is the same rotation: the shortest arc must give the same midpoint rotation
    mid = R.quat_slerp(a, -b, 0.5)
    np.testing.assert_allclose(R.quat_to_matrix(mid), R.quat_to_matrix(R.axis_angle_to_quat([0, 0, np.pi / 4])))


def test_normalize_rejects_zero():
    with pytest.raises(ValueError, match="zero or non-finite"):
        R.quat_normalize([0.0, 0.0, 0.0, 0.0])


@pytest.mark.parametrize(
    "d6",
    [[0, 0, 0, 0, 1, 0], [1, 0, 0, 2, 0, 0], [1, 0, 0, 0, 0, 0], [np.nan, 0, 0, 0, 1, 0], [np.inf, 0, 0, 0, 1, 0]],
)
def test_rot6d_without_a_rotation_is_refused(d6):
    """A zero first half, parallel halves or a non-finite entry name the 6D input (NaN matrices before, or a
    quaternion-norm error that named the wrong thing)."""
    batch = np.stack([[1.0, 0, 0, 0, 1, 0], d6])
    with pytest.raises(ValueError, match=r"6D rotation\[1\] .* must be finite, non-zero and not parallel"):
        R.rot6d_to_matrix(batch)
    with pytest.raises(ValueError, match="6D rotation"):
        R.rot6d_to_quat(batch)


def test_transform_matrix_broadcasts_a_batched_scale(rng):
    q = random_quats(rng, 1)[0]
    scale = np.array([[1.0, 2.0, 3.0], [0.5, 0.5, 0.5]])
    m = R.transform_matrix(np.zeros(3), q, scale)  # one rotation, two scales (a broadcast error before)
    assert m.shape == (2, 4, 4)
    for k in range(2):
        np.testing.assert_allclose(m[k, :3, :3], R.quat_to_matrix(q) @ np.diag(scale[k]), atol=TOL)


def test_lower_case_euler_orders_zero_quaternions_and_scalar_scales():
    # "xyz" was read as intrinsic XYZ (scipy's lower case is extrinsic: up to 1.26 off per component); a zero
    # quaternion became an all-NaN matrix; a scalar scale raised IndexError
    with pytest.raises(ValueError, match=r"unknown axis 'x' in order 'xyz' \(intrinsic axes are upper case"):
        R.euler_to_quat(np.zeros(3), "xyz")
    with pytest.raises(ValueError, match="quat_to_matrix: quaternion with zero norm"):
        R.quat_to_matrix(np.zeros(4))
    q = R.axis_angle_to_quat(np.array([0.0, 0.0, 0.5]))
    m = R.transform_matrix([1.0, 2.0, 3.0], q, 2.0)
    np.testing.assert_allclose(m, R.transform_matrix([1.0, 2.0, 3.0], q, [2.0, 2.0, 2.0]), atol=1e-15)
    np.testing.assert_allclose(m[:3, :3], 2.0 * R.quat_to_matrix(q), atol=1e-15)
