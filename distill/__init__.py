"""kinedistill.distill: AKD video score distillation of a rigged character's joint trajectory.

Differentiable Warp soft rasterizer and video renderer, SDS guidance through diffusers video models (CogVideoX,
Wan 2.1) or an oracle teacher (:mod:`distill.guidance`), the optimized trajectory, its losses and the optimization
loop with checkpoints. See ``design/sds.md`` for the gradient path.
"""

from ._run_state import ResumeError, motion_digest, rig_fingerprint
from .camera import CameraConfig, Cameras, follow_cameras, smooth_path
from .devices import check_device_name, resolve_device
from .losses import PosePrior, SelfCollisionCapsules, ground_penalty, smoothness
from .metrics import MotionError, joint_angle_errors, motion_error
from .optimize import DistillConfig, Distiller, DistillResult, LossWeights, OptimConfig, config_to_dict
from .presets import preset
from .preview import video_grid, write_preview
from .rasterizer import MeshTopology, RasterOutput, RasterSettings, facing_weights, rasterize
from .renderer import RenderConfig, RenderResult, VideoRenderer, body_dimensions, body_frame
from .trajectory import PoseSequence, Trajectory, body_root_joint, catmull_rom_basis, sample_clip

__all__ = [
    "CameraConfig",
    "Cameras",
    "DistillConfig",
    "DistillResult",
    "Distiller",
    "LossWeights",
    "MeshTopology",
    "MotionError",
    "OptimConfig",
    "PosePrior",
    "PoseSequence",
    "RasterOutput",
    "RasterSettings",
    "RenderConfig",
    "RenderResult",
    "ResumeError",
    "SelfCollisionCapsules",
    "Trajectory",
    "VideoRenderer",
    "body_dimensions",
    "body_frame",
    "body_root_joint",
    "catmull_rom_basis",
    "check_device_name",
    "config_to_dict",
    "facing_weights",
    "follow_cameras",
    "ground_penalty",
    "joint_angle_errors",
    "motion_digest",
    "motion_error",
    "preset",
    "rasterize",
    "resolve_device",
    "rig_fingerprint",
    "sample_clip",
    "smooth_path",
    "smoothness",
    "video_grid",
    "write_preview",
]
