"""A torch autograd wrapper for the validator kernels: one differentiable input, constant arrays, scalar outputs."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import warp as wp

from sim._warp_setup import init_warp
from sim.torch_ops import refuse_double_backward

__all__ = ["sphere_penetration", "warp_device", "warp_op", "warp_scalar"]


def warp_device(device: torch.device) -> str:
    """Warp device name of a torch device."""
    return "cpu" if device.type == "cpu" else f"cuda:{device.index or 0}"


def warp_scalar(dtype: torch.dtype):
    """Warp scalar type of a torch float dtype."""
    if dtype == torch.float32:
        return wp.float32
    if dtype == torch.float64:
        return wp.float64
    raise ValueError(f"expected torch.float32 or torch.float64, got {dtype}")


class _WarpOp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, kernel, dim, x_dtype, consts, out_shapes, x: torch.Tensor):
        init_warp()
        dev = warp_device(x.device)
        scalar = warp_scalar(x.dtype)
        xw = wp.from_torch(x.detach().contiguous(), dtype=x_dtype, requires_grad=True)
        outs = [wp.zeros(s, dtype=scalar, device=dev, requires_grad=True) for s in out_shapes]
        tape = wp.Tape()
        with tape:
            wp.launch(kernel, dim=dim, inputs=[xw, *consts], outputs=outs, device=dev)
        ctx.saved = (tape, xw, outs)
        return tuple(wp.to_torch(o).clone() for o in outs)

    @staticmethod
    def backward(ctx, *grads):
        refuse_double_backward("validator kernel")
        tape, xw, outs = ctx.saved
        g = {o: wp.from_torch(gr.contiguous(), dtype=o.dtype) for o, gr in zip(outs, grads) if gr is not None}
        tape.backward(grads=g)
        gx = wp.to_torch(xw.grad).clone()
        tape.zero()
        return None, None, None, None, None, gx


def warp_op(kernel, dim: tuple[int, ...], x: torch.Tensor, x_dtype, consts: Sequence, out_shapes) -> tuple:
    """Launches ``kernel(x, *consts) -> outputs`` differentiably w.r.t. ``x``.

    Args:
        kernel: a Warp kernel whose first argument is ``x`` and whose last ``len(out_shapes)`` arguments are
            scalar outputs of ``x``'s precision.
        dim: launch dimensions.
        x: the differentiable input (its trailing dimension is folded into ``x_dtype`` when that is a vector type).
        x_dtype: Warp dtype of ``x``'s elements (``wp.quatf``, ``wp.vec3d``, ``wp.transformf``, ...).
        consts: constant Warp arrays on the same device and precision.
        out_shapes: output shapes.

    Returns:
        The outputs as torch tensors.
    """
    return _WarpOp.apply(kernel, dim, x_dtype, list(consts), list(out_shapes), x)


class _SpherePenetration(torch.autograd.Function):
    """Sphere-pair overlap through :func:`sim.collision.capsule_penetration_penalty` (spheres are capsules whose
    segment ends coincide), in float64, differentiable w.r.t. the centres."""

    @staticmethod
    def forward(ctx, radii: wp.array, pairs: wp.array, centers: torch.Tensor) -> torch.Tensor:
        from sim.collision import capsule_penetration_penalty

        init_warp()
        c = centers.detach().to(torch.float64).contiguous()
        a = wp.from_torch(c, dtype=wp.vec3d, requires_grad=True)
        b = wp.from_torch(c.clone(), dtype=wp.vec3d, requires_grad=True)
        tape = wp.Tape()
        with tape:
            # the validators build (or host-check) their pairs once: no device-to-host copy per call
            depth, _ = capsule_penetration_penalty(a, b, radii, pairs, check_indices=False)
        ctx.saved = (tape, a, b, depth)
        ctx.dtype = centers.dtype
        return wp.to_torch(depth).clone().to(centers.dtype)

    @staticmethod
    def backward(ctx, grad_depth: torch.Tensor):
        refuse_double_backward("sphere penetration")
        tape, a, b, depth = ctx.saved
        tape.backward(grads={depth: wp.from_torch(grad_depth.detach().to(torch.float64).contiguous())})
        g = (wp.to_torch(a.grad) + wp.to_torch(b.grad)).to(ctx.dtype)
        tape.zero()
        return None, None, g


def sphere_penetration(centers: torch.Tensor, radii: wp.array, pairs: wp.array) -> torch.Tensor:
    """Overlap depth ``max(0, r_a + r_b - |c_a - c_b|)`` [m] of sphere pairs, shape (N, P).

    Args:
        centers: sphere centres [m], shape (N, S, 3) (CPU or the device of the Warp arrays).
        radii: sphere radii [m], shape (S,), float64 Warp array.
        pairs: sphere index pairs, shape (P, 2), int32 Warp array.
    """
    return _SpherePenetration.apply(radii, pairs, centers)
