"""ResNet-18 image backbone with frozen BatchNorm (or GroupNorm), returning layer4 (or layer3) feature maps.

BatchNorm statistics are frozen (as in DETR and ACT): batches of 8 images from one task are far
too small and too correlated to re-estimate ImageNet statistics, so the buffers are used as-is.
The convolution weights still train. From random initialisation the frozen statistics are the
identity, so the network trains with no normalisation at all; ``norm="group_norm"`` puts a
trainable GroupNorm (16 channels a group) in every BatchNorm's place instead, the usual choice
for visuomotor policies trained from scratch (Diffusion Policy, Chi et al. 2023, its visual encoder).
``norm="batch_norm"`` trains ordinary BatchNorm (batch statistics, running averages kept): in eval mode it
is exactly a frozen BatchNorm holding those averages, so such a network is LeRobot's ACT, whose ResNet has
FrozenBatchNorm only (``act.model.lerobot_policy``), where a GroupNorm one has no counterpart.

``last_layer=3`` stops after layer3: a feature map at stride 16 with 256 channels instead of stride
32 with 512 (a 72x112 image gives 5x7 tokens instead of 3x4), and 8.4M fewer parameters. For small
images, where a layer4 feature covers several times the object to grasp, it is the cheaper way to
finer features than DETR's dilated layer4 ("DC5", Carion et al. 2020, Sec. 4), which keeps the
parameters and quadruples layer4's arithmetic.
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch
import torch.nn.functional as F
import torchvision
from torch import nn

from act.common.checks import check_choice
from act.common.errors import InputError, MissingFileError, RunError

log = logging.getLogger(__name__)

RESNET18_URL = "https://download.pytorch.org/models/resnet18-f37072fd.pth"
RESNET18_FILE = "resnet18-f37072fd.pth"
LAYER_CHANNELS = {3: 256, 4: 512}  # ResNet-18's output channels of layer3 and layer4
NORMS = ("frozen_bn", "group_norm", "batch_norm")
GROUP_CHANNELS = 16  # GroupNorm: channels per group


class FrozenBatchNorm2d(nn.Module):
    """BatchNorm2d whose affine parameters and running statistics are fixed buffers.

    Computes ``(x - running_mean) / sqrt(running_var + eps) * weight + bias`` per channel, in train
    and eval mode alike. Loads ``nn.BatchNorm2d`` state dicts (``num_batches_tracked`` is dropped).

    Args:
        num_features: number of channels C of the (B, C, H, W) input.
        eps: added to the variance, 1e-5 like ``nn.BatchNorm2d``.
    """

    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.register_buffer("weight", torch.ones(num_features))
        self.register_buffer("bias", torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))

    def _load_from_state_dict(
        self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
    ):
        # nn.BatchNorm2d counts its updates; frozen statistics have nothing to count.
        state_dict.pop(prefix + "num_batches_tracked", None)
        super()._load_from_state_dict(
            state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
        )

    def scale_shift(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-channel (C,) scale and shift equivalent to the four buffers, in fp32."""
        scale = self.weight * (self.running_var + self.eps).rsqrt()
        return scale, self.bias - self.running_mean * scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) -> (B, C, H, W), same dtype and memory format as ``x``."""
        # Applied in x's dtype so a bf16 autocast stream stays bf16.
        scale, shift = self.scale_shift()
        return x * scale.to(x.dtype).view(1, -1, 1, 1) + shift.to(x.dtype).view(1, -1, 1, 1)  # (1, C, 1, 1)

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, eps={self.eps}"


def conv_bn(conv: nn.Conv2d, bn: FrozenBatchNorm2d, x: torch.Tensor) -> torch.Tensor:
    """``bn(conv(x))`` as one convolution: weight scaled per output channel, shift as the bias."""
    scale, shift = bn.scale_shift()
    weight = conv.weight * scale.view(-1, 1, 1, 1)  # (C_out, C_in, k, k), keeps the weight's layout
    bias = shift if conv.bias is None else shift + conv.bias * scale
    return F.conv2d(x, weight, bias, conv.stride, conv.padding, conv.dilation, conv.groups)


class ResNetBackbone(nn.Module):
    """torchvision ResNet-18 (frozen BatchNorm) up to layer4 (or layer3); no average pooling, no classifier.

    Submodule names match torchvision's (``conv1``, ``bn1``, ``layer1`` ... ``layer4``), so
    torchvision state dicts load directly.

    Args:
        weights: ``None`` for random initialisation, ``"imagenet"`` for torchvision's
            ``ResNet18_Weights.IMAGENET1K_V1`` (downloaded once into the torch hub cache), or the
            path of a local ResNet-18 state dict file. See ``load_backbone_weights``.
        norm: ``frozen_bn`` (the paper), ``group_norm`` (trainable, random initialisation only) or
            ``batch_norm`` (trainable BatchNorm: a frozen one at inference).
        last_layer: 4 (the paper: stride 32, 512 channels) or 3 (stride 16, 256 channels; layer4
            is not built, and its pretrained weights are not loaded).
    """

    def __init__(self, weights: str | None = None, norm: str = "frozen_bn", last_layer: int = 4):
        super().__init__()
        check_choice("backbone norm", norm, NORMS)
        check_choice("backbone last layer", last_layer, tuple(LAYER_CHANNELS))
        if norm == "group_norm" and weights is not None:
            raise InputError(
                "backbone_norm=group_norm trains from random initialisation; pretrained ResNet-18 "
                "weights come with BatchNorm statistics: use backbone_norm=frozen_bn with them"
            )
        self.norm = norm
        self.last_layer = last_layer
        self.out_channels = LAYER_CHANNELS[last_layer]
        self.stride = 2 ** (last_layer + 1)
        norm_layer = {
            "frozen_bn": FrozenBatchNorm2d,
            "group_norm": lambda channels: nn.GroupNorm(channels // GROUP_CHANNELS, channels),
            "batch_norm": nn.BatchNorm2d,
        }[norm]
        net = torchvision.models.resnet18(weights=None, norm_layer=norm_layer)
        self.conv1, self.bn1, self.relu, self.maxpool = net.conv1, net.bn1, net.relu, net.maxpool
        self.layer1, self.layer2, self.layer3 = net.layer1, net.layer2, net.layer3
        if last_layer == 4:
            self.layer4 = net.layer4
        if weights is not None:
            load_backbone_weights(self, weights)

    def layers(self) -> list[nn.Sequential]:
        """The residual stages in order, up to ``last_layer``."""
        return [getattr(self, f"layer{i}") for i in range(1, self.last_layer + 1)]

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """(N, 3, H, W) normalised images -> (N, C, ceil(H/s), ceil(W/s)) features of the last stage:
        C = 512, s = 32 for layer4; C = 256, s = 16 for layer3.

        Each frozen BatchNorm is folded into the convolution before it (weight x scale, shift as
        bias): the same function as conv then BatchNorm, without two passes over every
        activation map forward and backward (about 0.4 s of a 480x640 batch-8 step on 2 cores).
        GroupNorm and a training BatchNorm depend on the batch's values and cannot be folded: torchvision's
        blocks run as is.
        """
        if self.norm != "frozen_bn":
            x = self.maxpool(self.relu(self.bn1(self.conv1(images))))
            for layer in self.layers():
                x = layer(x)
            return x
        x = self.maxpool(F.relu(conv_bn(self.conv1, self.bn1, images), inplace=True))
        for layer in self.layers():
            for block in layer:  # torchvision BasicBlock: conv-bn-relu-conv-bn, + shortcut, relu
                out = F.relu(conv_bn(block.conv1, block.bn1, x), inplace=True)
                out = conv_bn(block.conv2, block.bn2, out)
                shortcut = x if block.downsample is None else conv_bn(block.downsample[0], block.downsample[1], x)
                x = F.relu(out + shortcut, inplace=True)
        return x


def feature_hw(image_hw: tuple[int, int], last_layer: int = 4) -> tuple[int, int]:
    """Spatial size of the feature map for an (H, W) image: each stride-2 stage (conv1, maxpool,
    layer2 .. last_layer) maps n to ceil(n / 2); 480x640 -> 15x20 at layer4, 30x40 at layer3."""
    h, w = image_hw
    for _ in range(last_layer + 1):
        h, w = (h + 1) // 2, (w + 1) // 2
    return h, w


def _imagenet_state_dict() -> dict[str, torch.Tensor]:
    weights = torchvision.models.ResNet18_Weights.IMAGENET1K_V1
    try:
        return weights.get_state_dict(progress=False)
    except Exception as err:  # URLError, timeouts, HTTP errors, truncated downloads
        hub = Path(torch.hub.get_dir()) / "checkpoints"
        raise RunError(
            f"Could not download the ImageNet ResNet-18 weights ({type(err).__name__}: {err}); "
            f"this machine may be offline. On a machine with internet, download the file "
            f"{RESNET18_FILE} from {weights.url}, then either put it in $TORCH_HOME/hub/checkpoints/ "
            f"(here: {hub}/) or pass its path as backbone_weights."
        ) from err


def _local_state_dict(path_str: str) -> dict[str, torch.Tensor]:
    path = Path(path_str).expanduser()
    if not path.is_file():
        raise MissingFileError(
            f"backbone_weights file not found: {path}. Expected a ResNet-18 state dict "
            f"(e.g. {RESNET18_FILE}), 'imagenet', or None."
        )
    state = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise InputError(
            f"backbone_weights file {path} does not hold a state dict "
            f"(a mapping of parameter names to tensors); got {type(state).__name__}."
        )
    return state


def load_backbone_weights(module: ResNetBackbone, weights: str) -> None:
    """Load ResNet-18 weights into ``module`` in place.

    Args:
        module: the backbone to fill.
        weights: ``"imagenet"`` (torchvision ``IMAGENET1K_V1``, from the torch hub cache or downloaded)
            or the path of a local state dict file. Classifier keys ``fc.*`` are ignored, and so are
            ``layer4.*`` for a backbone that stops at layer3.

    Raises:
        RuntimeError: ``"imagenet"`` could not be downloaded (the message says how to fetch it by hand),
            or the state dict does not match ResNet-18 (missing, unexpected or mis-shaped keys).
        FileNotFoundError: a path that does not exist.
    """
    if weights == "imagenet":
        state, source = _imagenet_state_dict(), RESNET18_URL
    else:
        state, source = _local_state_dict(weights), str(weights)
    dropped = ("fc.",) if module.last_layer == 4 else ("fc.", "layer4.")
    state = {k: v for k, v in state.items() if not k.startswith(dropped)}
    try:
        result = module.load_state_dict(state, strict=False)
    except RuntimeError as err:  # shape mismatches
        raise RunError(f"backbone weights from {source} do not fit ResNet-18: {err}") from err
    if result.missing_keys or result.unexpected_keys:
        raise RunError(
            f"backbone weights from {source} do not fit ResNet-18: "
            f"missing keys {result.missing_keys[:8]}{' ...' if len(result.missing_keys) > 8 else ''}, "
            f"unexpected keys {result.unexpected_keys[:8]}"
            f"{' ...' if len(result.unexpected_keys) > 8 else ''}."
        )
    log.info("loaded backbone weights from %s", source)
