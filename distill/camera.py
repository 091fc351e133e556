"""Cameras that follow a character: a smoothed path of its body centre, followed horizontally (the look-at point's
height is fixed above the bind pose's lowest point), seen from several azimuths.

All functions are torch and differentiable w.r.t. the followed path, so the root translation gets gradients both
from where the character lands in the image and from how the ground moves under it.

Framing: the camera distance is a multiple (``CameraConfig.distance``) of the *fit distance*, at which a sphere of
the given radius centred on the look-at point exactly fills the narrower field of view. The renderer passes the
bounding sphere of the bind pose (about its bounding-box centre), so at ``distance >= 1`` the whole bind pose is in
frame from every azimuth and elevation, tall characters (bipeds) as well as long ones.

Camera frame: ``right``, ``up``, ``forward`` (unit, world); a world point ``p`` has camera coordinates
``(right . (p - eye), up . (p - eye), forward . (p - eye))`` and the pixel
``x = W/2 + f * x_c / z_c``, ``y = H/2 - f * y_c / z_c`` with ``f = (H/2) / tan(fov/2)`` (square pixels, y down).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import torch

from sim._numbers import is_finite_real

__all__ = ["CameraConfig", "Cameras", "follow_cameras", "smooth_path"]


@dataclass(frozen=True)
class CameraConfig:
    """Follow-camera rig: one camera per azimuth, every frame."""

    azimuths_deg: tuple[float, ...] = (0.0,)
    """Camera azimuths [deg], one rendered view each, measured in the ground plane from +X towards +Y."""
    elevation_deg: float = 15.0
    """Camera elevation above the horizontal [deg], in (-90, 90)."""
    distance: float = 1.2
    """Camera distance from the look-at point [fit distances]: 1 puts the bind pose's bounding sphere exactly in the
    narrower field of view (see the module docstring); larger leaves room for the motion."""
    fov_deg: float = 40.0
    """Vertical field of view [deg]."""
    follow_smoothing_s: float = 0.5
    """Gaussian sigma [s] of the low-pass on the followed path (local linear, so a constant velocity is followed
    exactly, also at the clip ends); 0 follows exactly."""
    orbit_deg_per_s: float = 0.0
    """Azimuth change over time [deg/s] (a slow orbit around the character)."""
    look_at_height: float = 0.5
    """Height of the look-at point above the bind pose's lowest point [body heights] (0.5: the bounding-box centre)."""

    def __post_init__(self):
        if isinstance(self.azimuths_deg, (str, bytes)) or not isinstance(self.azimuths_deg, Iterable):
            raise ValueError(
                f"CameraConfig.azimuths_deg: need a sequence of angles [deg] (e.g. (0.0,)), got {self.azimuths_deg!r}"
            )
        az = tuple(self.azimuths_deg)
        if not az or not all(is_finite_real(a) for a in az):
            raise ValueError(f"CameraConfig.azimuths_deg: need one or more finite angles [deg], got {az}")
        if not (is_finite_real(self.distance) and self.distance > 0):
            raise ValueError(f"CameraConfig.distance: must be a finite number > 0, got {self.distance!r}")
        if not (is_finite_real(self.fov_deg) and 0 < self.fov_deg < 180):
            raise ValueError(f"CameraConfig.fov_deg: must be in (0, 180) [deg], got {self.fov_deg!r}")
        if not (is_finite_real(self.elevation_deg) and -90 < self.elevation_deg < 90):
            raise ValueError(f"CameraConfig.elevation_deg: must be in (-90, 90) [deg], got {self.elevation_deg!r}")
        if not (is_finite_real(self.follow_smoothing_s) and self.follow_smoothing_s >= 0):
            raise ValueError(
                f"CameraConfig.follow_smoothing_s: must be a finite number >= 0 [s], got {self.follow_smoothing_s!r}"
            )
        for name in ("orbit_deg_per_s", "look_at_height"):
            if not is_finite_real(getattr(self, name)):
                raise ValueError(f"CameraConfig.{name}: must be a finite number, got {getattr(self, name)!r}")


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
    """Gaussian-weighted local linear regression of a path (F, 3) sampled at ``times`` (F,) [s].

    Each output frame is the value at its own time of the straight line fitted to the path with Gaussian weights
    (sigma ``sigma_s``) around it. Away from the ends this is the plain Gaussian average; at the ends, where a
    normalized Gaussian average lags behind a moving path by about ``0.8 sigma v``, the fitted line removes the
    lag: a path at constant velocity comes out unchanged (a tiny ridge on the slope keeps single-sample windows
    well posed).
    """
    if sigma_s <= 0 or path.shape[0] == 1:
        return path
    t = times.to(torch.float64)
    dt = t[None, :] - t[:, None]  # (F_out, F_in): sample time minus output time
    w = torch.exp(-0.5 * (dt / sigma_s) ** 2)
    s0, s1, s2 = w.sum(-1, keepdim=True), (w * dt).sum(-1, keepdim=True), (w * dt * dt).sum(-1, keepdim=True)
    s2 = s2 + 1e-9 * s0 * sigma_s**2
    weights = w * (s2 - dt * s1) / (s0 * s2 - s1 * s1)  # rows sum to 1, first moments vanish
    return weights.to(path) @ path


