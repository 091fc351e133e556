"""Motion data model: per-frame root translation and per-joint local rotations of a rig."""

from __future__ import annotations

import numpy as np

from ._numbers import is_finite_real, is_real
from .rig import Rig, RigError, _array
from .rotations import quat_normalize, quat_slerp

__all__ = ["Motion"]

RESAMPLE_TOLERANCE = 1e-6
"""Relative tolerance [frames per frame of duration] within which :meth:`Motion.resample` counts a duration as a
whole number of frames (float32 key times are rounded to ~6e-8 relative; :meth:`Motion.is_uniform` allows 1e-6
frames)."""


class Motion:
    """A sampled joint trajectory.

    A frame's pose replaces each joint's rest rotation by ``rotations[f, j]``, the root joint's rest translation
    by ``root_translations[f]`` and, when ``translations`` is given, every other joint's rest translation by
    ``translations[f, j]`` (its root column always equals ``root_translations``).

    Attributes:
        fps: nominal frame rate [1/s] (USD's timeCodesPerSecond on export).
        times: sample times [s], strictly increasing, shape (frame_count,). Defaults to ``arange(F) / fps``;
            keyframed clips keep their key times here.
        root_translations: root joint position in skeleton space [m], shape (frame_count, 3).
        rotations: local joint rotations [unit quat xyzw], shape (frame_count, joint_count, 4).
        translations: optional local joint translations [m], shape (frame_count, joint_count, 3).
        name: clip name.
    """

    def __init__(
        self,
        fps: float,
        root_translations,
        rotations,
        translations=None,
        *,
        times=None,
        name: str = "motion",
    ):
        """Validates and stores the motion (quaternions are normalized, w >= 0).

        Raises:
            RigError: bad shapes, non-finite values, zero quaternions, non-increasing times, fps <= 0.
        """
        self.name = str(name)
        if not is_real(fps):
            raise RigError(f"motion {self.name!r} fps: must be a positive number, got {fps!r}")  # True was 1 fps
        self.fps = float(fps)
        if not np.isfinite(self.fps) or self.fps <= 0:
            raise RigError(f"motion {self.name!r} fps: must be a positive number, got {fps}")
        rot = _array(f"motion {self.name!r} rotations", rotations, np.float64, (None, None, 4))
        frames, joints = rot.shape[:2]
        if frames == 0:
            raise RigError(f"motion {self.name!r} rotations: no frames")
        try:
            self.rotations = quat_normalize(rot)
        except ValueError:
            raise RigError(f"motion {self.name!r} rotations: zero-length quaternion") from None
        self.root_translations = _array(
            f"motion {self.name!r} root_translations", root_translations, np.float64, (frames, 3)
        )
        if translations is not None:
            translations = _array(f"motion {self.name!r} translations", translations, np.float64, (frames, joints, 3))
            translations[:, 0] = self.root_translations
        self.translations = translations
        if times is None:
            times = np.arange(frames) / self.fps
        self.times = _array(f"motion {self.name!r} times", times, np.float64, (frames,))
        if frames > 1 and not np.all(np.diff(self.times) > 0):
            raise RigError(f"motion {self.name!r} times: must be strictly increasing")

    @classmethod
    def rest(cls, rig: Rig, frame_count: int = 1, fps: float = 30.0, name: str = "rest") -> Motion:
        """The rig's rest pose held for ``frame_count`` frames."""
        rot = np.broadcast_to(rig.rest_rotations, (frame_count, rig.joint_count, 4))
        root = np.broadcast_to(rig.rest_translations[0], (frame_count, 3))
        return cls(fps, root, rot, name=name)

    @property
    def frame_count(self) -> int:
        return self.rotations.shape[0]

    @property
    def joint_count(self) -> int:
        return self.rotations.shape[1]

    @property
    def duration(self) -> float:
        """Time from the first to the last sample [s]."""
        return float(self.times[-1] - self.times[0])

    def check_rig(self, rig: Rig) -> None:
        """Raises RigError when the motion does not fit ``rig`` (joint count)."""
        if self.joint_count != rig.joint_count:
            raise RigError(
                f"motion {self.name!r} has {self.joint_count} joints but rig {rig.name!r} has {rig.joint_count}"
            )

    def local_translations(self, rig: Rig) -> np.ndarray:
        """Per-frame local translations of every joint [m], shape (frame_count, joint_count, 3)."""
        self.check_rig(rig)
        if self.translations is not None:
            return self.translations.copy()
        t = np.broadcast_to(rig.rest_translations, (self.frame_count, rig.joint_count, 3)).copy()
        t[:, 0] = self.root_translations
        return t

    def is_uniform(self, tolerance: float = 1e-6) -> bool:
        """True when ``times`` lie on the ``1/fps`` grid from ``times[0]``: frame ``k`` within ``tolerance *
        max(1, k)`` frames of its grid point (relative, as float32 key times drift: 2 s of glTF keys at 30 fps were
        off by more than a fixed 1e-6 frames, and so was their ``resample``)."""
        k = (self.times - self.times[0]) * self.fps
        near = np.abs(k - np.round(k)) < tolerance * np.maximum(1.0, np.abs(k))
        return bool(np.all(near) and np.all(np.diff(np.round(k)) == 1))

    def sample(self, times) -> Motion:
        """Linear (translations) / slerp (rotations) resampling at ``times`` [s] (a scalar or shape (T,)),
        clamped at the ends; a scalar gives a one-frame motion."""
        times = np.atleast_1d(np.asarray(times, dtype=np.float64))
        idx = np.clip(np.searchsorted(self.times, times, side="right") - 1, 0, self.frame_count - 1)
        nxt = np.minimum(idx + 1, self.frame_count - 1)
        span = np.where(nxt > idx, self.times[nxt] - self.times[idx], 1.0)
        u = np.clip((times - self.times[idx]) / span, 0.0, 1.0)
        lerp = lambda a: a[idx] + (a[nxt] - a[idx]) * u.reshape(-1, *([1] * (a.ndim - 1)))  # noqa: E731
        rot = quat_slerp(self.rotations[idx], self.rotations[nxt], u[:, None])
        trans = None if self.translations is None else lerp(self.translations)
        return Motion(self.fps, lerp(self.root_translations), rot, trans, times=times, name=self.name)

    def resample(self, fps: float) -> Motion:
        """Uniform resampling at ``fps`` [1/s] over the clip's duration.

        A duration within ``RESAMPLE_TOLERANCE`` (relative) of a whole number of frames keeps its last frame, whose
        time is clamped to the clip's end: glTF key times are float32 and a clip looped on them ends a few 1e-7 s
        short of its grid point.

        Raises:
            RigError: ``fps`` is not a positive finite number (names the motion).
        """
        if not (is_finite_real(fps) and fps > 0):
            raise RigError(f"motion {self.name!r} resample fps: must be a positive number, got {fps!r}")
        frames = self.duration * fps  # intervals [frames]
        count = int(np.floor(frames + RESAMPLE_TOLERANCE * max(1.0, frames))) + 1
        m = self.sample(np.minimum(self.times[0] + np.arange(count) / fps, self.times[-1]))
        m.fps = float(fps)
        return m

    def slice(self, start: int, stop: int) -> Motion:
        """Frames ``[start, stop)``."""
        s = slice(start, stop)
        trans = None if self.translations is None else self.translations[s]
        return Motion(
            self.fps, self.root_translations[s], self.rotations[s], trans, times=self.times[s], name=self.name
        )

    def __repr__(self) -> str:
        return f"Motion({self.name!r}, frames={self.frame_count}, joints={self.joint_count}, fps={self.fps:g})"
