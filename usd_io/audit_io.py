"""Plausibility audit of files, its output folder, and assertions for users' pytest suites.

* :func:`audit_file` loads any source :func:`usd_io.load_asset` reads (UsdSkel, glTF, BVH, ``procedural:NAME``)
  and runs :func:`sim.audit.audit_motion` on one clip. BVH has no mesh: the contact checks then run on joint
  positions and the self-intersection check is reported as skipped.
* :func:`write_audit` writes ``report.json``, ``timeline.png`` and ``worst_frame.png`` into a folder, each
  atomically; every CLI that writes an animation calls it next to its output.
* ``assert_ground_contact``, ``assert_no_self_intersection``, ``assert_no_foot_skate``: one-line checks whose
  AssertionError names the failing frames (with times) and the body parts (joint names). ``source`` is a path,
  an :class:`usd_io.Asset` or a ``(rig, motion)`` pair.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sim import Motion, Rig
from sim.audit import AuditConfig, AuditReport, audit_motion, derived_joint_limits, frame_ranges
from sim.audit.checks import contact_points
from sim.contact_metrics import (
    GroundContactMetrics,
    JointLimits,
    ground_contact_metrics,
)
from sim.mesh_intersection import MeshSelfIntersection, SelfIntersectionMetrics, face_labels

from .asset import Asset, load_asset
from .atomic import atomic_output
from .errors import InputError

__all__ = [
    "AUDIT_FILES",
    "assert_ground_contact",
    "assert_no_foot_skate",
    "assert_no_self_intersection",
    "audit_asset",
    "audit_file",
    "audit_folder_names",
    "write_audit",
]

AUDIT_FILES = ("report.json", "timeline.png", "worst_frame.png")
"""What :func:`write_audit` writes."""

Source = str | Path | Asset | tuple[Rig, Motion]


def audit_asset(
    asset: Asset, clip: str | None = None, config: AuditConfig | None = None, *, limits: JointLimits | None = None
) -> AuditReport:
    """Audits one clip of an asset (the first when ``clip`` is None).

    Joint limits, unless given, are derived from all of the asset's clips (robust range plus the config's
    margin), so a clip is held to what the character does elsewhere.

    Raises:
        InputError: no such clip, or the asset has none.
        TypeError: ``config`` or ``limits`` of another class.
    """
    cfg = AuditConfig.checked(config)
    motion = _clip(asset, clip)
    if limits is None:
        limits = derived_joint_limits(asset.rig, list(asset.clips.values()), cfg)
    return audit_motion(asset.rig, motion, cfg, limits=limits, source=asset.source)


def audit_file(
    path: str | Path,
    clip: str | None = None,
    config: AuditConfig | None = None,
    *,
    limits: JointLimits | None = None,
    **load_options,
) -> AuditReport:
    """Loads ``path`` (any format :func:`usd_io.load_asset` reads) and audits one clip.

    Args:
        path: a UsdSkel stage, glTF/GLB, BVH, or ``procedural:NAME``.
        clip: clip name (default: the first).
        config: thresholds.
        limits: joint limits (default: derived from all clips of the file).
        **load_options: passed to the reader (e.g. ``meters_per_unit`` for BVH).

    Raises:
        InputError: unreadable file, unknown clip (the message names file and field).
    """
    return audit_asset(load_asset(path, **load_options), clip, config, limits=limits)


AUDIT_FOLDER_BYTES = 200
"""Longest audit folder name (file systems take 255 bytes, the suffix of a repeated name included)."""


def audit_folder_names(clip_names: Sequence[str]) -> list[str]:
    """A folder name per clip for its audit (same order): characters outside ``[A-Za-z0-9._-]`` replaced by ``_``,
    at most :data:`AUDIT_FOLDER_BYTES`, and unique ignoring case (``_1``, ``_2``, ... in order): ``Walk 1`` and
    ``Walk:1``, or ``Walk`` and ``walk`` on a case-insensitive disk, shared one folder and one audit overwrote the
    other."""
    out: list[str] = []
    taken: set[str] = set()
    for clip_name in clip_names:
        base = re.sub(r"[^A-Za-z0-9._-]", "_", clip_name).strip(".")[:AUDIT_FOLDER_BYTES] or "clip"
        name, k = base, 1
        while name.lower() in taken:
            name, k = f"{base}_{k}", k + 1
        taken.add(name.lower())
        out.append(name)
    return out


def write_audit(
    output_dir: str | Path,
    rig: Rig,
    motion: Motion,
    config: AuditConfig | None = None,
    *,
    limits: JointLimits | None = None,
    source: str = "",
    report: AuditReport | None = None,
) -> AuditReport:
    """Audits ``motion`` (unless ``report`` is given) and writes :data:`AUDIT_FILES` into ``output_dir``.

    Each file is written to a temporary name and renamed into place, so readers never see half a file.

    Returns:
        The report.
    """
    if report is None:
        report = audit_motion(rig, motion, config, limits=limits, source=source)
    out = Path(output_dir)
    with atomic_output(out / "report.json") as tmp:
        tmp.write_text(report.to_json() + "\n")
    from sim.audit import plot_timeline, plot_worst_frame

    with atomic_output(out / "timeline.png") as tmp:
        plot_timeline(report, tmp)
    with atomic_output(out / "worst_frame.png") as tmp:
        plot_worst_frame(report, tmp)
    return report


# -- pytest helpers ------------------------------------------------------------------------------------------


@dataclass
class _Resolved:
    rig: Rig
    motion: Motion
    label: str


def _clip(asset: Asset, clip: str | None) -> Motion:
    try:
        return asset.clip(clip)
    except KeyError as e:  # its message starts with the source, which InputError puts first already
        problem = str(e.args[0]).removeprefix(f"{asset.source}: ")
        raise InputError(asset.source or asset.rig.name, "clip", problem) from None


def _threshold(argument: str, value: float | None, optional: bool = True) -> float | None:
    """``value`` as a float; ValueError naming ``argument`` unless it is a finite number >= 0 (or None when
    ``optional``): a NaN limit would pass every frame, no comparison with NaN being true."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{argument}: must be a finite number >= 0 [m], got {value!r}")
    return float(value)


