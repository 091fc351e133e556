"""kinedistill.distill: AKD video score distillation of a rigged character's joint trajectory.

Differentiable Warp soft rasterizer and video renderer, SDS guidance through diffusers video models (CogVideoX,
Wan 2.1) or an oracle teacher, the optimized trajectory, its losses and the optimization loop.
"""

from .camera import CameraConfig, Cameras, follow_cameras, smooth_path
from .rasterizer import MeshTopology, RasterOutput, RasterSettings, rasterize
from .renderer import RenderConfig, RenderResult, VideoRenderer, body_dimensions
from .trajectory import PoseSequence, Trajectory, body_root_joint, catmull_rom_basis

__all__ = [
    "CameraConfig",
    "Cameras",
    "MeshTopology",
    "PoseSequence",
    "RasterOutput",
    "RasterSettings",
    "RenderConfig",
    "RenderResult",
    "Trajectory",
    "VideoRenderer",
    "body_dimensions",
    "body_root_joint",
    "catmull_rom_basis",
    "follow_cameras",
    "rasterize",
    "smooth_path",
]
