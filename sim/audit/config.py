"""Thresholds of the plausibility audit, calibrated on real and constructed clips.

Every length threshold is a fraction of the character size (largest extent of the bind-pose bounding box,
:func:`sim.contact_metrics.character_size`), so one config serves a 0.5 m fox, a 1.8 m human and a 155-unit
glTF fox alike.

Calibration (``examples/audit.py`` defaults; values as % of size unless stated; slides net / path; jerk: third
differences, in sizes/s^3):

===============================  ============  =================  ==============  ===========  ==================
clip                             penetration   max slide          contour (self)  jerk         verdict
===============================  ============  =================  ==============  ===========  ==================
Fox Survey / Walk / Run          0.08/1.3/2.3  0/0, 8.0/20, 7/33  1.2/4.0/30.5    43/1375/1231 pass/pass/FAIL
procedural biped walk / idle     0.0 / 0.0     0.2/0.4, 0/0.1     0 / 0.2         405 / 0      pass / pass
procedural quadruped walk/idle   0.0 / 0.0     0.1/0.1, 0/0       16.3 / 0        1320 / 185   pass / pass
CMU 131_01 / 131_02 (joints)     1.7 / 4.3     18/62, 113/257     skipped         4067 / 5611  FAIL / FAIL
biped walk sunk 3 cm, [20,45)    1.7 (25 fr)   12.2/12.7          0               1246         FAIL
biped walk + 0.8 m/s root drift  0.0           28.9/28.9          0               777          FAIL skate
biped walk, arm through torso    0.0           0.2/0.4            71.5 (min 23)   12225        FAIL self, jitter
quadruped, root +-3 cm zig-zag   0.0           6.2/105            16.3            6829         FAIL skate, jitter
quadruped, 0.3 m pop / teleport  0.0           0.1/62, 31/31      16.3            25051/16685  FAIL skate, jitter
quadruped at 60 fps, 1 m pop     0.0           0.1/206            16.3            83386        FAIL skate, jitter
  on frame 41
quadruped, leg +100 deg for 5    0.0           0.1/0.1            16.3            26422        FAIL limits (48 deg),
  of 49 frames                                                                                 jitter
biped idle, +-4 cm at 3 Hz, 2 s  0.0           0/52               0.1             138          FAIL skate
===============================  ============  =================  ==============  ===========  ==================

The Fox's Run fails self-intersection: its low-poly legs sink into its belly (contour 30% of its size, 7% of
faces, vertices up to 3% of its size deep) on frames 0 and 19-24. The Fox's in-place Walk and Run slide their
planted paws back and forth about the best constant treadmill (paths 20% and 33% of the size, nets 8% and 7%):
the path threshold (40%) sits above them, the net one (12%) stays below a 0.2 m/s glide of 2 s (23%). The CMU
files fail on joints: toe tips drift along the floor inside the joint contact band, 131_02's left toe tip is 5.9
cm under the floor for 0.35 s, and the right thumb/wrist swing 45-73 deg beyond their robust range for a few
frames; 131_02 also fails jitter there (its right thumb flips 180 deg for 5 frames, its tip popping 7.7 cm).
Without the thumbs the CMU jerk peaks at 3261 / 4141 (toes striking the floor), the clean clips' largest, 1.21x
below the threshold; derived joint limits pass every clean clip with at least 13 deg of the 45 deg margin left
(Fox Run: 32 deg used).
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
    slide_path_rel: float = 0.4
    """Slide path (x size) of a body part over one ground-contact phase that fails (foot skate): the path length
    its contact points slide (:attr:`sim.contact_metrics.ContactSlide.path_m`), so sliding back and forth adds up
    where the net slide cancels. Above the clean in-place loops' 20% (Fox Walk) and 33% (Fox Run): their planted
    feet slide back and forth about the best constant treadmill."""
    self_intersection_length_rel: float = 0.2
    """Length of the self-intersection contour on a frame (x size) that fails."""
    limit_margin_deg: float = 45.0
    """Joint limits derived from the clip itself: margin around its robust range [deg]."""
    limit_quantile: float = 0.05
    """Joint limits derived from the clip itself: the range spans these quantiles (robust to glitches)."""
    limit_min_tail_s: float = 0.2
    """Joint limits derived from the clip itself: the range leaves out at least this long of the clip's frames at
    each end (:meth:`limit_min_tail_frames`; up to ``limit_max_quantile`` of them): 5% of a 49-frame clip is 2.4
    frames, and a leg turned 100 deg for 5 frames dragged the range along and passed [s]."""
    limit_max_quantile: float = 0.11
    """Joint limits derived from the clip itself: the most ``limit_min_tail_s`` raises the quantile to (a short
    loop's brief extreme poses stay in its range: the Fox Walk's forepaws need 25 deg of the 45 deg margin at 0.11,
    more than it at 0.25)."""
    jerk_rel: float = 5000.0
    """Joint jerk (x size per s^3, third differences at ``jitter_fps`` or less) that fails: pops and jitter. At 30
    fps a one-frame pop of ``a`` reads ``3 a 30^3``, a teleport ``2 a 30^3``, a frame-to-frame alternation ``+-a``
    ``8 a 30^3``: 5000 sizes/s^3 is a pop of 6.2% of the size, a teleport of 9.3%, an alternation of +-2.3%.
    Clean clips read at most 4141 (a toe striking the floor in CMU 131_02)."""
    jitter_fps: float = 30.0
    """Highest rate jerk is measured at [1/s]: faster clips are measured on every ``ceil(fps / jitter_fps)``-th
    frame from every starting frame, and frame-to-frame changes as if that many frames apart
    (:func:`sim.audit.checks.jitter_jerk`; the jerk of noise grows as fps^3)."""
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

    def limit_min_tail_frames(self, motion) -> int:
        """Frames of ``motion`` (a :class:`sim.Motion`) that ``limit_min_tail_s`` spans, rounded up: its frame
        rate times that, or its mean key rate for keyframed clips (the ``min_tail`` of
        :func:`sim.contact_metrics.joint_limits_from_motions`)."""
        if motion.frame_count < 2 or not motion.duration > 0:
            return 0
        rate = motion.fps if motion.is_uniform() else (motion.frame_count - 1) / motion.duration
        return math.ceil(self.limit_min_tail_s * rate - 1e-9)

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
                    "slide_path_rel", "self_intersection_length_rel", "jerk_rel", "jitter_fps",
                    "bone_drift_rel")  # fmt: skip
        for name in positive:
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"AuditConfig.{name}: must be a positive finite number, got {value}")
        for name in ("min_event_s", "limit_margin_deg", "limit_min_tail_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"AuditConfig.{name}: must be a finite number >= 0, got {value}")
        if not (0.0 <= self.limit_quantile < 0.5):
            raise ValueError(f"AuditConfig.limit_quantile: must be in [0, 0.5), got {self.limit_quantile}")
        if not (0.0 <= self.limit_max_quantile < 0.5):
            raise ValueError(f"AuditConfig.limit_max_quantile: must be in [0, 0.5), got {self.limit_max_quantile}")
        if self.max_parts < 1:
            raise ValueError(f"AuditConfig.max_parts: must be >= 1, got {self.max_parts}")
        # the nested configs: a NaN ground height hid penetration; every number must be finite
        for part in ("contact", "self_intersection"):
            sub = getattr(self, part)
            for f in dataclasses.fields(sub):
                value = getattr(sub, f.name)
                if isinstance(value, float) and not math.isfinite(value):
                    raise ValueError(f"AuditConfig.{part}.{f.name}: must be a finite number, got {value}")
        self.contact.check("AuditConfig.contact")
        si = self.self_intersection
        for part, sub, names, strict in (
            ("self_intersection", si, ("inside_offset_rel", "max_depth_rel", "weld_tolerance_rel"), True),
            ("self_intersection", si, ("rest_clearance_rel",), False),
        ):
            for name in names:
                value = getattr(sub, name)
                if not (value > 0 if strict else value >= 0):
                    raise ValueError(f"AuditConfig.{part}.{name}: must be {'> 0' if strict else '>= 0'}, got {value}")
        if isinstance(si.ring_count, bool) or not isinstance(si.ring_count, int) or si.ring_count < 0:
            count = si.ring_count
            raise ValueError(f"AuditConfig.self_intersection.ring_count: must be an integer >= 0, got {count!r}")
        return self
