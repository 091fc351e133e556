"""Small batched solvers on pose tensors: Levenberg-Marquardt for inverse kinematics."""

from __future__ import annotations

from collections.abc import Callable

import torch

__all__ = ["levenberg_marquardt"]


def levenberg_marquardt(
    residual_fn: Callable[[torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    mask: torch.Tensor,
    iters: int,
    prior: torch.Tensor | None = None,
    prior_weight: float = 0.0,
    damping: float = 1e-2,
) -> torch.Tensor:
    """Minimizes ``|r(x)|^2 + prior_weight |x - prior|^2`` per batch element by Levenberg-Marquardt.

    The Jacobian of the residuals comes from one backward pass per residual component (the residual function may
    contain Warp ops, which support repeated backward passes through a retained graph).

    Args:
        residual_fn: ``x (B, J, C) -> r (B, M)``.
        x: start, shape (B, J, C).
        mask: joints that move, shape (J,), bool.
        iters: iterations.
        prior: point the regularizer pulls towards (default: the start).
        prior_weight: regularizer weight.
        damping: initial Marquardt damping (scaled by the diagonal of ``J^T J``).

    Returns:
        The solution, shape (B, J, C); each element never has a higher cost than its start.
    """
    x = x.detach().clone()
    prior = x.clone() if prior is None else prior.detach()
    B, _, C = x.shape
    cols = mask.nonzero().flatten()
    D = len(cols) * C
    lam = torch.full((B,), damping, dtype=x.dtype)
    eye = torch.eye(D, dtype=x.dtype)

    def cost(y: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        return (r**2).sum(1) + prior_weight * ((y - prior)[:, cols] ** 2).sum(dim=(1, 2))

    for _ in range(iters):
        xg = x.clone().requires_grad_(True)
        r = residual_fn(xg)
        M = r.shape[1]
        rows = []
        for k in range(M):
            (g,) = torch.autograd.grad(r[:, k].sum(), xg, retain_graph=k < M - 1)
            rows.append(g[:, cols].reshape(B, D))
        jac = torch.stack(rows, dim=1)  # (B, M, D)
        r = r.detach()
        jtj = jac.transpose(1, 2) @ jac
        grad = (jac.transpose(1, 2) @ r[..., None])[..., 0] + prior_weight * (x - prior)[:, cols].reshape(B, D)
        diag = torch.diagonal(jtj, dim1=1, dim2=2)
        a = jtj + prior_weight * eye + lam[:, None, None] * torch.diag_embed(diag + 1e-9)
        step = torch.linalg.solve(a, -grad[..., None])[..., 0]
        trial = x.clone()
        trial[:, cols] = x[:, cols] + step.view(B, len(cols), C)
        with torch.no_grad():
            before, after = cost(x, r), cost(trial, residual_fn(trial))
        better = after < before
        x = torch.where(better[:, None, None], trial, x)
        lam = torch.where(better, lam / 3.0, lam * 4.0).clamp(1e-7, 1e7)
    return x
