"""Pose data: clips from every source ``usd_io`` reads, several skeletons in one set, split by clip.

A *clip spec* names where poses come from, as a string (for command lines) or a :class:`ClipSpec`:

* ``PATH`` or ``PATH#Clip1,Clip2``: a glTF/GLB, BVH or UsdSkel file (e.g. trajectories written by distillation),
  all its clips or the named ones;
* ``procedural:NAME`` (``#walk`` etc. as above): a built-in character's clips;
* ``gaits:NAME*COUNT``: COUNT random variations of a built-in character's walk (speed, duty factor, step
  height, paw flex, sway, wag, nod drawn around the defaults), named ``gait_0``, ``gait_1``, ...;
  ``gaits:NAME-idle*COUNT``: variations of its standing idle (sway, breath, look, arm drop, period), named
  ``idle_0``, ...; ``gaits:NAME-walk*COUNT`` is the same as ``gaits:NAME*COUNT``;
* ``gaits:biped[-walk|-idle]*COUNT@PATH``: those variations retargeted onto the skeleton of the file at ``PATH``
  (any humanoid: :func:`posespace.retarget.retarget_motion`), so procedural gaits feed any humanoid skeleton.

A loaded clip is named ``"source#clip"``; a ``gaits:`` source there names its seed (when not 0) and target, so
variations of other data never share a name: ``gaits:biped#gait_0``, ``gaits:biped+seed=1@PATH#gait_0``.
A clip reached through several specs is loaded once, also where they spell its file differently (``../x.glb#Run``
and ``/abs/x.glb#Run``: file paths compare as resolved) or name a built-in source by an alias
(``procedural:biped-walk`` is ``procedural:biped#walk``, ``gaits:biped-walk`` is ``gaits:biped``), and a held-out
name in any spelling holds it out.

Every clip is resampled to a common frame rate (slerp between keys) and encoded as canonical 6D poses
(:class:`posespace.PoseRig`). Clips of the same skeleton (same signature) share one :class:`RigPoses`.
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from sim import Motion, Rig, RigError

from ._checks import check_fraction, check_int, check_number
from ._rotations import remove_twist_x
from .pose_rig import IDENTITY_6D, PoseRig

__all__ = [
    "AugmentConfig",
    "ClipSpec",
    "PoseBatch",
    "PoseBatchSampler",
    "PoseSet",
    "RigPoses",
    "collate_poses",
    "load_clips",
    "parse_clip_spec",
]

GAIT_PREFIX = "gaits:"


@dataclass(frozen=True)
class ClipSpec:
    """Where poses come from (see the module docstring)."""

    source: str
    """A file path, ``procedural:NAME`` or ``gaits:NAME``."""
    clips: tuple[str, ...] | None = None
    """Clip names to use (all when None)."""
    count: int = 8
    """``gaits:`` sources: how many variations."""
    seed: int = 0
    """``gaits:`` sources: random seed of the variations."""
    target: str | None = None
    """``gaits:`` sources: a humanoid file (or ``procedural:NAME``) whose skeleton the variations are
    retargeted onto (None: the built-in character's own skeleton)."""

    def __post_init__(self):
        if self.source.startswith(GAIT_PREFIX):
            if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 1:
                from usd_io import InputError

                raise InputError(self.source, "count", f"must be an integer >= 1, got {self.count!r}")

    def __str__(self) -> str:
        s = self.source
        if self.source.startswith(GAIT_PREFIX):
            s += f"*{self.count}" + (f"@{self.target}" if self.target else "")
        return s + (f"#{','.join(self.clips)}" if self.clips else "")


def parse_clip_spec(text: str | ClipSpec) -> ClipSpec:
    """``"PATH#a,b"`` / ``"procedural:NAME#walk"`` / ``"gaits:NAME*COUNT"`` / ``"gaits:NAME*COUNT@PATH"`` ->
    :class:`ClipSpec`."""
    if isinstance(text, ClipSpec):
        return text
    source, clips = _split_clips(str(text))
    count, target = 8, None
    if source.startswith(GAIT_PREFIX):
        source, _, at = source.partition("@")
        target = at.strip() or None
        if "*" in source:
            source, _, n = source.partition("*")
            try:
                count = int(n)
            except ValueError:
                from usd_io import InputError

                raise InputError(text, "count", f"expected an integer after '*', got {n!r}") from None
    names = tuple(c.strip() for c in clips.split(",") if c.strip()) or None
    return ClipSpec(source, names, count, target=target)


def _split_clips(text: str) -> tuple[str, str]:
    """``text`` split into (source, clip list) at a ``#``: where the left part names an existing file (file names
    may contain ``#``), else at the last one (clip names do not)."""
    cuts = [i for i, c in enumerate(text) if c == "#"]
    if not cuts or _is_file(text):
        return text, ""
    cut = next((i for i in reversed(cuts) if _is_file(text[:i])), cuts[-1])
    return text[:cut], text[cut + 1 :]


def _is_file(source: str) -> bool:
    """Whether a source names an existing file (``PATH``, or the ``@PATH`` of a ``gaits:`` source)."""
    if source.startswith(GAIT_PREFIX):
        source = source.partition("@")[2]
    return bool(source) and Path(source).is_file()


_WALK_RANGES = {
    "speed": (0.6, 1.5), "duty_factor": (0.9, 1.1), "step_height": (0.6, 1.6), "paw_flex": (0.5, 1.5),
    "spine_sway": (0.3, 2.0), "tail_wag": (0.3, 2.0), "head_nod": (0.3, 2.5), "arm_swing": (0.5, 1.6),
    "elbow_bend": (0.5, 1.8), "pelvis_drop": (0.5, 1.5), "sway": (0.5, 1.5), "heel_lift": (0.7, 1.3),
}  # fmt: skip
"""Walk variations: each parameter is its default times a uniform factor in this range."""

_BIPED_WALK_RANGES = {**_WALK_RANGES, "speed": (0.35, 1.4), "pelvis_drop": (0.5, 3.0)}
"""Biped walks also stroll slowly and walk with softer knees (deeper pelvis drop)."""

_IDLE_RANGES = {
    "cycle_frames": (0.6, 1.6), "sway": (0.3, 2.5), "breath": (0.5, 2.0), "look": (0.2, 2.0),
    "tail_wag": (0.3, 2.0), "arm_drop": (0.5, 3.0),
}  # fmt: skip
"""Idle variations: each parameter is its default times a uniform factor in this range."""


def _gait_variations(name: str, count: int, seed: int) -> tuple[Rig, dict[str, Motion]]:
    """``count`` random walks (``NAME`` / ``NAME-walk``) or idles (``NAME-idle``) of a built-in character."""
    from sim.characters import procedural_asset_names
    from usd_io import InputError

    species, _, kind = name.partition("-")
    known = [n for n in procedural_asset_names() if "-" not in n]
    if species not in known:
        raise InputError(GAIT_PREFIX + name, "name", f"unknown character {species!r}; known: {', '.join(known)}")
    if kind == "idle":
        return _idle_variations(species, count, seed)
    if kind not in ("", "walk"):
        raise InputError(GAIT_PREFIX + name, "name", f"unknown clip kind {kind!r}; use walk or idle")
    return _walk_variations(species, count, seed)


def _idle_variations(name: str, count: int, seed: int) -> tuple[Rig, dict[str, Motion]]:
    """``count`` random standing idles of built-in character ``name`` (configs drawn around the defaults)."""
    from sim import characters

    rig, _ = characters.build(f"{name}-idle")
    base = characters.IdleConfig()
    rng = np.random.default_rng(seed)
    out: dict[str, Motion] = {}
    attempts = 0
    while len(out) < count and attempts < 10 * count:
        attempts += 1
        changes = {key: getattr(base, key) * rng.uniform(lo, hi) for key, (lo, hi) in _IDLE_RANGES.items()}
        changes["cycle_frames"] = max(8, round(changes["cycle_frames"]))
        try:
            _, clip = characters.build(f"{name}-idle", idle=dataclasses.replace(base, **changes))
        except (ValueError, RuntimeError):
            continue  # a leg cannot reach: draw again
        motion = next(iter(clip.values()))
        motion.name = f"idle_{len(out)}"
        out[motion.name] = motion
    return rig, out


def _walk_variations(name: str, count: int, seed: int) -> tuple[Rig, dict[str, Motion]]:
    """``count`` random walks of built-in character ``name`` (configs drawn around the defaults)."""
    from sim import characters

    rig, clips = characters.build(f"{name}-walk")
    base_walk = characters.QuadrupedWalkConfig() if name == "quadruped" else characters.BipedWalkConfig()
    rng = np.random.default_rng(seed)
    ranges = _WALK_RANGES if name == "quadruped" else _BIPED_WALK_RANGES
    out: dict[str, Motion] = {}
    scale = rig.height() / (characters.QuadrupedConfig() if name == "quadruped" else characters.BipedConfig()).height
    names = {f.name for f in dataclasses.fields(base_walk)}
    attempts = 0
    while len(out) < count and attempts < 10 * count:
        attempts += 1
        changes = {}
        for key, (lo, hi) in ranges.items():
            if key in names:
                value = getattr(base_walk, key) * rng.uniform(lo, hi)
                changes[key] = min(value, 0.75) if key == "duty_factor" else value
        if "speed" in changes:
            changes["speed"] *= scale
        if "step_height" in changes:
            changes["step_height"] *= scale
        walk = dataclasses.replace(base_walk, **changes)
        try:
            _, clip = characters.build(f"{name}-walk", walk=walk)
        except (ValueError, RuntimeError):
            continue  # a leg cannot reach: draw again
        motion = next(iter(clip.values()))
        motion.name = f"gait_{len(out)}"
        out[motion.name] = motion
    del clips
    return rig, out


def load_clips(spec: str | ClipSpec) -> tuple[Rig, dict[str, Motion]]:
    """The rig and the selected clips of one spec.

    Raises:
        usd_io.InputError: unreadable source or malformed ``gaits:`` spec; KeyError: unknown clip name (the
            message lists the clips);
        sim.RigError: a ``gaits:...@PATH`` source or target without a humanoid correspondence.
    """
    from usd_io import load_asset

    spec = parse_clip_spec(spec)
    if spec.source.startswith(GAIT_PREFIX):
        rig, clips = _gait_variations(spec.source[len(GAIT_PREFIX) :], spec.count, spec.seed)
        if spec.target is not None:
            from .retarget import humanoid_map, retarget_motion

            target = load_asset(spec.target).rig
            try:
                source_map, target_map = humanoid_map(rig), humanoid_map(target)
            except RigError as e:
                raise RigError(f"{spec}: {e}") from e
            clips = {n: retarget_motion(rig, m, target, source_map, target_map) for n, m in clips.items()}
            rig = target
    else:
        asset = load_asset(spec.source)
        rig, clips = asset.rig, dict(asset.clips)
    if spec.clips is not None:
        missing = [c for c in spec.clips if c not in clips]
        if missing:
            raise KeyError(f"{spec.source}: no clip {missing[0]!r}; available: {', '.join(clips)}")
        clips = {c: clips[c] for c in spec.clips}
    return rig, clips


def _clip_origin(spec: ClipSpec) -> str:
    """The ``source`` of the ``"source#clip"`` names of ``spec``'s clips: everything that changes a clip's data.

    That is the source, and for ``gaits:`` sources a seed other than 0 and the target skeleton:
    ``gaits:biped+seed=1@131_01.bvh`` (the default ``gaits:biped`` keeps its plain name). The count is left out:
    variation ``k`` is the same draw whatever the count, so ``gaits:biped*2`` and ``gaits:biped*8`` share
    ``gait_0`` and ``gait_1`` (loaded once).
    """
    if not spec.source.startswith(GAIT_PREFIX):
        return spec.source
    return spec.source + (f"+seed={spec.seed}" if spec.seed else "") + (f"@{spec.target}" if spec.target else "")


def _clip_identity(name: str) -> str:
    """The clip a ``"source#clip"`` name refers to, whatever the spelling of its source: the name with a file source,
    or the ``@PATH`` target of a ``gaits:`` source, as its resolved absolute path (``data/../x.bvh#walk`` ->
    ``/abs/x.bvh#walk``, ``gaits:biped@../y.bvh#gait_0`` -> ``gaits:biped@/abs/y.bvh#gait_0``), and a built-in
    source in one spelling (:func:`_builtin_source`: ``procedural:biped-walk#walk`` -> ``procedural:biped#walk``,
    ``gaits:biped-walk#gait_0`` -> ``gaits:biped#gait_0``). The source ends at the last ``#`` whose left part names
    an existing file (file and clip names may contain ``#``), else a built-in source at the last ``#``; other names
    (bare clip names, clips added in memory) are returned unchanged."""
    from usd_io import PROCEDURAL_PREFIX

    cut = next((i for i in reversed(range(len(name))) if name[i] == "#" and _is_file(name[:i])), None)
    if cut is None:
        cut = name.rfind("#")
        if cut < 0 or not name.startswith((GAIT_PREFIX, PROCEDURAL_PREFIX)):
            return name
        return _builtin_source(name[:cut]) + name[cut:]
    source = name[:cut]
    if source.startswith(GAIT_PREFIX):
        head, _, target = source.partition("@")
        return f"{_builtin_source(head)}@{Path(target).resolve()}{name[cut:]}"
    return f"{Path(source).resolve()}{name[cut:]}"


def _builtin_source(source: str) -> str:
    """A built-in source in one spelling: ``procedural:NAME-walk`` / ``procedural:NAME-idle`` -> ``procedural:NAME``
    (their one clip is ``NAME``'s ``walk`` / ``idle``: same rig, same data) and ``gaits:NAME-walk`` ->
    ``gaits:NAME`` (the same variations), its ``+seed=`` part kept and its ``@`` target in one spelling too. Other
    sources are unchanged."""
    from usd_io import PROCEDURAL_PREFIX

    if source.startswith(PROCEDURAL_PREFIX):
        base, sep, kind = source.partition("-")
        return base if sep and kind in ("walk", "idle") else source
    if source.startswith(GAIT_PREFIX):
        head, at, target = source.partition("@")
        body, plus, seed = head.partition("+")
        return body.removesuffix("-walk") + plus + seed + at + _builtin_source(target)
    return source


def _clip_matches(full_name: str, name: str, identity: Callable[[str], str] = _clip_identity) -> bool:
    """Whether ``name`` names the clip ``full_name`` (``"source#clip"``): the full name in any spelling of its file
    (``identity``: :func:`_clip_identity`, or a cached one) or the clip name."""
    return name == full_name or full_name.endswith("#" + name) or identity(name) == identity(full_name)


@dataclass
class RigPoses:
    """Poses of one skeleton.

    Attributes:
        pose_rig: the prepared rig.
        poses: canonical 6D poses, shape (N, J, 6).
        clip_ids: index into ``clip_names`` per pose, shape (N,).
        clip_names: ``"source#clip"`` per clip.
    """

    pose_rig: PoseRig
    poses: np.ndarray
    clip_ids: np.ndarray
    clip_names: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.poses)

    def select_clips(self, keep: np.ndarray) -> RigPoses:
        """The poses of the clips where ``keep`` (bool, one per clip) is True, clip ids renumbered."""
        rows = keep[self.clip_ids]
        ids = np.flatnonzero(keep)
        remap = -np.ones(len(self.clip_names), dtype=np.int64)
        remap[ids] = np.arange(len(ids))
        return RigPoses(self.pose_rig, self.poses[rows], remap[self.clip_ids[rows]], [self.clip_names[i] for i in ids])

    def clip(self, name: str) -> np.ndarray:
        """Poses of the clip called ``name`` (``"source#clip"`` or just ``clip``)."""
        for i, n in enumerate(self.clip_names):
            if _clip_matches(n, name):
                return self.poses[self.clip_ids == i]
        raise KeyError(f"no clip {name!r}; clips: {', '.join(self.clip_names)}")


