"""Score distillation sampling: the shared math and the base class of the video guidances.

The SDS gradient of a latent ``z = E(x)`` (``E`` the frozen VAE encoder, ``x`` the rendered video) is

    g = w(t) * (eps_hat(x_t, t, y) - eps),      x_t = alpha_t z + sigma_t eps,

with ``eps_hat`` the classifier-free-guided noise prediction (``u + s (c - u)``). It is injected with the
detached-target trick ``L = 0.5 * ||z - stopgrad(z - g)||^2 / B`` so that ``dL/dz = g / B`` and autograd carries
``J_E^T g`` back to the pixels (the VAE encode stays in the graph) and on to the renderer, skinning and FK.

Parameterizations:

* v-prediction on a VP (DDPM) schedule (CogVideoX): ``eps_hat = sqrt(ab) v_hat + sqrt(1 - ab) x_t``;
* flow matching (Wan): ``x_s = (1 - s) z + s eps``, the model predicts the velocity ``v = eps - z``; the gradient is
  ``w(s) (v_hat - (eps - z))`` (which is the eps-form residual divided by ``1 - s``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch

from sim._numbers import is_finite_real

__all__ = [
    "SDSOutput",
    "TimestepSchedule",
    "VideoSDS",
    "cfg_combine",
    "detached_target_loss",
    "step_generator",
    "vpred_to_eps",
]

Weighting = Literal["uniform", "noise_level"]


@dataclass(frozen=True)
class TimestepSchedule:
    """Diffusion-time sampling range, annealed over the run.

    Times are fractions of the model's training range in [0, 1] (a DDPM timestep is ``round(u * 999)``; a flow
    sigma is ``u`` before the model's shift). At progress ``p`` in [0, 1] the upper bound is
    ``max_start + (max_end - max_start) * a(p)`` with ``a`` the annealing curve, and ``u ~ U[min, upper]``.
    """

    min: float = 0.02
    """Lower bound of the sampled time [fraction]."""
    max_start: float = 0.98
    """Upper bound at the start [fraction]."""
    max_end: float = 0.5
    """Upper bound at the end [fraction]."""
    anneal: Literal["none", "linear", "sqrt"] = "linear"
    """Annealing curve of the upper bound ('none' keeps max_start)."""

    def __post_init__(self):
        values = (self.min, self.max_start, self.max_end)
        if not all(is_finite_real(v) for v in values):
            raise ValueError(f"TimestepSchedule: min, max_start, max_end must be finite numbers, got {values}")
        if not (0.0 <= self.min <= self.max_start <= 1.0 and self.min <= self.max_end <= 1.0):
            raise ValueError(
                f"TimestepSchedule: need 0 <= min <= max_start <= 1 and min <= max_end <= 1, got min {self.min}, "
                f"max_start {self.max_start}, max_end {self.max_end}"
            )
        if self.anneal not in ("none", "linear", "sqrt"):
            raise ValueError(f"TimestepSchedule.anneal: expected 'none', 'linear' or 'sqrt', got {self.anneal!r}")

    def upper(self, progress: float) -> float:
        p = min(max(float(progress), 0.0), 1.0)
        a = {"none": 0.0, "linear": p, "sqrt": math.sqrt(p)}[self.anneal]
        return max(self.min, self.max_start + (self.max_end - self.max_start) * a)

    def sample(self, progress: float, generator: torch.Generator) -> float:
        """One time fraction for this step, drawn with ``generator``."""
        u = float(torch.rand((), generator=generator, device=generator.device))
        return self.min + (self.upper(progress) - self.min) * u


@dataclass
class SDSOutput:
    """One guidance evaluation.

    Attributes:
        loss: the detached-target loss (differentiable w.r.t. the video), a scalar.
        latents: the encoded latents ``z`` (in the graph), model layout.
        grad: the latent-space SDS gradient ``g`` (detached), same shape as ``latents``.
        timestep: the model timestep used (DDPM step, or ``1000 * sigma`` for flow).
        weight: ``w(t)``.
    """

    loss: torch.Tensor
    latents: torch.Tensor
    grad: torch.Tensor
    timestep: float
    weight: float


def vpred_to_eps(v: torch.Tensor, x_t: torch.Tensor, alpha_bar: torch.Tensor | float) -> torch.Tensor:
    """Noise prediction from a v-prediction on a VP schedule: ``sqrt(ab) v + sqrt(1 - ab) x_t``."""
    ab = torch.as_tensor(alpha_bar, dtype=x_t.dtype, device=x_t.device)
    return ab.sqrt() * v + (1.0 - ab).sqrt() * x_t


def cfg_combine(uncond: torch.Tensor, cond: torch.Tensor, scale: float) -> torch.Tensor:
    """Classifier-free guidance in diffusers' form ``u + s (c - u)``."""
    return uncond + scale * (cond - uncond)


