"""Trajectory parameterization, clip sampling, metrics and regularizers."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest
import torch

import sim
from distill import Trajectory, body_root_joint, catmull_rom_basis
from distill.losses import SelfCollisionCapsules, ground_penalty, smoothness
from distill.metrics import joint_angle_errors, motion_error
from distill.trajectory import sample_clip
from sim.rotations import axis_angle_to_quat, quat_multiply

TOL = 1e-6
LOOP_TOL = 1e-9  # [m] / [unitless quat]: float64 rigid placement of a looped cycle


def test_catmull_rom_basis_interpolates_keys_and_partitions_unity():
    basis = catmull_rom_basis(13, 5)  # keys land on frames 0, 3, 6, 9, 12
    np.testing.assert_allclose(basis.sum(1), 1.0, atol=1e-12)
    np.testing.assert_allclose(basis[::3], np.eye(5), atol=1e-12)
    keys = np.array([0.0, 1.0, 2.0, 3.0, 4.0])  # linear data stays linear
    np.testing.assert_allclose(basis @ keys, np.linspace(0, 4, 13), atol=1e-12)
    np.testing.assert_array_equal(catmull_rom_basis(4, 9), np.eye(4))


def test_trajectory_reproduces_its_init_motion(make_chain, make_motion):
    rig = make_chain()
    motion = make_motion(rig, 7)
    out = Trajectory(rig, motion).to_motion()
    np.testing.assert_allclose(joint_angle_errors(out, motion), 0.0, atol=1e-3)
    np.testing.assert_allclose(out.root_translations, motion.root_translations, atol=TOL)
    np.testing.assert_allclose(out.times, motion.times, atol=TOL)
    assert out.translations is None


def test_keyframe_trajectory_is_smooth_and_differentiable(make_chain, make_motion):
    rig = make_chain()
    traj = Trajectory(rig, make_motion(rig, 13), key_count=5)
    assert traj.rotations_6d.shape == (5, rig.joint_count, 6) and traj.translation.shape == (5, 3)
    world = traj.world(sim.torch_ops.TorchRig(rig))
    world[..., :3].sum().backward()
    assert traj.rotations_6d.grad.abs().max() > 0 and traj.translation.grad.abs().max() > 0


def test_non_integer_key_count_is_refused(make_chain, make_motion):
    """key_count=2.7 was truncated to 2 keys without a word."""
    rig = make_chain()
    motion = make_motion(rig, 13)
    for bad in (2.7, True, "5"):
        with pytest.raises(ValueError, match="key_count: must be an integer"):
            Trajectory(rig, motion, key_count=bad)
    assert Trajectory(rig, motion, key_count=np.int64(5)).rotations_6d.shape[0] == 5


def _container_rig(make_chain):
    """The chain with two static joints above it (glTF style: _rootJoint -> b_Root -> chain)."""
    base = make_chain()
    count = base.joint_count + 2
    parents = [-1, 0, *[p + 2 if p >= 0 else 1 for p in base.parents]]
    rest_t = np.concatenate([[[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], base.rest_translations])
    rest_q = np.concatenate([[[0, 0, 0, 1.0], [0, 0, 0, 1.0]], base.rest_rotations])
    m = base.meshes[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sim.RigWarning)
        mesh = sim.SkinnedMesh("tube", m.points, m.triangles, m.influence_joints + 2, m.influence_weights)
    return sim.Rig([f"k{i}" for i in range(count)], parents, rest_t, rest_q, None, [mesh])


def test_body_root_skips_static_container_joints(make_chain, make_motion):
    assert body_root_joint(make_chain()) == 0
    rig = _container_rig(make_chain)
    assert body_root_joint(rig) == 2
    traj = Trajectory(rig, sim.Motion.rest(rig, 4))
    np.testing.assert_array_equal(traj.joints, np.arange(2, rig.joint_count))
    with torch.no_grad():
        traj.translation += torch.tensor([0.1, 0.2, 0.3])
    out = traj.to_motion()
    assert out.translations is not None
    expected = np.broadcast_to(rig.rest_translations[2] + [0.1, 0.2, 0.3], (4, 3))
    np.testing.assert_allclose(out.translations[:, 2], expected, atol=TOL)
    np.testing.assert_allclose(out.rotations[:, :2], np.broadcast_to(rig.rest_rotations[:2], (4, 2, 4)), atol=TOL)


def test_sample_clip_loops_a_cycle(make_chain, make_motion):
    rig = make_chain()
    clip = make_motion(rig, 9, fps=12.0)  # 0.667 s, not a closed cycle
    with pytest.warns(UserWarning, match="not a closed cycle"):
        out = sample_clip(clip, 13, 12.0)
    assert out.frame_count == 13 and out.fps == 12.0
    np.testing.assert_allclose(out.rotations[:8], clip.rotations[:8], atol=TOL)
    wrapped = clip.sample(clip.times[0] + np.array([12 / 12.0 - clip.duration]))
    np.testing.assert_allclose(np.abs((out.rotations[12] * wrapped.rotations[0]).sum(-1)), 1.0, atol=TOL)
    held = sample_clip(clip, 13, 12.0, loop=False)
    np.testing.assert_allclose(held.rotations[12], clip.rotations[-1], atol=TOL)


def _same_rotations(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Largest quaternion-component difference per frame, q and -q being the same rotation."""
    return np.minimum(np.abs(a - b).max(-1), np.abs(a + b).max(-1)).max(-1)


