"""Pixar's own UsdSkel skinning of a stage, for comparisons in tests."""

from __future__ import annotations

import numpy as np
from pxr import Usd, UsdGeom, UsdSkel


def pixar_skinning(path):
    """Pixar's UsdSkel skinning of every bound mesh at every authored time sample of the bound animation.

    Returns:
        time codes (F,), {mesh prim name: skeleton-space points (F, V, 3)}, skeleton local-to-world (4, 4) in
        USD's row-vector convention.
    """
    _stage, binding, skel_query = _binding(path)
    codes = list(skel_query.GetAnimQuery().GetJointTransformTimeSamples())
    out = _skinned_points(binding, skel_query, codes, placed=False)
    l2w = np.array(UsdGeom.Imageable(binding.GetSkeleton().GetPrim()).ComputeLocalToWorldTransform(0))
    return np.array(codes), out, l2w


def _binding(path):
    """The stage (keep it: its prims die with it), its defaultPrim SkelRoot's one skeleton binding and that
    skeleton's query."""
    stage = Usd.Stage.Open(str(path))
    root = UsdSkel.Root(stage.GetDefaultPrim())
    cache = UsdSkel.Cache()
    cache.Populate(root, Usd.TraverseInstanceProxies())
    (binding,) = cache.ComputeSkelBindings(root, Usd.TraverseInstanceProxies())
    return stage, binding, cache.GetSkelQuery(binding.GetSkeleton())


def _skinned_points(binding, skel_query, codes, placed: bool) -> dict[str, np.ndarray]:
    """{mesh prim name: points (F, V, 3)} at ``codes``: skeleton space, or (``placed``) stage space through the
    Skeleton prim's local-to-world transform at each code."""
    skel_prim = UsdGeom.Imageable(binding.GetSkeleton().GetPrim())
    out = {}
    for query in binding.GetSkinningTargets():
        points_attr = UsdGeom.Mesh(query.GetPrim()).GetPointsAttr()
        frames = []
        for code in codes:
            xforms = skel_query.ComputeSkinningTransforms(code)
            points = points_attr.Get()
            assert query.ComputeSkinnedPoints(xforms, points, code)
            frame = np.array(points, dtype=np.float64)
            if placed:
                l2w = np.array(skel_prim.ComputeLocalToWorldTransform(code))
                frame = frame @ l2w[:3, :3] + l2w[3, :3]
            frames.append(frame)
        out[query.GetPrim().GetName()] = np.stack(frames)
    return out


def pixar_joint_world_positions(path) -> tuple[np.ndarray, list[str], np.ndarray]:
    """Skeleton-space joint positions from UsdSkel at every authored time sample of the first Skeleton's animation.

    Returns:
        time codes (F,), joint paths, positions (F, J, 3).
    """
    stage = Usd.Stage.Open(str(path))
    skeleton = next(UsdSkel.Skeleton(p) for p in stage.Traverse() if p.IsA(UsdSkel.Skeleton))
    cache = UsdSkel.Cache()
    cache.Populate(UsdSkel.Root(stage.GetDefaultPrim()), Usd.TraverseInstanceProxies())
    skel_query = cache.GetSkelQuery(skeleton)
    codes = list(skel_query.GetAnimQuery().GetJointTransformTimeSamples())
    frames = [np.array(skel_query.ComputeJointSkelTransforms(code))[:, 3, :3] for code in codes]
    return np.array(codes), [str(j) for j in skel_query.GetJointOrder()], np.stack(frames)


def pixar_world_skinning(path, codes) -> dict[str, np.ndarray]:
    """Pixar's UsdSkel skinning of every bound mesh at ``codes``, placed in the stage by the Skeleton prim's
    local-to-world transform *at each code* (an animated SkelRoot moves the skinned character).

    Returns:
        {mesh prim name: stage-space points (F, V, 3)} in stage units and axes.
    """
    _stage, binding, skel_query = _binding(path)
    return _skinned_points(binding, skel_query, codes, placed=True)