def detached_target_loss(latents: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """``0.5 * ||z - stopgrad(z - g)||^2 / B`` (float32): value ``0.5 ||g||^2 / B``, gradient w.r.t. ``z`` ``g / B``.

    Computed as ``<z, g> / B - stopgrad(<z, g> / B) + 0.5 ||g||^2 / B`` in float32: forming ``z - (z - g)`` in the
    weights' half precision cancels catastrophically (bf16 latents ~1.5 with |g| ~ 0.02: 12% gradient error) and
    the squared sum overflows float16.
    """
    g = grad.detach().float()
    B = latents.shape[0]
    inner = (latents.float() * g).sum() / B
    return inner - inner.detach() + 0.5 * g.square().sum() / B


def step_generator(seed: int, step: int, device: str | torch.device = "cpu") -> torch.Generator:
    """The random stream of one optimization step (a pure function of seed and step, so resumed runs match)."""
    g = torch.Generator(device=device)
    g.manual_seed((int(seed) * 1_000_003 + int(step)) % (2**63 - 1))
    return g


class VideoSDS(torch.nn.Module):
    """Base of the video guidances: encode in the graph, noise, predict with CFG, form the SDS gradient.

    Subclasses implement :meth:`encode` (video -> model-layout latents), :meth:`noisy` (forward diffusion and
    the model timestep), :meth:`predict` (the guided model output) and :meth:`sds_grad`.

    Attributes:
        guidance_scale: classifier-free guidance scale (1 disables the unconditional pass).
        schedule: the timestep sampling schedule.
        weighting: ``"uniform"`` (w = 1) or ``"noise_level"`` (w = 1 - alpha_bar for VP, sigma for flow).
    """

    def __init__(self, guidance_scale: float, schedule: TimestepSchedule, weighting: Weighting):
        super().__init__()
        if weighting not in ("uniform", "noise_level"):
            raise ValueError(f"weighting: expected 'uniform' or 'noise_level', got {weighting!r}")
        self.guidance_scale = float(guidance_scale)
        self.schedule = schedule
        self.weighting = weighting

    # -- to implement ---------------------------------------------------------------------------------
    def encode(self, video: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def noisy(self, latents: torch.Tensor, noise: torch.Tensor, u: float) -> tuple[torch.Tensor, float, float]:
        """Returns ``(x_t, model timestep, w(t))`` for time fraction ``u``."""
        raise NotImplementedError  # pragma: no cover

    def predict(self, x_t: torch.Tensor, timestep: float) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def sds_grad(
        self, latents: torch.Tensor, noise: torch.Tensor, x_t: torch.Tensor, pred: torch.Tensor, timestep: float
    ) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- shared ----------------------------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        """The device the model computes on (where its prompt embeddings live); videos are moved there."""
        emb = getattr(self, "prompt_embeds", None)
        return emb.device if isinstance(emb, torch.Tensor) else torch.device("cpu")

    def forward(self, video: torch.Tensor, progress: float, generator: torch.Generator) -> SDSOutput:
        """SDS on a batch of rendered videos.

        Args:
            video: RGB in [0, 1], shape (B, F, 3, H, W), differentiable, on any device (it is moved to the model's,
                and autograd carries the gradient back).
            progress: fraction of the run done, in [0, 1] (anneals the timestep range).
            generator: the step's random stream (timestep and noise).

        Returns:
            The output; its loss is on ``video``'s device.
        """
        if video.dim() != 5 or video.shape[2] != 3:
            raise ValueError(f"video: expected shape (B, F, 3, H, W), got {tuple(video.shape)}")
        home = video.device
        latents = self.encode(video.to(self.device))
        u = self.schedule.sample(progress, generator)
        noise = torch.randn(latents.shape, generator=generator, device=generator.device, dtype=torch.float32)
        noise = noise.to(device=latents.device, dtype=latents.dtype)
        with torch.no_grad():
            x_t, timestep, weight = self.noisy(latents.detach(), noise, u)
            pred = self.predict(x_t, timestep)
            grad = weight * self.sds_grad(latents.detach(), noise, x_t, pred, timestep)
            bad = ~torch.isfinite(grad)
            if bool(bad.any()):
                # zeroing them (as before) hid a broken model or an fp16 overflow behind a quietly wrong run
                raise FloatingPointError(
                    f"the video model's SDS gradient has {int(bad.sum())} non-finite entries of {bad.numel()} at "
                    f"timestep {timestep:g} (latents finite: {bool(torch.isfinite(latents).all())}); a float16 "
                    "overflow? try --guidance-dtype bfloat16 or float32, then --resume"
                )
            grad = grad.to(latents.dtype)
        return SDSOutput(detached_target_loss(latents, grad).to(home), latents, grad, timestep, weight)
