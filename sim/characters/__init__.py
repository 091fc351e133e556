"""Built-in procedural characters and gaits: the default inputs of every example, made entirely by our code.

Two characters, both Z-up, SI metres, facing +X, standing on z = 0, rest pose = bind pose:

* :func:`quadruped`: a fox-like animal, 26 joints, ~0.58 m tall;
* :func:`biped`: a human in an A-pose, 22 joints, 1.75 m tall.

Each has ONE closed, manifold skin (the zero level set of a smooth union of capsules and ellipsoids along the
bones, meshed by marching cubes) with distance-based linear-blend-skinning weights, and exactly looping clips:
a walk whose stance feet stay planted (analytic leg IK) and a standing idle. :func:`build` hands out rig and
clips by name, as ``usd_io.load_asset("procedural:NAME")`` does.
"""

from ._catalog import build, procedural_asset_names
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

__all__ = [
    "BipedConfig",
    "BipedWalkConfig",
    "IdleConfig",
    "QuadrupedConfig",
    "QuadrupedWalkConfig",
    "biped",
    "biped_idle",
    "biped_walk",
    "build",
    "procedural_asset_names",
    "quadruped",
    "quadruped_idle",
    "quadruped_walk",
]