def test_sample_clip_continues_a_walk_instead_of_jumping_back():
    """One cycle of the procedural walk looped to three cycles equals the walk generated with three cycles (the
    generator's own frame f + cycle = frame f moved by a stride): the root kept walking. It was teleported back to
    the start every cycle, and the oracle distilled that jump (34.5 % root-path error on a looped walk)."""
    from sim.characters import QuadrupedWalkConfig, quadruped, quadruped_walk

    rig = quadruped()
    one = dataclasses.replace(QuadrupedWalkConfig(), cycles=1)
    clip, reference = quadruped_walk(rig, one), quadruped_walk(rig, dataclasses.replace(one, cycles=3))
    looped = sample_clip(clip, reference.frame_count, reference.fps, rig=rig)
    np.testing.assert_allclose(looped.root_translations, reference.root_translations, atol=LOOP_TOL)
    np.testing.assert_allclose(_same_rotations(looped.rotations, reference.rotations), 0.0, atol=LOOP_TOL)
    np.testing.assert_allclose(looped.times, reference.times, atol=1e-12)


def _turning_walk(rig, frames: int, fps: float, body_root: int):
    """A closed cycle of the chain walking on a circle: the body root moves along its heading, which turns at a
    constant rate; the other joints bend with the cycle's period. Sampled at ``frames`` frames analytically."""
    period, omega, radius = 0.5, np.radians(50.0), 0.8  # [s], [rad/s], [m]
    t = np.arange(frames) / fps
    yaw = omega * t
    pos = np.stack([radius * np.sin(yaw), radius * (1.0 - np.cos(yaw)), np.full_like(t, 0.3)], -1)
    rot = np.tile(rig.rest_rotations, (frames, 1, 1))
    rot[:, body_root] = axis_angle_to_quat(yaw[:, None] * np.array([0.0, 0.0, 1.0]))
    bend = 0.4 * np.sin(2.0 * np.pi * t / period)
    for j in range(body_root + 1, rig.joint_count):
        rot[:, j] = axis_angle_to_quat(bend[:, None] * np.array([0.0, 1.0, 0.3]))
    trans = np.tile(rig.rest_translations, (frames, 1, 1))
    trans[:, body_root] = pos  # the containers above sit at the origin unrotated: local = world
    return sim.Motion(fps, trans[:, 0], rot, trans if body_root else None, name="circle")


@pytest.mark.parametrize("container", [False, True])
def test_sample_clip_carries_the_heading_on(make_chain, container):
    """A cycle that turns while it walks continues on its circle when looped, also when the body root sits below
    static container joints (glTF): compared with the circle sampled analytically."""
    rig = _container_rig(make_chain) if container else make_chain()
    j = body_root_joint(rig)
    fps = 12.0
    clip = _turning_walk(rig, 7, fps, j)  # 0.5 s: frames 0..6, the last closing the cycle
    reference = _turning_walk(rig, 20, fps, j)
    looped = sample_clip(clip, 20, fps, rig=rig)
    pos, _ = sim.pose_motion(rig, looped)
    ref_pos, _ = sim.pose_motion(rig, reference)
    np.testing.assert_allclose(pos[:, j], ref_pos[:, j], atol=LOOP_TOL)
    np.testing.assert_allclose(_same_rotations(looped.rotations, reference.rotations), 0.0, atol=LOOP_TOL)


