"""SDS guidance from CogVideoX (v-prediction on a zero-terminal-SNR DDPM schedule), built on diffusers' classes.

Components: ``CogVideoXTransformer3DModel`` (or anything with its call signature, e.g. the oracle denoiser),
``AutoencoderKLCogVideoX`` (or :class:`distill.guidance.PixelVAE`) and ``CogVideoXDDIMScheduler`` (only its
``alphas_cumprod`` and ``prediction_type`` are used). Latents are scaled by the VAE's ``scaling_factor``
(1.15258426 for 2b, 0.7 for 5b) and permuted to the transformer's [B, F, C, h, w] layout.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._sds import TimestepSchedule, VideoSDS, Weighting, cfg_combine, vpred_to_eps

__all__ = ["GuidanceCogVideoX"]


class GuidanceCogVideoX(VideoSDS):
    """Video SDS with CogVideoX.

    Attributes:
        transformer, vae, scheduler: the frozen diffusers components.
        prompt_embeds, negative_prompt_embeds: T5 embeddings computed once, shape (1, L, D) each.
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
        vae_gradient_checkpointing: bool = True,
        vae_tiling: bool = False,
    ):
        super().__init__(guidance_scale, schedule or TimestepSchedule(), weighting)
        self.transformer = transformer.requires_grad_(False).eval()
        self.vae = vae.requires_grad_(False).eval()
        self.scheduler = scheduler
        self.register_buffer("alphas_cumprod", torch.as_tensor(scheduler.alphas_cumprod, dtype=torch.float64))
        self.prediction_type = scheduler.config.prediction_type
        if self.prediction_type not in ("v_prediction", "epsilon"):
            raise ValueError(
                f"scheduler: {type(scheduler).__name__} has prediction_type {self.prediction_type!r}, expected "
                "'v_prediction' or 'epsilon' (CogVideoX needs its DDPM-family scheduler, e.g. CogVideoXDDIMScheduler)"
            )
        self.prompt_embeds = prompt_embeds
        if negative_prompt_embeds is None:
            negative_prompt_embeds = torch.zeros_like(prompt_embeds)
        self.negative_prompt_embeds = negative_prompt_embeds
        self.model_size = model_size
        if vae_gradient_checkpointing and getattr(vae, "_supports_gradient_checkpointing", False):
            vae.enable_gradient_checkpointing()
        if vae_tiling and hasattr(vae, "enable_tiling"):
            vae.enable_tiling()
        self._rope_cache: dict[tuple, tuple[torch.Tensor, torch.Tensor] | None] = {}

    @property
    def scaling_factor(self) -> float:
        return float(getattr(self.vae.config, "scaling_factor", 1.0))

    def encode(self, video: torch.Tensor) -> torch.Tensor:
        """Rendered video (B, F, 3, H, W) in [0, 1] -> scaled latents (B, F', C, h, w), in the graph.

        Raises:
            ValueError: F is not k r + 1 for the CogVideoX VAE's temporal compression r (4): its encoder keeps the
                first frame alone only for such counts (otherwise it averages it with its neighbours, a latent
                layout the model was not trained on; no frame is dropped).
        """
        b, f = video.shape[:2]
        ratio = getattr(getattr(self.vae, "config", None), "temporal_compression_ratio", None)  # (not the oracle's)
        if isinstance(ratio, int) and ratio > 1 and (f - 1) % ratio != 0:
            lower = max(1, ratio * ((f - 1) // ratio) + 1)
            raise ValueError(
                f"video: {f} frames, expected {ratio}k + 1 (e.g. {lower} or {lower + ratio}): the CogVideoX VAE "
                f"encodes the first frame alone, then {ratio} frames per latent frame, only for such counts (with "
                f"{f} it averages the first frame with its neighbours, a layout the model was not trained on)"
            )
        if self.model_size is not None and tuple(video.shape[-2:]) != tuple(self.model_size):
            frames = F.interpolate(video.flatten(0, 1), size=self.model_size, mode="bilinear", align_corners=False)
            video = frames.unflatten(0, (b, f))
        x = (2.0 * video - 1.0).permute(0, 2, 1, 3, 4)  # (B, 3, F, H, W)
        vae_dtype = next(self.vae.parameters(), torch.empty(0)).dtype
        dist = self.vae.encode(x.to(vae_dtype)).latent_dist
        z = dist.mode() * self.scaling_factor
        p = getattr(getattr(self.transformer, "config", None), "patch_size", None)
        if isinstance(p, int) and (z.shape[-1] % p or z.shape[-2] % p):
            raise ValueError(
                f"video: {tuple(video.shape[-2:])} px gives {tuple(z.shape[-2:])} latents, not divisible by the "
                f"transformer patch size {p}; render (or set model_height/width) in multiples of "
                f"{p * video.shape[-1] // z.shape[-1]} px"
            )
        return z.permute(0, 2, 1, 3, 4)

    def noisy(self, latents: torch.Tensor, noise: torch.Tensor, u: float) -> tuple[torch.Tensor, float, float]:
        n = len(self.alphas_cumprod)
        t = round(u * (n - 1))
        ab = float(self.alphas_cumprod[t])
        x_t = ab**0.5 * latents + (1.0 - ab) ** 0.5 * noise
        weight = 1.0 if self.weighting == "uniform" else 1.0 - ab
        return x_t, float(t), weight

    def _rotary(self, latents: torch.Tensor):
        cfg = self.transformer.config
        if not getattr(cfg, "use_rotary_positional_embeddings", False):
            return None
        key = (*latents.shape[1:], str(latents.device))
        if key not in self._rope_cache:
            from diffusers.models.embeddings import get_3d_rotary_pos_embed
            from diffusers.pipelines.cogvideo.pipeline_cogvideox import get_resize_crop_region_for_grid

            frames, h, w = latents.shape[1], latents.shape[3], latents.shape[4]
            p, p_t = cfg.patch_size, cfg.patch_size_t
            gh, gw = h // p, w // p
            base_w, base_h = cfg.sample_width // p, cfg.sample_height // p
            if p_t is None:
                crops = get_resize_crop_region_for_grid((gh, gw), base_w, base_h)
                rope = get_3d_rotary_pos_embed(
                    embed_dim=cfg.attention_head_dim, crops_coords=crops, grid_size=(gh, gw),
                    temporal_size=frames, device=latents.device,
                )  # fmt: skip
            else:
                rope = get_3d_rotary_pos_embed(
                    embed_dim=cfg.attention_head_dim, crops_coords=None, grid_size=(gh, gw),
                    temporal_size=(frames + p_t - 1) // p_t, grid_type="slice", max_size=(base_h, base_w),
                    device=latents.device,
                )  # fmt: skip
            self._rope_cache[key] = rope
        return self._rope_cache[key]

    def predict(self, x_t: torch.Tensor, timestep: float) -> torch.Tensor:
        # CogVideoX 1.5 patches latent frames in pairs (patch_size_t): an odd count is padded at the front with
        # copies of the first frame, as its pipeline generates extra leading frames and drops them
        p_t = getattr(getattr(self.transformer, "config", None), "patch_size_t", None)
        pad = (-x_t.shape[1]) % p_t if isinstance(p_t, int) and p_t > 1 else 0
        if pad:
            x_t = torch.cat([x_t[:, :1].expand(-1, pad, -1, -1, -1), x_t], dim=1)
        out = self._predict(x_t, timestep)
        return out[:, pad:]

    def _predict(self, x_t: torch.Tensor, timestep: float) -> torch.Tensor:
        b = x_t.shape[0]
        dtype = self.prompt_embeds.dtype
        pos = self.prompt_embeds.expand(b, -1, -1)
        if self.guidance_scale != 1.0:
            neg = self.negative_prompt_embeds.expand(b, -1, -1)
            inp, emb = torch.cat([x_t, x_t]), torch.cat([neg, pos])
        else:
            inp, emb = x_t, pos
        t = torch.full((inp.shape[0],), timestep, device=x_t.device)
        out = self.transformer(
            hidden_states=inp.to(dtype),
            encoder_hidden_states=emb,
            timestep=t.long(),
            image_rotary_emb=self._rotary(x_t),
            return_dict=False,
        )[0].float()
        if self.guidance_scale != 1.0:
            uncond, cond = out.chunk(2)
            return cfg_combine(uncond, cond, self.guidance_scale)
        return out

    def sds_grad(
        self, latents: torch.Tensor, noise: torch.Tensor, x_t: torch.Tensor, pred: torch.Tensor, timestep: float
    ) -> torch.Tensor:
        if self.prediction_type == "v_prediction":
            eps_hat = vpred_to_eps(pred, x_t.float(), float(self.alphas_cumprod[int(timestep)]))
        else:
            eps_hat = pred
        return eps_hat - noise.float()