def _resolve(source: Source, clip: str | None) -> _Resolved:
    if isinstance(source, tuple):
        if len(source) != 2 or not isinstance(source[0], Rig) or not isinstance(source[1], Motion):
            raise TypeError("source: expected a path, an usd_io.Asset or a (Rig, Motion) pair")
        rig, motion = source
        return _Resolved(rig, motion, f"{rig.name}/{motion.name}")
    asset = source if isinstance(source, Asset) else load_asset(source)
    motion = _clip(asset, clip)
    return _Resolved(asset.rig, motion, f"{asset.source or asset.rig.name} clip {motion.name!r}")


def _frames_text(mask: np.ndarray, times: np.ndarray, limit: int = 3) -> str:
    ranges = frame_ranges(mask, times)
    text = ", ".join(str(r) for r in ranges[:limit])
    return text + (f" and {len(ranges) - limit} more ranges" if len(ranges) > limit else "")


def assert_ground_contact(
    source: Source,
    max_penetration_m: float = 0.01,
    *,
    clip: str | None = None,
    allow_floating: bool = False,
    config: AuditConfig | None = None,
) -> GroundContactMetrics:
    """Asserts that no point goes deeper than ``max_penetration_m`` into the ground and, unless
    ``allow_floating``, that the character never floats (see :mod:`sim.contact_metrics`).

    Args:
        source: a file path (any format :func:`usd_io.load_asset` reads), an Asset, or a (rig, motion) pair.
        max_penetration_m: allowed depth below the ground [m] (in the rig's units).
        clip: clip name for files/assets (default: the first).
        allow_floating: skip the floating part.
        config: an :class:`sim.audit.AuditConfig` (its ``.contact`` sets the ground plane and contact band).

    Returns:
        The ground-contact metrics (for further assertions).

    Raises:
        AssertionError: naming the frames (and times) and the deepest body part.
        ValueError: ``max_penetration_m`` is not a finite number >= 0.
        TypeError: ``config`` is not an AuditConfig.
    """
    max_penetration_m = _threshold("max_penetration_m", max_penetration_m, optional=False)
    cfg = AuditConfig.checked(config)
    r = _resolve(source, clip)
    cp = contact_points(r.rig, r.motion, cfg)
    g = ground_contact_metrics(cp.points, r.motion.times, cp.contact, size=cp.size, labels=cp.labels,
                               label_count=r.rig.joint_count)  # fmt: skip
    names = r.rig.joint_names
    problems = []
    bad = g.penetration_max > max_penetration_m
    if bad.any():
        worst = int(g.penetration_max.argmax())
        part = names[g.penetration_label[worst]]
        parts = _top_parts(np.where(bad[:, None], g.part_penetration, 0.0).max(axis=0), names, max_penetration_m)
        problems.append(
            f"ground penetration {g.penetration_max.max():.4g} m > {max_penetration_m:.4g} m at "
            f"{_frames_text(bad, g.times)}; deepest at frame {worst} in {part!r} (parts: {', '.join(parts)})"
        )
    if not allow_floating and g.floating.any():
        problems.append(
            f"floating up to {g.floating_height.max():.4g} m above the ground at {_frames_text(g.floating, g.times)}"
        )
    if problems:
        raise AssertionError(f"{r.label}: " + "; ".join(problems))
    return g


