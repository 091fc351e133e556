"""Gaussian diffusion on pose tokens: DDPM training with v-prediction, DDIM sampling and inversion.

Continuous time ``t`` in [0, 1] with the cosine schedule ``alpha_bar(t)``; ``x_t = sqrt(ab) x_0 + sqrt(1-ab) eps``.
The network predicts ``v = sqrt(ab) eps - sqrt(1-ab) x_0`` (well conditioned at both ends), from which
``x_0 = sqrt(ab) x_t - sqrt(1-ab) v`` and ``eps = sqrt(1-ab) x_t + sqrt(ab) v``.

DDIM (eta = 0) is the deterministic map ``x_s = sqrt(ab_s) x_0 + sqrt(1-ab_s) eps`` between times; run towards
``t = 0`` it samples, run towards ``t = 1`` (with the prediction at the current point) it inverts. Guidance acts
on the predicted clean pose: an ``x0_fn(x0, t)`` hook may move ``x_0`` (e.g. down a validator or IK loss
gradient) before the step, and ``eps`` is recomputed so the step stays consistent.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ._checks import check_fraction, check_int, check_number
from .model import PoseDenoiser

__all__ = ["Conditioning", "DiffusionConfig", "GaussianDiffusion"]


MAX_MIN_ALPHA_BAR = 1e-2
"""Largest ``alpha_bar`` floor: the signal left at t = 1 (sqrt 0.01 = 10% of the pose) is what sampling from unit
noise ignores."""


@dataclass(frozen=True)
class DiffusionConfig:
    """Noise schedule."""

    cosine_offset: float = 0.008
    """``s`` of the cosine schedule (Nichol & Dhariwal 2021)."""
    min_alpha_bar: float = 1e-5
    """``alpha_bar`` is clamped to [min_alpha_bar, 1], at most :data:`MAX_MIN_ALPHA_BAR` (t = 1, where sampling
    starts from unit noise, must be almost pure noise: at 0.5 samples of N(0.5, 0.3^2) came out N(0.36, 0.39^2)
    with an exact denoiser)."""

    def check(self) -> DiffusionConfig:
        """Returns self when the schedule is well defined; ValueError naming the field otherwise."""
        check_number("DiffusionConfig.cosine_offset", self.cosine_offset, 0.0)
        check_fraction("DiffusionConfig.min_alpha_bar", self.min_alpha_bar, open_low=True, open_high=True)
        if self.min_alpha_bar > MAX_MIN_ALPHA_BAR:
            raise ValueError(f"DiffusionConfig.min_alpha_bar: must be in (0, {MAX_MIN_ALPHA_BAR:g}] (t = 1 nearly "
                             f"pure noise), got {self.min_alpha_bar!r}")  # fmt: skip
        return self


@dataclass
class Conditioning:
    """What the denoiser sees besides the noisy poses: features (B, J, F), distances (B, J, J), mask (B, J)."""

    features: torch.Tensor
    distances: torch.Tensor
    mask: torch.Tensor

    def index(self, rows) -> Conditioning:
        return Conditioning(self.features[rows], self.distances[rows], self.mask[rows])


def _check_finite(name: str, x: torch.Tensor, cond: Conditioning) -> None:
    """ValueError naming ``name`` when ``x`` (B, J, 6) is not finite at a posed joint (``cond.mask``; padded slots
    are ignored by the samplers and may hold anything): a NaN there made every sample NaN without a word."""
    mask = cond.mask.to(x.device)
    if tuple(x.shape[:2]) != tuple(mask.shape):
        raise ValueError(f"{name}: expected shape ({', '.join(map(str, mask.shape))}, 6), got {tuple(x.shape)}")
    bad = ~torch.isfinite(x).all(dim=-1) & mask
    if bool(bad.any()):
        b, j = (int(i) for i in torch.nonzero(bad)[0])
        raise ValueError(f"{name}: non-finite value at pose {b}, joint {j}")


class GaussianDiffusion:
    """The schedule and the samplers (module docstring)."""

    def __init__(self, config: DiffusionConfig | None = None):
        self.config = config or DiffusionConfig()

    def alpha_bar(self, t: torch.Tensor) -> torch.Tensor:
        s = self.config.cosine_offset
        f = torch.cos((t + s) / (1 + s) * math.pi / 2) ** 2 / math.cos(s / (1 + s) * math.pi / 2) ** 2
        return f.clamp(self.config.min_alpha_bar, 1.0)

    # -- training -------------------------------------------------------------------------------------------
    def training_terms(
        self, model: PoseDenoiser, x0: torch.Tensor, cond: Conditioning, t: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per-pose v-prediction MSE over posed joints, the predicted ``x_0`` and the times.

        Args:
            x0: clean poses (model units), shape (B, J, 6).
            cond: conditioning.
            t: times (B,); uniform in [0, 1] when None.

        Returns:
            loss (B,), x0_hat (B, J, 6), t (B,).
        """
        B = x0.shape[0]
        if t is None:
            t = torch.rand(B, device=x0.device)
        m = cond.mask[..., None].to(x0.dtype)
        x0 = torch.where(cond.mask[..., None], x0, 0.0)  # whatever padded slots hold (NaN x 0 is NaN)
        eps = torch.randn_like(x0) * m
        ab = self.alpha_bar(t)[:, None, None]
        x_t = ab.sqrt() * x0 + (1 - ab).sqrt() * eps
        v = ab.sqrt() * eps - (1 - ab).sqrt() * x0
        v_hat = model(x_t, t, cond.features, cond.distances, cond.mask)
        err = ((v_hat - v) ** 2 * m).sum(dim=(1, 2)) / (6 * m.sum(dim=(1, 2))).clamp_min(1)
        x0_hat = ab.sqrt() * x_t - (1 - ab).sqrt() * v_hat
        return err, x0_hat, t

    # -- sampling -------------------------------------------------------------------------------------------
    def predict(
        self, model: PoseDenoiser, x_t: torch.Tensor, t: float, cond: Conditioning
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Predicted ``(x_0, eps)`` at time ``t`` (a float shared by the batch)."""
        tt = torch.full((x_t.shape[0],), float(t), device=x_t.device)
        ab = self.alpha_bar(tt)[:, None, None]
        v = model(x_t, tt, cond.features, cond.distances, cond.mask)
        m = cond.mask[..., None].to(x_t.dtype)
        x0 = (ab.sqrt() * x_t - (1 - ab).sqrt() * v) * m
        eps = (ab.sqrt() * v + (1 - ab).sqrt() * x_t) * m
        return x0, eps

    def _eps_from(self, x_t: torch.Tensor, x0: torch.Tensor, t: float) -> torch.Tensor:
        ab = self.alpha_bar(torch.tensor(float(t)))
        return (x_t - ab.sqrt() * x0) / (1 - ab).sqrt()

    @staticmethod
    def schedule(steps: int, t_start: float = 1.0, t_end: float = 0.0) -> list[float]:
        """``steps + 1`` evenly spaced times from ``t_start`` to ``t_end`` (both diffusion times in [0, 1]: the
        schedule is not monotonic outside)."""
        steps = check_int("steps", steps, 1)
        t_start, t_end = check_fraction("t_start", t_start), check_fraction("t_end", t_end)
        return [t_start + (t_end - t_start) * i / steps for i in range(steps + 1)]

    @torch.no_grad()
    def ddim(
        self,
        model: PoseDenoiser,
        x: torch.Tensor,
        cond: Conditioning,
        times: list[float],
        x0_fn: Callable[[torch.Tensor, float], torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Deterministic DDIM from ``times[0]`` to ``times[-1]`` (decreasing: denoise; increasing: invert).

        Args:
            x: the state at ``times[0]`` (model units), shape (B, J, 6); finite at the posed joints (padded slots
                may hold anything).
            times: the time grid: diffusion times in [0, 1] (the schedule folds back outside), monotonic (all
                non-increasing or all non-decreasing).
            x0_fn: optional guidance hook ``x0 -> x0'`` applied to each prediction while denoising (it may use
                autograd internally).

        Returns:
            The state at ``times[-1]``; the clean pose when ``times[-1] == 0``.

        Raises:
            ValueError: a time outside [0, 1] or not a number, times that go both ways, or a non-finite ``x`` at
                a posed joint.
        """
        times = [check_fraction(f"times[{i}]", t) for i, t in enumerate(times)]
        steps = [s - t for t, s in itertools.pairwise(times)]
        if any(d > 0 for d in steps) and any(d < 0 for d in steps):
            raise ValueError(f"times: must be monotonic (decreasing to denoise, increasing to invert), got {times}")
        _check_finite("x", x, cond)
        m = cond.mask[..., None].to(x.dtype)
        x = torch.where(cond.mask[..., None], x, 0.0)  # whatever padded slots hold (NaN x 0 is NaN)
        for t, s in itertools.pairwise(times):
            x0, eps = self.predict(model, x, t, cond)
            if x0_fn is not None and s < t:
                with torch.enable_grad():
                    x0 = x0_fn(x0, t) * m
                eps = self._eps_from(x, x0, t) * m if t > 0 else eps
            ab_s = self.alpha_bar(torch.tensor(float(s)))
            x = (ab_s.sqrt() * x0 + (1 - ab_s).sqrt() * eps) * m
            if s <= 0:
                x = x0
        return x

    def sample(
        self,
        model: PoseDenoiser,
        cond: Conditioning,
        steps: int = 50,
        generator: torch.Generator | None = None,
        x0_fn: Callable[[torch.Tensor, float], torch.Tensor] | None = None,
        temperature: float = 1.0,
        noise: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Clean poses from noise, shape (B, J, 6) (model units).

        Args:
            generator: draws the initial noise (on its own device, then moved to the mask's) when ``noise`` is None.
            temperature: standard deviation of the initial noise (1: the prior of the diffusion; below 1:
                truncated sampling, nearer the modes).
            noise: the unit initial noise, shape (B, J, 6), instead of drawing it.
        """
        check_number("temperature", temperature, 0.0)  # inf gave NaN poses, True ran at 1
        shape = (*cond.mask.shape, 6)
        if noise is None:
            device = generator.device if generator is not None else cond.mask.device
            noise = torch.randn(shape, generator=generator, device=device)
        elif tuple(noise.shape) != shape:
            raise ValueError(f"noise: expected shape {shape}, got {tuple(noise.shape)}")
        else:
            _check_finite("noise", noise, cond)
        noise = noise.to(cond.mask.device) * float(temperature)
        return self.ddim(model, noise, cond, self.schedule(steps), x0_fn)

    def invert(self, model: PoseDenoiser, x0: torch.Tensor, cond: Conditioning, t_end: float, steps: int):
        """DDIM inversion of clean poses to time ``t_end``, shape (B, J, 6)."""
        return self.ddim(model, x0, cond, self.schedule(steps, 0.0, t_end))
