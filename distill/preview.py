"""Preview files of rendered videos: every view side by side, as an animated GIF or an MP4."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

__all__ = ["video_grid", "write_preview"]


def video_grid(video: torch.Tensor) -> np.ndarray:
    """Views (B, F, 3, H, W) in [0, 1] -> frames with the views side by side, uint8, shape (F, H, B * W, 3)."""
    v = video.detach().float().clamp(0, 1).cpu()
    b, f, _, h, w = v.shape
    grid = v.permute(1, 3, 0, 4, 2).reshape(f, h, b * w, 3)
    return (grid.numpy() * 255.0 + 0.5).astype(np.uint8)


def write_preview(path: str | Path, video: torch.Tensor, fps: float) -> Path:
    """Writes the views of ``video`` (B, F, 3, H, W) in [0, 1] side by side, atomically: an MP4 for a ``.mp4``
    suffix (any case; needs imageio-ffmpeg), a GIF for any other (:func:`sim.physics.preview.write_video`: GIF
    delays that add up to the clip's length at ``fps``, MP4 frames at their own size)."""
    from sim.physics.preview import write_video

    return write_video(path, video_grid(video), fps)
