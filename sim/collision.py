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


def _finite_scalar(name: str, value) -> float:
    """``value`` as a finite float; TypeError (not a number) or ValueError (NaN, inf) naming ``name``."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name}: expected a real number, got {type(value).__name__}") from None
    if not np.isfinite(x):
        raise ValueError(f"{name}: must be finite, got {x}")
    return x


def _check_pair_indices(pairs: np.ndarray, capsule_count: int) -> None:
    """Raises ValueError unless every capsule index in ``pairs`` (P, 2) lies in ``[0, capsule_count)`` and no pair
    names one capsule twice.

    The kernels index the segment arrays with these values unchecked: an index outside the range reads arbitrary
    memory (garbage penalties or a crash), so every public entry point checks them on the host first.
    """
    if pairs.size == 0:
        return
    bad = (pairs < 0) | (pairs >= capsule_count)
    if bad.any():
        k = int(np.flatnonzero(bad.any(axis=-1))[0])
        i, j = (int(v) for v in pairs[k])
        raise ValueError(f"pairs: capsule index out of range [0, {capsule_count}): pair {k} is ({i}, {j})")
    same = pairs[..., 0] == pairs[..., 1]
    if same.any():  # a capsule "overlaps" itself by twice its radius: a penalty no pose can remove
        k = int(np.flatnonzero(same)[0])
        raise ValueError(f"pairs: pair {k} pairs capsule {int(pairs[k, 0])} with itself")


def _check_radii(radii: np.ndarray) -> None:
    """ValueError naming the first negative capsule radius (a negative radius shrinks its pairs' overlap: they read
    as apart while the capsules interpenetrate)."""
    bad = np.flatnonzero(radii < 0)
    if len(bad):
        raise ValueError(f"radii: must be >= 0 [m], capsule {int(bad[0])} has {float(radii[bad[0]])!r}")


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
        penalty_out: optional output (F,) float64, zeroed here. Do not pass the same output arrays to two calls
            recorded on one tape: the second call's zeroing overwrites what the first launch's adjoint reads.

    Returns:
        Depth below the ground per point [m] (F, V) and the per-frame penalty sum(depth^2) [m^2] (F,).
    """
    init_warp()
    _check("points", points, wp.vec3d, (None, None))
    ground_height = _finite_scalar("ground_height", ground_height)
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
    *,
    check_indices: bool = True,
) -> tuple[wp.array, wp.array]:
    """Capsule-capsule penetration (Warp level, tape-recordable).

    Args:
        seg_a, seg_b: world segment ends of each capsule [m], shape (F, N), dtype vec3d.
        radii: capsule radii [m], shape (N,), float64, >= 0.
        pairs: the capsule pairs to test (i, j), shape (P, 2), int32 (e.g. non-adjacent bodies), indices in
            ``[0, N)``: checked on the host with the radii (one copy of ``pairs`` and ``radii`` from the device per
            call; skipped while a CUDA graph is being captured, where no copy is possible).
        depth_out: optional output (F, P) float64, zeroed here.
        penalty_out: optional output (F,) float64, zeroed here. Do not pass the same output arrays to two calls
            recorded on one tape: the second call's zeroing overwrites what the first launch's adjoint reads.
        check_indices: False skips the host check of ``pairs`` and ``radii`` (and their device-to-host copies) for
            callers that built or checked them once and call this in a loop (training steps, guided denoising).

    Returns:
        Overlap depth per frame and pair [m] (F, P) and the per-frame penalty sum(depth^2) [m^2] (F,).

    Raises:
        TypeError, ValueError: on arrays of the wrong type, dtype or shape, pair indices out of range, or a
            negative radius.
    """
    return _capsule_penalty(seg_a, seg_b, radii, pairs, depth_out, penalty_out, check_indices=check_indices)


def _capsule_penalty(
    seg_a: wp.array,
    seg_b: wp.array,
    radii: wp.array,
    pairs: wp.array,
    depth_out: wp.array | None,
    penalty_out: wp.array | None,
    check_indices: bool,
) -> tuple[wp.array, wp.array]:
    """:func:`capsule_penetration_penalty`; ``check_indices=False`` for callers that checked the pair indices on
    the host already (:mod:`sim.collision_torch`)."""
    init_warp()
    _check("seg_a", seg_a, wp.vec3d, (None, None))
    F, N = seg_a.shape
    _check("seg_b", seg_b, wp.vec3d, (F, N))
    _check("radii", radii, wp.float64, (N,))
    _check("pairs", pairs, wp.int32, (None, 2))
    P = pairs.shape[0]
    if check_indices and not wp.get_device(pairs.device).is_capturing:
        if P:
            _check_pair_indices(pairs.numpy(), N)
        _check_radii(radii.numpy())
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
    """``x`` as a contiguous float64 (F, N, 3) array of finite values, or ValueError naming ``name``."""
    try:
        x = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{name}: expected an array of points [m], shape (F, N, 3) or (N, 3) ({e})") from None
    if x.ndim == 2:
        x = x[None]
    if x.ndim != 3 or x.shape[-1] != 3:
        raise ValueError(f"{name}: expected shape (F, N, 3) or (N, 3), got {x.shape}")
    _np_finite(name, x)
    return np.ascontiguousarray(x)