def assert_no_foot_skate(
    source: Source,
    max_slide_m: float | None = None,
    *,
    clip: str | None = None,
    config: AuditConfig | None = None,
) -> GroundContactMetrics:
    """Asserts that no body part slides further than ``max_slide_m`` over one ground-contact phase (net), nor
    along a path longer than ``config.slide_path_rel`` x character size (sliding back and forth adds up).

    Args:
        source: a file path, an Asset, or a (rig, motion) pair.
        max_slide_m: allowed net slide per contact [m]; default ``config.slide_rel`` x character size.
        clip: clip name for files/assets.
        config: an :class:`sim.audit.AuditConfig`: contact settings and the default slide threshold.

    Raises:
        AssertionError: naming each failing contact's frames and body part.
        ValueError: ``max_slide_m`` is not None or a finite number >= 0.
        TypeError: ``config`` is not an AuditConfig.
    """
    max_slide_m = _threshold("max_slide_m", max_slide_m)
    cfg = AuditConfig.checked(config)
    r = _resolve(source, clip)
    cp = contact_points(r.rig, r.motion, cfg)
    g = ground_contact_metrics(cp.points, r.motion.times, cp.contact, size=cp.size, labels=cp.labels,
                               label_count=r.rig.joint_count)  # fmt: skip
    limit = cfg.slide_rel * cp.size if max_slide_m is None else max_slide_m
    path_limit = cfg.slide_path_rel * cp.size
    bad = sorted(
        (s for s in g.slides if s.distance_m > limit or s.path_m > path_limit),
        key=lambda s: -max(s.distance_m / max(limit, 1e-300), s.path_m / path_limit),
    )
    if bad:
        t = g.times
        items = [
            f"{r.rig.joint_names[s.part]!r} slides {s.distance_m:.4g} m net along a {s.path_m:.4g} m path over "
            f"frames {s.start}-{s.stop - 1} ({t[s.start]:.2f}-{t[s.stop - 1]:.2f} s)"
            for s in bad[:5]
        ]
        more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        raise AssertionError(
            f"{r.label}: foot skate above {limit:.4g} m net or {path_limit:.4g} m of path per contact: "
            + "; ".join(items)
            + more
        )
    return g


def assert_no_self_intersection(
    source: Source,
    max_contour_m: float | None = None,
    *,
    max_depth_m: float | None = None,
    clip: str | None = None,
    config: AuditConfig | None = None,
) -> SelfIntersectionMetrics:
    """Asserts that the skinned mesh does not pass through itself (beyond rest-pose neighbours).

    Args:
        source: a file path, an Asset, or a (rig, motion) pair; the rig needs a mesh.
        max_contour_m: allowed length of the intersection contour on a frame [m]; default
            ``config.self_intersection_length_rel`` x character size. Pass 0 to allow no intersection at all.
        max_depth_m: also fail when a vertex lies deeper than this inside the body [m].
        clip: clip name for files/assets.
        config: an :class:`sim.audit.AuditConfig`: which face pairs are rest neighbours, default threshold.

    Raises:
        AssertionError: naming the failing frames and the joints whose faces intersect.
        InputError: the rig has no mesh.
        ValueError: ``max_contour_m`` or ``max_depth_m`` is not None or a finite number >= 0.
        TypeError: ``config`` is not an AuditConfig.
    """
    max_contour_m = _threshold("max_contour_m", max_contour_m)
    max_depth_m = _threshold("max_depth_m", max_depth_m)
    cfg = AuditConfig.checked(config)
    r = _resolve(source, clip)
    cp = contact_points(r.rig, r.motion, cfg)
    if cp.mesh is None:
        raise InputError(r.label, "meshes", "no skinned mesh to test for self-intersection")
    checker = MeshSelfIntersection(cp.mesh.triangles, cp.mesh.points, cfg.self_intersection, size=cp.size)
    si = checker.motion(cp.points, penetration=max_depth_m is not None)
    limit = cfg.self_intersection_length_rel * cp.size if max_contour_m is None else max_contour_m
    bad = si.length_m > limit
    if max_depth_m is not None:
        bad |= si.depth_m > max_depth_m
    if bad.any():
        labels = face_labels(cp.mesh)
        names = r.rig.joint_names
        pair_len: dict[tuple[str, str], float] = {}
        for f in np.flatnonzero(bad):
            fr = si.frames[f]
            for (i, j), ln in zip(fr.pairs, fr.lengths):
                key = tuple(sorted((names[labels[i]], names[labels[j]])))
                pair_len[key] = pair_len.get(key, 0.0) + float(ln)
        top = ", ".join(f"{a}/{b}" for (a, b), _ in sorted(pair_len.items(), key=lambda kv: -kv[1])[:5])
        worst = int(si.length_m.argmax())
        depth = f", deepest vertex {si.depth_m.max():.4g} m" if max_depth_m is not None else ""
        raise AssertionError(
            f"{r.label}: self-intersection at {_frames_text(bad, r.motion.times)} (contour up to "
            f"{si.length_m.max():.4g} m at frame {worst}, limit {limit:.4g} m{depth}) between {top}"
        )
    return si


def _top_parts(scores: np.ndarray, names: tuple[str, ...], floor: float, limit: int = 5) -> list[str]:
    order = np.argsort(-scores, kind="stable")
    return [names[p] for p in order[:limit] if scores[p] > floor]
