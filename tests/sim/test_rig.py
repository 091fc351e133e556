"""Rig / SkinnedMesh / Motion construction: validation and repair."""

from __future__ import annotations

import numpy as np
import pytest

from sim import Motion, Rig, RigError, RigWarning, SkinnedMesh
from sim.rotations import axis_angle_to_quat, quat_identity


def chain_rig(count=3, **kw):
    t = np.zeros((count, 3))
    t[1:, 2] = 1.0
    return Rig([f"j{i}" for i in range(count)], [-1, *range(count - 1)], t, quat_identity((count,)), **kw)


def tri_mesh(joints, weights, count=3):
    return SkinnedMesh("m", np.eye(3), [[0, 1, 2]], joints, weights, joint_count=count)


def test_rest_world_and_bind():
    rot = np.stack([axis_angle_to_quat([0, 0, np.pi / 2])] + [quat_identity()] * 2)
    t = np.array([[1.0, 0, 0], [1.0, 0, 0], [0, 2.0, 0]])
    rig = Rig(["a", "b", "c"], [-1, 0, 1], t, rot)
    pos, _ = rig.rest_world_transforms()
    # root rotated 90 deg about z: child's +x offset becomes +y
    np.testing.assert_allclose(pos, [[1, 0, 0], [1, 1, 0], [-1, 1, 0]], atol=1e-12)
    np.testing.assert_allclose(rig.bind_world_matrices(), rig.rest_world_matrices(), atol=1e-12)
    np.testing.assert_allclose(rig.bone_lengths(), [0, 1, 2])
    assert rig.depths().tolist() == [0, 1, 2]
    assert rig.children() == [[1], [2], []]


@pytest.mark.parametrize(
    ("parents", "message"),
    [
        ([-1, 0, -1], "several root joints"),
        ([1, 2, 0], "no root joint"),
        ([-1, 2, 0], "listed before its parent"),
        ([-1, 2, 1], "cycle"),
        ([-1, 1, 0], "its own parent"),
        ([1, -1, 1], "listed before its parent"),
        ([-1, 0, 7], "out of range"),
        ([-1, -2, 0], r"parents\[1\] = -2 is out of range"),  # counted as a second root before
        ([-5, 0, 0], r"parents\[0\] = -5 is out of range"),
    ],
)
def test_bad_trees_are_rejected(parents, message):
    with pytest.raises(RigError, match=message):
        Rig(["a", "b", "c"], parents, np.zeros((3, 3)), quat_identity((3,)))


def test_bad_fields_are_named():
    with pytest.raises(RigError, match="rest_translations: expected shape"):
        Rig(["a", "b"], [-1, 0], np.zeros((3, 3)), quat_identity((2,)))
    with pytest.raises(RigError, match=r"rest_translations: non-finite value at index \(1, 2\)"):
        Rig(["a", "b"], [-1, 0], [[0, 0, 0], [0, 0, np.nan]], quat_identity((2,)))
    with pytest.raises(RigError, match="duplicate joint name 'a'"):
        Rig(["a", "a"], [-1, 0], np.zeros((2, 3)), quat_identity((2,)))
    with pytest.raises(RigError, match="rest_rotations: zero-length"):
        Rig(["a"], [-1], np.zeros((1, 3)), np.zeros((1, 4)))


def test_mesh_validation():
    with pytest.raises(RigError, match="references a joint outside"):
        tri_mesh([[0], [1], [5]], [[1.0], [1.0], [1.0]])
    with pytest.raises(RigError, match="NaN weight at vertex 1"):
        tri_mesh([[0], [1], [2]], [[1.0], [np.nan], [1.0]])
    with pytest.raises(RigError, match="all weights zero at vertex 2"):
        tri_mesh([[0], [1], [2]], [[1.0], [1.0], [0.0]])
    with pytest.raises(RigError, match="negative weight"):
        tri_mesh([[0, 1], [1, 2], [2, 0]], [[1.2, -0.2], [1, 0], [1, 0]])
    with pytest.raises(RigError, match="triangles: vertex index out of range"):
        SkinnedMesh("m", np.eye(3), [[0, 1, 3]], [[0], [0], [0]], [[1.0], [1.0], [1.0]])
    with pytest.raises(RigError, match=r"must both be \(vertex_count=3, K\)"):
        tri_mesh([[0, 1], [1, 2], [2, 0]], [[1.0], [1.0], [1.0]])
    # a mesh referencing a joint the rig does not have
    mesh = SkinnedMesh("m", np.eye(3), [[0, 1, 2]], [[0], [1], [4]], [[1.0], [1.0], [1.0]])
    with pytest.raises(RigError, match="index 4 >= 3 joints"):
        chain_rig(meshes=[mesh])
    # a negative index was accepted (NumPy wraps it to the last joint) and failed later blaming "another rig"
    mesh = SkinnedMesh("m", np.eye(3), [[0, 1, 2]], [[0], [1], [-1]], [[1.0], [1.0], [1.0]])
    with pytest.raises(RigError, match="mesh 'm' influence_joints: negative index -1"):
        chain_rig(meshes=[mesh])


