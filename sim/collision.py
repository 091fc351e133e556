"""Differentiable contact penalties in Warp: ground penetration of points, capsule-capsule self-penetration.

Two levels, like :mod:`sim.kinematics`:

* Warp level (``*_penalty``): float64 ``wp.array`` in and out, recordable on a ``wp.Tape`` (the penalties are
  differentiable with respect to the point / segment coordinates);
* NumPy level (``ground_penetration``, ``capsule_penetration``): arrays in, depths and per-frame penalties out.

Torch users go through :mod:`sim.collision_torch`. Definitions, per frame ``f``:

* ground: ``depth[f, v] = max(0, h - z[f, v])``, ``penalty[f] = sum_v depth[f, v]^2``;
* capsules: ``depth[f, k] = max(0, r_i + r_j - dist(segment_i, segment_j))`` for the pair ``k = (i, j)``,
  ``penalty[f] = sum_k depth[f, k]^2``.
"""

from __future__ import annotations

import numpy as np
import warp as wp

from . import _collision_kernels as K
from ._warp_setup import init_warp

__all__ = [
    "capsule_penetration",
    "capsule_penetration_penalty",
    "ground_penetration",
    "ground_penetration_penalty",
    "max_capsule_penetration",
]


def _check(name: str, arr, dtype, shape: tuple[int | None, ...]) -> None:
    if not isinstance(arr, wp.array):
        raise TypeError(f"{name}: expected a wp.array, got {type(arr).__name__}")
    if arr.dtype != dtype:
        raise ValueError(f"{name}: expected dtype {dtype.__name__}, got {getattr(arr.dtype, '__name__', arr.dtype)}")
    if len(arr.shape) != len(shape) or any(s is not None and s != a for s, a in zip(shape, arr.shape)):
        raise ValueError(f"{name}: expected shape {shape}, got {arr.shape}")


def ground_penetration_penalty(
    points: wp.array,
    ground_height: float = 0.0,
    depth_out: wp.array | None = None,
    penalty_out: wp.array | None = None,
) -> tuple[wp.array, wp.array]:
    """Ground penetration of points (Warp level, tape-recordable).

    Args:
        points: world points [m], shape (F, V), dtype vec3d (Z up).
        ground_height: ground plane height [m].
        depth_out: optional output (F, V) float64, zeroed here.
        penalty_out: optional output (F,) float64, zeroed here.

    Returns:
        Depth below the ground per point [m] (F, V) and the per-frame penalty sum(depth^2) [m^2] (F,).
    """
    init_warp()
    _check("points", points, wp.vec3d, (None, None))
    F, V = points.shape
    dev = points.device
    grad = points.requires_grad
    if depth_out is None:
        depth_out = wp.zeros((F, V), dtype=wp.float64, device=dev, requires_grad=grad)
    else:
        _check("depth_out", depth_out, wp.float64, (F, V))
        depth_out.zero_()
    if penalty_out is None:
        penalty_out = wp.zeros(F, dtype=wp.float64, device=dev, requires_grad=grad)
    else:
        _check("penalty_out", penalty_out, wp.float64, (F,))
        penalty_out.zero_()
    wp.launch(
        K.ground_penetration_kernel,
        dim=(F, V),
        inputs=[points, wp.float64(ground_height)],
        outputs=[depth_out, penalty_out],
        device=dev,
    )
    return depth_out, penalty_out


