"""Plausibility audit of any animation: ground contact, foot skate, self-intersection, joint limits, bone
lengths and jitter, with pass/fail per check, the failing frame ranges and the body parts involved.

``audit_motion(rig, motion)`` returns an :class:`AuditReport` (``report.to_json()``); the figures
(:func:`plot_timeline`, :func:`plot_worst_frame`) import matplotlib only when called. File loading, atomic
output and pytest assertions live in :mod:`usd_io.audit_io`.

Default thresholds (:class:`AuditConfig`) were calibrated on the Fox's Survey/Walk/Run, CMU 131_01/131_02,
the procedural biped/quadruped walks and idles against clips made bad on purpose; the figures are in
:mod:`sim.audit.config`.
"""

from .checks import CHECK_NAMES, audit_motion, derived_joint_limits, frame_ranges
from .config import AuditConfig
from .report import AUDIT_SCHEMA, AuditReport, CheckResult, FrameRange, json_ready

__all__ = [
    "AUDIT_SCHEMA",
    "CHECK_NAMES",
    "AuditConfig",
    "AuditReport",
    "CheckResult",
    "FrameRange",
    "audit_motion",
    "derived_joint_limits",
    "frame_ranges",
    "json_ready",
    "plot_timeline",
    "plot_worst_frame",
]


def plot_timeline(report: AuditReport, path) -> None:
    """Writes the per-frame metrics with their thresholds and failing ranges as a PNG (see :mod:`.plots`)."""
    from .plots import plot_timeline as _plot

    _plot(report, path)


def plot_worst_frame(report: AuditReport, path, frame: int | None = None) -> None:
    """Writes the worst frame with offending regions in red as a PNG (see :mod:`.plots`)."""
    from .plots import plot_worst_frame as _plot

    _plot(report, path, frame)
