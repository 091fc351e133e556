"""The audit's result: one :class:`CheckResult` per check, summary metrics, per-frame series, JSON output."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

__all__ = ["AUDIT_SCHEMA", "AuditReport", "CheckResult", "FrameRange"]

AUDIT_SCHEMA = "kinedistill.audit/1"
"""``schema`` field of report.json."""

Status = Literal["pass", "fail", "skipped"]


@dataclass(frozen=True)
class FrameRange:
    """Frames ``[start, stop)`` and their times [s] (``stop_s`` is the time of frame ``stop - 1``)."""

    start: int
    stop: int
    start_s: float
    stop_s: float

    def __str__(self) -> str:
        if self.stop - 1 == self.start:  # one frame: one time, not a zero-length range "0.70-0.70 s"
            return f"frame {self.start} ({self.start_s:.2f} s)"
        return f"frames {self.start}-{self.stop - 1} ({self.start_s:.2f}-{self.stop_s:.2f} s)"


@dataclass
class CheckResult:
    """One check of the audit.

    Attributes:
        name: check name (``ground_penetration``, ``floating``, ``foot_skate``, ``self_intersection``,
            ``joint_limits``, ``bone_length``, ``jitter``).
        status: ``"pass"``, ``"fail"`` or ``"skipped"`` (e.g. no mesh for self-intersection).
        value: the measured worst value, in ``unit``.
        threshold: the failing threshold, in ``unit``.
        unit: unit of value and threshold.
        message: one line for people, naming frames and body parts when it fails.
        frame_ranges: failing frame ranges.
        body_parts: joints involved, most severe first.
        worst_frame: frame of the worst value (-1 when none).
        series: name of the per-frame series in :attr:`AuditReport.series` this check reads (or "").
        details: check-specific extras (JSON-ready).
    """

    name: str
    status: Status
    value: float
    threshold: float
    unit: str
    message: str
    frame_ranges: list[FrameRange] = field(default_factory=list)
    body_parts: list[str] = field(default_factory=list)
    worst_frame: int = -1
    series: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.status == "fail"


@dataclass
class AuditReport:
    """Everything the audit measured on one clip.

    Attributes:
        rig_name, clip_name, source: what was audited.
        frame_count, fps, duration_s: clip sampling.
        size_m: character size the thresholds scale with [m].
        up_axis, ground_height_m: ground plane.
        has_mesh: whether mesh checks ran (False: metrics on joint positions, mesh checks skipped).
        checks: the checks in a fixed order.
        metrics: summary metrics by group (``ground``, ``self_intersection``, ``kinematic``).
        series: per-frame series by name (``times_s`` and one per check), each of length frame_count.
        config: the resolved config (JSON-ready).
        geometry: in-memory data for the worst-frame plot (not serialized).
    """

    rig_name: str
    clip_name: str
    source: str
    frame_count: int
    fps: float
    duration_s: float
    size_m: float
    up_axis: str
    ground_height_m: float
    has_mesh: bool
    checks: list[CheckResult]
    metrics: dict[str, dict[str, float]]
    series: dict[str, np.ndarray]
    config: dict[str, Any]
    geometry: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def passed(self) -> bool:
        """True when no check failed."""
        return not any(c.failed for c in self.checks)

    @property
    def failed_checks(self) -> list[CheckResult]:
        return [c for c in self.checks if c.failed]

    def check(self, name: str) -> CheckResult:
        """The check called ``name``; KeyError listing the checks otherwise."""
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(f"no check {name!r}; checks: {', '.join(c.name for c in self.checks)}")

    def worst_frame(self) -> int:
        """The frame the worst-frame figure shows: the worst frame of the failing check with the largest
        value/threshold ratio (of any check when all pass). A check failing any value above 0 (joint limits) has
        no ratio: it is ``1 + value / details["severity_scale"]`` (for joint limits the margin the limits were
        derived with: an excess of a whole margin counts as twice a threshold)."""
        pool = self.failed_checks or [c for c in self.checks if c.status != "skipped" and c.worst_frame >= 0]
        if not pool:
            return 0

        def severity(c: CheckResult) -> float:
            if c.threshold > 0:
                return c.value / c.threshold
            scale = c.details.get("severity_scale", 0.0)
            return 1.0 + c.value / scale if c.failed and scale > 0 else 0.0

        return max(max(pool, key=severity).worst_frame, 0)

    def summary(self) -> str:
        """A few lines for people: verdict, then one line per check."""
        head = f"{self.rig_name}/{self.clip_name}: {'PASS' if self.passed else 'FAIL'}"
        lines = [head] + [f"  [{c.status}] {c.name}: {c.message}" for c in self.checks]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary (NaN and infinities become None)."""
        out = {
            "schema": AUDIT_SCHEMA,
            "passed": self.passed,
            "rig": self.rig_name,
            "clip": self.clip_name,
            "source": self.source,
            "frame_count": self.frame_count,
            "fps": self.fps,
            "duration_s": self.duration_s,
            "size_m": self.size_m,
            "up_axis": self.up_axis,
            "ground_height_m": self.ground_height_m,
            "has_mesh": self.has_mesh,
            "checks": [dataclasses.asdict(c) for c in self.checks],
            "metrics": self.metrics,
            "config": self.config,
            "series": {k: np.asarray(v).tolist() for k, v in self.series.items()},
        }
        return json_ready(out)

    def to_json(self, indent: int | None = 1) -> str:
        """The report as JSON text (``report.json``)."""
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)


def json_ready(x):
    """``x`` with NumPy values as plain numbers and lists, tuples as lists and NaN / infinities as None (strict JSON:
    ``json.dumps(..., allow_nan=False)``); other values unchanged."""
    if isinstance(x, dict):
        return {str(k): json_ready(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [json_ready(v) for v in x]
    if isinstance(x, np.ndarray):
        return json_ready(x.tolist())
    if isinstance(x, np.bool_ | bool):
        return bool(x)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, float | np.floating):
        v = float(x)
        return v if math.isfinite(v) else None
    return x