def _np_finite(name: str, x: np.ndarray) -> None:
    if not np.all(np.isfinite(x)):
        bad = tuple(int(i) for i in np.argwhere(~np.isfinite(x))[0])
        raise ValueError(f"{name}: non-finite value at index {bad}")


def _np_pairs(pairs, capsule_count: int) -> np.ndarray:
    """``pairs`` as a contiguous int32 (P, 2) array of indices in ``[0, capsule_count)``."""
    pr = np.asarray(pairs)
    if pr.size == 0:
        return np.zeros((0, 2), dtype=np.int32)
    if pr.dtype.kind not in "iu":
        raise ValueError(f"pairs: expected integer capsule indices, got dtype {pr.dtype}")
    if pr.ndim not in (1, 2) or pr.shape[-1] != 2:
        raise ValueError(f"pairs: expected shape (P, 2), got {pr.shape}")
    pr = pr.reshape(-1, 2)
    _check_pair_indices(pr, capsule_count)  # before the int32 cast, which would wrap huge values into range
    return np.ascontiguousarray(pr, dtype=np.int32)


def ground_penetration(points, ground_height: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Ground penetration of points (NumPy level): depth [m] (F, V) and per-frame penalty [m^2] (F,).

    Args:
        points: world points [m], shape (F, V, 3) or (V, 3).
        ground_height: ground plane height [m].

    Raises:
        ValueError: on a wrong shape or a non-finite point or ground height (a NaN point would count as above
            the ground).
    """
    init_warp()
    p = _np_points("points", points)
    ground_height = _finite_scalar("ground_height", ground_height)
    depth, pen = ground_penetration_penalty(wp.array(p, dtype=wp.vec3d, device="cpu"), ground_height)
    return depth.numpy().copy(), pen.numpy().copy()


def capsule_penetration(seg_a, seg_b, radii, pairs) -> tuple[np.ndarray, np.ndarray]:
    """Capsule-capsule penetration (NumPy level): overlap [m] (F, P) and per-frame penalty [m^2] (F,).

    Args:
        seg_a, seg_b: world segment ends [m], shape (F, N, 3) or (N, 3).
        radii: capsule radii [m], shape (N,), finite and >= 0.
        pairs: capsule index pairs, shape (P, 2), integers in ``[0, N)``.

    Raises:
        ValueError: on wrong shapes, non-finite coordinates or radii, negative radii, non-integer pairs or pair
            indices out of range.
    """
    init_warp()
    a, b = _np_points("seg_a", seg_a), _np_points("seg_b", seg_b)
    if a.shape != b.shape:
        raise ValueError(f"seg_b: expected shape {a.shape}, got {b.shape}")
    try:
        r = np.asarray(radii, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as e:
        raise TypeError(f"radii: expected an array of capsule radii [m], shape (N,) ({e})") from None
    if len(r) != a.shape[1]:
        raise ValueError(f"radii: expected {a.shape[1]} radii, got {len(r)}")
    _np_finite("radii", r)
    if (r < 0).any():
        raise ValueError(f"radii: must be >= 0, got {r.min()} at index {int(np.argmin(r))}")
    pr = _np_pairs(pairs, a.shape[1])
    depth, pen = _capsule_penalty(
        wp.array(a, dtype=wp.vec3d, device="cpu"),
        wp.array(b, dtype=wp.vec3d, device="cpu"),
        wp.array(r, dtype=wp.float64, device="cpu"),
        wp.array(pr, dtype=wp.int32, device="cpu"),
        None,
        None,
        check_indices=False,
    )
    return depth.numpy().copy(), pen.numpy().copy()


def max_capsule_penetration(seg_a, seg_b, radii, pairs) -> tuple[float, int, int]:
    """Deepest capsule overlap [m] over frames and pairs, with its frame and pair index (-1, -1 when none).

    Arguments and errors as :func:`capsule_penetration`.
    """
    depth, _ = capsule_penetration(seg_a, seg_b, radii, pairs)
    if depth.size == 0 or depth.max() <= 0.0:
        return 0.0, -1, -1
    f, k = np.unravel_index(int(np.argmax(depth)), depth.shape)
    return float(depth[f, k]), int(f), int(k)
