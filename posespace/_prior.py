"""The pose space as a differentiable pose prior for trajectory optimization (``distill.losses.PosePrior``).

``prior(rotations (F, J, 4), world (F, J, 7)) -> scalar``: the mean over frames of

* the validators' smooth loss (self-intersection of the skinned body parts, hyperextension beyond the calibrated
  swing / twist limits, bone collapse): zero for poses well inside, growing with the violation;
* ``manifold_weight`` x the squared distance (model units) between the pose and the denoiser's estimate of its clean
  version after noising it to diffusion time ``manifold_time`` -- the score-distillation direction of the pose
  model, pulling each frame towards the learned pose distribution. The noise is drawn once per frame count from
  ``seed``, so the prior is a deterministic function of the poses (a resumed optimization retraces itself).

The root's world heading and translation are not part of a pose; ``world`` is not used.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from sim import Rig
from sim._numbers import is_real

from ._checks import check_int, check_number

__all__ = ["make_pose_prior"]

MIN_QUAT_NORM = 1e-6
"""Rotations are quaternions of any norm (normalized here); below this norm one holds no direction worth reading."""


def make_pose_prior(
    space, rig: Rig, manifold_weight: float = 0.02, manifold_time: float = 0.1, seed: int = 0
) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """See :meth:`posespace.PoseSpace.pose_prior`."""
    manifold_weight = check_number("manifold_weight", manifold_weight, 0.0)  # True weighed 1
    seed = check_int("seed", seed, 0)
    if not (is_real(manifold_time) and 0.0 < manifold_time < 1.0):
        raise ValueError(f"manifold_time: must be a diffusion time in (0, 1), got {manifold_time!r}")
    ctx = space.context(rig)
    pr = ctx.pose_rig
    noise: dict[int, torch.Tensor] = {}
    ab = space.diffusion.alpha_bar(torch.tensor(float(manifold_time)))

    def prior(rotations: torch.Tensor, world: torch.Tensor | None = None) -> torch.Tensor:
        if rotations.ndim != 3 or rotations.shape[1:] != (pr.joint_count, 4):
            raise ValueError(f"pose prior: rotations must be (F, {pr.joint_count}, 4), got {tuple(rotations.shape)}")
        if rotations.shape[0] == 0:  # the mean over no frames is NaN
            raise ValueError(f"pose prior: rotations: no frames (shape (0, {pr.joint_count}, 4)); give at least one")
        finite = torch.isfinite(rotations.detach()).all(dim=-1)
        if not bool(finite.all()):  # a NaN would make the loss and every gradient NaN without a word
            f, j = (int(i) for i in torch.nonzero(~finite)[0])
            raise ValueError(f"pose prior: non-finite rotation at frame {f}, joint {j} ({rig.joint_names[j]})")
        degenerate = rotations.detach().norm(dim=-1) < MIN_QUAT_NORM
        if bool(degenerate.any()):  # normalizing it divides by the 1e-12 clamp: read as the identity, no gradient
            f, j = (int(i) for i in torch.nonzero(degenerate)[0])
            raise ValueError(f"pose prior: rotations: zero quaternion (norm < {MIN_QUAT_NORM:g}) at frame {f}, joint "
                             f"{j} ({rig.joint_names[j]}); it is no rotation")  # fmt: skip
        device = rotations.device
        rotations = rotations.to("cpu")  # the model and the validators live on the CPU; autograd crosses back
        poses = pr.encode_torch(rotations)  # (F, J, 6)
        val = ctx.validators
        loss = val.loss(poses.to(val.dtype)).to(rotations.dtype).mean()
        if manifold_weight > 0.0:
            x = space.to_model(ctx, poses)  # (F, A, 6), differentiable
            n = x.shape[0]
            if n not in noise:
                gen = torch.Generator().manual_seed(int(seed))
                noise[n] = torch.randn(x.shape, generator=gen, dtype=torch.float32)
            x_t = ab.sqrt() * x.detach() + (1.0 - ab).sqrt() * noise[n].to(x.device)
            with torch.no_grad():
                x0_hat, _ = space.diffusion.predict(space.model, x_t, manifold_time, ctx.cond(n))
            loss = loss + manifold_weight * ((x - x0_hat) ** 2).sum(dim=(1, 2)).mean().to(rotations.dtype)
        return loss.to(device)

    prior.key = (
        f"posespace-prior:{space.fingerprint()}:manifold_weight={float(manifold_weight)!r}:"
        f"manifold_time={float(manifold_time)!r}:seed={int(seed)}"
    )
    return prior
