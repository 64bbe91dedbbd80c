"""The ACT network (Zhao et al. 2023): a CVAE whose decoder is a DETR-style transformer.

Training: the CVAE encoder reads [CLS, qpos, action chunk] and gives q(z | qpos, actions); the main
encoder reads [z, qpos, image tokens of every camera]; the decoder turns ``chunk_size`` learned
queries into the predicted chunk. Inference: z = 0 (the prior's mean), so the output is deterministic.

Tensors made inside ``forward`` come from ``new_zeros`` of an input (never ``torch.zeros(...,
device=x.device)``): ``torch.jit.trace`` records the device argument as a constant, and the exported
network then mixed devices anywhere but where it was traced.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
from torch import nn

from act.common.checks import is_integer
from act.common.errors import InputError
from act.model.backbone import ResNetBackbone, feature_hw
from act.model.loss import reparameterize
from act.model.position_encoding import SinePositionEmbedding2d, sinusoid_table
from act.model.transformer import TransformerDecoder, TransformerEncoder

NUM_EXTRA_TOKENS = 2  # latent token and joint-state token, ahead of the image tokens


@dataclass
class ACTConfig:
    """Network sizes; defaults are the ACT paper's hyperparameter table (appendix), except
    dec_layers = 1: the table lists 7 decoder layers, of which the authors' public code used only
    the first, so 1 is the effective depth.

    Attributes:
        state_dim: qpos size (14 for two ALOHA arms). action_dim: action size.
        chunk_size: k, actions predicted per query.
        hidden_dim: transformer width D (even, divisible by ``heads``). ff_dim: feed-forward width.
        heads: attention heads. enc_layers / dec_layers: main encoder / decoder depth.
        vae_enc_layers: CVAE encoder depth. dropout: in [0, 1). latent_dim: size L of z.
        use_vae: train with the CVAE encoder; if False z is always 0.
        num_cameras: cameras per sample, all through one shared backbone.
        backbone_weights: None (random), "imagenet", or the path of a ResNet-18 state dict.
        backbone_norm: "frozen_bn" (the paper), "group_norm" (trainable; random init only) or "batch_norm"
            (trainable BatchNorm, frozen at inference: exportable to LeRobot).
        backbone_layer: the last ResNet stage: 4 (the paper: stride 32) or 3 (stride 16, finer tokens).
    """

    state_dim: int = 14
    action_dim: int = 14
    chunk_size: int = 100
    hidden_dim: int = 512
    ff_dim: int = 3200
    heads: int = 8
    enc_layers: int = 4
    dec_layers: int = 1
    vae_enc_layers: int = 4
    dropout: float = 0.1
    latent_dim: int = 32
    use_vae: bool = True
    num_cameras: int = 1
    backbone_weights: str | None = None
    backbone_norm: str = "frozen_bn"
    backbone_layer: int = 4

    def __post_init__(self):
        for name in (
            "state_dim",
            "action_dim",
            "chunk_size",
            "hidden_dim",
            "ff_dim",
            "heads",
            "enc_layers",
            "dec_layers",
            "vae_enc_layers",
            "latent_dim",
            "num_cameras",
        ):
            value = getattr(self, name)
            if not is_integer(value) or value < 1:
                raise InputError(f"ACTConfig.{name} must be a positive integer, got {value!r}")
        if self.hidden_dim % 2:
            raise InputError(
                f"ACTConfig.hidden_dim must be even (the 2D position embedding gives half its "
                f"channels to y and half to x), got {self.hidden_dim}"
            )
        if self.hidden_dim % self.heads:
            raise InputError(f"ACTConfig.hidden_dim ({self.hidden_dim}) must be divisible by heads ({self.heads})")
        if self.backbone_layer not in (3, 4):
            raise InputError(
                f"ACTConfig.backbone_layer must be 3 (layer3, stride 16) or 4 (layer4, stride 32, "
                f"the paper), got {self.backbone_layer!r}"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise InputError(f"ACTConfig.dropout must be in [0, 1), got {self.dropout}")
        if isinstance(self.backbone_weights, os.PathLike):
            self.backbone_weights = os.fspath(self.backbone_weights)
        if self.backbone_weights is not None and not isinstance(self.backbone_weights, str):
            raise InputError(
                f"ACTConfig.backbone_weights must be None, 'imagenet' or a file path, got {self.backbone_weights!r}"
            )


class ACT(nn.Module):
    """Action Chunking with Transformers.

    Args:
        config: sizes; ``config.backbone_weights`` other than None loads weights here (the one file
            or network access in this constructor).
    """

    def __init__(self, config: ACTConfig):
        super().__init__()
        self.config = config
        D = config.hidden_dim
        layer_args = dict(dim=D, heads=config.heads, ff_dim=config.ff_dim, dropout=config.dropout)

        self.backbone = ResNetBackbone(config.backbone_weights, config.backbone_norm, config.backbone_layer)
        self.input_proj = nn.Conv2d(self.backbone.out_channels, D, kernel_size=1)
        self.image_pos = SinePositionEmbedding2d(D)
        self.latent_proj = nn.Linear(config.latent_dim, D)
        self.qpos_proj = nn.Linear(config.state_dim, D)
        self.extra_pos = nn.Embedding(NUM_EXTRA_TOKENS, D)  # learned positions of [latent, qpos]
        self.encoder = TransformerEncoder(config.enc_layers, **layer_args)
        self.decoder = TransformerDecoder(config.dec_layers, **layer_args)
        self.query_embed = nn.Embedding(config.chunk_size, D)
        self.action_head = nn.Linear(D, config.action_dim)

        if config.use_vae:
            self.vae_cls = nn.Embedding(1, D)
            self.vae_qpos_proj = nn.Linear(config.state_dim, D)
            self.vae_action_proj = nn.Linear(config.action_dim, D)
            self.vae_encoder = TransformerEncoder(config.vae_enc_layers, **layer_args)
            self.vae_latent_head = nn.Linear(D, 2 * config.latent_dim)
            # Fixed positions of [CLS, qpos, a_1 .. a_k]; rebuilt by the constructor, so not saved.
            self.register_buffer("vae_pos", sinusoid_table(config.chunk_size + 2, D), persistent=False)

    def num_tokens(self, image_hw: tuple[int, int]) -> int:
        """Main-encoder sequence length for images of size (H, W): 2 + cameras * h * w with
        (h, w) the backbone's feature size; 302 for one 480x640 camera at layer4, 1202 for four."""
        h, w = feature_hw(image_hw, self.config.backbone_layer)
        return NUM_EXTRA_TOKENS + self.config.num_cameras * h * w

    def _check_inputs(self, qpos, images, actions, is_pad) -> None:
        c = self.config
        if qpos.ndim != 2 or qpos.shape[1] != c.state_dim:
            raise InputError(f"qpos must be (B, {c.state_dim}), got {tuple(qpos.shape)}")
        B = qpos.shape[0]
        if images.ndim != 5 or images.shape[:3] != (B, c.num_cameras, 3):
            raise InputError(f"images must be (B={B}, cameras={c.num_cameras}, 3, H, W), got {tuple(images.shape)}")
        if actions is not None and actions.shape != (B, c.chunk_size, c.action_dim):
            raise InputError(
                f"actions must be (B={B}, chunk_size={c.chunk_size}, {c.action_dim}), got {tuple(actions.shape)}"
            )
        if is_pad is not None and is_pad.shape != (B, c.chunk_size):
            raise InputError(f"is_pad must be (B={B}, chunk_size={c.chunk_size}), got {tuple(is_pad.shape)}")

    def encode_latent(
        self, qpos: torch.Tensor, actions: torch.Tensor, is_pad: torch.Tensor | None = None
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """CVAE encoder q(z | qpos, actions).

        Args:
            qpos: (B, state_dim); actions: (B, k, action_dim); is_pad: (B, k) bool, True = padded step
                (masked out as a key), or None.

        Returns:
            mu, logvar: (B, latent_dim) float32; (None, None) without a CVAE (``use_vae=False``: no encoder,
            no KL term; validation calls this for every model).
        """
        if not self.config.use_vae:
            return None, None
        B, k, _ = actions.shape
        cls = self.vae_cls.weight.expand(B, 1, -1)  # (B, 1, D)
        state = self.vae_qpos_proj(qpos).unsqueeze(1)  # (B, 1, D)
        steps = self.vae_action_proj(actions)  # (B, k, D)
        tokens = torch.cat([cls, state, steps], dim=1)  # (B, k + 2, D)
        if is_pad is None:
            is_pad = qpos.new_zeros(B, k, dtype=torch.bool)
        mask = torch.cat([qpos.new_zeros(B, 2, dtype=torch.bool), is_pad.bool()], dim=1)  # (B, k+2)
        out = self.vae_encoder(tokens, pos=self.vae_pos[: k + 2], key_padding_mask=mask)  # (B, k + 2, D)
        stats = self.vae_latent_head(out[:, 0]).float()  # (B, 2L), from the CLS token
        mu, logvar = stats.chunk(2, dim=-1)  # (B, L) each
        return mu, logvar

    def forward(
        self,
        qpos: torch.Tensor,
        images: torch.Tensor,
        actions: torch.Tensor | None = None,
        is_pad: torch.Tensor | None = None,
        latent: torch.Tensor | None = None,
    ) -> dict[str, torch.Tensor | None]:
        """Predict an action chunk.

        Args:
            qpos: (B, state_dim) normalised joint state.
            images: (B, num_cameras, 3, H, W) float, already ImageNet-normalised.
            actions: (B, chunk_size, action_dim) normalised target chunk, or None at inference.
            is_pad: (B, chunk_size) bool, True past the episode end; None = no padding.
            latent: (B, latent_dim) z to decode with instead of sampling or zeros (e.g. the
                posterior mean, for validation); ``actions`` are then ignored.

        Returns:
            dict with ``actions`` (B, chunk_size, action_dim), and
            ``mu`` and ``logvar`` (B, latent_dim) float32, or None when ``actions`` is None or
            ``use_vae`` is False. With actions given (training and validation), z = mu + sigma * eps;
            otherwise z = 0.
        """
        self._check_inputs(qpos, images, actions, is_pad)
        c = self.config
        B, C = images.shape[:2]

        mu = logvar = None
        if latent is not None:
            z = latent.to(qpos.dtype)  # (B, L)
        elif c.use_vae and actions is not None:
            mu, logvar = self.encode_latent(qpos, actions, is_pad)
            z = reparameterize(mu, logvar, torch.randn_like(mu))  # (B, L)
        else:
            z = qpos.new_zeros(B, c.latent_dim)  # (B, L)

        # One shared backbone for every camera: fold cameras into the batch.
        frames = images.flatten(0, 1)  # (B*C, 3, H, W)
        if self.backbone.conv1.weight.is_contiguous(memory_format=torch.channels_last):
            frames = frames.contiguous(memory_format=torch.channels_last)  # match the weights' layout
        features = self.input_proj(self.backbone(frames))  # (B*C, D, h, w)
        image_pos = self.image_pos(features)  # (h*w, D), the same for every camera
        D, h, w = features.shape[1:]
        image_tokens = features.flatten(2).transpose(1, 2)  # (B*C, h*w, D)
        image_tokens = image_tokens.reshape(B, C * h * w, D)  # (B, C*h*w, D), camera-major
        image_pos = image_pos.repeat(C, 1)  # (C*h*w, D)

        latent_token = self.latent_proj(z).unsqueeze(1)  # (B, 1, D)
        state_token = self.qpos_proj(qpos).unsqueeze(1)  # (B, 1, D)
        src = torch.cat([latent_token, state_token, image_tokens], dim=1)  # (B, S, D), S = 2 + C*h*w
        pos = torch.cat([self.extra_pos.weight, image_pos.to(self.extra_pos.weight.dtype)], dim=0)  # (S, D)
        memory = self.encoder(src, pos=pos)  # (B, S, D)

        query_pos = self.query_embed.weight  # (k, D)
        tgt = memory.new_zeros(B, c.chunk_size, D)  # (B, k, D)
        hidden = self.decoder(tgt, memory, query_pos=query_pos, memory_pos=pos)  # (B, k, D)
        return {
            "actions": self.action_head(hidden),  # (B, k, A)
            "mu": mu,
            "logvar": logvar,
        }
