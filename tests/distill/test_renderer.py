"""Video renderer: end-to-end gradients (joint rotations, root translation, camera) against finite differences,
and the follow-camera and ground conventions."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from distill import CameraConfig, RasterSettings, RenderConfig, Trajectory, VideoRenderer, follow_cameras, smooth_path
from sim import Motion
from sim.torch_ops import TorchRig

FD_STEP_ROT = 2e-3  # 6D rotation parameters [unitless]
FD_STEP_TRANS = 2e-3  # [m]
FD_RTOL = 3e-2  # float32 render, relative to the largest gradient entry checked
SIZE = 24


def _setup(rig, motion, azimuths=(20.0, 110.0)):
    cfg = RenderConfig(
        width=SIZE,
        height=SIZE,
        albedo="position",
        camera=CameraConfig(azimuths_deg=azimuths, distance=1.6, follow_smoothing_s=0.2),
        raster=RasterSettings(sigma=2.0, gamma=0.05),
    )
    renderer = VideoRenderer(rig, cfg)
    traj = Trajectory(rig, motion)
    trig = TorchRig(rig)
    weights = torch.rand(len(azimuths), motion.frame_count, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(3))

    def loss() -> torch.Tensor:
        pose = traj()
        world = traj.world(trig, pose)
        points, normals = trig.skin(world)
        video = renderer.render(points, normals, world[:, traj.body_root, :3], traj.times).video
        return (video.double() * weights).sum()

    return traj, loss


def _fd(loss, param: torch.Tensor, idx, step: float) -> float:
    with torch.no_grad():
        old = param[idx].item()
        param[idx] = old + step
        lp = loss().item()
        param[idx] = old - step
        lm = loss().item()
        param[idx] = old
    return (lp - lm) / (2 * step)


def test_gradient_reaches_rotations_and_root_and_matches_finite_differences(make_chain, make_motion):
    rig = make_chain()
    traj, loss = _setup(rig, make_motion(rig, frames=4))
    loss().backward()
    g_rot, g_trans = traj.rotations_6d.grad.clone(), traj.translation.grad.clone()
    assert torch.isfinite(g_rot).all() and torch.isfinite(g_trans).all()
    assert g_rot[:, 1:].abs().max() > 0, "gradient reaches non-root joint rotations"
    rot_idx = [(0, 1, 0), (1, 1, 4), (2, 2, 1), (3, 2, 5), (1, 0, 2)]
    fd_rot = [_fd(loss, traj.rotations_6d, i, FD_STEP_ROT) for i in rot_idx]
    scale = max(abs(x) for x in fd_rot)
    np.testing.assert_allclose([g_rot[i].item() for i in rot_idx], fd_rot, atol=FD_RTOL * scale)
    trans_idx = [(0, 0), (1, 1), (2, 2), (3, 1)]
    fd_trans = [_fd(loss, traj.translation, i, FD_STEP_TRANS) for i in trans_idx]
    scale = max(abs(x) for x in fd_trans)
    np.testing.assert_allclose([g_trans[i].item() for i in trans_idx], fd_trans, atol=FD_RTOL * scale)


def test_ground_moves_differentiably_with_the_follow_camera(make_chain):
    """With the character off screen the image is the ground alone: its gradient w.r.t. the root path is the
    camera's (checkerboard sliding under the camera)."""
    rig = make_chain()
    renderer = VideoRenderer(rig, RenderConfig(width=SIZE, height=SIZE, camera=CameraConfig(follow_smoothing_s=0.0)))
    times = torch.arange(3, dtype=torch.float32) / 12
    root = torch.tensor([[0.1, 0.2, 0.3], [0.15, 0.3, 0.3], [0.2, 0.45, 0.3]])
    w = torch.rand(1, 3, SIZE, SIZE, 3, generator=torch.Generator().manual_seed(0))

    def f(r):
        return (renderer.ground(renderer.cameras(r, times)).double() * w).sum()

    r = root.clone().requires_grad_()
    f(r).backward()
    step = 1e-3
    for idx in [(0, 0), (1, 1), (2, 0), (2, 1)]:
        rp, rm = root.clone(), root.clone()
        rp[idx] += step
        rm[idx] -= step
        fd = (f(rp) - f(rm)).item() / (2 * step)
        np.testing.assert_allclose(r.grad[idx].item(), fd, atol=FD_RTOL * r.grad.abs().max().item())
    assert r.grad[:, :2].abs().max() > 0 and r.grad[:, 2].abs().max() == 0, "look-at height is fixed"


