"""Video score distillation guidance: CogVideoX and Wan 2.1 through diffusers, tiny offline models, the oracle."""

from ._sds import SDSOutput, TimestepSchedule, VideoSDS, cfg_combine, detached_target_loss, step_generator, vpred_to_eps
from .cogvideox import GuidanceCogVideoX
from .loading import MODEL_PRESETS, GuidanceConfig, GuidanceKind, GuidanceModelError, ModelPreset, build_guidance
from .oracle import OracleDenoiser, PixelVAE
from .text import ByteTokenizer, encode_prompts
from .tiny import TinyComponents, cogvideox_scheduler, tiny_cogvideox, tiny_wan
from .wan import GuidanceWan, flow_shift

__all__ = [
    "MODEL_PRESETS",
    "ByteTokenizer",
    "GuidanceCogVideoX",
    "GuidanceConfig",
    "GuidanceKind",
    "GuidanceModelError",
    "GuidanceWan",
    "ModelPreset",
    "OracleDenoiser",
    "PixelVAE",
    "SDSOutput",
    "TimestepSchedule",
    "TinyComponents",
    "VideoSDS",
    "build_guidance",
    "cfg_combine",
    "cogvideox_scheduler",
    "detached_target_loss",
    "encode_prompts",
    "flow_shift",
    "step_generator",
    "tiny_cogvideox",
    "tiny_wan",
    "vpred_to_eps",
]
