"""Turns a :class:`CharacterSpec` into a skinned :class:`sim.Rig`: skeleton, skin mesh, weights."""

from __future__ import annotations

import numpy as np

from ..rig import Rig, SkinnedMesh
from ..rotations import quat_identity
from ._checks import require_config
from ._shapes import CharacterSpec
from ._skeletons import BipedConfig, QuadrupedConfig, biped_spec, quadruped_spec
from ._surface import check_every_bone_skinned, skin_mesh
from ._weights import skin_weights

__all__ = ["biped", "quadruped", "rig_from_spec"]

_QUADRUPED = QuadrupedConfig()
_BIPED = BipedConfig()


def rig_from_spec(
    spec: CharacterSpec, cells_per_height: int, max_influences: int = 4, field: str = "cells_per_height"
) -> Rig:
    """Builds the skeleton, meshes and weights the skin, and stands the result on the ground.

    Every joint's rest rotation is the identity, so joint frames are aligned with the world axes in the rest
    pose, which is also the bind pose (inverse bind matrices = inverse rest world transforms). The rig and
    its mesh are shifted vertically so that the lowest skin vertex lies exactly on z = 0.

    Args:
        spec: the character.
        cells_per_height: marching-cubes cells along the character's height [count].
        max_influences: joints per vertex [count].
        field: how messages name ``cells_per_height``.

    Raises:
        ValueError: a grid too coarse to resolve every bone's skin (the message names ``field`` and suggests a
            finer grid).
    """
    names = spec.bone_names()
    index = {n: i for i, n in enumerate(names)}
    parents = np.array([-1 if b.parent is None else index[b.parent] for b in spec.bones], dtype=np.int32)
    heads = np.array([b.head for b in spec.bones], dtype=np.float64)
    points, triangles = skin_mesh(spec, cells_per_height, field)
    joints, weights = skin_weights(spec, points, max_influences)
    check_every_bone_skinned(spec, joints[:, 0], cells_per_height, field)
    lift = -float(points[:, 2].min())
    points[:, 2] += lift
    heads[:, 2] += lift
    local = heads - np.where(parents[:, None] >= 0, heads[np.maximum(parents, 0)], 0.0)
    mesh = SkinnedMesh("body", points, triangles, joints, weights, joint_count=len(names))
    return Rig(names, parents, local, quat_identity((len(names),)), None, [mesh], name=spec.name)


def quadruped(config: QuadrupedConfig = _QUADRUPED) -> Rig:
    """A fox-like quadruped: 26 joints, one closed skin of ~5,000 vertices, ~0.58 m tall, facing +X.

    Joints: ``pelvis`` (root), ``spine_1``, ``spine_2`` (chest), ``neck``, ``head``, ``left_ear``/``right_ear``,
    ``tail_1..3``, and per leg (``front_left``, ``hind_left``, ``front_right``, ``hind_right``)
    ``{leg}_upper_leg``, ``{leg}_lower_leg``, ``{leg}_foot``, ``{leg}_toes`` (the paw).
    """
    require_config(config, QuadrupedConfig, "quadruped: config")
    spec = quadruped_spec(config)
    return rig_from_spec(spec, config.cells_per_height, config.max_influences, "QuadrupedConfig.cells_per_height")


def biped(config: BipedConfig = _BIPED) -> Rig:
    """A human biped in an A-pose: 22 joints, one closed skin of ~4,500 vertices, 1.75 m tall, facing +X.

    Joints: ``pelvis`` (root), ``spine_1..3``, ``neck``, ``head``, and per side (``left``, ``right``)
    ``{side}_clavicle``, ``{side}_upper_arm``, ``{side}_lower_arm``, ``{side}_hand``, ``{side}_thigh``,
    ``{side}_shin``, ``{side}_foot``, ``{side}_toes``.
    """
    require_config(config, BipedConfig, "biped: config")
    spec = biped_spec(config)
    return rig_from_spec(spec, config.cells_per_height, config.max_influences, "BipedConfig.cells_per_height")
