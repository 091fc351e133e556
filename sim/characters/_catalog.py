"""Named procedural assets: ``build("quadruped")`` and friends, the default inputs of every example."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields, replace

from ..motion import Motion
from ..rig import Rig
from ._checks import require_config
from ._gaits import (
    BipedWalkConfig,
    IdleConfig,
    QuadrupedWalkConfig,
    biped_idle,
    biped_walk,
    quadruped_idle,
    quadruped_walk,
)
from ._rigs import biped, quadruped
from ._skeletons import BipedConfig, QuadrupedConfig

__all__ = ["build", "procedural_asset_names"]


@dataclass(frozen=True)
class _Species:
    make_rig: Callable
    rig_config: type
    walk: Callable
    walk_config: type
    idle: Callable


_SPECIES = {
    "quadruped": _Species(quadruped, QuadrupedConfig, quadruped_walk, QuadrupedWalkConfig, quadruped_idle),
    "biped": _Species(biped, BipedConfig, biped_walk, BipedWalkConfig, biped_idle),
}
_CLIPS = ("walk", "idle")


def procedural_asset_names() -> list[str]:
    """Names :func:`build` accepts: each character alone (all its clips) and with one clip (``NAME-CLIP``)."""
    return [n for species in _SPECIES for n in (species, *(f"{species}-{clip}" for clip in _CLIPS))]


def build(
    name: str,
    *,
    config: QuadrupedConfig | BipedConfig | None = None,
    walk: QuadrupedWalkConfig | BipedWalkConfig | None = None,
    idle: IdleConfig | None = None,
) -> tuple[Rig, dict[str, Motion]]:
    """A procedural character and its clips.

    Args:
        name: one of :func:`procedural_asset_names`: ``"quadruped"`` / ``"biped"`` give every clip (walk first);
            ``"quadruped-walk"``, ``"biped-idle"``, ... give that clip only.
        config: the character's options (:class:`QuadrupedConfig` / :class:`BipedConfig`); default sizes when None.
        walk: walk options (:class:`QuadrupedWalkConfig` / :class:`BipedWalkConfig`), in absolute units [m, m/s]
            as given. When None, the default walk is scaled to ``config.height`` (dynamically similar): a default
            ``BipedWalkConfig()`` passed with a 1 m biped strides as the 1.75 m one does, which its legs cannot.
        idle: idle options (:class:`IdleConfig`).

    Returns:
        the rig and its clips by name, in order.

    Raises:
        KeyError: unknown ``name``; the message lists the known names.
        TypeError: a config of the wrong type for the character.
        ValueError: a config the legs cannot follow, or a grid too coarse for the skin (the message names the
            field). Out-of-range fields are refused when the config is made.
    """
    species_name, dash, clip = str(name).partition("-")
    species = _SPECIES.get(species_name)
    if species is None or (dash and clip not in _CLIPS):
        raise KeyError(f"unknown procedural asset {name!r}; known: {', '.join(procedural_asset_names())}")
    for value, want, what in (
        (config, species.rig_config, "config"),
        (walk, species.walk_config, "walk"),
        (idle, IdleConfig, "idle"),
    ):
        if value is not None:
            require_config(value, want, f"build({name!r}): {what}")
    if config is None:
        config = species.rig_config()
    if walk is None:
        walk = _scaled_walk(species.walk_config(), config.height / species.rig_config().height)
    if idle is None:
        idle = IdleConfig()
    rig = species.make_rig(config)
    makers = {"walk": lambda: species.walk(rig, walk), "idle": lambda: species.idle(rig, idle)}
    wanted = [clip] if clip else list(_CLIPS)
    return rig, {c: makers[c]() for c in wanted}


_GAIT_LENGTHS = ("step_height", "bob", "pelvis_drop", "sway", "stance_shift")


def _scaled_walk(walk, ratio: float):
    """The default walk of a character ``ratio`` times the default size (dynamically similar: equal Froude number).

    Lengths scale with ``ratio``, the period with ``sqrt(ratio)`` (rounded to whole frames), so the stride stays
    the same fraction of the leg length.
    """
    if abs(ratio - 1.0) < 1e-12:
        return walk
    names = {f.name for f in fields(walk)}
    cycle_frames = max(2, round(walk.cycle_frames * math.sqrt(ratio)))
    stride = walk.speed * walk.cycle_frames / walk.fps * ratio
    changes = {n: getattr(walk, n) * ratio for n in _GAIT_LENGTHS if n in names}
    return replace(walk, cycle_frames=cycle_frames, speed=stride * walk.fps / cycle_frames, **changes)
