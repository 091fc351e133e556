"""A quick preview of a skinned motion: flat-shaded triangles drawn with matplotlib, saved as GIF or MP4.

The physical motion is drawn in colour; an optional reference motion is drawn beside it as a translucent ghost.
The camera follows the pair from a three-quarter side view. matplotlib and imageio are imported on first use.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from ..kinematics import pose_motion, skin_motion
from ..motion import Motion
from ..rig import Rig

__all__ = ["render_preview"]


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
    """Writes a GIF (or MP4 when ``path`` ends in .mp4) of ``motion``, with ``ghost`` drawn beside it.

    Args:
        path: output file (written atomically).
        rig: the rig both motions animate.
        motion: the motion to show (colour).
        ghost: optional reference motion, drawn translucent and offset sideways by 1.5 character widths.
        size: image size [px] (width, height).
        max_frames: keep every n-th frame so that at most this many are drawn (None: every frame).
        ground_height: ground plane height [m].
        title: caption.
    """
    import imageio.v2 as imageio
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.collections import PolyCollection

    if max_frames is not None and max_frames < 1:
        raise ValueError(f"max_frames: must be at least 1 (or None for every frame), got {max_frames}")
    pts, tris = _points(rig, motion)
    F = pts.shape[0]
    step = max(1, int(np.ceil(F / max_frames))) if max_frames is not None else 1
    frames = np.arange(0, F, step)
    gpts = None
    if ghost is not None:
        gpts = _points(rig, ghost)[0]
        gpts = gpts[np.minimum(np.arange(F), gpts.shape[0] - 1)]
    # heading from the root's travel; camera on the character's right, three-quarter view, looking slightly down
    root = pts[:, :, :2].mean(axis=1)
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
    extent = pts[0].max(axis=0) - pts[0].min(axis=0)
    height = float(extent[2])
    size_h = float(max(np.abs(extent @ heading), np.abs(extent @ left), 1e-6))  # horizontal size
    # the ghost stands beside the character on screen (to its right), one character length away
    offset = right * 1.25 * size_h
    if gpts is not None:
        gpts = gpts + offset
    span = 1.15 * (size_h + (np.linalg.norm(offset) if gpts is not None else 0.0)) + 1e-6
    span = max(span, 1.6 * height)
    w, h = size
    dpi = 100
    images = []
    for f in frames:
        fig = plt.figure(figsize=(w / dpi, h / dpi), dpi=dpi)
        ax = fig.add_axes((0, 0, 1, 1))
        ax.set_axis_off()
        centre = pts[f].mean(axis=0) + (0.5 * offset if gpts is not None else 0.0)
        centre[2] = ground_height + 0.45 * height
        aspect = h / w

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
        ax.text(0.02, 0.96, f"{label}  t={motion.times[f]:.2f}s", transform=ax.transAxes, fontsize=7, va="top")
        fig.canvas.draw()
        img = np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()
        plt.close(fig)
        images.append(img)
    fps = motion.fps / step
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=f".tmp{path.suffix}", dir=path.parent)
    os.close(fd)
    try:
        if path.suffix.lower() == ".mp4":
            imageio.mimsave(tmp, images, fps=fps)
        else:
            imageio.mimsave(tmp, images, duration=1000.0 / fps, loop=0)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
