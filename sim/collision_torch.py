"""Torch bridge for the collision penalties (importing this module imports torch).

``ground_penetration_penalty(points)`` and ``capsule_penetration_penalty(seg_a, seg_b, radii, pairs)`` return
per-frame penalties (sum of squared penetration depths [m^2]) as differentiable torch tensors, computed by the
Warp kernels of :mod:`sim.collision` in float64 (inputs of other float types are cast, gradients cast back).
Leading batch dimensions are flattened into frames. Unlike the NumPy API, which refuses them, non-finite inputs are
not checked here (no device sync per step): a NaN point or segment makes its frame's penalty NaN, so a diverging
optimization's finite-loss check sees it (it used to read as 0: no penetration, no gradient).
"""

from __future__ import annotations

import math

import torch
import warp as wp

from ._warp_setup import init_warp
from .collision import _check_pair_indices, _check_radii, _finite_scalar
from .collision import capsule_penetration_penalty as _capsule_wp
from .collision import ground_penetration_penalty as _ground_wp
from .torch_ops import refuse_double_backward

__all__ = ["capsule_penetration_penalty", "ground_penetration_penalty"]


def _wp_vec3(t: torch.Tensor) -> wp.array:
    """A float64 Warp copy (with a gradient array) of a detached (F, N, 3) tensor: a copy, since the tape re-reads
    it in backward (a view of a contiguous float64 input saw an in-place edit made after the forward pass)."""
    return wp.from_torch(t.detach().to(torch.float64).clone().contiguous(), dtype=wp.vec3d, requires_grad=True)


class _GroundPenalty(torch.autograd.Function):
    @staticmethod
    def forward(ctx, points: torch.Tensor, ground_height: float) -> torch.Tensor:
        init_warp()
        p = _wp_vec3(points)
        tape = wp.Tape()
        with tape:
            _, pen = _ground_wp(p, ground_height)
        ctx.saved = (tape, p, pen)
        ctx.in_dtype = points.dtype
        return wp.to_torch(pen).clone().to(points.dtype)

    @staticmethod
    def backward(ctx, grad_pen: torch.Tensor):
        refuse_double_backward("ground penetration penalty")
        tape, p, pen = ctx.saved
        tape.backward(grads={pen: wp.from_torch(grad_pen.detach().to(torch.float64).contiguous())})
        g = wp.to_torch(p.grad).clone().to(ctx.in_dtype)
        tape.zero()
        return g, None


class _CapsulePenalty(torch.autograd.Function):
    @staticmethod
    def forward(ctx, seg_a: torch.Tensor, seg_b: torch.Tensor, radii: torch.Tensor, pairs: torch.Tensor):
        init_warp()
        a, b = _wp_vec3(seg_a), _wp_vec3(seg_b)
        # copies, like the segments' (_wp_vec3): ``.to``/``.contiguous`` return the caller's own float64 radii (and
        # int32 pairs), which the tape re-reads in backward, so an in-place edit after the forward pass (an optimizer
        # step on the radii before backward) changed the gradient
        r = wp.from_torch(
            radii.detach().to(device=seg_a.device, dtype=torch.float64).clone().contiguous(), requires_grad=True
        )
        pr = wp.from_torch(
            pairs.detach().to(device=seg_a.device, dtype=torch.int32).clone().contiguous().reshape(-1, 2)
        )
        tape = wp.Tape()
        with tape:
            _, pen = _capsule_wp(a, b, r, pr, check_indices=False)  # checked on the host by the caller
        ctx.saved = (tape, a, b, r, pen)
        ctx.dtypes = (seg_a.dtype, seg_b.dtype, radii.dtype)
        ctx.radii_device = radii.device
        return wp.to_torch(pen).clone().to(seg_a.dtype)

    @staticmethod
    def backward(ctx, grad_pen: torch.Tensor):
        refuse_double_backward("capsule penetration penalty")
        tape, a, b, r, pen = ctx.saved
        tape.backward(grads={pen: wp.from_torch(grad_pen.detach().to(torch.float64).contiguous())})
        ta, tb, tr = ctx.dtypes
        out = (
            wp.to_torch(a.grad).clone().to(ta),
            wp.to_torch(b.grad).clone().to(tb),
            wp.to_torch(r.grad).clone().to(device=ctx.radii_device, dtype=tr),
        )
        tape.zero()
        return (*out, None)


def _type_name(x) -> str:
    t = type(x)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__.split('.')[0]}.{t.__qualname__}"