def test_weights_renormalized_with_warning_and_padding_ignored():
    with pytest.warns(RigWarning, match="1 vertices have weights not summing to 1"):
        mesh = tri_mesh([[0, 1], [1, 99], [2, 0]], [[0.5, 0.5], [1.0, 0.0], [1.5, 0.5]])
    np.testing.assert_allclose(mesh.influence_weights.sum(axis=1), 1.0)
    np.testing.assert_allclose(mesh.influence_weights[2], [0.75, 0.25])
    assert mesh.influence_joints[1, 1] == 0  # zero-weight padding index 99 is harmless


def test_merged_mesh_keeps_order_and_pads():
    a = SkinnedMesh("a", np.eye(3), [[0, 1, 2]], [[0], [1], [2]], [[1.0]] * 3)
    b = SkinnedMesh("b", np.eye(3) * 2, [[0, 2, 1]], [[0, 1], [1, 2], [2, 0]], [[0.5, 0.5]] * 3)
    merged = chain_rig(meshes=[a, b]).merged_mesh()
    np.testing.assert_allclose(merged.points, np.concatenate([np.eye(3), 2 * np.eye(3)]))
    assert merged.triangles.tolist() == [[0, 1, 2], [3, 5, 4]]
    assert merged.influence_count == 2
    np.testing.assert_allclose(merged.influence_weights[:3], [[1, 0]] * 3)


def test_motion_validation_and_sampling():
    rig = chain_rig()
    rot = np.broadcast_to(quat_identity((3,)), (4, 3, 4))
    with pytest.raises(RigError, match="root_translations: expected shape"):
        Motion(30, np.zeros((3, 3)), rot)
    with pytest.raises(RigError, match="times: must be strictly increasing"):
        Motion(30, np.zeros((4, 3)), rot, times=[0, 1, 1, 2])
    with pytest.raises(RigError, match="fps: must be a positive"):
        Motion(0, np.zeros((4, 3)), rot)
    m = Motion(10, np.arange(12.0).reshape(4, 3), rot)
    assert m.is_uniform() and m.duration == pytest.approx(0.3)
    half = m.sample([0.05])
    np.testing.assert_allclose(half.root_translations, [[1.5, 2.5, 3.5]])
    one = m.sample(0.05)  # a scalar time: a one-frame motion (an IndexError before)
    assert one.frame_count == 1
    np.testing.assert_allclose(one.root_translations, [[1.5, 2.5, 3.5]])
    np.testing.assert_allclose(m.resample(20).root_translations[1], [1.5, 2.5, 3.5])
    with pytest.raises(RigError, match="has 2 joints but rig"):
        Motion(10, np.zeros((1, 3)), quat_identity((1, 2))).check_rig(rig)
    # local translations: rest for non-root joints, root replaced
    lt = m.local_translations(rig)
    np.testing.assert_allclose(lt[:, 1:], np.broadcast_to(rig.rest_translations[1:], (4, 2, 3)))
    np.testing.assert_allclose(lt[:, 0], m.root_translations)


