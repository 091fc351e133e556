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
    """Writes the views of ``video`` side by side; the format follows the suffix (``.gif`` or ``.mp4``).

    MP4 needs an ffmpeg backend for imageio (``imageio-ffmpeg``); GIF works everywhere. A GIF's per-frame delays are
    :func:`sim.physics.preview.gif_frame_durations_ms` (10 ms steps that add up to the clip's length at ``fps``); a
    single frame is written as a one-frame GIF showing it for ``1 / fps``.
    """
    import imageio.v3 as iio

    from sim.physics.preview import gif_frame_durations_ms
    from usd_io import atomic_output

    path = Path(path)
    frames = video_grid(video)
    with atomic_output(path) as tmp:
        if path.suffix.lower() == ".gif":
            durations = gif_frame_durations_ms(len(frames), fps)
            # Pillow writes one frame through its single-image path, which takes one delay, not a list of them
            duration = durations[0] if len(durations) == 1 else durations
            iio.imwrite(tmp, frames, extension=".gif", duration=duration, loop=0)
        else:
            iio.imwrite(tmp, frames, extension=path.suffix, fps=fps)
    return path
