"""Thresholds of the plausibility audit, calibrated on real and constructed clips.

Every length threshold is a fraction of the character size (largest extent of the bind-pose bounding box,
:func:`sim.contact_metrics.character_size`), so one config serves a 0.5 m fox, a 1.8 m human and a 155-unit
glTF fox alike.

Calibration (``examples/audit.py`` defaults; values as % of size unless stated):

===============================  ===========  ==========  ===============  ============  =============
clip                             penetration  max slide   contour (self)   jerk [1/s^3]  verdict
===============================  ===========  ==========  ===============  ============  =============
Fox Survey / Walk / Run          0.08/1.3/2.3 0/8.0/10.0  1.2/4.0/30.5     12/456/572    pass/pass/FAIL
procedural biped walk / idle     0.0 / 0.0    0.2 / 0     0 / 0.2          346 / 0       pass / pass
procedural quadruped walk/idle   0.0 / 0.0    0.1 / 0     16.3 / 0         621 / 160     pass / pass
CMU 131_01 / 131_02 (joints)     1.7 / 4.3    17.6 / 113  skipped          1861 / 2043   FAIL / FAIL
biped walk sunk 3 cm, [20,45)    1.7 (25 fr)  12.1        0                382           FAIL 20-44
biped walk + 0.8 m/s root drift  0.0          28.9        0                397           FAIL 15-56
biped walk, arm through torso    0.0          0.2         71.5 (min 23)    1542          FAIL 20-44
===============================  ===========  ==========  ===============  ============  =============

The Fox's Run fails self-intersection: its low-poly legs sink into its belly (contour 30% of its size, 7% of
faces, vertices up to 3% of its size deep) on frames 0 and 19-24. The CMU files fail on joints: toe tips drift
along the floor inside the joint contact band, 131_02's left toe tip is 5.9 cm under the floor for 0.35 s,
and the right thumb/wrist swing 45-73 deg beyond their robust range for a few frames.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from ..contact_metrics import ContactConfig
from ..mesh_intersection import SelfIntersectionConfig

__all__ = ["AuditConfig"]


def _type_error(argument: str, expected: type, got: object, path: str | None = None) -> TypeError:
    """TypeError naming ``argument``, the expected class (``path``: its public path, default its module's) and the
    class given, each with its module (several modules define a ContactConfig or JointLimits)."""
    path = path or f"{expected.__module__}.{expected.__qualname__}"
    given = f"{type(got).__module__}.{type(got).__qualname__}"
    same = " (another class of the same name)" if type(got).__name__ == expected.__name__ else ""
    return TypeError(f"{argument}: expected a {path}, got a {given}{same}")


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

    @classmethod
    def checked(cls, config: AuditConfig | None, argument: str = "config") -> AuditConfig:
        """The config a function runs with: ``config`` checked, or the default when None.

        Raises:
            TypeError: ``config`` is not an AuditConfig (e.g. a ``ContactConfig``), naming ``argument``.
            ValueError: see :meth:`check`.
        """
        if config is None:
            return cls().check()
        if not isinstance(config, AuditConfig):
            raise _type_error(argument, AuditConfig, config, "sim.audit.AuditConfig")
        return config.check()

    def check(self) -> AuditConfig:
        """Returns the config; raises ValueError naming the first threshold that is not a usable number, TypeError
        naming a nested config of the wrong class (``sim.physics.ContactConfig`` shares a name with
        :class:`sim.contact_metrics.ContactConfig`).

        A NaN threshold would otherwise pass every check (no comparison with NaN is true).
        """
        for part, expected in (("contact", ContactConfig), ("self_intersection", SelfIntersectionConfig)):
            if not isinstance(getattr(self, part), expected):
                raise _type_error(f"AuditConfig.{part}", expected, getattr(self, part))
        positive = ("joint_contact_height_rel", "penetration_rel", "penetration_hard_rel", "slide_rel",
                    "self_intersection_length_rel", "jerk_rel", "jitter_fps", "bone_drift_rel")  # fmt: skip
        for name in positive:
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"AuditConfig.{name}: must be a positive finite number, got {value}")
        for name in ("min_event_s", "limit_margin_deg"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"AuditConfig.{name}: must be a finite number >= 0, got {value}")
        if not (0.0 <= self.limit_quantile < 0.5):
            raise ValueError(f"AuditConfig.limit_quantile: must be in [0, 0.5), got {self.limit_quantile}")
        if self.max_parts < 1:
            raise ValueError(f"AuditConfig.max_parts: must be >= 1, got {self.max_parts}")
        # the nested configs: a NaN ground height hid penetration; every number must be finite
        for part in ("contact", "self_intersection"):
            sub = getattr(self, part)
            for f in dataclasses.fields(sub):
                value = getattr(sub, f.name)
                if isinstance(value, float) and not math.isfinite(value):
                    raise ValueError(f"AuditConfig.{part}.{f.name}: must be a finite number, got {value}")
        c, si = self.contact, self.self_intersection
        for part, sub, names, strict in (
            ("contact", c, ("contact_height_rel", "skate_speed_rel", "max_flight_time_s", "hover_time_s"), True),
            ("contact", c, ("in_place_rel",), False),
            ("self_intersection", si, ("inside_offset_rel", "max_depth_rel"), True),
            ("self_intersection", si, ("rest_clearance_rel", "weld_tolerance_rel"), False),
        ):
            for name in names:
                value = getattr(sub, name)
                if not (value > 0 if strict else value >= 0):
                    raise ValueError(f"AuditConfig.{part}.{name}: must be {'> 0' if strict else '>= 0'}, got {value}")
        if isinstance(si.ring_count, bool) or not isinstance(si.ring_count, int) or si.ring_count < 0:
            count = si.ring_count
            raise ValueError(f"AuditConfig.self_intersection.ring_count: must be an integer >= 0, got {count!r}")
        return self
