"""Differentiable video renderer of a skinned character: soft-rasterized mesh over a checkerboard ground.

AKD's render conventions: a checkerboard ground plane, a camera that follows the character smoothly (several
azimuths per step), configurable resolution, frame count, fps and orbit. The cameras follow the *body centre*: the
bind pose's bounding-box centre carried rigidly by the body root (the point a vertex there would move with), and
frame the bind pose's bounding sphere about it (see :mod:`distill.camera`). Gradients reach the skinned vertex
positions and normals (hence joint rotations and root translation through :class:`sim.torch_ops.TorchRig`) and
the root path through the follow camera (the ground plane is shaded analytically per pixel, so it moves
differentiably with the camera).

Shading: per-vertex albedo (a smooth colour code of the bind-pose position, so body parts are distinguishable, or
a uniform grey) times ambient + Lambert light from a camera-attached key light. The ground is drawn behind the
character (it never occludes it; ground penetration is penalized by the ground loss instead).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch

from sim import Rig
from sim._numbers import is_finite_real, is_integer

from .camera import CameraConfig, Cameras, follow_cameras
from .rasterizer import MeshTopology, RasterSettings, rasterize

__all__ = ["RenderConfig", "RenderResult", "VideoRenderer", "body_dimensions", "body_frame"]


_ALBEDO_MAX = {"position": 0.9, "uniform": 0.8}
"""Brightest albedo of each colour scheme (see :func:`_position_albedo`)."""


@dataclass(frozen=True)
class RenderConfig:
    """Everything that decides what a rendered video looks like."""

    width: int = 64
    """Image width [px]."""
    height: int = 64
    """Image height [px]."""
    camera: CameraConfig = field(default_factory=CameraConfig)
    """Follow-camera rig."""
    raster: RasterSettings = field(default_factory=RasterSettings)
    """Soft rasterization parameters."""
    albedo: Literal["position", "uniform"] = "uniform"
    """Character colour: 'position' codes the bind-pose position as RGB, 'uniform' is a light grey."""
    albedo_frequency: float = 0.0
    """'position' code: 0 maps each axis linearly to a channel; > 0 uses smooth sinusoids of this many cycles per
    body length along three oblique directions (small parts and limb twist become visible)."""
    ambient: float = 0.45
    """Ambient light [unitless]; ``albedo x (ambient + diffuse)`` must stay <= 1 (checked)."""
    diffuse: float = 0.6
    """Key light strength [unitless]."""
    checker_size: float = 0.25
    """Ground checker square edge [body lengths]."""
    checker_sharpness: float = 4.0
    """Steepness of the smooth checker edges (tanh gain)."""
    ground_colors: tuple[float, float] = (0.35, 0.75)
    """Dark and light checker grey levels."""
    sky_color: tuple[float, float, float] = (0.80, 0.86, 0.92)
    """Background colour above the horizon (RGB)."""
    fog_distance: float = 8.0
    """Distance [body lengths] over which the checker contrast fades into the sky colour."""

    def __post_init__(self):
        for name in ("width", "height"):
            value = getattr(self, name)
            if not is_integer(value) or value < 1:
                raise ValueError(f"RenderConfig.{name}: must be an integer >= 1 [px], got {value!r}")
        if self.albedo not in ("position", "uniform"):
            raise ValueError(f"RenderConfig.albedo: expected 'position' or 'uniform', got {self.albedo!r}")
        for name, positive in (
            ("albedo_frequency", False), ("ambient", False), ("diffuse", False), ("checker_size", True),
            ("checker_sharpness", True), ("fog_distance", True),
        ):  # fmt: skip
            value = getattr(self, name)
            if not is_finite_real(value) or (value <= 0 if positive else value < 0):
                raise ValueError(
                    f"RenderConfig.{name}: must be a finite number {'>' if positive else '>='} 0, got {value!r}"
                )
        brightest = _ALBEDO_MAX[self.albedo] * (self.ambient + self.diffuse)
        if brightest > 1.0:
            raise ValueError(
                f"RenderConfig.ambient, diffuse: {self.ambient:g} + {self.diffuse:g} lights the brightest "
                f"{self.albedo!r} albedo ({_ALBEDO_MAX[self.albedo]:g}) to {brightest:.3g}, above 1 (the video is RGB "
                f"in [0, 1], mapped to the VAE's [-1, 1]); keep ambient + diffuse <= {1 / _ALBEDO_MAX[self.albedo]:.4g}"
            )
        colors = (*self.ground_colors, *self.sky_color)
        if len(self.ground_colors) != 2 or len(self.sky_color) != 3 or not all(0.0 <= c <= 1.0 for c in colors):
            raise ValueError(
                f"RenderConfig.ground_colors, sky_color: 2 grey levels and 3 RGB values in [0, 1], got "
                f"{self.ground_colors}, {self.sky_color}"
            )


@dataclass
class RenderResult:
    """Rendered videos, B = views, F = frames.

    Attributes:
        video: RGB in [0, 1], shape (B, F, 3, H, W).
        alpha: character coverage, shape (B, F, H, W).
        depth: soft normalized inverse depth of the character (1 at the camera's near plane, 0 at its far plane
            and where uncovered), shape (B, F, H, W).
        cameras: the cameras used.
    """

    video: torch.Tensor
    alpha: torch.Tensor
    depth: torch.Tensor
    cameras: Cameras


_CHECKER_EDGE_PIXELS = 3.0
"""Checker edge softening: the tanh gain falls to this over the pattern's change across a pixel (chosen by the
error against an 8 x 8 supersampled ground at 32-128 px: 0.0069 mean at 32 px, 0.0025 at 128)."""
_CHECKER_FADE = 8.0
"""Checker contrast falls as exp(-(pi squares per pixel / this)^2): about half at 2 squares per pixel."""


def _bind_points(rig: Rig) -> np.ndarray:
    """The meshes' bind-pose points (the joints' rest positions for a meshless rig) [m], shape (N, 3)."""
    if rig.meshes:
        return np.concatenate([m.points for m in rig.meshes])
    return rig.rest_world_transforms()[0]


def body_dimensions(rig: Rig) -> tuple[float, float, float]:
    """Bind-pose body length (largest horizontal extent) [m], height [m], and lowest point z [m] of the meshes."""
    pts = _bind_points(rig)
    ext = np.ptp(pts, axis=0)
    return float(max(ext[0], ext[1], 1e-6)), float(max(ext[2], 1e-6)), float(pts[:, 2].min())


def body_frame(rig: Rig, body_root: int) -> tuple[np.ndarray, float]:
    """The body centre in the body root's joint frame and the framing radius.

    Returns:
        The bind pose's bounding-box centre expressed in ``body_root``'s frame as skinning sees it
        (``IBM @ centre``), shape (3,), and the radius [m] of the bind pose's bounding sphere about that centre.
    """
    pts = _bind_points(rig)
    lo, hi = pts.min(0), pts.max(0)
    centre = 0.5 * (lo + hi)
    ibm = np.asarray(rig.inverse_bind_matrices[body_root], dtype=np.float64)
    local = ibm[:3, :3] @ centre + ibm[:3, 3]
    radius = float(max(np.linalg.norm(pts - centre, axis=1).max(), 1e-6))
    return local, radius


_CODE_DIRECTIONS = np.array([[0.8, 0.5, 0.33], [-0.3, 0.85, -0.43], [0.52, -0.16, -0.84]])


def _position_albedo(points: np.ndarray, frequency: float) -> np.ndarray:
    """A smooth RGB code of bind positions in [0.1, 0.9].

    ``frequency == 0``: each axis normalized to [0, 1] (a linear ramp per channel). Otherwise channel ``c`` is
    ``0.5 + 0.4 sin(2 pi frequency (d_c . p) / L)`` along an oblique unit direction ``d_c`` (L: largest extent).
    """
    lo, hi = points.min(0), points.max(0)
    if frequency <= 0:
        return 0.1 + 0.8 * (points - lo) / np.maximum(hi - lo, 1e-12)
    length = max(float((hi - lo).max()), 1e-12)
    d = _CODE_DIRECTIONS / np.linalg.norm(_CODE_DIRECTIONS, axis=1, keepdims=True)
    phase = 2.0 * np.pi * frequency * ((points - lo) @ d.T) / length
    return 0.5 + 0.4 * np.sin(phase + np.array([0.0, 2.1, 4.2]))


class VideoRenderer:
    """Renders a rig's merged mesh under per-frame skinned vertices, from follow cameras.

    Attributes:
        rig: the character.
        config: render settings.
        topology: triangles and adjacency of the merged mesh.
        albedo: per-vertex colour, shape (V, 3), torch.
        body_length, body_height, ground_z: bind-pose dimensions [m] (see :func:`body_dimensions`).
        body_root: the joint whose world transform :meth:`render` takes (:func:`distill.body_root_joint`).
        centre_local: the body centre in the body root's frame, shape (3,) (see :func:`body_frame`).
        frame_radius: the bind pose's bounding-sphere radius about the body centre [m] (the framed sphere).
    """

    def __init__(
        self,
        rig: Rig,
        config: RenderConfig | None = None,
        device: str | torch.device = "cpu",
        ground_z: float | None = None,
        body_root: int | None = None,
    ):
        from .trajectory import body_root_joint

        self.rig = rig
        self.config = config or RenderConfig()
        self.device = torch.device(device)
        mesh = rig.merged_mesh()
        self.topology = MeshTopology(mesh.triangles, device=self.device)
        self.body_length, self.body_height, low = body_dimensions(rig)
        self.lowest_z = low
        self.ground_z = low if ground_z is None else float(ground_z)
        self.body_root = body_root_joint(rig) if body_root is None else int(body_root)
        centre, self.frame_radius = body_frame(rig, self.body_root)
        self.centre_local = torch.as_tensor(centre, dtype=torch.float32, device=self.device)
        if self.config.albedo == "position":
            albedo = _position_albedo(mesh.points, self.config.albedo_frequency)
        else:
            albedo = np.full((mesh.vertex_count, 3), 0.8)
        self.albedo = torch.as_tensor(albedo, dtype=torch.float32, device=self.device)
        self._check_eye_above_ground()

    def _check_eye_above_ground(self) -> None:
        """ValueError naming ``CameraConfig.elevation_deg`` when the cameras sit at or below the ground (the ground
        then renders as one flat colour seen from beneath), with the lowest elevation that works."""
        cam = self.config.camera
        one = torch.zeros(1, 3, dtype=torch.float64)
        cams = follow_cameras(one, one[:, 0], cam, self.frame_radius, self.body_height, self.lowest_z,
                              self.config.height, self.config.width)  # fmt: skip
        eye_z = float(cams.eye[..., 2].min())  # the same on every frame: the look-at height is fixed
        if eye_z > self.ground_z:
            return
        target_z = self.lowest_z + cam.look_at_height * self.body_height
        dist = float(torch.linalg.vector_norm(cams.eye[0, 0] - torch.tensor([0.0, 0.0, target_z], dtype=one.dtype)))
        ratio = (self.ground_z - target_z) / dist
        lowest = f"above {math.degrees(math.asin(ratio)):.1f} deg" if -1.0 < ratio < 1.0 else "a higher look_at_height"
        raise ValueError(
            f"CameraConfig.elevation_deg: {cam.elevation_deg:g} deg puts the cameras {self.ground_z - eye_z:.3g} m "
            f"below the ground plane (the ground would render as one flat colour seen from beneath); use {lowest}"
        )

    def body_centre(self, root: torch.Tensor) -> torch.Tensor:
        """The body centre's world path (F, 3) from the body root's world transforms (F, 7) (position, quat xyzw);
        from positions alone (F, 3) the centre keeps its bind-pose offset (no rotation)."""
        from sim.torch_ops import quat_rotate

        offset = self.centre_local.to(root)
        if root.shape[-1] == 7:
            return root[:, :3] + quat_rotate(root[:, 3:7], offset.expand(root.shape[0], 3))
        bind = torch.as_tensor(np.linalg.inv(self.rig.inverse_bind_matrices[self.body_root]), dtype=root.dtype)
        return root + (bind[:3, :3].to(root.device) @ offset)

    def cameras(self, root: torch.Tensor, times: torch.Tensor) -> Cameras:
        """The follow cameras of a body-root path: world transforms (F, 7) or positions (F, 3) (see
        :meth:`body_centre`)."""
        c = self.config
        return follow_cameras(
            self.body_centre(root), times, c.camera, self.frame_radius, self.body_height, self.lowest_z, c.height,
            c.width,
        )  # fmt: skip

    def ground(self, cams: Cameras) -> torch.Tensor:
        """Checkerboard ground and sky per pixel, shape (B, F, H, W, 3); differentiable w.r.t. the camera."""
        c = self.config
        rays = cams.pixel_rays()  # (B, F, H, W, 3)
        eye = cams.eye[:, :, None, None]
        dz = rays[..., 2]
        hits_ground = dz < -1e-6
        s = (self.ground_z - eye[..., 2]) / torch.where(hits_ground, dz, -torch.ones_like(dz))
        s = torch.where(hits_ground, s.clamp_min(0.0), torch.zeros_like(s))
        hit = eye + s[..., None] * rays
        a = c.checker_size * self.body_length
        pattern = torch.sin(torch.pi * hit[..., 0] / a) * torch.sin(torch.pi * hit[..., 1] / a)
        # filtered over each pixel's footprint on the ground (point samples aliased: 0.03 mean, 0.13 max error
        # against an 8 x 8 supersampled ground at 32 px): the pattern's change across the pixel softens the edges to
        # about a pixel, and squares far smaller than a pixel fade to the mean grey
        dx, dy = torch.gradient(hit[..., :2], dim=(3, 2))  # ground shift per pixel step [m], (B, F, H, W, 2) each
        u, v = torch.pi * hit[..., 0] / a, torch.pi * hit[..., 1] / a
        grad = torch.pi / a * torch.stack([torch.cos(u) * torch.sin(v), torch.sin(u) * torch.cos(v)], -1)
        change = (grad * dx).sum(-1).abs() + (grad * dy).sum(-1).abs()  # of the pattern across the pixel
        k = c.checker_sharpness
        gain = k / torch.sqrt(1.0 + (k * change / _CHECKER_EDGE_PIXELS) ** 2)
        squares = (dx.abs().sum(-1) + dy.abs().sum(-1)) / a  # checker squares per pixel, as an L1 length
        fade = torch.exp(-((torch.pi * squares / _CHECKER_FADE) ** 2))
        level = 0.5 + 0.5 * fade * torch.tanh(gain * pattern)
        dark, light = c.ground_colors
        grey = dark + (light - dark) * level
        dist = s * rays.norm(dim=-1)
        fog = torch.exp(-dist / (c.fog_distance * self.body_length))
        fog = torch.where(hits_ground, fog, torch.zeros_like(fog))
        sky = torch.tensor(c.sky_color, device=rays.device, dtype=rays.dtype)
        return fog[..., None] * grey[..., None] + (1.0 - fog[..., None]) * sky

    def shade(self, normals: torch.Tensor, cams: Cameras) -> torch.Tensor:
        """Per-view, per-frame vertex colours (B, F, V, 3) from skinned normals (F, V, 3)."""
        c = self.config
        light = -cams.forward + 0.6 * cams.up + 0.4 * cams.right  # (B, F, 3): over the camera's shoulder
        light = light / light.norm(dim=-1, keepdim=True)
        lambert = (normals[None] * light[:, :, None]).sum(-1).clamp_min(0.0)  # (B, F, V)
        return self.albedo * (c.ambient + c.diffuse * lambert)[..., None]

    def render(
        self, points: torch.Tensor, normals: torch.Tensor, root_path: torch.Tensor, times: torch.Tensor
    ) -> RenderResult:
        """Renders every configured view of the posed character.

        Args:
            points: skinned vertex positions [m], shape (F, V, 3).
            normals: skinned unit normals, shape (F, V, 3).
            root_path: the body root's world transforms (position [m], quat xyzw), shape (F, 7), whose body centre
                the cameras follow; positions alone, shape (F, 3), keep the centre's bind-pose offset.
            times: frame times [s], shape (F,).
        """
        cfg = self.config
        v_expected = self.albedo.shape[-2]
        if points.ndim != 3 or points.shape[1:] != (v_expected, 3):
            raise ValueError(f"points: expected shape (F, {v_expected}, 3), got {tuple(points.shape)}")
        f, v = points.shape[:2]
        if normals.shape != points.shape:
            raise ValueError(f"normals: expected shape {tuple(points.shape)}, got {tuple(normals.shape)}")
        if root_path.shape not in ((f, 3), (f, 7)):
            raise ValueError(f"root_path: expected shape ({f}, 7) or ({f}, 3), got {tuple(root_path.shape)}")
        # one synchronisation: NaN points drew no triangle (the character vanished, the loss stayed finite)
        finite = [torch.isfinite(x).all() for x in (points, normals, root_path, times)]
        if not bool(torch.stack(finite).all()):
            bad = [n for n, ok in zip(("points", "normals", "root_path", "times"), finite) if not bool(ok)]
            raise ValueError(f"{', '.join(bad)}: non-finite values (NaN or inf) to render")
        points, normals = points.float(), normals.float()
        cams = self.cameras(root_path.float(), times.float())
        screen, zc = cams.project(points)  # (B, F, V, 3), (B, F, V)
        b = screen.shape[0]
        colors = self.shade(normals, cams)
        tri = self.topology.triangles
        valid = (zc[..., tri] > 1e-3 * cams.near[..., None, None]).all(-1)  # (B, F, T)
        out = rasterize(
            screen.reshape(b * f, v, 3),
            colors.reshape(b * f, v, 3).contiguous(),
            self.topology,
            cfg.height,
            cfg.width,
            cfg.raster,
            valid.reshape(b * f, -1),
        )
        alpha = out.alpha.reshape(b, f, cfg.height, cfg.width)
        rgb = out.rgb.reshape(b, f, cfg.height, cfg.width, 3)
        image = alpha[..., None] * rgb + (1.0 - alpha[..., None]) * self.ground(cams)
        depth = out.depth.reshape(b, f, cfg.height, cfg.width)
        return RenderResult(image.permute(0, 1, 4, 2, 3).contiguous(), alpha, depth, cams)
