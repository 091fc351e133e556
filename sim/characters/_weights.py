"""Linear-blend-skinning weights from the distance of each skin vertex to each bone's solids.

Every solid of a :class:`CharacterSpec` belongs to one bone, so a bone's *distance field* is the (plain) minimum
of its solids' signed distances. A vertex lies on the surface of the bone it hugs (distance ~0) and away from the
others, so a softmax of the negated distances,

    w_j(v) ∝ exp(-d_j(v) / falloff),

gives each vertex to the bone it belongs to, with a smooth hand-over where solids meet at a joint (both
distances ~0 there). The ``max_influences`` largest weights are kept, small ones dropped, and the rest
renormalized to sum to 1.
"""

from __future__ import annotations

import numpy as np

from ._shapes import CharacterSpec
from ._surface import shape_distance

__all__ = ["skin_weights"]

_MIN_WEIGHT = 0.01
"""Influences below this weight (before renormalizing) are dropped."""


def bone_distances(spec: CharacterSpec, points: np.ndarray) -> np.ndarray:
    """Signed distance [m] from each point to each bone's solids (min over the bone's solids), shape (V, J)."""
    names = spec.bone_names()
    index = {n: i for i, n in enumerate(names)}
    out = np.full((len(points), len(names)), np.inf)
    for sh in spec.shapes:
        j = index[sh.bone]
        out[:, j] = np.minimum(out[:, j], shape_distance(sh, points))
    missing = [names[j] for j in range(len(names)) if not np.isfinite(out[:, j]).any()]
    if missing:
        raise ValueError(f"bones without skin solids: {missing}")
    return out


def skin_weights(spec: CharacterSpec, points: np.ndarray, max_influences: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """Per-vertex joint influences.

    Args:
        spec: the character (bones in joint order, solids, ``weight_falloff``).
        points: rest-pose skin vertices [m], shape (V, 3).
        max_influences: influences kept per vertex [count].

    Returns:
        joint indices, shape (V, max_influences), sorted by decreasing weight (padding entries point at joint 0
        with weight 0), and weights summing to 1 per vertex, shape (V, max_influences).
    """
    if max_influences < 1:
        raise ValueError(f"max_influences must be >= 1, got {max_influences}")
    d = bone_distances(spec, points)
    logits = -(d - d.min(axis=1, keepdims=True)) / spec.weight_falloff
    w = np.exp(logits)
    w /= w.sum(axis=1, keepdims=True)
    k = min(max_influences, w.shape[1])
    order = np.argsort(-w, axis=1, kind="stable")[:, :k]
    top = np.take_along_axis(w, order, axis=1)
    top = np.where(top >= _MIN_WEIGHT, top, 0.0)
    top /= top.sum(axis=1, keepdims=True)
    joints = np.where(top > 0.0, order, 0)
    if k < max_influences:
        pad = max_influences - k
        joints = np.pad(joints, ((0, 0), (0, pad)))
        top = np.pad(top, ((0, 0), (0, pad)))
    return joints.astype(np.int32), top