def test_follow_camera_centres_the_root_and_orbits():
    times = torch.arange(5, dtype=torch.float32) / 10
    root = torch.stack([torch.linspace(0, 2, 5), torch.linspace(0, -1, 5), torch.full((5,), 0.5)], -1)
    cfg = CameraConfig(azimuths_deg=(0.0, 90.0), elevation_deg=10.0, follow_smoothing_s=0.0, orbit_deg_per_s=60.0)
    cams = follow_cameras(root, times, cfg, body_length=1.0, body_height=1.0, ground_z=0.0, height=32, width=48)
    screen, depth = cams.project(root[:, None])  # (B, F, 1, 3)
    np.testing.assert_allclose(screen[..., 0], 24.0, atol=1e-4)  # root on the vertical centre line
    np.testing.assert_allclose(depth.min(), depth.max(), rtol=1e-5)  # constant distance
    az = torch.atan2(cams.eye[..., 1] - root[:, 1], cams.eye[..., 0] - root[:, 0])
    expected = torch.deg2rad(torch.tensor([[0.0], [90.0]]) + 60.0 * times)
    np.testing.assert_allclose(torch.cos(az - expected), 1.0, atol=1e-5)
    np.testing.assert_allclose(cams.forward[..., 2], -math.sin(math.radians(10.0)), atol=1e-6)


def test_smooth_path_keeps_constants_and_follows_slowly():
    times = torch.arange(9, dtype=torch.float32) / 8
    const = torch.tensor([[1.0, 2.0, 3.0]]).expand(9, 3)
    np.testing.assert_allclose(smooth_path(const, times, 0.3), const, atol=1e-6)
    step = torch.zeros(9, 3)
    step[5:, 0] = 1.0
    s = smooth_path(step, times, 0.2)
    assert (s[:, 0].diff() >= -1e-7).all() and 0 < s[4, 0] < 0.5 < s[5, 0] < 1
    assert smooth_path(step, times, 0.0) is step


def test_render_shapes_range_and_sky(make_chain, make_motion):
    rig = make_chain()
    motion = make_motion(rig, frames=3)
    renderer = VideoRenderer(rig, RenderConfig(width=32, height=20, camera=CameraConfig(azimuths_deg=(0, 45, 90))))
    traj, trig = Trajectory(rig, motion), TorchRig(rig)
    with torch.no_grad():
        world = traj.world(trig)
        points, normals = trig.skin(world)
        out = renderer.render(points, normals, world[:, 0, :3], traj.times)
    assert out.video.shape == (3, 3, 3, 20, 32) and out.alpha.shape == (3, 3, 20, 32)
    assert out.depth.shape == (3, 3, 20, 32) and 0 < out.depth.max() <= 1 and out.depth.min() == 0
    assert out.video.min() >= 0 and out.video.max() <= 1
    np.testing.assert_allclose(out.video[:, :, :, 0, 0], torch.tensor(renderer.config.sky_color).expand(3, 3, 3))
    assert out.alpha.max() > 0.99, "the character is in view"
    with pytest.raises(ValueError, match="root_path"):
        renderer.render(points, normals, world[:2, 0, :3], traj.times)


def test_trajectory_starts_at_the_init_motion(make_chain):
    """The trajectory's initial pose is the init motion's (nothing moves before the first step)."""
    rig = make_chain()
    motion = Motion.rest(rig, 3, 12.0)
    traj = Trajectory(rig, motion)
    with torch.no_grad():
        pose = traj()
    np.testing.assert_allclose(pose.rotations, np.broadcast_to(rig.rest_rotations, (3, rig.joint_count, 4)), atol=1e-6)
    np.testing.assert_allclose(pose.root_translation, np.broadcast_to(rig.rest_translations[0], (3, 3)), atol=1e-6)
