"""Prompt embeddings, computed once per run with the model's own tokenizer and T5-family text encoder.

Both pipelines pad to a fixed length: CogVideoX feeds the whole padded T5 output (226 tokens; its patch embedding
needs exactly ``max_text_seq_length`` tokens), Wan keeps the valid tokens and zero-pads the rest (512 tokens).
:class:`ByteTokenizer` is an offline stand-in (UTF-8 bytes as ids) for the tiny test models.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Literal

import torch

__all__ = ["ByteTokenizer", "encode_prompts"]


@dataclass
class _Tokens:
    input_ids: torch.Tensor
    attention_mask: torch.Tensor


class ByteTokenizer:
    """UTF-8 bytes as token ids (offset by 2: 0 = pad, 1 = end of sequence), for tiny offline text encoders."""

    vocab_size = 258
    pad_token_id = 0
    eos_token_id = 1

    def __call__(self, prompts, padding="max_length", max_length=16, truncation=True, **_) -> _Tokens:
        prompts = [prompts] if isinstance(prompts, str) else list(prompts)
        ids = torch.zeros(len(prompts), max_length, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, p in enumerate(prompts):
            tok = [*[b + 2 for b in p.encode("utf-8")][: max_length - 1], self.eos_token_id]
            ids[i, : len(tok)] = torch.tensor(tok)
            mask[i, : len(tok)] = 1
        return _Tokens(ids, mask)


def _clean(text: str) -> str:
    """Wan's prompt cleaning (HTML unescape, whitespace collapse) without the optional ftfy step."""
    return re.sub(r"\s+", " ", html.unescape(html.unescape(text))).strip()


@torch.no_grad()
def encode_prompts(
    tokenizer,
    text_encoder: torch.nn.Module,
    prompts: list[str],
    max_length: int,
    style: Literal["cogvideox", "wan"],
    device: str | torch.device | None = None,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """Text embeddings of ``prompts``, shape (len(prompts), max_length, text_dim).

    Args:
        tokenizer: a Hugging Face tokenizer (or :class:`ByteTokenizer`).
        text_encoder: a T5/UMT5 encoder returning ``last_hidden_state``.
        prompts: the texts.
        max_length: padded token count (226 for CogVideoX, 512 for Wan).
        style: the pipeline whose conventions to follow.
        device, dtype: of the returned tensor (default: the encoder's).
    """
    if style == "wan":
        prompts = [_clean(p) for p in prompts]
    tokens = tokenizer(
        prompts,
        padding="max_length",
        max_length=max_length,
        truncation=True,
        add_special_tokens=True,
        return_attention_mask=True,
        return_tensors="pt",
    )
    enc_device = next(text_encoder.parameters()).device
    ids = tokens.input_ids.to(enc_device)
    if style == "cogvideox":
        emb = text_encoder(ids)[0]
    else:
        mask = tokens.attention_mask.to(enc_device)
        emb = text_encoder(ids, mask).last_hidden_state
        lengths = mask.gt(0).sum(1)
        keep = torch.arange(max_length, device=enc_device)[None, :] < lengths[:, None]
        emb = emb * keep[..., None].to(emb.dtype)
    return emb.to(device=device or emb.device, dtype=dtype or emb.dtype)
