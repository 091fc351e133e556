"""Starting configurations per guidance model.

* ``oracle``: the settings of the oracle check (Fox Walk recovered from the rest pose on CPU in minutes): 13 frames
  at 12 fps (1 s), 96x96 (the coarse first half at 48x48), four azimuths, a sinusoidal bind-position colour code,
  coarse-to-fine edge softness.
* ``tiny`` / ``tiny-wan``: a CPU smoke run of the SDS path with random tiny models (seconds; the motion is noise).
* released models: the model's native frame count, rate and resolution, one view, a plain grey character (the
  video model should see a plausible render, not a colour code). These are starting points for GPU runs, not
  tuned results (no GPU was available to tune them).
"""

from __future__ import annotations

import dataclasses

from .camera import CameraConfig
from .guidance import MODEL_PRESETS, GuidanceConfig, GuidanceKind, TimestepSchedule
from .optimize import DistillConfig, LossWeights, OptimConfig
from .rasterizer import RasterSettings
from .renderer import RenderConfig

__all__ = ["preset"]


def preset(kind: GuidanceKind, prompt: str = "") -> DistillConfig:
    """The starting configuration for guidance ``kind``."""
    if kind == "oracle":
        return DistillConfig(
            prompt=prompt,
            frames=13,
            fps=12.0,
            render=RenderConfig(
                width=96,
                height=96,
                albedo="position",
                albedo_frequency=6.0,
                camera=CameraConfig(azimuths_deg=(30.0, 120.0, 210.0, 300.0), elevation_deg=20.0, distance=1.0),
                raster=RasterSettings(sigma=0.5, gamma=0.01),
            ),
            guidance=GuidanceConfig(
                kind="oracle", schedule=TimestepSchedule(min=0.02, max_start=0.98, max_end=0.98, anneal="none")
            ),
            optim=OptimConfig(
                steps=400,
                lr_rotation=0.02,
                lr_translation=0.005,
                sigma_start=8.0,
                coarse_fraction=0.5,
                coarse_scale=0.5,
            ),
            weights=LossWeights(smoothness=100.0 / 12.0**4, ground=100.0, self_collision=10.0),
        )
    if kind in ("tiny", "tiny-wan"):
        return DistillConfig(
            prompt=prompt,
            frames=5,
            fps=8.0,
            render=RenderConfig(width=32, height=32, camera=CameraConfig(azimuths_deg=(0.0,))),
            guidance=GuidanceConfig(kind=kind, guidance_scale=7.5),
            optim=OptimConfig(steps=10, checkpoint_every=5, preview_every=5),
        )
    m = MODEL_PRESETS[kind]
    return DistillConfig(
        prompt=prompt,
        frames=m.frames,
        fps=float(m.fps),
        render=RenderConfig(
            width=m.width,
            height=m.height,
            albedo="uniform",
            camera=CameraConfig(azimuths_deg=(0.0,), elevation_deg=15.0, distance=1.2),
            raster=RasterSettings(sigma=1.0, gamma=0.01),
        ),
        guidance=dataclasses.replace(GuidanceConfig(kind=kind), guidance_scale=25.0),
        optim=OptimConfig(steps=1000, lr_rotation=0.005, lr_translation=0.002, checkpoint_every=50, preview_every=50),
        weights=LossWeights(),
    )
