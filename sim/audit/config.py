"""Thresholds of the plausibility audit, calibrated on real and constructed clips (see :mod:`sim.audit`).

Every length threshold is a fraction of the character size (largest extent of the bind-pose bounding box,
:func:`sim.contact_metrics.character_size`), so one config serves a 0.5 m fox, a 1.8 m human and a 155-unit
glTF fox alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..contact_metrics import ContactConfig
from ..mesh_intersection import SelfIntersectionConfig

__all__ = ["AuditConfig"]


@dataclass(frozen=True)
class AuditConfig:
    """What the audit measures and when a check fails."""

    contact: ContactConfig = field(default_factory=ContactConfig)
    """Ground plane and contact detection on skinned vertices."""
    self_intersection: SelfIntersectionConfig = field(default_factory=SelfIntersectionConfig)
    """Which face pairs are rest-pose neighbours (never tested)."""
    joint_contact_height_rel: float = 0.06
    """Contact band (x size) for rigs without a mesh: joint centres sit a foot's thickness above the ground."""
    penetration_rel: float = 0.015
    """Ground penetration (x size) that fails when it lasts ``min_event_s`` or longer."""
    penetration_hard_rel: float = 0.03
    """Ground penetration (x size) that fails on any single frame."""
    min_event_s: float = 0.25
    """Shortest sustained event [s] (penetration above ``penetration_rel``) that fails."""
    slide_rel: float = 0.12
    """Net slide (x size) of a body part over one ground-contact phase that fails (foot skate)."""
    self_intersection_length_rel: float = 0.2
    """Length of the self-intersection contour on a frame (x size) that fails."""
    limit_margin_deg: float = 45.0
    """Joint limits derived from the clip itself: margin around its robust range [deg]."""
    limit_quantile: float = 0.05
    """Joint limits derived from the clip itself: the range spans these quantiles (robust to glitches)."""
    jerk_rel: float = 4000.0
    """Joint jerk (x size per s^3, measured at ``jitter_fps``) that fails: pops and jitter."""
    jitter_fps: float = 30.0
    """Clips sampled faster are resampled to this rate before measuring jerk (jerk of noise grows as fps^3) [1/s]."""
    bone_drift_rel: float = 0.01
    """Change of a bone's length (x size) that fails (root-motion bones above the hips are exempt)."""
    max_parts: int = 5
    """Body parts named per failing check, most severe first."""