class PoseSet:
    """Poses of several skeletons, grouped by skeleton signature.

    Attributes:
        rigs: one :class:`RigPoses` per skeleton, in the order first seen.
    """

    def __init__(self, rigs: Sequence[RigPoses] = ()):
        self.rigs = list(rigs)

    @classmethod
    def from_specs(cls, specs: Iterable[str | ClipSpec], fps: float = 60.0) -> PoseSet:
        """Loads every spec, resamples its clips to ``fps`` and groups them by skeleton.

        Clips are named ``"source#clip"`` (module docstring), in the spelling of the first spec that reaches them; a
        clip loaded already is skipped with a warning (the same file twice, also as another path to it such as
        ``../x.glb`` beside ``/abs/x.glb``: compared as the resolved file; or ``gaits:NAME*2`` beside
        ``gaits:NAME*8``, which share ``gait_0`` and ``gait_1``).

        Raises:
            usd_io.InputError: a spec whose source holds no clip (e.g. a BVH with ``Frames: 0``, a stage without a
                SkelAnimation): the message names the source; it is not skipped, even beside good data.
            and whatever ``load_clips`` raises.
        """
        from usd_io import InputError

        out = cls()
        seen: dict[str, str] = {}  # clip identity (resolved file) -> the name it was loaded as
        for spec in specs:
            spec = parse_clip_spec(spec)
            rig, clips = load_clips(spec)
            if not clips:
                raise InputError(spec.source, "clips", "holds no clip (no frames of motion) to take poses from")
            origin = _clip_origin(spec)
            for name, motion in clips.items():
                full = f"{origin}#{name}"
                key = _clip_identity(full)
                if key in seen:  # the same clip through two specs would count its poses twice
                    first = "" if seen[key] == full else f" (as {seen[key]!r})"
                    warnings.warn(f"{spec}: clip {name!r} was already loaded{first}; using it once", stacklevel=2)
                    continue
                seen[key] = full
                out.add(rig, motion, full, fps)
        return out

    def add(self, rig: Rig | PoseRig, motion: Motion, name: str | None = None, fps: float | None = 60.0) -> None:
        """Adds one clip (resampled to ``fps`` unless None)."""
        pose_rig = rig if isinstance(rig, PoseRig) else None
        rig = pose_rig.rig if pose_rig else rig
        if fps is not None and motion.frame_count > 1:
            motion = motion.resample(fps)
        entry = self.find(rig)
        if entry is None:
            entry = RigPoses(pose_rig or PoseRig(rig), np.zeros((0, rig.joint_count, 6)), np.zeros(0, dtype=np.int64))
            self.rigs.append(entry)
        poses = entry.pose_rig.encode(motion)
        entry.clip_names.append(name or motion.name)
        entry.poses = np.concatenate([entry.poses, poses])
        entry.clip_ids = np.concatenate([entry.clip_ids, np.full(len(poses), len(entry.clip_names) - 1)])

    def find(self, rig: Rig) -> RigPoses | None:
        """The entry of ``rig``'s skeleton, if any."""
        from .skeleton import rig_signature

        sig = rig_signature(rig)
        return next((r for r in self.rigs if r.pose_rig.signature == sig), None)

    def clip_names(self) -> list[str]:
        """Every clip's ``"source#clip"`` name, skeleton by skeleton."""
        return [n for r in self.rigs for n in r.clip_names]

    def split_by_clip(self, heldout: Iterable[str], strict: bool = True) -> tuple[PoseSet, PoseSet]:
        """(train, held-out): clips whose ``"source#clip"`` name or clip name is in ``heldout`` go to held-out.

        A file source matches in any spelling of its path (``../x.glb#Run`` holds out ``/abs/x.glb#Run``), and a
        held-out clip takes every clip of the same identity (:func:`_clip_identity`) with it: no spelling of it
        stays in training.

        Args:
            heldout: names, any iterable (read once).

        Raises:
            KeyError: ``strict`` and a held-out name matches no clip (a typo would silently train on everything);
                the message names the unmatched names and lists the clips.
        """
        if isinstance(heldout, str):  # iterated, 'march' held out 'm', 'a', 'r', 'c', 'h'
            raise ValueError(f"heldout: a list of clip names, got the string {heldout!r} (use [{heldout!r}])")
        heldout = list(dict.fromkeys(heldout))  # an iterator would be used up by the first pass
        names = self.clip_names()
        identity = functools.cache(_clip_identity)  # one look at the file system per name
        if strict:
            missing = [h for h in heldout if not any(_clip_matches(n, h, identity) for n in names)]
            if missing:
                raise KeyError(f"held-out {', '.join(map(repr, missing))}: no such clip; clips: {', '.join(names)}")
        held = {identity(n) for n in names if any(_clip_matches(n, h, identity) for h in heldout)}
        train, test = PoseSet(), PoseSet()
        for r in self.rigs:
            is_held = np.array([identity(n) in held for n in r.clip_names], dtype=bool)
            for target, keep in ((train, ~is_held), (test, is_held)):
                if keep.any():
                    target.rigs.append(r.select_clips(keep))
        return train, test

    def random_split(self, heldout_fraction: float, seed: int = 0) -> tuple[PoseSet, PoseSet]:
        """Held-out = a random share of each skeleton's clips (at least one clip stays in training).

        Clips are picked per skeleton (by index, not name: two skeletons' clips called ``walk`` are two clips).
        """
        if not (isinstance(heldout_fraction, int | float) and 0.0 <= heldout_fraction <= 1.0):
            raise ValueError(f"heldout_fraction: must be a number in [0, 1], got {heldout_fraction!r}")
        rng = np.random.default_rng(seed)
        train, test = PoseSet(), PoseSet()
        for r in self.rigs:
            n = len(r.clip_names)
            k = min(round(heldout_fraction * n), n - 1)
            held = np.zeros(n, dtype=bool)
            held[rng.choice(n, size=k, replace=False)] = True
            for target, keep in ((train, ~held), (test, held)):
                if keep.any():
                    target.rigs.append(r.select_clips(keep))
        return train, test

    def __len__(self) -> int:
        return sum(len(r) for r in self.rigs)

    def __repr__(self) -> str:
        parts = ", ".join(f"{r.pose_rig.rig.name}: {len(r)} poses / {len(r.clip_names)} clips" for r in self.rigs)
        return f"PoseSet({parts})"