def follow_cameras(
    follow_path: torch.Tensor,
    times: torch.Tensor,
    config: CameraConfig,
    radius: float,
    body_height: float,
    ground_z: float,
    height: int,
    width: int,
) -> Cameras:
    """Cameras looking at the smoothed followed path from every configured azimuth.

    Args:
        follow_path: the point the cameras follow horizontally (the character's body centre) [m], shape (F, 3).
        times: frame times [s], shape (F,).
        config: the camera rig.
        radius: framing radius [m]: the bind pose's bounding-sphere radius about the followed point.
        body_height: the character's bind-pose height [m] (scales the look-at height).
        ground_z: height [m] that ``config.look_at_height`` is measured from (the bind pose's lowest point).
        height, width: image size [px].
    """
    f = follow_path.shape[0]
    if follow_path.ndim != 2 or follow_path.shape[1] != 3:
        raise ValueError(f"follow_path: expected shape (F, 3), got {tuple(follow_path.shape)}")
    if tuple(times.shape) != (f,):
        raise ValueError(f"times: expected shape ({f},) (one per frame of the followed path), got {tuple(times.shape)}")
    dev, dt = follow_path.device, follow_path.dtype
    target = smooth_path(follow_path, times, config.follow_smoothing_s)
    z = torch.full_like(target[:, 2], ground_z + config.look_at_height * body_height)
    target = torch.stack([target[:, 0], target[:, 1], z], -1)  # (F, 3)
    az = torch.tensor(config.azimuths_deg, device=dev, dtype=dt)[:, None] + config.orbit_deg_per_s * times.to(dt)
    az = torch.deg2rad(az)  # (B, F)
    el = math.radians(config.elevation_deg)
    # the sphere of the bind pose, grown by how far the look-at point sits from its centre, fits the narrower fov
    reach = radius + abs(config.look_at_height - 0.5) * body_height
    tan_v = math.tan(0.5 * math.radians(config.fov_deg))
    half_fov = math.atan(tan_v * min(1.0, width / height))
    dist = config.distance * reach / math.sin(half_fov)
    offset = torch.stack(
        [math.cos(el) * torch.cos(az), math.cos(el) * torch.sin(az), torch.full_like(az, math.sin(el))], -1
    )
    eye = target[None] + dist * offset
    forward = -offset
    world_up = torch.tensor([0.0, 0.0, 1.0], device=dev, dtype=dt).expand_as(forward)
    right = torch.cross(forward, world_up, dim=-1)
    right = right / right.norm(dim=-1, keepdim=True)
    up = torch.cross(right, forward, dim=-1)
    focal = 0.5 * height / tan_v
    # depth range: the sphere with room for the motion (twice its radius either side)
    near = torch.full(az.shape, max(dist - 2.0 * reach, 0.05 * dist), device=dev, dtype=dt)
    far = torch.full(az.shape, dist + 2.0 * reach, device=dev, dtype=dt)
    return Cameras(eye, right, up, forward, focal, near, far, height, width)
