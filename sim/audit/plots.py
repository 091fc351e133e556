"""Audit figures (matplotlib, Agg backend, imported only when a figure is drawn).

* :func:`plot_timeline`: one panel per check with its per-frame series, its threshold (dashed) and its failing
  frame ranges shaded red.
* :func:`plot_worst_frame`: two orthographic views (along both horizontal axes) of the skinned mesh at the worst frame,
  painter-sorted and shaded; intersecting faces red, vertices under the ground orange, the self-intersection
  contour black, the ground line brown. Rigs without a mesh are drawn as skeletons with offending joints red.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..contact_metrics import UP_AXES, horizontal_axes
from ..mesh_intersection import intersection_segments
from .report import AuditReport

__all__ = ["plot_timeline", "plot_worst_frame"]

_PANELS = (
    ("ground_penetration", "penetration_m", "ground penetration [m]"),
    ("floating", "floating_m", "floating height [m]"),
    ("foot_skate", "skate_speed_mps", "contact slide speed [m/s]"),
    ("self_intersection", "self_intersection_length_m", "self-intersection contour [m]"),
    ("joint_limits", "joint_limit_excess_deg", "joint-limit excess [deg]"),
    ("bone_length", "bone_drift_m", "bone-length change [m]"),
    ("jitter", "jerk_mps3", "max joint jerk [m/s^3]"),
)


def _pyplot():
    try:
        import matplotlib
    except ImportError as e:  # pragma: no cover - matplotlib is a dependency
        raise ImportError("audit figures need matplotlib: pip install matplotlib") from e
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def plot_timeline(report: AuditReport, path: str | Path) -> None:
    """Per-frame metrics over time with thresholds and failing ranges, as a PNG at ``path``."""
    plt = _pyplot()
    t = np.asarray(report.series["times_s"])
    panels = [p for p in _PANELS if report.check(p[0]).status != "skipped" and p[1] in report.series]
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 1.6 * len(panels) + 0.8), sharex=True, squeeze=False)
    for ax, (name, key, label) in zip(axes[:, 0], panels):
        check = report.check(name)
        y = np.asarray(report.series[key], dtype=float)
        color = "tab:red" if check.failed else "tab:blue"
        ax.plot(t, y, color=color, lw=1.2)
        if check.threshold > 0 and name != "foot_skate":  # the skate threshold is a distance per contact
            ax.axhline(check.threshold, color="k", ls="--", lw=0.8)
        for r in check.frame_ranges:
            ax.axvspan(t[r.start], t[r.stop - 1] + (t[1] - t[0] if len(t) > 1 else 0.0), color="red", alpha=0.15)
        ax.set_ylabel(label, fontsize=7)
        ax.tick_params(labelsize=7)
        ax.set_title(f"{name}: {check.status}", fontsize=8, loc="left", color=color)
    axes[-1, 0].set_xlabel("time [s]")
    verdict = "PASS" if report.passed else "FAIL"
    fig.suptitle(f"{report.rig_name} / {report.clip_name}: {verdict}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100, format="png")
    plt.close(fig)


def plot_worst_frame(report: AuditReport, path: str | Path, frame: int | None = None) -> None:
    """The worst frame (or ``frame``) from the side and the front, offending regions in red, as a PNG."""
    plt = _pyplot()
    from matplotlib.collections import LineCollection, PolyCollection

    geo = report.geometry
    if not geo:
        raise ValueError("report has no geometry (it was not made by audit_motion in this process)")
    f = report.worst_frame() if frame is None else int(frame)
    count = len(geo["points"])
    if not 0 <= f < count:  # -1 drew the last frame titled "frame -1"; past the end, a bare IndexError
        raise ValueError(f"frame: must be in [0, {count}), got {frame!r}")
    up = UP_AXES[report.up_axis]
    h0, h1 = horizontal_axes(report.up_axis)  # type: ignore[arg-type]
    pts = np.asarray(geo["points"][f])
    ground = report.ground_height_m
    views = (("view along " + "XYZ"[h1], h0, h1), ("view along " + "XYZ"[h0], h1, h0))  # (title, screen x, depth)
    fig, axes = plt.subplots(1, 2, figsize=(10, 5))
    tris = geo["triangles"]
    si = geo.get("self_intersection")
    for ax, (title, sx, depth_axis) in zip(axes, views):
        if tris is not None:
            hit = si.face_hit[f] if si is not None else np.zeros(len(tris), bool)
            tri = pts[tris]
            n = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
            n /= np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-30)
            light = np.zeros(3)
            light[depth_axis], light[up] = -0.6, 0.8
            shade = 0.35 + 0.6 * np.abs(n @ light)
            colors = np.stack([shade * 0.82, shade * 0.84, shade * 0.88, np.ones_like(shade)], axis=1)
            below = (tri[..., up] < ground).any(axis=1)
            colors[below] = [1.0, 0.55, 0.0, 1.0]
            colors[hit] = [0.9, 0.05, 0.05, 1.0]
            order = np.argsort(tri[..., depth_axis].mean(axis=1))[::-1]  # far first (viewer on the -depth side)
            order = np.concatenate([order[~hit[order]], order[hit[order]]])  # offending faces on top
            polys = tri[order][..., [sx, up]]
            ax.add_collection(PolyCollection(polys, facecolors=colors[order], edgecolors="none"))
            if si is not None and len(si.frames[f].pairs):
                seg = intersection_segments(pts, tris, si.frames[f].pairs)
                ax.add_collection(LineCollection(seg[..., [sx, up]], colors="k", linewidths=1.2))
        else:
            joints = np.asarray(geo["joints"][f])
            par = geo["parents"]
            segs = [joints[[j, p]][:, [sx, up]] for j, p in enumerate(par) if p >= 0]
            ax.add_collection(LineCollection(segs, colors="0.3", linewidths=2))
            bad = _offending_joints(report, f)
            ok = np.setdiff1d(np.arange(len(joints)), bad)
            ax.scatter(joints[ok, sx], joints[ok, up], s=10, c="0.3", zorder=3)
            ax.scatter(joints[bad, sx], joints[bad, up], s=30, c="red", zorder=4)
        lo, hi = pts.min(axis=0), pts.max(axis=0)
        pad = 0.08 * max(hi[sx] - lo[sx], hi[up] - lo[up], 1e-9)
        ax.axhline(ground, color="saddlebrown", lw=1.5)
        ax.set_xlim(lo[sx] - pad, hi[sx] + pad)
        ax.set_ylim(min(lo[up], ground) - pad, hi[up] + pad)
        ax.set_aspect("equal")
        ax.set_title(f"{title}: {'XYZ'[sx]}-{'XYZ'[up]} projection", fontsize=9)
        ax.tick_params(labelsize=7)
    failing = [c.name for c in report.checks if c.failed and any(r.start <= f < r.stop for r in c.frame_ranges)]
    note = ", ".join(failing) if failing else "no failing check on this frame"
    t = report.series["times_s"][f]
    fig.suptitle(f"{report.rig_name} / {report.clip_name}: frame {f} ({t:.2f} s): {note}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100, format="png")
    plt.close(fig)


def _offending_joints(report: AuditReport, frame: int) -> np.ndarray:
    """Joints named by a check failing on ``frame`` (skeleton view)."""
    names = list(report.geometry["joint_names"])
    bad = set()
    for c in report.checks:
        if c.failed and any(r.start <= frame < r.stop for r in c.frame_ranges):
            bad.update(names.index(p) for p in c.body_parts if p in names)
    pts = np.asarray(report.geometry["points"][frame])
    if report.geometry["triangles"] is None:
        up = UP_AXES[report.up_axis]
        bad.update(np.flatnonzero(pts[:, up] < report.ground_height_m).tolist())
    return np.array(sorted(bad), dtype=np.int64)