@dataclass(frozen=True)
class AugmentConfig:
    """Training-time augmentation."""

    mirror: float = 0.2
    """Probability of replacing a pose by its left/right mirror image (symmetric rigs)."""
    rotation_noise_deg: float = 1.5
    """Standard deviation of a random rotation applied to every active joint [deg]."""
    feature_noise: float = 0.03
    """Relative noise on the length-like joint features (bone lengths, offsets, region sizes)."""

    def check(self) -> AugmentConfig:
        """Returns self when every setting is in range; ValueError naming the field otherwise."""
        check_fraction("AugmentConfig.mirror", self.mirror)
        check_number("AugmentConfig.rotation_noise_deg", self.rotation_noise_deg, 0.0)
        check_number("AugmentConfig.feature_noise", self.feature_noise, 0.0)
        return self


@dataclass
class PoseBatch:
    """A padded batch of poses of several skeletons (torch tensors), one token per *active* joint.

    Token ``i`` of a pose is joint ``pose_rig.active_index[i]`` of its rig; ``T`` is the largest active-joint
    count in the batch.

    Attributes:
        x: canonical 6D poses minus identity, divided by the data scale; padding 0, shape (B, T, 6).
        features: joint features, shape (B, T, F).
        distances: skeletal graph distances (0 on padding), shape (B, T, T), long.
        mask: real tokens (not padding), shape (B, T), bool.
        rig_index: index of each pose's skeleton in the source list, shape (B,), long.
    """

    x: torch.Tensor
    features: torch.Tensor
    distances: torch.Tensor
    mask: torch.Tensor
    rig_index: torch.Tensor

    def to(self, device) -> PoseBatch:
        return PoseBatch(*(getattr(self, f.name).to(device) for f in dataclasses.fields(self)))