def _float_tensor(name: str, x, shape: str) -> None:
    """TypeError unless ``x`` is a floating-point torch.Tensor (``shape`` describes the expected shape)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(
            f"{name}: expected a floating-point torch.Tensor of shape {shape}, got {_type_name(x)} "
            "(convert with torch.as_tensor)"
        )
    if not x.is_floating_point():
        raise TypeError(f"{name}: expected a floating-point torch.Tensor of shape {shape}, got dtype {x.dtype}")


def _checked_pairs(pairs, capsule_count: int) -> torch.Tensor:
    """``pairs`` as an int32 (P, 2) tensor on its own device, its indices checked on the host to lie in
    ``[0, capsule_count)`` (the kernel indexes the segments with them unchecked)."""
    if not isinstance(pairs, torch.Tensor):
        raise TypeError(
            f"pairs: expected an integer torch.Tensor of shape (P, 2), got {_type_name(pairs)} "
            "(convert with torch.as_tensor)"
        )
    if pairs.numel() == 0:
        return torch.zeros((0, 2), dtype=torch.int32, device=pairs.device)
    if pairs.is_floating_point() or pairs.is_complex() or pairs.dtype == torch.bool:
        raise TypeError(f"pairs: expected an integer torch.Tensor of shape (P, 2), got dtype {pairs.dtype}")
    if pairs.dim() != 2 or pairs.shape[1] != 2:
        raise ValueError(f"pairs: expected shape (P, 2), got {tuple(pairs.shape)}")
    _check_pair_indices(pairs.detach().cpu().numpy(), capsule_count)  # one small copy (and sync) per call
    return pairs.detach().to(torch.int32)  # safe after the range check (no wrap-around)


def ground_penetration_penalty(points: torch.Tensor, ground_height: float = 0.0) -> torch.Tensor:
    """Per-frame ground penalty ``sum_v max(0, h - z)^2`` [m^2].

    Args:
        points: world points [m], shape (..., V, 3) (any device; the Warp kernels run where the tensor lives).
        ground_height: ground plane height [m].

    Returns:
        Shape (...) (the leading dimensions of ``points``).

    Raises:
        TypeError: ``points`` is not a floating-point tensor, ``ground_height`` not a number.
        ValueError: on a wrong shape or a non-finite ``ground_height``.
    """
    _float_tensor("points", points, "(..., V, 3)")
    ground_height = _finite_scalar("ground_height", ground_height)
    if points.shape[-1] != 3 or points.dim() < 2:
        raise ValueError(f"points: expected shape (..., V, 3), got {tuple(points.shape)}")
    lead = points.shape[:-2]
    flat = points.reshape(math.prod(lead), points.shape[-2], 3)  # not -1: ambiguous without points (V = 0)
    return _GroundPenalty.apply(flat, float(ground_height)).reshape(lead)


def capsule_penetration_penalty(
    seg_a: torch.Tensor, seg_b: torch.Tensor, radii: torch.Tensor, pairs: torch.Tensor
) -> torch.Tensor:
    """Per-frame capsule self-penetration penalty ``sum_k max(0, r_i + r_j - dist_ij)^2`` [m^2].

    Args:
        seg_a, seg_b: world capsule segment ends [m], shape (..., N, 3).
        radii: capsule radii [m], shape (N,), >= 0 (checked on the host).
        pairs: capsule index pairs to test, shape (P, 2), an integer tensor (any device) with indices in
            ``[0, N)``; checked on the host, one copy of ``pairs`` per call.

    Returns:
        Shape (...).

    Raises:
        TypeError: an argument is not a tensor, or of the wrong kind of dtype.
        ValueError: on wrong shapes, pair indices out of range or a negative radius.
    """
    _float_tensor("seg_a", seg_a, "(..., N, 3)")
    _float_tensor("seg_b", seg_b, "(..., N, 3)")
    _float_tensor("radii", radii, "(N,)")
    if seg_a.shape != seg_b.shape or seg_a.shape[-1] != 3 or seg_a.dim() < 2:
        raise ValueError(
            f"seg_a/seg_b: expected equal shapes (..., N, 3), got {tuple(seg_a.shape)}, {tuple(seg_b.shape)}"
        )
    if radii.shape != (seg_a.shape[-2],):
        raise ValueError(f"radii: expected shape ({seg_a.shape[-2]},), got {tuple(radii.shape)}")
    lead = seg_a.shape[:-2]
    n = seg_a.shape[-2]
    pairs = _checked_pairs(pairs, n)
    _check_radii(radii.detach().to(torch.float64).cpu().numpy())  # a small copy, like the pairs' (bfloat16 too)
    f = math.prod(lead)  # not -1: ambiguous without capsules (N = 0)
    out = _CapsulePenalty.apply(seg_a.reshape(f, n, 3), seg_b.reshape(f, n, 3), radii, pairs)
    return out.reshape(lead)
