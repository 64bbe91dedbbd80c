"""The ResNet-18 backbone: frozen or group norm, folded BatchNorm, feature shapes, local and ImageNet
weights and the errors that name the fix. Tiny inputs (64x96 -> a 2x3 feature map)."""

from __future__ import annotations

import urllib.error

import pytest
import torch
import torchvision
from helpers import IMAGE_HW, tiny_config
from torch import nn

from act.model import ACT
from act.model.backbone import FrozenBatchNorm2d, ResNetBackbone, feature_hw


def test_frozen_batchnorm_matches_batchnorm_eval():
    g = torch.Generator().manual_seed(0)
    bn = nn.BatchNorm2d(6)
    bn.weight.data = torch.randn(6, generator=g)
    bn.bias.data = torch.randn(6, generator=g)
    bn.running_mean = torch.randn(6, generator=g)
    bn.running_var = torch.rand(6, generator=g) + 0.5
    bn.eval()
    frozen = FrozenBatchNorm2d(6)
    frozen.load_state_dict(bn.state_dict())  # strict, with num_batches_tracked present
    x = torch.randn(3, 6, 4, 5, generator=g)
    torch.testing.assert_close(frozen(x), bn(x))
    frozen.train()
    before = {k: v.clone() for k, v in frozen.state_dict().items()}
    torch.testing.assert_close(frozen(x * 3 + 1), bn(x * 3 + 1))  # no batch statistics in train mode
    assert all(torch.equal(before[k], v) for k, v in frozen.state_dict().items())
    assert not list(frozen.parameters())


def test_backbone_feature_shape():
    torch.manual_seed(0)
    feats = ResNetBackbone(None).eval()(torch.randn(2, 3, *IMAGE_HW))
    assert feats.shape == (2, 512, 2, 3)
    assert feature_hw((480, 640)) == (15, 20)
    assert feature_hw(IMAGE_HW) == (2, 3)


def test_group_norm_backbone_trains_its_norms_and_matches_torchvision():
    torch.manual_seed(0)
    backbone = ResNetBackbone(None, norm="group_norm")
    norms = [m for m in backbone.modules() if isinstance(m, torch.nn.GroupNorm)]
    assert len(norms) == 20 and all(m.num_groups == m.num_channels // 16 for m in norms)
    assert all(m.weight.requires_grad for m in norms)
    images = torch.randn(2, 3, *IMAGE_HW)
    reference = torchvision.models.resnet18(weights=None, norm_layer=lambda c: torch.nn.GroupNorm(c // 16, c))
    reference.load_state_dict(
        {**backbone.state_dict(), **{k: v for k, v in reference.state_dict().items() if k.startswith("fc.")}}
    )
    trunk = torch.nn.Sequential(*list(reference.children())[:-2])
    torch.testing.assert_close(backbone(images), trunk(images))
    # No running statistics: training and evaluation mode compute the same function.
    torch.testing.assert_close(backbone.train()(images), backbone.eval()(images))
    with pytest.raises(ValueError, match="random initialisation"):
        ResNetBackbone("imagenet", norm="group_norm")
    with pytest.raises(ValueError, match="frozen_bn, group_norm"):
        ResNetBackbone(None, norm="layer_norm")


def test_backbone_loads_local_state_dict(tmp_path):
    torch.manual_seed(3)
    reference = torchvision.models.resnet18(weights=None)
    with torch.no_grad():
        reference.layer4[1].bn2.running_var.uniform_(0.5, 2.0)
    path = tmp_path / "resnet18.pth"
    torch.save(reference.state_dict(), path)  # includes fc.* and num_batches_tracked

    backbone = ResNetBackbone(str(path))
    assert torch.equal(backbone.conv1.weight, reference.conv1.weight)
    assert torch.equal(backbone.layer4[1].bn2.running_var, reference.layer4[1].bn2.running_var)
    model = ACT(tiny_config(backbone_weights=str(path)))
    assert torch.equal(model.backbone.layer3[0].conv2.weight, reference.layer3[0].conv2.weight)


def test_backbone_missing_file_is_named(tmp_path):
    missing = tmp_path / "nope.pth"
    with pytest.raises(FileNotFoundError, match="nope.pth"):
        ResNetBackbone(str(missing))


def test_backbone_rejects_mismatched_state_dict(tmp_path):
    state = {
        k: v for k, v in torchvision.models.resnet18(weights=None).state_dict().items() if not k.startswith("layer4.")
    }
    state["extra.weight"] = torch.zeros(1)
    path = tmp_path / "partial.pth"
    torch.save(state, path)
    with pytest.raises(RuntimeError, match=r"missing keys \['layer4.*unexpected keys \['extra.weight'\]"):
        ResNetBackbone(str(path))


def test_imagenet_download_failure_explains_the_fix(monkeypatch):
    def offline(*args, **kwargs):
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(torchvision.models._api, "load_state_dict_from_url", offline)
    with pytest.raises(RuntimeError) as info:
        ResNetBackbone("imagenet")
    message = str(info.value)
    for needed in (
        "resnet18-f37072fd.pth",
        "https://download.pytorch.org/models/",
        "hub/checkpoints",
        "backbone_weights",
        "offline",
    ):
        assert needed in message


def test_folded_backbone_matches_torchvision_conv_then_batchnorm():
    """The backbone folds each frozen BatchNorm into its convolution; the function must not change."""
    torch.manual_seed(0)
    backbone = ResNetBackbone(None)
    for m in backbone.modules():
        if isinstance(m, FrozenBatchNorm2d):  # non-trivial statistics, so folding is exercised
            m.weight.uniform_(0.5, 1.5)
            m.bias.normal_()
            m.running_mean.normal_()
            m.running_var.uniform_(0.5, 2.0)
    ref = torchvision.models.resnet18(weights=None, norm_layer=FrozenBatchNorm2d)
    ref.load_state_dict(backbone.state_dict(), strict=False)
    x = torch.randn(2, 3, 64, 96)
    expected = ref.layer4(ref.layer3(ref.layer2(ref.layer1(ref.maxpool(ref.relu(ref.bn1(ref.conv1(x))))))))
    torch.testing.assert_close(backbone(x), expected, rtol=1e-4, atol=1e-4)