def test_distilled_motion_keeps_whole_frame_times(make_chain):
    """The motion written as USD has the init motion's float64 frame times (float32 gave 1.0000000298 frames)."""
    rig = make_chain()
    init = sim.Motion.rest(rig, 13, 12.0)
    out = Trajectory(rig, init).to_motion()
    np.testing.assert_array_equal(out.times, init.times)
    np.testing.assert_array_equal(np.round(out.times * out.fps), out.times * out.fps)


def test_motion_error_measures_angles_and_root_path(make_chain, make_motion):
    rig = make_chain()
    a = make_motion(rig, 5)
    q = axis_angle_to_quat(np.array([0.0, 0.0, np.radians(10.0)]))
    rot = a.rotations.copy()
    rot[:, 1] = quat_multiply(rot[:, 1], q)
    b = sim.Motion(a.fps, a.root_translations + np.array([0.0, 0.06, 0.0]), rot)
    err = motion_error(rig, b, a)
    np.testing.assert_allclose(err.per_joint_deg, [0.0, 10.0, 0.0], atol=1e-6)
    np.testing.assert_allclose(err.mean_joint_angle_deg, 10.0 / 3, atol=1e-6)
    np.testing.assert_allclose(err.root_path_error_m, 0.06, atol=1e-9)
    np.testing.assert_allclose(err.root_path_error, 0.06 / err.body_length, atol=1e-9)
    assert "10.0" in err.summary(rig)


def test_regularizers(make_chain):
    rig = make_chain()
    trig = sim.torch_ops.TorchRig(rig)
    f = 6
    t = torch.arange(f, dtype=torch.float32)[:, None]
    rest = torch.as_tensor(rig.rest_rotations, dtype=torch.float32).expand(f, -1, -1)
    root = torch.as_tensor(rig.rest_translations[0], dtype=torch.float32) + t * torch.tensor([0.1, 0.0, 0.0])
    world = trig.forward_kinematics(root, rest)
    np.testing.assert_allclose(smoothness(world, 1.0).item(), 0.0, atol=1e-10)  # constant velocity
    bumped = world.clone()
    bumped[2, :, 2] += 0.1
    np.testing.assert_allclose(smoothness(bumped, 1.0).item(), 0.1**2 * (1 + 4 + 1) / (f - 2), rtol=1e-4)
    points, _ = trig.skin(world)
    assert ground_penalty(points, 0.0, 1.0).item() == 0.0  # the tube floats above z = 0
    sunk = points - torch.tensor([0.0, 0.0, 1.0])
    depth = (-sunk[..., 2]).clamp_min(0.0)
    np.testing.assert_allclose(ground_penalty(sunk, 0.0, 2.0).item(), depth.square().sum(-1).mean() / 4, rtol=1e-5)
    long_rig = make_chain(joint_count=5)
    long_trig = sim.torch_ops.TorchRig(long_rig)
    collide = SelfCollisionCapsules(long_rig, min_hops=2)
    assert len(collide.pairs) > 0
    rest = torch.as_tensor(long_rig.rest_rotations, dtype=torch.float32)
    base = torch.as_tensor(long_rig.rest_translations[:1], dtype=torch.float32)
    np.testing.assert_allclose(collide(long_trig.forward_kinematics(base, rest[None])).item(), 0.0, atol=1e-12)
    folded = rest.clone()
    folded[2] = torch.tensor([0.0, 0.0, np.sin(np.radians(175) / 2), np.cos(np.radians(175) / 2)])
    fold_world = long_trig.forward_kinematics(base, folded[None])
    assert collide(fold_world).item() > 0, "folding the chain back onto itself collides"


def test_self_collision_is_normalized_like_the_other_terms():
    """The self-collision term measured in the largest extent over all three axes while smoothness, ground and the
    translation's learning rate use the renderer's body length (largest horizontal extent): a standing biped's
    self-collision weighed 0.38x a quadruped's."""
    from distill.renderer import body_dimensions
    from sim.characters import biped

    rig = biped()
    length, height, _ = body_dimensions(rig)
    assert height > 1.5 * length, "a standing character: its height is not its body length"
    assert SelfCollisionCapsules(rig).body_length == length
