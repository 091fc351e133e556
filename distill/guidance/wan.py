"""SDS guidance from Wan 2.1 (flow matching), built on diffusers' classes.

Components: ``WanTransformer3DModel`` (latents in [B, C, F, h, w]), ``AutoencoderKLWan`` (latents normalized
with the config's ``latents_mean`` / ``latents_std``) and the flow shift of the model's scheduler
(``flow_shift`` of UniPC configs, ``shift`` of FlowMatchEulerDiscreteScheduler). Forward process
``x_s = (1 - s) z + s eps`` with ``s = shift u / (1 + (shift - 1) u)``; the model timestep is ``1000 s`` and the
model predicts the velocity ``eps - z``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ._sds import TimestepSchedule, VideoSDS, Weighting, cfg_combine

__all__ = ["GuidanceWan", "checkpointed_wan_encode", "flow_shift"]


def checkpointed_wan_encode(vae, x: torch.Tensor) -> torch.Tensor:
    """``vae.encode(x).latent_dist.mode()`` of an ``AutoencoderKLWan`` with each causal chunk recomputed in the
    backward pass.

    The Wan VAE encodes the first frame, then 4 frames at a time, carrying a causal cache of the last frames of
    every convolution from chunk to chunk. diffusers does not checkpoint it, so every chunk's activations stayed
    alive for the backward pass (about 730 GB for 81 frames at 480 x 832 in float32, extrapolated from the tiny
    model). Here each chunk is a ``torch.utils.checkpoint`` call that takes the cache as inputs and returns the
    new cache as outputs (gradients flow through it to earlier chunks), so only one chunk's activations are alive at
    a time: the same values and gradients (tested), 1 / chunks of the memory.

    Args:
        vae: the ``AutoencoderKLWan``.
        x: video in [-1, 1], shape (B, 3, F, H, W), F = 4k + 1.

    Returns:
        The posterior mode (un-normalized latents), shape (B, C, 1 + (F - 1) // 4, H / 8, W / 8).
    """
    from diffusers.models.autoencoders.vae import DiagonalGaussianDistribution
    from torch.utils.checkpoint import checkpoint

    # (the causal cache ``_enc_feat_map`` exists only once ``clear_cache`` has run: a fresh VAE has none, so its
    # first encode must not be taken for another encoder's)
    causal = all(hasattr(vae, a) for a in ("clear_cache", "encoder", "quant_conv"))
    if causal:
        vae.clear_cache()
        causal = hasattr(vae, "_enc_feat_map")
    if not causal or getattr(vae, "use_tiling", False) or getattr(vae, "use_slicing", False):
        return vae.encode(x).latent_dist.mode()  # (another encoder, e.g. the oracle's stand-in, or tiled)
    if getattr(vae.config, "patch_size", None) is not None:
        from diffusers.models.autoencoders.autoencoder_kl_wan import patchify

        x = patchify(x, patch_size=vae.config.patch_size)
    cache = list(vae._enc_feat_map)

    def chunk(frames, *cache_in):
        feat = list(cache_in)
        out = vae.encoder(frames, feat_cache=feat, feat_idx=[0])
        return (out, *feat)

    outs = []
    for i in range(1 + (x.shape[2] - 1) // 4):
        frames = x[:, :, :1] if i == 0 else x[:, :, 1 + 4 * (i - 1) : 1 + 4 * i]
        res = checkpoint(chunk, frames, *cache, use_reentrant=False)
        outs.append(res[0])
        cache = list(res[1:])
    enc = vae.quant_conv(torch.cat(outs, 2))
    vae.clear_cache()
    return DiagonalGaussianDistribution(enc).mode()


def flow_shift(scheduler) -> float:
    """The sigma shift of a diffusers flow scheduler config (``flow_shift``, else ``shift``).

    Raises:
        ValueError: the scheduler is not a flow-matching one (a ``prediction_type`` other than 'flow_prediction', or
            no shift: a CogVideoX DDIM scheduler here silently gave shift 1.0), or the shift is not a finite number
            > 0.
    """
    cfg = scheduler.config
    get = (lambda key: cfg.get(key)) if hasattr(cfg, "get") else (lambda key: getattr(cfg, key, None))
    name = type(scheduler).__name__
    prediction = get("prediction_type")
    if prediction is not None and prediction != "flow_prediction":
        raise ValueError(
            f"scheduler: {name} has prediction_type {prediction!r}, expected 'flow_prediction' (Wan needs a "
            "flow-matching scheduler, e.g. UniPCMultistepScheduler(prediction_type='flow_prediction', "
            "use_flow_sigmas=True, flow_shift=3.0) or FlowMatchEulerDiscreteScheduler(shift=3.0))"
        )
    for key in ("flow_shift", "shift"):
        value = get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 < value < float("inf")):
            raise ValueError(f"scheduler: {name} has {key} {value!r}, expected a finite number > 0")
        return float(value)
    raise ValueError(
        f"scheduler: {name} has no flow shift (neither flow_shift nor shift in its config); Wan needs a "
        "flow-matching scheduler, e.g. FlowMatchEulerDiscreteScheduler(shift=3.0)"
    )


class GuidanceWan(VideoSDS):
    """Video SDS with Wan 2.1 (text to video).

    Attributes:
        transformer, vae: the frozen diffusers components.
        shift: flow sigma shift.
        prompt_embeds, negative_prompt_embeds: UMT5 embeddings computed once, shape (1, L, D) each.
        model_size: (height, width) the renders are resized to before encoding, or None to keep them.
    """

    def __init__(
        self,
        transformer: torch.nn.Module,
        vae: torch.nn.Module,
        scheduler,
        prompt_embeds: torch.Tensor,
        negative_prompt_embeds: torch.Tensor | None = None,
        guidance_scale: float = 25.0,
        schedule: TimestepSchedule | None = None,
        weighting: Weighting = "noise_level",
        model_size: tuple[int, int] | None = None,
        vae_tiling: bool = False,
    ):
        super().__init__(guidance_scale, schedule or TimestepSchedule(), weighting)
        self.transformer = transformer.requires_grad_(False).eval()
        self.vae = vae.requires_grad_(False).eval()
        self.shift = flow_shift(scheduler)
        self.prompt_embeds = prompt_embeds
        if negative_prompt_embeds is None:
            negative_prompt_embeds = torch.zeros_like(prompt_embeds)
        self.negative_prompt_embeds = negative_prompt_embeds
        self.model_size = model_size
        cfg = vae.config
        z_dim = int(cfg.z_dim)
        for name in ("latents_mean", "latents_std"):  # a short list failed in a raw view() of the buffer
            values = getattr(cfg, name, None)
            if not (isinstance(values, list | tuple) and len(values) == z_dim
                    and all(isinstance(v, int | float) and math.isfinite(v) for v in values)):  # fmt: skip
                raise ValueError(f"vae/config.json: {name} must be {z_dim} finite numbers (z_dim), got {values!r}")
        self.register_buffer(
            "latents_mean", torch.tensor(cfg.latents_mean, dtype=torch.float32).view(1, z_dim, 1, 1, 1)
        )
        self.register_buffer("latents_std", torch.tensor(cfg.latents_std, dtype=torch.float32).view(1, z_dim, 1, 1, 1))
        # AutoencoderKLWan does not support diffusers' gradient checkpointing: encode() checkpoints each causal
        # chunk itself (checkpointed_wan_encode). Tiling (optional) splits the frame spatially but keeps every
        # tile's activations for the backward pass: it does not save memory there.
        if vae_tiling and hasattr(vae, "enable_tiling"):
            vae.enable_tiling()

    def sigma(self, u: float) -> float:
        """Shifted flow sigma of time fraction ``u``."""
        return self.shift * u / (1.0 + (self.shift - 1.0) * u)

    def encode(self, video: torch.Tensor) -> torch.Tensor:
        """Rendered video (B, F, 3, H, W) in [0, 1] -> normalized latents (B, C, F', h, w), in the graph.

        Raises:
            ValueError: F is not 4k + 1 for the Wan VAE (its encoder takes the first frame, then 4 frames per
                latent frame, and silently dropped the remaining frames: they got no gradient).
        """
        b, f = video.shape[:2]
        config = getattr(self.vae, "config", None)
        causal = getattr(config, "temperal_downsample", None) is not None  # the Wan VAE (not the oracle's stand-in)
        if causal and (f - 1) % 4 != 0:
            kept = max(1, 4 * ((f - 1) // 4) + 1)
            raise ValueError(
                f"video: {f} frames, expected 4k + 1 (e.g. {kept} or {kept + 4}): the Wan VAE encodes the first "
                f"frame, then 4 frames per latent frame, and drops the rest (frames {kept} to {f - 1} would get no "
                "gradient)"
            )
        if self.model_size is not None and tuple(video.shape[-2:]) != tuple(self.model_size):
            frames = F.interpolate(video.flatten(0, 1), size=self.model_size, mode="bilinear", align_corners=False)
            video = frames.unflatten(0, (b, f))
        x = (2.0 * video - 1.0).permute(0, 2, 1, 3, 4)
        vae_dtype = next(self.vae.parameters()).dtype
        z = checkpointed_wan_encode(self.vae, x.to(vae_dtype))
        patch = getattr(getattr(self.transformer, "config", None), "patch_size", None)
        if patch is not None and (z.shape[-2] % patch[1] or z.shape[-1] % patch[2]):
            raise ValueError(
                f"video: {tuple(video.shape[-2:])} px gives {tuple(z.shape[-2:])} latents, not divisible by the "
                f"transformer patch size {tuple(patch[1:])}; render (or set model_height/width) in multiples of "
                f"{patch[2] * video.shape[-1] // z.shape[-1]} px"
            )
        mean, std = self.latents_mean.to(z), self.latents_std.to(z)
        return (z - mean) / std

    def noisy(self, latents: torch.Tensor, noise: torch.Tensor, u: float) -> tuple[torch.Tensor, float, float]:
        s = self.sigma(u)
        x = (1.0 - s) * latents + s * noise
        weight = 1.0 if self.weighting == "uniform" else s
        return x, 1000.0 * s, weight

    def predict(self, x_t: torch.Tensor, timestep: float) -> torch.Tensor:
        b = x_t.shape[0]
        dtype = self.prompt_embeds.dtype
        pos = self.prompt_embeds.expand(b, -1, -1)
        if self.guidance_scale != 1.0:
            inp = torch.cat([x_t, x_t])
            emb = torch.cat([self.negative_prompt_embeds.expand(b, -1, -1), pos])
        else:
            inp, emb = x_t, pos
        t = torch.full((inp.shape[0],), timestep, device=x_t.device, dtype=torch.float32)
        out = self.transformer(hidden_states=inp.to(dtype), timestep=t, encoder_hidden_states=emb, return_dict=False)[
            0
        ].float()
        if self.guidance_scale != 1.0:
            uncond, cond = out.chunk(2)
            return cfg_combine(uncond, cond, self.guidance_scale)
        return out

    def sds_grad(
        self, latents: torch.Tensor, noise: torch.Tensor, x_t: torch.Tensor, pred: torch.Tensor, timestep: float
    ) -> torch.Tensor:
        return pred - (noise.float() - latents.float())
