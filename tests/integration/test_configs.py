"""The composed Hydra configs every entry point reads."""

from __future__ import annotations

from datetime import timedelta

import pytest
from helpers import CONFIGS
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from lightning.pytorch.strategies import DDPStrategy
from omegaconf import OmegaConf

from act.apps.adapters.training import training_settings
from act.training.run import ConfigError
from act.training.session import check_clipping


def test_every_evaluation_shares_one_execution_config():
    """eval.py, the eval callback, make demo, the latency table and the real-time loop all read
    configs/execution/: the coefficient and the other settings are written once."""
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        plain = [
            OmegaConf.to_container(node, resolve=True)
            for node in (
                compose("eval").execution,
                compose("train", overrides=["callbacks=eval"]).callbacks.eval.execution,
                compose("demo", overrides=["experiment=paper"]).execution,
                compose("latency_table").execution,
            )
        ]
        realtime = OmegaConf.to_container(compose("run_realtime").execution)
        chunked = OmegaConf.to_container(compose("eval", overrides=["execution=chunked"]).execution)
    ensemble = plain[0]
    assert ensemble["temporal_ensemble_coeff"] == 0.01 and ensemble["n_action_steps"] is None
    assert plain[1] == ensemble and plain[3] == ensemble and plain[2] == {**ensemble, "precision": "32-true"}
    assert realtime == {**ensemble, "asynchronous": True}
    assert chunked == {**ensemble, "temporal_ensemble_coeff": None}


def test_gpu_trainers_set_what_a_gpu_needs():
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        gpu = compose("train", overrides=["trainer=gpu"])
        ddp = compose("train", overrides=["trainer=ddp"])
        paper = compose("train", overrides=["experiment=paper", "trainer=ddp"])
        quickstart = compose("train", overrides=["experiment=cpu_quickstart", "trainer=gpu"])
    assert gpu.trainer.accelerator == "gpu" and gpu.trainer.benchmark and gpu.data.num_workers == "auto"
    assert instantiate(ddp.trainer.strategy.timeout) == timedelta(minutes=60)  # rank 0's rollouts fit in it
    assert isinstance(instantiate(ddp.trainer.strategy), DDPStrategy) and ddp.data.num_workers == "auto"
    assert paper.trainer.precision == "32-true" and not paper.data.cache_images  # fp32, as its comment says
    assert quickstart.data.num_workers == 0  # an experiment's own setting wins over the trainer's


def test_clipping_a_fused_optimizer_under_16_mixed_is_refused_before_training():
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        quickstart = compose("train", overrides=["experiment=cpu_quickstart", "trainer=gpu", "out_dir=unused"])
        fused = compose("train", overrides=["trainer=gpu", "+policy.optimizer.fused=true", "out_dir=unused"])
    assert quickstart.policy.optimizer.fused and quickstart.policy.clip_grad_norm == 10.0
    quickstart, fused = training_settings(quickstart), training_settings(fused)
    check_clipping(quickstart, "16-mixed")  # the module clips: in every precision
    check_clipping(fused, "bf16-mixed")  # no gradient scaler: Lightning clips a fused optimiser's gradients
    with pytest.raises(
        ConfigError,
        match=r"^trainer.gradient_clip_val=10.0 cannot clip a fused optimiser's gradients "
        r"under trainer.precision=16-mixed .* trainer.gradient_clip_val=null "
        r"policy.clip_grad_norm=10.0$",
    ):
        check_clipping(fused, "16-mixed")


def test_the_default_policy_is_pretrained_and_every_random_one_uses_group_norm():
    """A user's own data gets the paper's ImageNet backbone; a preset that trains from random weights (nothing to
    download) puts GroupNorm in frozen BatchNorm's place, which training would refuse from random weights."""
    from act.training.run import check_backbone_init

    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        default = compose("train")
        random_presets = [
            compose("train", overrides=overrides).policy.model
            for overrides in (["policy=small"], ["experiment=cpu_quickstart"], ["experiment=smoke"])
        ]
    assert default.policy.model.backbone_weights == "imagenet" and default.policy.model.backbone_norm == "frozen_bn"
    for model in random_presets:
        assert model.backbone_weights is None and model.backbone_norm == "group_norm"
        check_backbone_init(model)
    check_backbone_init(default.policy.model)
    with pytest.raises(ConfigError, match="policy.model.backbone_norm=group_norm"):
        check_backbone_init({**default.policy.model, "backbone_weights": None})
