"""Tiny randomly initialised CogVideoX and Wan components, built offline from configs (tests, CPU smoke runs).

The configs follow diffusers' own pipeline tests (same classes, a few thousand parameters); the text encoder is a
tiny ``T5EncoderModel`` / ``UMT5EncoderModel`` from a config with :class:`ByteTokenizer` instead of the hub's
tiny T5, so nothing is downloaded. The scheduler configs are the real models' (CogVideoX-2b's zero-terminal-SNR
v-prediction DDIM with SNR shift 3; Wan 2.1's flow shift 3).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .text import ByteTokenizer

__all__ = ["TinyComponents", "cogvideox_scheduler", "tiny_cogvideox", "tiny_wan"]

TEXT_DIM = 32
COGVIDEOX_TEXT_LENGTH = 16
WAN_TEXT_LENGTH = 16


@dataclass
class TinyComponents:
    """A tiny model family: transformer, VAE, scheduler, tokenizer, text encoder, padded text length."""

    transformer: torch.nn.Module
    vae: torch.nn.Module
    scheduler: object
    tokenizer: ByteTokenizer
    text_encoder: torch.nn.Module
    text_length: int


def cogvideox_scheduler(snr_shift_scale: float = 3.0):
    """``CogVideoXDDIMScheduler`` with the released CogVideoX configs (3.0 for 2b, 1.0 for 5b)."""
    from diffusers import CogVideoXDDIMScheduler

    return CogVideoXDDIMScheduler(
        beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", clip_sample=False,
        prediction_type="v_prediction", rescale_betas_zero_snr=True, set_alpha_to_one=True,
        snr_shift_scale=snr_shift_scale, timestep_spacing="trailing",
    )  # fmt: skip


def _t5(cls_name: str):
    import transformers

    config = transformers.T5Config(
        vocab_size=ByteTokenizer.vocab_size, d_model=TEXT_DIM, d_kv=8, d_ff=64, num_layers=1, num_heads=4,
        relative_attention_num_buckets=8, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0,
    )  # fmt: skip
    if cls_name == "umt5":
        config = transformers.UMT5Config(**config.to_dict())
        return transformers.UMT5EncoderModel(config)
    return transformers.T5EncoderModel(config)


def tiny_cogvideox(seed: int = 0) -> TinyComponents:
    """Tiny ``CogVideoXTransformer3DModel`` + ``AutoencoderKLCogVideoX`` (8x spatial, 4x temporal compression)."""
    from diffusers import AutoencoderKLCogVideoX, CogVideoXTransformer3DModel

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        transformer = CogVideoXTransformer3DModel(
            num_attention_heads=4, attention_head_dim=8, in_channels=4, out_channels=4, time_embed_dim=2,
            text_embed_dim=TEXT_DIM, num_layers=1, sample_width=8, sample_height=8, sample_frames=9, patch_size=2,
            temporal_compression_ratio=4, max_text_seq_length=COGVIDEOX_TEXT_LENGTH,
        )  # fmt: skip
        vae = AutoencoderKLCogVideoX(
            in_channels=3, out_channels=3, down_block_types=("CogVideoXDownBlock3D",) * 4,
            up_block_types=("CogVideoXUpBlock3D",) * 4, block_out_channels=(8, 8, 8, 8), latent_channels=4,
            layers_per_block=1, norm_num_groups=2, temporal_compression_ratio=4,
        )  # fmt: skip
        text_encoder = _t5("t5")
    return TinyComponents(
        transformer, vae, cogvideox_scheduler(), ByteTokenizer(), text_encoder.eval(), COGVIDEOX_TEXT_LENGTH
    )


def tiny_wan(seed: int = 0) -> TinyComponents:
    """Tiny ``WanTransformer3DModel`` + ``AutoencoderKLWan`` (8x spatial, 4x temporal compression)."""
    from diffusers import AutoencoderKLWan, FlowMatchEulerDiscreteScheduler, WanTransformer3DModel

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        vae = AutoencoderKLWan(
            base_dim=3, z_dim=16, dim_mult=[1, 1, 1, 1], num_res_blocks=1, temperal_downsample=[False, True, True]
        )
        transformer = WanTransformer3DModel(
            patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=16, out_channels=16,
            text_dim=TEXT_DIM, freq_dim=256, ffn_dim=32, num_layers=2, cross_attn_norm=True,
            qk_norm="rms_norm_across_heads", rope_max_seq_len=32,
        )  # fmt: skip
        text_encoder = _t5("umt5")
    scheduler = FlowMatchEulerDiscreteScheduler(shift=3.0)
    return TinyComponents(transformer, vae, scheduler, ByteTokenizer(), text_encoder.eval(), WAN_TEXT_LENGTH)
