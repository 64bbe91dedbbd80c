"""The deployable ACT: the network with its own normalisation, as one ``nn.Module``.

Raw joint positions and uint8 camera images go in, raw joint targets come out. The qpos/action
statistics (z-scoring per dimension over the dataset, std clipped below at 0.01, as in the paper's
code) and the image scaling ([0, 1], then ImageNet mean/std, cropped to ``image_crop``) live here
and nowhere else: the dataset yields raw values, the Lightning module trains this network through
``outputs``, and the runtime runs ``forward``, eagerly or exported (TorchScript, ONNX).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Sequence

import numpy as np
import torch
from torch import nn

from act.common.errors import InputError
from act.model.act import ACT, ACTConfig
from act.model.spec import STAT_KEYS, PolicySpec, SpecFields

# torchvision's ImageNet statistics: the backbone expects them even with random init.
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def check_crop(crop: Sequence[int] | None, image_size: tuple[int, int]) -> tuple[int, int, int, int] | None:
    """``[top, left, height, width]`` inside an ``image_size`` (H, W) image, as a tuple; None stays None."""
    if crop is None:
        return None
    values = list(crop)
    if len(values) != 4 or any(isinstance(v, bool) or int(v) != v for v in values):
        raise InputError(f"image_crop must be [top, left, height, width] in pixels, got {crop!r}")
    top, left, height, width = (int(v) for v in values)
    if top < 0 or left < 0 or height < 1 or width < 1 or top + height > image_size[0] or left + width > image_size[1]:
        raise InputError(
            f"image_crop {values} does not fit the {image_size[0]}x{image_size[1]} images: need "
            f"0 <= top, top + height <= {image_size[0]}, 0 <= left, left + width <= {image_size[1]}"
        )
    return top, left, height, width


class NormalizedACT(SpecFields, nn.Module):
    """``ACT`` plus everything needed to run it on raw robot data.

    Args:
        config: the network's sizes (``config.num_cameras`` must equal ``len(spec.camera_names)``).
        spec: what the policy expects (``act.model.spec``): its cameras in the order the network
            sees them, their image size, the statistics it normalises with (None: identity), the
            task and render quality it was trained on. Kept as ``self.spec``, with the network's sizes.
        image_crop: ``[top, left, height, width]`` window the network sees, or None (whole image).
        channels_last: run the backbone in channels-last memory format (faster CPU convolutions).

    ``forward(qpos, images)`` is the deployed function: qpos (B, state_dim) float in joint units,
    images (B, cameras, 3, H, W) uint8 -> actions (B, chunk_size, action_dim) in joint units, z = 0.
    """

    def __init__(
        self,
        config: ACTConfig,
        spec: PolicySpec = PolicySpec(),
        image_crop: Sequence[int] | None = None,
        channels_last: bool = True,
    ):
        super().__init__()
        if config.num_cameras != len(spec.camera_names):
            raise InputError(f"config.num_cameras={config.num_cameras} but {len(spec.camera_names)} camera names given")
        self.config = config
        self.model = ACT(config)
        self.spec = spec.for_network(config.chunk_size, config.state_dim, config.action_dim)
        self.image_crop = check_crop(image_crop, self.spec.image_size)
        stats = self.spec.stats or {}
        for key in STAT_KEYS:
            dim = config.state_dim if key.startswith("qpos") else config.action_dim
            default = np.ones(dim) if key.endswith("std") else np.zeros(dim)
            value = torch.as_tensor(np.asarray(stats.get(key, default), dtype=np.float32))
            if value.shape != (dim,):
                raise InputError(f"stats[{key!r}] must have shape ({dim},), got {tuple(value.shape)}")
            if key.endswith("std") and not bool(torch.all(value > 0)):
                raise InputError(f"stats[{key!r}] must be positive")
            self.register_buffer(key, value)
        self.register_buffer("image_mean", torch.tensor(IMAGENET_MEAN).view(1, 1, 3, 1, 1), persistent=False)
        self.register_buffer("image_std", torch.tensor(IMAGENET_STD).view(1, 1, 3, 1, 1), persistent=False)
        if channels_last:
            self.model.backbone.to(memory_format=torch.channels_last)

    # -- normalisation: the one place it happens -----------------------------------------------
    def normalize_qpos(self, qpos: torch.Tensor) -> torch.Tensor:
        """(B, D) joint units -> z-scores."""
        return (qpos - self.qpos_mean) / self.qpos_std

    def normalize_actions(self, actions: torch.Tensor) -> torch.Tensor:
        """(..., A) joint targets -> z-scores."""
        return (actions - self.action_mean) / self.action_std

    def unnormalize_actions(self, actions: torch.Tensor) -> torch.Tensor:
        """(..., A) z-scores -> joint targets."""
        return actions * self.action_std + self.action_mean

    def normalize_target(self, actions: torch.Tensor, is_pad: torch.Tensor | None = None) -> torch.Tensor:
        """(B, k, A) joint targets -> the chunk the loss and the CVAE encoder see: z-scores, zero at
        the steps past the episode's end (``is_pad`` (B, k) True), which hold no real action."""
        target = self.normalize_actions(actions)  # (B, k, A)
        return target if is_pad is None else target.masked_fill(is_pad.bool()[..., None], 0.0)

    def normalize_images(self, images: torch.Tensor) -> torch.Tensor:
        """(B, C, 3, H, W) uint8 -> (B, C, 3, h, w) float: cropped to ``image_crop``, scaled to
        [0, 1], then ImageNet-normalised."""
        if self.image_crop is not None:
            top, left, height, width = self.image_crop
            images = images[..., top : top + height, left : left + width]
        return (images.float() / 255.0 - self.image_mean) / self.image_std

    # -- training and deployment ---------------------------------------------------------------
    def outputs(
        self,
        qpos: torch.Tensor,
        images: torch.Tensor,
        actions: torch.Tensor | None = None,
        is_pad: torch.Tensor | None = None,
        latent: torch.Tensor | None = None,
    ) -> dict:
        """The network's outputs for raw inputs, in normalised action units (what the loss compares).

        Args:
            qpos: (B, D) joint units; images: (B, C, 3, H, W) uint8; actions: (B, k, A) joint units or
            None; is_pad: (B, k) bool; latent: (B, L) z to decode with (see ``ACT.forward``).

        Returns:
            ``ACT.forward``'s dict (``actions`` (B, k, A) normalised, ``mu``, ``logvar``) plus
            ``target`` (B, k, A): ``actions`` normalised, zero where padded (None without actions).
        """
        target = None if actions is None else self.normalize_target(actions, is_pad)  # (B, k, A)
        out = self.model(self.normalize_qpos(qpos), self.normalize_images(images), target, is_pad, latent)
        out["target"] = target
        return out

    def encode_latent(self, qpos: torch.Tensor, actions: torch.Tensor, is_pad: torch.Tensor | None = None):
        """The CVAE posterior's (mu, logvar), each (B, L), for raw qpos (B, D) and actions (B, k, A)."""
        target = self.normalize_target(actions, is_pad)  # (B, k, A)
        return self.model.encode_latent(self.normalize_qpos(qpos), target, is_pad)

    def forward(self, qpos: torch.Tensor, images: torch.Tensor) -> torch.Tensor:
        """Raw qpos (B, D) float, uint8 images (B, C, 3, H, W) -> raw actions (B, k, A), z = 0."""
        actions = self.model(self.normalize_qpos(qpos), self.normalize_images(images))["actions"]  # (B, k, A)
        return self.unnormalize_actions(actions.float())

    def metadata(self) -> dict:
        """Plain values describing this network: its spec, with its config and crop beside it (what an
        exported artifact carries beside the graph)."""
        return {
            **self.spec.to_dict(),
            "config": asdict(self.config),
            "image_crop": list(self.image_crop) if self.image_crop is not None else None,
        }