def collate_poses(
    pose_rigs: Sequence[PoseRig],
    rig_index: np.ndarray,
    poses: Sequence[np.ndarray],
    scale: float,
    features: Sequence[np.ndarray] | None = None,
) -> PoseBatch:
    """Pads poses of (possibly) different skeletons into one :class:`PoseBatch`.

    Args:
        pose_rigs: the skeletons.
        rig_index: skeleton of each pose, shape (B,).
        poses: 6D poses, each (J_i, 6); only the active joints become tokens.
        scale: data scale (the model sees ``(pose - identity) / scale``).
        features: per-pose features (J_i, F) overriding the rig's (augmentation).
    """
    B = len(poses)
    T = max(len(pose_rigs[i].active_index) for i in rig_index)
    F = pose_rigs[rig_index[0]].features.shape[1]
    x = np.zeros((B, T, 6), dtype=np.float32)
    feat = np.zeros((B, T, F), dtype=np.float32)
    dist = np.zeros((B, T, T), dtype=np.int64)
    mask = np.zeros((B, T), dtype=bool)
    for b, (i, pose) in enumerate(zip(rig_index, poses)):
        pr = pose_rigs[i]
        a = pr.active_index
        n = len(a)
        x[b, :n] = (pose[a] - IDENTITY_6D) / scale
        feat[b, :n] = (pr.features if features is None else features[b])[a]
        dist[b, :n, :n] = pr.distances[np.ix_(a, a)]
        mask[b, :n] = True
    t = torch.from_numpy
    return PoseBatch(t(x), t(feat), t(dist), t(mask), torch.as_tensor(np.asarray(rig_index), dtype=torch.long))


