"""A quick preview of a skinned motion: flat-shaded triangles drawn with matplotlib, saved as GIF or MP4.

The physical motion is drawn in colour; an optional reference motion is drawn beside it as a translucent ghost.
The camera follows the pair from a three-quarter side view of the reference's travel, framing both characters (and
the caption) in every frame at one scale for the clip. matplotlib and imageio are imported on first use.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .._atomic import atomic_file
from .._numbers import is_finite_real
from ..kinematics import pose_motion, skin_motion
from ..motion import Motion
from ..rig import Rig

__all__ = ["GIF_MAX_FPS", "gif_frame_durations_ms", "render_preview", "write_video"]

GIF_MAX_FPS = 50.0
"""Highest frame rate a GIF preview plays at [1/s]: many viewers play delays under 20 ms as 100 ms."""
_CAPTION_PT = 7.0
"""Caption font size [pt]."""


def gif_frame_durations_ms(frame_count: int, fps: float) -> list[int]:
    """Per-frame GIF delays [ms] that play ``frame_count`` frames at ``fps``.

    GIF stores delays in 10 ms steps (writers drop the rest), so one constant ``1000 / fps`` plays 30 fps at 30 ms a
    frame, 10% fast. Here frame k (from 1) ends at ``round(100 k / fps)`` centiseconds: every delay is a multiple of
    10 ms, each frame's rounding error is carried into the next, and the first k frames (the whole clip included)
    last within 5 ms of k / fps. Above :data:`GIF_MAX_FPS` some delays are under 20 ms, which many viewers stretch.

    Args:
        frame_count: number of frames (0 gives an empty list).
        fps: frame rate [1/s].

    Returns:
        ``frame_count`` delays [ms], ints.

    Raises:
        ValueError: a negative frame count, or an fps that is not a positive finite number.
    """
    if int(frame_count) != frame_count or frame_count < 0:
        raise ValueError(f"frame_count: must be a non-negative integer, got {frame_count}")
    if not (np.isfinite(fps) and fps > 0):
        raise ValueError(f"fps: must be a positive finite number, got {fps}")
    ends = np.round(np.arange(1, int(frame_count) + 1) * 100.0 / float(fps)).astype(np.int64)  # centiseconds
    return [int(d) for d in 10 * np.diff(ends, prepend=0)]


def write_video(path: str | Path, frames: np.ndarray, fps: float) -> Path:
    """Writes RGB frames (F, H, W, 3) uint8 atomically (temp file, then rename) as an MP4 for a ``.mp4`` suffix (any
    case; needs imageio-ffmpeg) and as a GIF for any other suffix (or none).

    A GIF plays at ``fps`` through :func:`gif_frame_durations_ms` (a single frame shows for ``1 / fps``). An MP4 of
    odd width or height gets one edge row / column repeated (H.264 wants even sizes) instead of being rescaled
    (imageio's default rescales to multiples of 16, blurring every frame).

    Raises:
        ValueError: frames of another shape or dtype, no frames, or an fps that is not a positive finite number.
    """
    import imageio.v3 as iio

    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8 or not frames.size:
        raise ValueError(f"frames: expected RGB uint8 frames of shape (F > 0, H, W, 3), got {frames.dtype} "
                         f"{frames.shape}")  # fmt: skip
    if not (is_finite_real(fps) and fps > 0):
        raise ValueError(f"fps: must be a positive finite number, got {fps!r}")
    path = Path(path)
    mp4 = path.suffix.lower() == ".mp4"
    with atomic_file(path, ".mp4" if mp4 else ".gif") as tmp:
        if mp4:
            _, h, w, _ = frames.shape
            frames = np.pad(frames, ((0, 0), (0, h % 2), (0, w % 2), (0, 0)), mode="edge")
            iio.imwrite(tmp, frames, plugin="FFMPEG", fps=float(fps), macro_block_size=2)
        else:
            durations = gif_frame_durations_ms(len(frames), float(fps))
            # Pillow writes one frame through its single-image path, which takes one delay, not a list of them
            duration = durations[0] if len(durations) == 1 else durations
            iio.imwrite(tmp, frames, extension=".gif", duration=duration, loop=0)
    return path


def _fit_view(
    clouds: list[np.ndarray], right: np.ndarray, up: np.ndarray, size: tuple[int, int], dpi: float, fps: float
) -> tuple[float, np.ndarray]:
    """One view width for the clip and a screen centre per frame that keep every point of every frame in view.

    The caption's band at the top and a small margin on every side stay clear of the points. The centres follow the
    points' box, smoothed over about half a second, then clamped so that each frame's box stays inside its view.

    Args:
        clouds: point sets drawn together, each of shape (n, V_i, 3) for the n drawn frames.
        right, up: screen axes (unit, orthogonal) in world space.
        size: image size [px] (width, height).
        dpi: dots per inch of the figure (the caption's size in pixels).
        fps: drawn frames per second (the smoothing window).

    Returns:
        (span, centres): the view's width [m] and the screen centres [m] along (right, up), shape (n, 2).
    """
    w, h = size
    pad = max(2.0, 0.03 * min(w, h))  # [px] on every side
    top = 0.04 * h + 1.4 * _CAPTION_PT / 72.0 * dpi  # [px]: the caption's band, placed 4% below the top edge
    lo, hi = [], []
    for xyz in zip(*clouds, strict=True):
        pts = np.concatenate(xyz, axis=0)
        scr = np.stack([pts @ right, pts @ up], axis=-1)
        lo.append(scr.min(axis=0))
        hi.append(scr.max(axis=0))
    lo, hi = np.array(lo), np.array(hi)
    box = hi - lo
    usable = np.array([w - 2.0 * pad, h - pad - top])  # [px]
    if np.any(usable < 1.0):  # a tiny image: draw edge to edge
        pad, top, usable = 0.0, 0.0, np.array([float(w), float(h)])
    span = float(max(np.max(box[:, 0] / usable[0]), np.max(box[:, 1] / usable[1]), 1e-6 / w) * w)
    s = span / w  # [m/px]
    half = np.array([w / 2.0, h / 2.0]) * s
    low = hi - half + np.array([pad, top]) * s  # the lowest centre that keeps the box's far side in view
    high = lo + half - pad * s  # the highest that keeps its near side in view
    want = 0.5 * (low + high)
    k = min(round(0.25 * fps), len(want) - 1)  # half a window, in frames
    if k > 0:
        padded = np.pad(want, ((k, k), (0, 0)), mode="reflect", reflect_type="odd")  # keeps steady travel unbiased
        kernel = np.ones(2 * k + 1) / (2 * k + 1)
        want = np.stack([np.convolve(padded[:, i], kernel, mode="valid") for i in range(2)], axis=-1)
    return span, np.clip(want, low, np.maximum(low, high))


def _bone_tubes(pos: np.ndarray, parents: np.ndarray, radius: float, sides: int = 6) -> tuple[np.ndarray, np.ndarray]:
    """Hexagonal prisms around the bones: points (F, 2 * sides * nbones, 3) and triangles (T, 3).

    Args:
        pos: world joint positions [m], shape (F, J, 3).
        parents: parent index per joint (-1 for the root), shape (J,).
        radius: prism radius [m].
        sides: sides per prism.
    """
    child = np.array([c for c, p in enumerate(parents) if p >= 0], dtype=np.int64)
    parent = np.asarray(parents, dtype=np.int64)[child]
    a, b = pos[:, parent], pos[:, child]  # (F, N, 3)
    axis = b - a
    length = np.linalg.norm(axis, axis=-1, keepdims=True)
    axis = np.where(length > 1e-12, axis / np.maximum(length, 1e-12), np.array([0.0, 0.0, 1.0]))
    helper = np.where(np.abs(axis[..., 2:3]) < 0.9, np.array([0.0, 0.0, 1.0]), np.array([1.0, 0.0, 0.0]))
    u = np.cross(axis, helper)
    u /= np.linalg.norm(u, axis=-1, keepdims=True)
    v = np.cross(axis, u)
    ang = 2.0 * np.pi * np.arange(sides) / sides
    ring = radius * (np.cos(ang)[:, None] * u[..., None, :] + np.sin(ang)[:, None] * v[..., None, :])  # (F, N, S, 3)
    pts = np.concatenate([a[..., None, :] + ring, b[..., None, :] + ring], axis=-2)  # (F, N, 2S, 3)
    k = np.arange(sides)
    k1 = (k + 1) % sides
    quad = np.concatenate([np.stack([k, k1, sides + k], 1), np.stack([k1, sides + k1, sides + k], 1)])
    tris = (quad[None] + (2 * sides) * np.arange(len(child))[:, None, None]).reshape(-1, 3)
    return pts.reshape(pos.shape[0], -1, 3), tris


def _points(rig: Rig, motion: Motion) -> tuple[np.ndarray, np.ndarray]:
    """Skinned vertices (F, V, 3) and triangles (T, 3); meshless rigs draw their bones as thin prisms."""
    if rig.meshes and sum(len(m.triangles) for m in rig.meshes):
        mesh = rig.merged_mesh()
        return skin_motion(rig, motion, mesh=mesh)[0], mesh.triangles
    pos = pose_motion(rig, motion)[0]
    extent = np.ptp(pos[0], axis=0).max() if pos.size else 1.0
    return _bone_tubes(pos, rig.parents, 0.015 * max(float(extent), 1e-6))


def render_preview(
    path: str | Path,
    rig: Rig,
    motion: Motion,
    ghost: Motion | None = None,
    *,
    size: tuple[int, int] = (480, 320),
    max_frames: int | None = None,
    ground_height: float = 0.0,
    title: str = "",
) -> None:
    """Writes a GIF (an MP4 when ``path`` ends in .mp4) of ``motion``, with ``ghost`` drawn beside it.

    The camera looks across the reference's travel (``ghost``'s, else ``motion``'s) at one scale for the clip, and
    follows the two so that both stay whole in every frame, clear of the caption. A GIF plays at the motion's rate
    (its per-frame delays are :func:`gif_frame_durations_ms`), drawing every n-th frame above :data:`GIF_MAX_FPS`.

    Args:
        path: output file (written atomically): an MP4 for a .mp4 suffix, a GIF for any other (or none).
        rig: the rig both motions animate.
        motion: the motion to show (colour).
        ghost: optional reference motion, drawn translucent and offset to the right on screen by 1.25 character sizes.
        size: image size [px] (width, height).
        max_frames: keep every n-th frame so that at most this many are drawn (None: every frame).
        ground_height: ground plane height [m].
        title: caption.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.collections import PolyCollection

    if max_frames is not None and max_frames < 1:
        raise ValueError(f"max_frames: must be at least 1 (or None for every frame), got {max_frames}")
    pts, tris = _points(rig, motion)
    F = pts.shape[0]
    step = max(1, int(np.ceil(F / max_frames))) if max_frames is not None else 1
    if Path(path).suffix.lower() != ".mp4":  # faster GIF delays are not played as written
        step = max(step, int(np.ceil(motion.fps / GIF_MAX_FPS - 1e-9)))
    frames = np.arange(0, F, step)
    gpts = None
    if ghost is not None:
        gpts = _points(rig, ghost)[0]
        gpts = gpts[np.minimum(np.arange(F), gpts.shape[0] - 1)]
    # heading from the reference's travel (the simulation may have fallen or turned); camera on the character's
    # right, three-quarter view, looking slightly down
    lead = pts if gpts is None else gpts
    root = lead[:, :, :2].mean(axis=1)
    travel = root[-1] - root[0]
    heading = travel / np.linalg.norm(travel) if np.linalg.norm(travel) > 1e-6 else np.array([1.0, 0.0])
    heading = np.array([heading[0], heading[1], 0.0])
    left = np.cross([0.0, 0.0, 1.0], heading)
    yaw = np.deg2rad(30.0)
    view = left * np.cos(yaw) + heading * np.sin(yaw)  # from the camera towards the scene
    view = view + np.array([0.0, 0.0, -0.35])
    view /= np.linalg.norm(view)
    right = np.cross(view, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    up = np.cross(right, view)
    light = -view + np.array([0.0, 0.0, 0.6])
    light /= np.linalg.norm(light)
    extent = lead[0].max(axis=0) - lead[0].min(axis=0)  # the reference's first pose
    size_h = float(max(np.abs(extent @ heading), np.abs(extent @ left), 1e-6))  # horizontal size
    # the ghost stands beside the character on screen (to its right), one character length away
    offset = right * 1.25 * size_h
    if gpts is not None:
        gpts = gpts + offset
    w, h = size
    dpi = 100
    aspect = h / w
    drawn = [pts[frames]] + ([] if gpts is None else [gpts[frames]])
    span, centres = _fit_view(drawn, right, up, (w, h), dpi, motion.fps / step)
    images = []
    for i, f in enumerate(frames):
        fig = plt.figure(figsize=(w / dpi, h / dpi), dpi=dpi)
        ax = fig.add_axes((0, 0, 1, 1))
        ax.set_axis_off()
        centre = centres[i, 0] * right + centres[i, 1] * up  # the screen centre, as a point in world space
        centre = centre + (ground_height - centre[2]) / view[2] * view  # moved along the view onto the ground

        def project(p, centre=centre):
            d = p - centre
            return np.stack([d @ right, d @ up], axis=-1), d @ view

        # ground grid around the character
        g0 = np.floor((centre[:2] - span) / (span / 4)) * (span / 4)
        for k in range(9):
            for axis in (0, 1):
                a = np.array([g0[0], g0[1], ground_height])
                b = a.copy()
                a[axis] += k * span / 4
                b[axis] += k * span / 4
                b[1 - axis] += 2 * span
                a[1 - axis] -= 0.0
                (pa, _), (pb, _) = project(a), project(b)
                ax.plot([pa[0], pb[0]], [pa[1], pb[1]], color="0.85", lw=0.6, zorder=0)
        polys, colors, depths = [], [], []
        for cloud, base, alpha in (
            (pts[f], np.array([0.85, 0.45, 0.2]), 1.0),
            (None if gpts is None else gpts[f], np.array([0.5, 0.55, 0.7]), 0.35),
        ):
            if cloud is None:
                continue
            tri = cloud[tris]
            n = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
            n /= np.maximum(np.linalg.norm(n, axis=-1, keepdims=True), 1e-12)
            shade = 0.35 + 0.65 * np.abs(n @ light)
            xy, depth = project(tri.reshape(-1, 3))
            polys.append(xy.reshape(-1, 3, 2))
            depths.append(depth.reshape(-1, 3).mean(axis=1))
            rgba = np.concatenate([np.clip(shade[:, None] * base, 0, 1), np.full((len(tri), 1), alpha)], axis=1)
            colors.append(rgba)
        poly = np.concatenate(polys)
        order = np.argsort(-np.concatenate(depths))  # far first
        ax.add_collection(PolyCollection(poly[order], facecolors=np.concatenate(colors)[order], edgecolors="none"))
        ax.set_xlim(-span / 2, span / 2)
        ax.set_ylim(-span * aspect / 2, span * aspect / 2)
        label = title or ""
        if ghost is not None:
            label = (label + "  " if label else "") + "(ghost: reference)"
        ax.text(
            0.02, 0.96, f"{label}  t={motion.times[f]:.2f}s", transform=ax.transAxes, fontsize=_CAPTION_PT, va="top"
        )
        fig.canvas.draw()
        img = np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()
        plt.close(fig)
        images.append(img)
    write_video(path, np.stack(images), motion.fps / step)
