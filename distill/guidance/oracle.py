"""The oracle teacher: a denoiser that knows a target video and predicts its clean latent exactly.

Plugged into :class:`GuidanceCogVideoX` (v-prediction) or :class:`GuidanceWan` (flow) in place of the
transformer, it exercises the whole SDS path (encode in the graph, forward diffusion, CFG, parameterization
conversion, weighting, detached-target loss) with a known answer. With ``x0_hat = z*`` the noise cancels:

    v-prediction:  eps_hat - eps = sqrt(ab / (1 - ab)) (z - z*)
    flow:          v_hat - (eps - z) = (z - z*) / s

so SDS descends a timestep-weighted latent residual and, through an identity :class:`PixelVAE`, a photometric
loss against the target renders. An oracle whose target is the current latent is an *exact denoiser*: its SDS
gradient is zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Literal

import torch

__all__ = ["OracleDenoiser", "PixelVAE"]


@dataclass
class _Posterior:
    mean: torch.Tensor

    def mode(self) -> torch.Tensor:
        return self.mean

    def sample(self, generator=None) -> torch.Tensor:
        return self.mean


@dataclass
class _EncoderOutput:
    latent_dist: _Posterior


class PixelVAE(torch.nn.Module):
    """An identity "VAE": the latent of a video (B, 3, F, H, W) in [-1, 1] is the video itself.

    It has the diffusers encoder interface (``encode(x).latent_dist.mode()``, ``config.scaling_factor``).
    """

    def __init__(self):
        super().__init__()
        self.config = SimpleNamespace(scaling_factor=1.0)
        self.register_buffer("_dtype_probe", torch.zeros(0), persistent=False)

    def parameters(self, recurse: bool = True):
        yield self._dtype_probe

    def encode(self, x: torch.Tensor) -> _EncoderOutput:
        return _EncoderOutput(_Posterior(x))


class OracleDenoiser(torch.nn.Module):
    """Stands in for a video transformer; predicts the output that makes ``x0_hat`` equal the target latent.

    Attributes:
        target: clean target latents in the guidance's model layout, shape (B, ...). A batch of ``k * B`` noisy
            inputs (e.g. CFG's [uncond, cond]) is matched to the targets tiled ``k`` times.
        parameterization: ``"v_prediction"`` (VP schedule, needs ``alphas_cumprod``), ``"epsilon"`` or ``"flow"``
            (timestep = 1000 sigma).
    """

    def __init__(
        self,
        target: torch.Tensor,
        parameterization: Literal["v_prediction", "epsilon", "flow"] = "v_prediction",
        alphas_cumprod: torch.Tensor | None = None,
    ):
        super().__init__()
        if parameterization != "flow" and alphas_cumprod is None:
            raise ValueError("alphas_cumprod: required for the v_prediction and epsilon parameterizations")
        self.register_buffer("target", target.detach().clone())
        self.parameterization = parameterization
        ab = torch.zeros(1) if alphas_cumprod is None else torch.as_tensor(alphas_cumprod, dtype=torch.float64)
        self.register_buffer("alphas_cumprod", ab)
        self.config = SimpleNamespace(use_rotary_positional_embeddings=False)

    def forward(self, hidden_states: torch.Tensor, timestep: torch.Tensor, return_dict: bool = False, **_):
        x = hidden_states.float()
        b = self.target.shape[0]
        if x.shape[0] % b or x.shape[1:] != self.target.shape[1:]:
            raise ValueError(
                f"hidden_states {tuple(x.shape)} do not match the oracle target {tuple(self.target.shape)}"
            )
        x0 = self.target.float().repeat(x.shape[0] // b, *([1] * (x.dim() - 1)))
        t = float(timestep.reshape(-1)[0])
        if self.parameterization == "flow":
            s = max(t / 1000.0, 1e-6)
            out = (x - x0) / s
        else:
            ab = float(self.alphas_cumprod[round(t)])
            eps = (x - ab**0.5 * x0) / max(1.0 - ab, 1e-12) ** 0.5
            out = eps if self.parameterization == "epsilon" else ab**0.5 * eps - (1.0 - ab) ** 0.5 * x0
        return (out,)
