"""The denoiser: a transformer over joint tokens with attention biased by skeletal graph distance.

One token per joint. A token is the sum of an embedding of the joint's noisy 6D rotation and an embedding of its
conditioning features (rest offset, depth, bone length, the skinned region it drives, ...; see
:meth:`posespace.PoseRig.joint_features`). Each block is pre-norm self-attention plus an MLP, both modulated by
the diffusion time (adaLN-Zero, as in DiT). Attention logits get a learned bias per head and per graph distance
(hop count between the two joints, clipped at ``max_distance``): the skeleton's topology enters through the bias,
so one network serves any skeleton. Padding joints are masked out of the keys, so a skeleton's output does not
depend on what else is in the batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from ._checks import check_int, check_number
from .pose_rig import FEATURE_COUNT

__all__ = ["ModelConfig", "PoseDenoiser"]


@dataclass(frozen=True)
class ModelConfig:
    """Size of the denoiser."""

    width: int = 64
    """Token width."""
    depth: int = 4
    """Transformer blocks."""
    heads: int = 4
    """Attention heads."""
    max_distance: int = 8
    """Graph distances above this share one attention bias."""
    mlp_ratio: float = 2.0
    """MLP hidden width / token width."""
    feature_count: int = FEATURE_COUNT
    """Length of the joint feature vectors (fixed by :meth:`posespace.PoseRig.joint_features`: must be
    FEATURE_COUNT; recorded so a checkpoint says what it was trained on)."""

    def check(self) -> ModelConfig:
        """Returns self when the sizes make a working network (training calls this first); ValueError naming the
        field otherwise."""
        for name in ("width", "depth", "heads"):
            check_int(f"ModelConfig.{name}", getattr(self, name), 1)
        check_int("ModelConfig.max_distance", self.max_distance, 0)
        if self.width % 2:
            raise ValueError(f"ModelConfig.width: must be even (the time embedding is sin/cos pairs), got {self.width}")
        if self.width % self.heads:
            raise ValueError(f"ModelConfig.width: must be a multiple of ModelConfig.heads ({self.heads}), "
                             f"got {self.width}")  # fmt: skip
        check_number("ModelConfig.mlp_ratio", self.mlp_ratio, 0.0, strict=True)
        if int(self.mlp_ratio * self.width) < 1:
            raise ValueError(f"ModelConfig.mlp_ratio: {self.mlp_ratio!r} x width {self.width} leaves no MLP unit")
        if self.feature_count != FEATURE_COUNT:
            raise ValueError(f"ModelConfig.feature_count: the joint features have {FEATURE_COUNT} entries (fixed by "
                             f"the pose rig), got {self.feature_count!r}")  # fmt: skip
        return self


def timestep_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    """Sinusoidal embedding of diffusion times ``t`` in [0, 1], shape (B,) -> (B, dim)."""
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, device=t.device, dtype=torch.float32) / half)
    args = 1000.0 * t.float()[:, None] * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


class _Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        w, self.heads = cfg.width, cfg.heads
        self.norm1 = nn.LayerNorm(w, elementwise_affine=False)
        self.qkv = nn.Linear(w, 3 * w)
        self.proj = nn.Linear(w, w)
        self.norm2 = nn.LayerNorm(w, elementwise_affine=False)
        hidden = int(cfg.mlp_ratio * w)
        self.mlp = nn.Sequential(nn.Linear(w, hidden), nn.GELU(), nn.Linear(hidden, w))
        self.modulation = nn.Linear(w, 6 * w)
        nn.init.zeros_(self.modulation.weight)
        nn.init.zeros_(self.modulation.bias)

    def forward(self, h: torch.Tensor, cond: torch.Tensor, bias: torch.Tensor):
        """``bias``: additive attention bias (graph distance and key mask), shape (B, H, J, J)."""
        B, J, W = h.shape
        s1, b1, g1, s2, b2, g2 = self.modulation(cond)[:, None].chunk(6, dim=-1)
        x = self.norm1(h) * (1 + s1) + b1
        q, k, v = self.qkv(x).view(B, J, 3, self.heads, W // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        h = h + g1 * self.proj(a.transpose(1, 2).reshape(B, J, W))
        x = self.norm2(h) * (1 + s2) + b2
        return h + g2 * self.mlp(x)


class PoseDenoiser(nn.Module):
    """Predicts the diffusion velocity ``v`` of every joint token (see :mod:`posespace.diffusion`).

    Args:
        config: sizes.
    """

    def __init__(self, config: ModelConfig | None = None):
        super().__init__()
        self.config = cfg = config or ModelConfig()
        w = cfg.width
        self.pose_in = nn.Linear(6, w)
        self.feature_in = nn.Sequential(nn.Linear(cfg.feature_count, w), nn.GELU(), nn.Linear(w, w))
        self.time_mlp = nn.Sequential(nn.Linear(w, w), nn.GELU(), nn.Linear(w, w))
        self.blocks = nn.ModuleList(_Block(cfg) for _ in range(cfg.depth))
        # attention bias per block, head and graph distance (one table, gathered once per forward)
        self.distance_bias = nn.Parameter(torch.zeros(cfg.max_distance + 1, cfg.depth * cfg.heads))
        self.out_norm = nn.LayerNorm(w, elementwise_affine=False)
        self.out_modulation = nn.Linear(w, 2 * w)
        self.out = nn.Linear(w, 6)
        for layer in (self.out_modulation, self.out):
            nn.init.zeros_(layer.weight)
            nn.init.zeros_(layer.bias)

    def forward(
        self,
        x_t: torch.Tensor,
        t: torch.Tensor,
        features: torch.Tensor,
        distances: torch.Tensor,
        mask: torch.Tensor,
    ) -> torch.Tensor:
        """Velocity prediction.

        Args:
            x_t: noisy poses (model units), shape (B, J, 6).
            t: diffusion times in [0, 1], shape (B,).
            features: joint features, shape (B, J, F).
            distances: graph distances, shape (B, J, J), long.
            mask: posed joints, shape (B, J), bool; other tokens are ignored as keys and their outputs are 0.

        Returns:
            shape (B, J, 6).
        """
        cfg = self.config
        cond = self.time_mlp(timestep_embedding(t, cfg.width).to(x_t.dtype))
        keep = mask[..., None]
        # padded slots are zeroed, not only masked out of attention: a NaN there (0 x NaN = NaN) would reach every
        # real joint through the attention's weighted sum
        x_t, features = torch.where(keep, x_t, 0.0), torch.where(keep, features, 0.0)
        h = self.pose_in(x_t) + self.feature_in(features)
        J = mask.shape[1]
        onehot = F.one_hot(distances.clamp(0, cfg.max_distance), cfg.max_distance + 1).to(h.dtype)
        bias = (onehot @ self.distance_bias).permute(0, 3, 1, 2)  # (B, depth * heads, J, J)
        # a padded query must still see one key (itself) or its softmax is NaN
        eye = torch.eye(J, dtype=torch.bool, device=mask.device)
        blocked = ~(mask[:, None, :] | eye[None])
        bias = bias.masked_fill(blocked[:, None], float("-inf"))
        for i, block in enumerate(self.blocks):
            h = block(h, cond, bias[:, i * cfg.heads : (i + 1) * cfg.heads])
        shift, scale = self.out_modulation(F.silu(cond))[:, None].chunk(2, dim=-1)
        out = self.out(self.out_norm(h) * (1 + scale) + shift)
        return torch.where(keep, out, 0.0)
