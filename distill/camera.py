"""Cameras that follow a character: a Gaussian-smoothed root path as the look-at point, several azimuths.

All functions are torch and differentiable w.r.t. the root path, so the root translation gets gradients both
from where the character lands in the image and from how the ground moves under it.

Camera frame: ``right``, ``up``, ``forward`` (unit, world); a world point ``p`` has camera coordinates
``(right . (p - eye), up . (p - eye), forward . (p - eye))`` and the pixel
``x = W/2 + f * x_c / z_c``, ``y = H/2 - f * y_c / z_c`` with ``f = (H/2) / tan(fov/2)`` (square pixels, y down).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

__all__ = ["CameraConfig", "Cameras", "follow_cameras", "smooth_path"]


@dataclass(frozen=True)
class CameraConfig:
    """Follow-camera rig: one camera per azimuth, every frame."""

    azimuths_deg: tuple[float, ...] = (0.0,)
    """Camera azimuths [deg], one rendered view each, measured in the ground plane from +X towards +Y."""
    elevation_deg: float = 15.0
    """Camera elevation above the horizontal [deg]."""
    distance: float = 2.0
    """Camera distance from the look-at point [body lengths]."""
    fov_deg: float = 40.0
    """Vertical field of view [deg]."""
    follow_smoothing_s: float = 0.5
    """Gaussian sigma [s] of the low-pass on the root path that the camera looks at; 0 follows exactly."""
    orbit_deg_per_s: float = 0.0
    """Azimuth change over time [deg/s] (a slow orbit around the character)."""
    look_at_height: float = 0.35
    """Height of the look-at point above the ground [body heights]."""

    def __post_init__(self):
        az = tuple(self.azimuths_deg)
        if not az or not all(isinstance(a, (int, float)) and math.isfinite(a) for a in az):
            raise ValueError(f"CameraConfig.azimuths_deg: need one or more finite angles [deg], got {az}")
        if not (isinstance(self.distance, (int, float)) and math.isfinite(self.distance) and self.distance > 0):
            raise ValueError(f"CameraConfig.distance: must be a finite number > 0, got {self.distance!r}")
        if not (isinstance(self.fov_deg, (int, float)) and 0 < self.fov_deg < 180):
            raise ValueError(f"CameraConfig.fov_deg: must be in (0, 180) [deg], got {self.fov_deg!r}")


@dataclass
class Cameras:
    """Per view and frame camera frames, shapes (B, F, 3) each, plus scalars.

    Attributes:
        eye: camera positions [m].
        right, up, forward: unit camera axes (world).
        focal: focal length [px].
        near, far: depth range [m] mapped to normalized inverse depth 1 and 0, shape (B, F).
    """

    eye: torch.Tensor
    right: torch.Tensor
    up: torch.Tensor
    forward: torch.Tensor
    focal: float
    near: torch.Tensor
    far: torch.Tensor
    height: int
    width: int

    def project(self, points: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """World points (F, V, 3) seen by every view -> screen vertices (B, F, V, 3): x [px], y [px], zeta.

        Returns:
            The screen vertices and the camera depth ``z_c`` [m], shape (B, F, V).
        """
        rel = points[None] - self.eye[:, :, None]
        xc = (rel * self.right[:, :, None]).sum(-1)
        yc = (rel * self.up[:, :, None]).sum(-1)
        zc = (rel * self.forward[:, :, None]).sum(-1)
        zs = zc.clamp_min(1e-6 * self.near[..., None])
        x = 0.5 * self.width + self.focal * xc / zs
        y = 0.5 * self.height - self.focal * yc / zs
        inv_far, inv_near = 1.0 / self.far[..., None], 1.0 / self.near[..., None]
        zeta = (1.0 / zs - inv_far) / (inv_near - inv_far)
        return torch.stack([x, y, zeta], -1), zc

    def pixel_rays(self) -> torch.Tensor:
        """Unnormalized world ray directions through every pixel centre, shape (B, F, H, W, 3)."""
        dev, dt = self.eye.device, self.eye.dtype
        xs = (torch.arange(self.width, device=dev, dtype=dt) + 0.5 - 0.5 * self.width) / self.focal
        ys = (0.5 * self.height - torch.arange(self.height, device=dev, dtype=dt) - 0.5) / self.focal
        f, r, u = (a[:, :, None, None] for a in (self.forward, self.right, self.up))
        return f + xs[None, None, None, :, None] * r + ys[None, None, :, None, None] * u


def smooth_path(path: torch.Tensor, times: torch.Tensor, sigma_s: float) -> torch.Tensor:
    """Gaussian low-pass of a path (F, 3) sampled at ``times`` (F,) [s], normalized per output frame."""
    if sigma_s <= 0 or path.shape[0] == 1:
        return path
    dt = times[:, None] - times[None, :]
    w = torch.exp(-0.5 * (dt / sigma_s) ** 2)
    w = w / w.sum(-1, keepdim=True)
    return w.to(path) @ path


def follow_cameras(
    root_path: torch.Tensor,
    times: torch.Tensor,
    config: CameraConfig,
    body_length: float,
    body_height: float,
    ground_z: float,
    height: int,
    width: int,
) -> Cameras:
    """Cameras looking at the smoothed root path from every configured azimuth.

    Args:
        root_path: character root (pelvis) positions [m], shape (F, 3).
        times: frame times [s], shape (F,).
        config: the camera rig.
        body_length: the character's largest bind-pose extent [m] (scales the distance).
        body_height: the character's bind-pose height [m] (scales the look-at height).
        ground_z: ground height [m].
        height, width: image size [px].
    """
    dev, dt = root_path.device, root_path.dtype
    target = smooth_path(root_path, times, config.follow_smoothing_s)
    z = torch.full_like(target[:, 2], ground_z + config.look_at_height * body_height)
    target = torch.stack([target[:, 0], target[:, 1], z], -1)  # (F, 3)
    az = torch.tensor(config.azimuths_deg, device=dev, dtype=dt)[:, None] + config.orbit_deg_per_s * times.to(dt)
    az = torch.deg2rad(az)  # (B, F)
    el = math.radians(config.elevation_deg)
    dist = config.distance * body_length
    offset = torch.stack(
        [math.cos(el) * torch.cos(az), math.cos(el) * torch.sin(az), torch.full_like(az, math.sin(el))], -1
    )
    eye = target[None] + dist * offset
    forward = -offset
    world_up = torch.tensor([0.0, 0.0, 1.0], device=dev, dtype=dt).expand_as(forward)
    right = torch.cross(forward, world_up, dim=-1)
    right = right / right.norm(dim=-1, keepdim=True)
    up = torch.cross(right, forward, dim=-1)
    focal = 0.5 * height / math.tan(0.5 * math.radians(config.fov_deg))
    near = torch.full(az.shape, max(dist - body_length, 0.05 * dist), device=dev, dtype=dt)
    far = torch.full(az.shape, dist + body_length, device=dev, dtype=dt)
    return Cameras(eye, right, up, forward, focal, near, far, height, width)