_LENGTH_FEATURES = np.r_[0:6, 13, 17, 20:25]


class PoseBatchSampler:
    """Endless random batches from a :class:`PoseSet`, skeletons drawn in proportion to ``rig_weights``.

    Each process of a distributed run draws from its own seed (``seed + rank``), so no batch is repeated across
    processes. Iterating yields :class:`PoseBatch` objects.
    """

    def __init__(
        self,
        pose_set: PoseSet,
        batch_size: int,
        scale: float,
        augment: AugmentConfig | None = None,
        rig_weights: Sequence[float] | None = None,
        seed: int = 0,
        rank: int = 0,
    ):
        if not pose_set.rigs or not all(len(r) for r in pose_set.rigs):
            raise ValueError("pose_set: holds a skeleton without poses (or none at all): nothing to draw from")
        self.set = pose_set
        self.batch_size = check_int("batch_size", batch_size, 1)
        self.scale = check_number("scale", scale, 0.0, strict=True)
        self.augment = augment or AugmentConfig()
        w = np.ones(len(pose_set.rigs)) if rig_weights is None else np.asarray(rig_weights, dtype=np.float64)
        # a shorter list never drew the last skeletons, a longer one drew a skeleton that is not there
        if w.shape != (len(pose_set.rigs),) or not (np.isfinite(w).all() and (w >= 0).all() and w.sum() > 0):
            raise ValueError(f"rig_weights: one finite weight >= 0 per skeleton of the set ({len(pose_set.rigs)}), "
                             f"with a positive sum, got {list(np.ravel(w))}")  # fmt: skip
        self.rig_p = w / w.sum()
        self.rng = np.random.default_rng(seed + 1009 * rank)
        self.pose_rigs = [r.pose_rig for r in pose_set.rigs]

    def sample(self) -> PoseBatch:
        from sim.rotations import axis_angle_to_quat, quat_multiply, quat_to_rot6d, rot6d_to_quat

        rng, aug = self.rng, self.augment
        rig_index = rng.choice(len(self.rig_p), size=self.batch_size, p=self.rig_p)
        poses, feats = [], []
        for i in rig_index:
            r = self.set.rigs[i]
            pose = r.poses[rng.integers(len(r))]
            pr = r.pose_rig
            if aug.mirror > 0 and pr.frame.symmetric and rng.random() < aug.mirror:
                pose = pr.mirror(pose[None])[0]
            if aug.rotation_noise_deg > 0:
                noise = axis_angle_to_quat(rng.normal(scale=np.radians(aug.rotation_noise_deg), size=(len(pose), 3)))
                q = quat_multiply(rot6d_to_quat(pose), noise)
                q[0] = remove_twist_x(q[0])  # the root's noise tilts it; a pose has no heading (twist about up)
                pose = quat_to_rot6d(q)
            f = pr.features.copy()
            if aug.feature_noise > 0:
                f[:, _LENGTH_FEATURES] *= 1.0 + aug.feature_noise * rng.standard_normal((1, len(_LENGTH_FEATURES)))
            poses.append(pose)
            feats.append(f)
        return collate_poses(self.pose_rigs, rig_index, poses, self.scale, feats)

    def __iter__(self) -> Iterator[PoseBatch]:
        while True:
            yield self.sample()


def data_scale(pose_set: PoseSet) -> float:
    """RMS of ``pose - identity`` over active joints of every pose (the model's unit)."""
    total, count = 0.0, 0
    for r in pose_set.rigs:
        diff = (r.poses - IDENTITY_6D)[:, r.pose_rig.active]
        total += float((diff**2).sum())
        count += diff.size
    return float(np.sqrt(total / max(count, 1))) or 1.0