def test_resample_keeps_the_last_frame_of_float32_key_times():
    """glTF key times are float32: an 18-frame 24 fps clip ends at float32(17/24), 5.6e-7 frames before the grid
    point 17/24, and resampling at 24 fps dropped its last frame (17 of 18). It is kept, at the clip's end."""
    frames, fps = 18, 24.0
    times = (np.arange(frames) / fps).astype(np.float32).astype(np.float64)
    assert times[-1] < (frames - 1) / fps  # the construction: float32 rounds this end down
    root = np.arange(frames)[:, None] * np.array([1.0, 0.0, 0.0])  # x = key index
    m = Motion(fps, root, quat_identity((frames, 2)), times=times)
    r = m.resample(fps)
    assert r.frame_count == frames
    assert r.times[-1] == times[-1]  # clamped to the end, not past it
    np.testing.assert_allclose(r.root_translations[:, 0], np.arange(frames), atol=1e-4)  # key k at k / fps
    assert r.root_translations[-1, 0] == frames - 1
    # a clip really short of its last grid point (by 1e-3 frames) still ends at the grid point before
    short = Motion(fps, root, quat_identity((frames, 2)), times=np.r_[times[:-1], (frames - 1 - 1e-3) / fps])
    assert short.resample(fps).frame_count == frames - 1


@pytest.mark.parametrize("fps", [0.0, -10.0, float("nan"), float("inf")])
def test_resample_rejects_a_bad_rate(fps):
    m = Motion(10, np.zeros((3, 3)), quat_identity((3, 2)), name="clip")
    with pytest.raises(RigError, match=r"motion 'clip' resample fps: must be a positive number"):
        m.resample(fps)  # 0 and NaN used to build a NaN clip that failed later as "non-finite rotations"


def test_float32_key_times_are_uniform_and_so_is_their_resample():
    # a fixed 1e-6-frame tolerance: 292 float32 frames at 30 fps were not uniform, nor their resample (tracking
    # then asked to "resample it first", which did not help)
    n = 292
    times = (np.arange(n) / 30.0).astype(np.float32).astype(np.float64)
    m = Motion(30, np.zeros((n, 3)), quat_identity((n, 1)), times=times)
    assert m.is_uniform() and m.resample(30.0).is_uniform()
    skipped = Motion(30, np.zeros((n - 1, 3)), quat_identity((n - 1, 1)), times=np.delete(times, 100))
    assert not skipped.is_uniform()
    off = times.copy()
    off[5] += 0.01 / 30.0  # a hundredth of a frame off near the start
    assert not Motion(30, np.zeros((n, 3)), quat_identity((n, 1)), times=off).is_uniform()


_Z3, _I3 = np.zeros((3, 3)), quat_identity((3,))


@pytest.mark.parametrize(
    ("make", "message"),
    [
        # floats were truncated (0.9 -> 0, 1.7 -> 1), 2**32 wrapped to 0
        (lambda: Rig(["a", "b", "c"], [-1, 0.9, 1.7], _Z3, _I3), r"parents: expected integer indices, got 0\.9"),
        (lambda: Rig(["a", "b", "c"], [-1, 0, 2**32], _Z3, _I3), r"parents: index out of the int32 range"),
        (
            lambda: SkinnedMesh("m", np.eye(3), [[0, 1, 2**32 + 2]], [0, 0, 0], [1, 1, 1]),
            r"mesh 'm' triangles: index out of the int32",
        ),
        (
            lambda: SkinnedMesh("m", np.eye(3), [[0, 1, 2]], [0, 0.5, 1.9], [1, 1, 1]),
            r"influence_joints: expected integer indices, got 0\.5",
        ),
        (lambda: Motion(True, np.zeros((2, 3)), quat_identity((2, 1))), r"fps: must be a positive number, got True"),
        (lambda: Motion("30", np.zeros((2, 3)), quat_identity((2, 1))), r"fps: must be a positive number, got '30'"),
    ],
)
def test_indices_and_rates_of_the_wrong_kind_are_refused(make, message):
    with pytest.raises(RigError, match=message):
        make()
    with pytest.raises(RigError, match=r"resample fps: must be a positive number, got True"):
        Motion(10, np.zeros((3, 3)), quat_identity((3, 2))).resample(True)
    assert Rig(["a", "b"], np.array([-1.0, 0.0]), np.zeros((2, 3)), quat_identity((2,))).parents.tolist() == [-1, 0]


def test_projective_inverse_bind_matrices_are_refused():
    # skinning reads the top three rows: a bottom row [0.3, 0, 0, 2] was dropped without a word
    ibm = np.tile(np.eye(4), (3, 1, 1))
    ibm[1, 3] = [0.3, 0.0, 0.0, 2.0]
    with pytest.raises(RigError, match=r"inverse_bind_matrices: joint 1 \('j1'\) has bottom row \[0\.3, 0\.0, 0"):
        chain_rig(inverse_bind_matrices=ibm)