def capsule_penetration_penalty(
    seg_a: wp.array,
    seg_b: wp.array,
    radii: wp.array,
    pairs: wp.array,
    depth_out: wp.array | None = None,
    penalty_out: wp.array | None = None,
) -> tuple[wp.array, wp.array]:
    """Capsule-capsule penetration (Warp level, tape-recordable).

    Args:
        seg_a, seg_b: world segment ends of each capsule [m], shape (F, N), dtype vec3d.
        radii: capsule radii [m], shape (N,), float64.
        pairs: the capsule pairs to test (i, j), shape (P, 2), int32 (e.g. non-adjacent bodies).
        depth_out: optional output (F, P) float64, zeroed here.
        penalty_out: optional output (F,) float64, zeroed here.

    Returns:
        Overlap depth per frame and pair [m] (F, P) and the per-frame penalty sum(depth^2) [m^2] (F,).
    """
    init_warp()
    _check("seg_a", seg_a, wp.vec3d, (None, None))
    F, N = seg_a.shape
    _check("seg_b", seg_b, wp.vec3d, (F, N))
    _check("radii", radii, wp.float64, (N,))
    _check("pairs", pairs, wp.int32, (None, 2))
    P = pairs.shape[0]
    dev = seg_a.device
    grad = seg_a.requires_grad or seg_b.requires_grad or radii.requires_grad
    if depth_out is None:
        depth_out = wp.zeros((F, P), dtype=wp.float64, device=dev, requires_grad=grad)
    else:
        _check("depth_out", depth_out, wp.float64, (F, P))
        depth_out.zero_()
    if penalty_out is None:
        penalty_out = wp.zeros(F, dtype=wp.float64, device=dev, requires_grad=grad)
    else:
        _check("penalty_out", penalty_out, wp.float64, (F,))
        penalty_out.zero_()
    if P:
        wp.launch(
            K.capsule_penetration_kernel,
            dim=(F, P),
            inputs=[seg_a, seg_b, radii, pairs],
            outputs=[depth_out, penalty_out],
            device=dev,
        )
    return depth_out, penalty_out


def _np_points(name: str, x) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 2:
        x = x[None]
    if x.ndim != 3 or x.shape[-1] != 3:
        raise ValueError(f"{name}: expected shape (F, N, 3) or (N, 3), got {x.shape}")
    return np.ascontiguousarray(x)


def ground_penetration(points, ground_height: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Ground penetration of points (NumPy level): depth [m] (F, V) and per-frame penalty [m^2] (F,).

    Args:
        points: world points [m], shape (F, V, 3) or (V, 3).
        ground_height: ground plane height [m].
    """
    init_warp()
    p = _np_points("points", points)
    depth, pen = ground_penetration_penalty(wp.array(p, dtype=wp.vec3d, device="cpu"), ground_height)
    return depth.numpy().copy(), pen.numpy().copy()


def capsule_penetration(seg_a, seg_b, radii, pairs) -> tuple[np.ndarray, np.ndarray]:
    """Capsule-capsule penetration (NumPy level): overlap [m] (F, P) and per-frame penalty [m^2] (F,).

    Args:
        seg_a, seg_b: world segment ends [m], shape (F, N, 3) or (N, 3).
        radii: capsule radii [m], shape (N,).
        pairs: capsule index pairs, shape (P, 2).
    """
    init_warp()
    a, b = _np_points("seg_a", seg_a), _np_points("seg_b", seg_b)
    if a.shape != b.shape:
        raise ValueError(f"seg_b: expected shape {a.shape}, got {b.shape}")
    r = np.asarray(radii, dtype=np.float64).reshape(-1)
    if len(r) != a.shape[1]:
        raise ValueError(f"radii: expected {a.shape[1]} radii, got {len(r)}")
    pr = np.asarray(pairs, dtype=np.int32).reshape(-1, 2)
    if pr.size and (pr.min() < 0 or pr.max() >= a.shape[1]):
        raise ValueError(f"pairs: capsule index out of range [0, {a.shape[1]})")
    depth, pen = capsule_penetration_penalty(
        wp.array(a, dtype=wp.vec3d, device="cpu"),
        wp.array(b, dtype=wp.vec3d, device="cpu"),
        wp.array(r, dtype=wp.float64, device="cpu"),
        wp.array(pr, dtype=wp.int32, device="cpu"),
    )
    return depth.numpy().copy(), pen.numpy().copy()


def max_capsule_penetration(seg_a, seg_b, radii, pairs) -> tuple[float, int, int]:
    """Deepest capsule overlap [m] over frames and pairs, with its frame and pair index (-1, -1 when none)."""
    depth, _ = capsule_penetration(seg_a, seg_b, radii, pairs)
    if depth.size == 0 or depth.max() <= 0.0:
        return 0.0, -1, -1
    f, k = np.unravel_index(int(np.argmax(depth)), depth.shape)
    return float(depth[f, k]), int(f), int(k)
