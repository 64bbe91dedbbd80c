"""Training: the Hydra CLI, the Lightning module, checkpoints, exact resume, sweeps, DDP."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import CONFIGS, IMAGE, ROOT, assert_same_weights, make_cfg
from hydra import compose, initialize_config_dir

from act.apps.adapters.training import train
from act.data.errors import DatasetError
from act.training.module import ACTLitModule, lr_factor_fn
from act.training.run import ConfigError


def read_metric(out_dir: Path, key: str) -> list[float]:
    with open(out_dir / "csv" / "metrics.csv") as f:
        return [float(row[key]) for row in csv.DictReader(f) if row.get(key)]


def test_tiny_fit_lowers_l1_and_writes_checkpoints(demos, tmp_path):
    out = tmp_path / "run"
    metrics = train(
        make_cfg(
            demos,
            out,
            "trainer.max_steps=150",
            "trainer.val_check_interval=75",
            "callbacks.periodic.every_n_train_steps=75",
        )
    )
    l1 = read_metric(out, "train/l1")
    assert len(l1) == 150
    assert np.mean(l1[-20:]) < 0.85 * np.mean(l1[:20])  # measured here: about 0.78 -> 0.50
    assert np.isfinite(metrics["val/l1"]) and "best/val_l1" in metrics
    names = {p.name for p in (out / "checkpoints").iterdir()}
    assert {"last.ckpt", "step75.ckpt", "step150.ckpt"} <= names and any(n.startswith("best-") for n in names)
    assert read_metric(out, "train/samples_per_s")


def test_training_without_the_cvae_validates(demos, tmp_path):
    # policy.model.use_vae=false (the CVAE ablation, issue 32) has no encoder: validation once called it
    # anyway and crashed at the first check (`'ACT' object has no attribute 'vae_cls'`).
    out = tmp_path / "run"
    train(make_cfg(demos, out, "policy.model.use_vae=false", "trainer.max_steps=2", "trainer.val_check_interval=2"))
    assert read_metric(out, "val/kl") == [0.0] and len(read_metric(out, "val/l1")) == 1
    assert not any(k.startswith("net.model.vae_") for k in torch.load(out / "checkpoints" / "last.ckpt")["state_dict"])


def test_resume_equals_uninterrupted_run(demos, tiny_checkpoint, six_step_run, tmp_path):
    # tiny_checkpoint: this config stopped at step 3; six_step_run: the same run straight to step 6.
    train(make_cfg(demos, tmp_path / "resumed", "trainer.max_steps=6", f"ckpt_path={tiny_checkpoint}"))
    straight, resumed = assert_same_weights(
        six_step_run / "checkpoints" / "last.ckpt", tmp_path / "resumed" / "checkpoints" / "last.ckpt"
    )
    assert straight["global_step"] == resumed["global_step"] == 6
    # ... and the checkpoint at step 3 differs from step 6: the test can fail.
    early = torch.load(tiny_checkpoint, weights_only=False)
    assert not torch.allclose(
        early["state_dict"]["net.model.action_head.weight"], straight["state_dict"]["net.model.action_head.weight"]
    )


def test_last_checkpoint_holds_the_final_step_between_validations(demos, tmp_path):
    # 13 steps, validation every 10: Lightning alone would leave last.ckpt at step 10.
    out = tmp_path / "run"
    train(make_cfg(demos, out, "trainer.max_steps=13"))
    last = torch.load(out / "checkpoints" / "last.ckpt", weights_only=False)
    assert last["global_step"] == 13
    best = [p.name for p in (out / "checkpoints").glob("best-*.ckpt")]
    assert len(best) == 1 and best[0].startswith("best-step10-")  # the best is still from validation
    # ... and resuming from it to step 16 is exact.
    train(
        make_cfg(demos, tmp_path / "resumed", "trainer.max_steps=16", f"ckpt_path={out / 'checkpoints' / 'last.ckpt'}")
    )
    train(make_cfg(demos, tmp_path / "straight", "trainer.max_steps=16"))
    straight, resumed = assert_same_weights(
        tmp_path / "straight" / "checkpoints" / "last.ckpt", tmp_path / "resumed" / "checkpoints" / "last.ckpt"
    )
    assert straight["global_step"] == resumed["global_step"] == 16


def test_checkpoint_alone_rebuilds_the_policy(tiny_checkpoint):
    ckpt = tiny_checkpoint  # a 3-step run of the tiny config
    policy = ACTLitModule.load_from_checkpoint(ckpt, map_location="cpu").eval()
    again = ACTLitModule.load_from_checkpoint(ckpt, map_location="cpu").eval()
    assert policy.net.camera_names == ["top"] and policy.net.image_size == (IMAGE, IMAGE)
    assert policy.hparams.deployment["task"] == "transfer_cube"
    assert policy.hparams.train_config["policy"]["model"]["chunk_size"] == 10
    stats = policy.hparams.deployment["stats"]
    assert len(stats["action_mean"]) == 14
    qpos = torch.randn(2, 14)
    images = torch.randint(0, 255, (2, 1, 3, IMAGE, IMAGE), dtype=torch.uint8)
    a, b = policy.net(qpos, images), again.net(qpos, images)
    assert a.shape == (2, 10, 14)
    torch.testing.assert_close(a, b)
    # Raw-unit predictions: de-normalised with the dataset's action statistics.
    torch.testing.assert_close(policy.net.action_mean, torch.tensor(stats["action_mean"], dtype=torch.float32))


@pytest.mark.parametrize(
    "extra, error, message",
    [
        (["policy.model.chunk_size=500"], ConfigError, "chunk_size=500 is longer than the shortest episode"),
        (
            ["policy.model.chunk_size=0"],
            ConfigError,
            r"policy.model.chunk_size must be a positive number of actions "
            r"\(the paper: 100\), got 0",
        ),
        (["task.cameras=[angle]"], DatasetError, r"\['angle'\] not in dataset"),
        (["task.image_size=[48,64]"], ConfigError, "episodes in .* are 32x32"),
        (["trainer.max_steps=0"], ConfigError, "max_steps"),
        (
            ["policy.lr_schedule=cosine", "policy.lr_warmup_steps=5", "trainer.max_steps=5"],
            ConfigError,
            r"lr_schedule=cosine needs trainer.max_steps \(5\) > policy.lr_warmup_steps \(5\)",
        ),
        (["policy.model.heads=3"], ConfigError, "hidden_dim \\(32\\) must be divisible by heads \\(3\\)"),
        # Issue 33: transfer-cube episodes trained as insertion (max_steps=0: the old code fails fast, on it).
        (
            ["task=insertion", "trainer.max_steps=0"],
            ConfigError,
            r"the episodes in .* are of task 'transfer_cube' "
            r"\(e.g. episode_0.hdf5\), not task.name='insertion': train with task=transfer_cube",
        ),
    ],
)
def test_bad_configs_fail_before_training(demos, tmp_path, extra, error, message):
    with pytest.raises(error, match=message):
        train(make_cfg(demos, tmp_path / "run", *extra))
    assert not list((tmp_path / "run").glob("checkpoints/*.ckpt"))  # (the folder may be: its writability was checked)


def test_lr_schedule_factors():
    cosine = lr_factor_fn("cosine", warmup_steps=10, total_steps=110, min_ratio=0.1)
    assert cosine(0) == pytest.approx(0.1) and cosine(9) == pytest.approx(1.0)
    assert cosine(10) == pytest.approx(1.0) and cosine(60) == pytest.approx(0.55) and cosine(110) == pytest.approx(0.1)
    assert cosine(500) == pytest.approx(0.1)  # past max_steps (a resumed run extended) it stays at the floor
    constant = lr_factor_fn("constant", warmup_steps=4, total_steps=100, min_ratio=0.0)
    assert [constant(s) for s in (0, 3, 4, 99)] == pytest.approx([0.25, 1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="unknown lr_schedule 'linear'"):
        ACTLitModule(model={"hidden_dim": 32, "ff_dim": 64, "heads": 2}, lr_schedule="linear")


def test_cosine_schedule_steps_every_group(demos, tmp_path):
    out = tmp_path / "run"
    train(
        make_cfg(
            demos,
            out,
            "trainer.max_steps=12",
            "policy.lr_schedule=cosine",
            "policy.lr_warmup_steps=2",
            "policy.lr_min_ratio=0.0",
            "policy.lr_backbone=1e-4",
        )
    )
    rest, backbone = read_metric(out, "lr-AdamW/pg1"), read_metric(out, "lr-AdamW/pg2")
    assert len(rest) == 12
    assert rest[0] == pytest.approx(1.5e-4) and rest[1] == pytest.approx(3e-4)  # warm-up: 1/2, 2/2 of the peak
    assert backbone[1] == pytest.approx(1e-4) and rest[-1] < 0.05 * 3e-4  # decayed to near 0 at step 12
    assert all(a >= b for a, b in zip(rest[1:], rest[2:]))


def test_missing_dataset_names_the_record_command(tmp_path):
    with pytest.raises(ConfigError, match="python scripts/record_demos.py task=transfer_cube"):
        train(make_cfg(tmp_path / "nothing", tmp_path / "run"))


def test_an_empty_dataset_folder_names_the_fix(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(
        DatasetError,
        match=r"holds no episode_\*.hdf5 files; record demonstrations into it with "
        r"`python scripts/record_demos.py task=<task> out_dir=.*empty`",
    ):
        train(make_cfg(tmp_path / "empty", tmp_path / "run"))


def test_bf16_mixed_precision_steps(demos, tmp_path):
    out = tmp_path / "run"
    train(make_cfg(demos, out, "trainer.max_steps=3", "trainer.precision=bf16-mixed"))
    assert all(np.isfinite(read_metric(out, "train/loss")))


def test_wandb_logs_offline_without_a_key(demos, tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    out = tmp_path / "run"
    train(make_cfg(demos, out, "trainer.max_steps=2", "logger=wandb"))
    assert list((out / "wandb").glob("offline-run-*")), "expected an offline wandb run"
    assert read_metric(out, "train/loss")  # CSV is always written too


def test_ddp_two_cpu_processes_agree(demos, tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "ddp_check.py"), str(demos), str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rank0 = torch.load(tmp_path / "rank0.pt")
    rank1 = torch.load(tmp_path / "rank1.pt")
    assert rank0.keys() == rank1.keys()
    for key in rank0:
        torch.testing.assert_close(rank0[key], rank1[key], msg=key)


@pytest.mark.slow  # two processes compiling: about a minute more than the eager DDP test
def test_under_ddp_the_compiled_step_is_split_at_ddps_gradient_buckets(demos, tmp_path):
    """The compiled function runs inside DDP's forward (Lightning calls ``training_step`` through it), where dynamo
    hands what it compiles to its DDPOptimizer: the graph is split at DDP's gradient buckets (the first 1 MB, then
    25 MB), so each bucket's all-reduce overlaps the backward of the rest, and the ranks still agree."""
    extra = ["policy.compile=true", "+callbacks.compile_check._target_=ddp_check.CompileCheck"]
    extra.append(f"+callbacks.compile_check.folder={tmp_path}")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "ddp_check.py"), str(demos), str(tmp_path), "cpu", *extra],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for rank in (0, 1):
        graphs = json.loads((tmp_path / f"rank{rank}.json").read_text())["ddp_optimizer_graphs"]
        assert graphs and all(pieces >= 2 for pieces in graphs), graphs  # split, not one graph for all
    rank0, rank1 = (torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1))
    for key in rank0:
        torch.testing.assert_close(rank0[key], rank1[key], msg=key)


def test_slurm_launcher_config_composes():
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        cfg = compose(
            "train",
            overrides=["hydra/launcher=slurm", "hydra.launcher.partition=gpu", "trainer=gpu"],
            return_hydra_config=True,
        )
    assert cfg.hydra.launcher.partition == "gpu" and cfg.hydra.launcher.gpus_per_node == 1
    assert "SlurmLauncher" in cfg.hydra.launcher._target_


def test_image_crop_is_what_the_network_sees_in_training_and_deployment(demos, tmp_path):
    out = tmp_path / "run"
    # fp32: on a 24x16 crop, bf16 autocast on the CPU (torch 2.14.1) gave a non-finite gradient now and then
    # (1 run in 4 here, also with torchvision's own ResNet-18), which StopOnDivergence rightly stops on.
    train(make_cfg(demos, out, "trainer.max_steps=2", "policy.image_crop=[4,8,24,16]", "trainer.precision=32-true"))
    loaded = ACTLitModule.load_from_checkpoint(out / "checkpoints" / "last.ckpt")
    assert loaded.net.image_crop == (4, 8, 24, 16) and loaded.net.image_size == (IMAGE, IMAGE)
    torch.manual_seed(0)
    module = ACTLitModule(
        {"chunk_size": 4, "hidden_dim": 32, "ff_dim": 32, "heads": 2},
        deployment={"image_size": (IMAGE, IMAGE)},
        image_crop=(4, 8, 24, 16),
    ).eval()
    images = torch.randint(0, 256, (2, 1, 3, IMAGE, IMAGE), dtype=torch.uint8)
    assert module.net.normalize_images(images).shape == (2, 1, 3, 24, 16)
    # Pixels outside the window cannot change the output; pixels inside do.
    qpos = torch.zeros(2, 14)
    outside, inside = images.clone(), images.clone()
    outside[..., :4, :] = 0
    outside[..., :, 24:] = 255
    inside[..., 10, 10] = 255 - inside[..., 10, 10]
    base = module.net(qpos, images)
    assert torch.equal(module.net(qpos, outside), base)
    assert not torch.equal(module.net(qpos, inside), base)


@pytest.mark.parametrize("crop", [[0, 0, 33, 8], [-1, 0, 8, 8], [0, 0, 8], [0, 0, 0, 8]])
def test_image_crop_outside_the_image_is_refused(crop):
    with pytest.raises(ValueError, match="image_crop"):
        ACTLitModule(
            {"chunk_size": 4, "hidden_dim": 32, "ff_dim": 32, "heads": 2},
            deployment={"image_size": (32, 32)},
            image_crop=crop,
        )


def test_module_clipping_with_a_fused_optimizer(demos, tmp_path):
    # Lightning refuses trainer.gradient_clip_val with a fused AdamW; the module clips instead.
    out = tmp_path / "run"
    train(
        make_cfg(
            demos,
            out,
            "trainer.max_steps=3",
            "trainer.gradient_clip_val=null",
            "policy.clip_grad_norm=0.5",
            "+policy.optimizer.fused=true",
        )
    )
    assert torch.load(out / "checkpoints" / "last.ckpt", weights_only=False)["global_step"] == 3
    module = ACTLitModule(
        {"chunk_size": 4, "hidden_dim": 32, "ff_dim": 32, "heads": 2},
        deployment={"image_size": (32, 32)},
        clip_grad_norm=0.5,
    )
    for p in module.parameters():
        p.grad = torch.full_like(p, 10.0)
    module.on_before_optimizer_step(None)
    norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in module.parameters()]))
    assert norm == pytest.approx(0.5, rel=1e-3)
    with pytest.raises(ValueError, match="clip_grad_norm"):
        ACTLitModule({"chunk_size": 4, "hidden_dim": 32, "ff_dim": 32, "heads": 2}, clip_grad_norm=0.0)


def test_explicit_bf16_on_a_cpu_without_it_warns_before_training(demos, tmp_path, monkeypatch, capsys):
    from act.runtime import precision as P

    slow = P.BF16Probe("cpu", native=False, fp32_ms=0.3, bf16_ms=90.0, detail="CPU capability AVX2, oneDNN bf16 no")
    monkeypatch.setattr(P, "probe_bf16", lambda device_type="cpu": slow)
    # trainer.max_steps=0 fails after the precision check: no (possibly emulated) bf16 step runs.
    with pytest.warns(UserWarning, match="300x slower"), pytest.raises(ConfigError, match="max_steps"):
        train(make_cfg(demos, tmp_path / "run", "trainer.precision=bf16-mixed", "trainer.max_steps=0"))
    monkeypatch.setattr(P, "probe_bf16", lambda device_type="cpu": slow)
    cfg = make_cfg(demos, tmp_path / "auto", "trainer.max_steps=1")
    from act.apps.adapters.training import training_parts, training_settings
    from act.training.session import build_trainer, choose_step

    settings, parts = training_settings(cfg), training_parts(cfg)
    step = choose_step(settings, lambda: None)
    trainer = build_trainer(settings, parts, step.precision)
    assert step.precision == "32-true" and step.compiled == "auto" and "32" in str(trainer.precision)
    assert "training precision: 32-true (auto: bf16 is not native" in capsys.readouterr().out


def test_a_run_trains_from_python_with_settings_and_parts_no_hydra(demos, tmp_path):
    """``run_training`` takes typed settings and the parts built by plain constructors (issue 69): the run folder
    is locked, a workflow's chosen steps are trained and recorded in the checkpoint with the config."""
    import functools

    import lightning as L
    from lightning.pytorch.callbacks import ModelCheckpoint

    from act.data.datamodule import ACTDataModule
    from act.training.session import run_training
    from act.training.settings import TrainingParts, TrainSettings

    out = tmp_path / "run"
    model = dict(
        state_dim=14, action_dim=14, chunk_size=10, hidden_dim=32, ff_dim=64, heads=2, enc_layers=1, dec_layers=1,
        vae_enc_layers=1, latent_dim=4, backbone_layer=3, backbone_weights=None, backbone_norm="group_norm",
    )  # fmt: skip
    settings = TrainSettings(
        out_dir=str(out),
        seed=0,
        max_steps=100,
        task="transfer_cube",
        cameras=("top",),
        image_size=(IMAGE, IMAGE),
        render_quality="fast",
        dataset_dir=str(demos),
        data_cameras=("top",),
        val_fraction=0.2,
        batch_size=4,
        model=model,
        precision="32-true",
    )

    def policy(deployment, pretrained=True, channels_last="auto"):
        adam = functools.partial(torch.optim.AdamW, lr=3e-4)
        return ACTLitModule(model, optimizer=adam, deployment=deployment, channels_last=channels_last)

    def trainer(precision, max_steps, callbacks, plugins):
        return L.Trainer(
            accelerator="cpu", devices=1, precision=precision, max_steps=max_steps, callbacks=callbacks,
            plugins=plugins, logger=False, enable_progress_bar=False, enable_model_summary=False,
            limit_val_batches=1, val_check_interval=2, num_sanity_val_steps=0,
        )  # fmt: skip

    parts = TrainingParts(
        datamodule=lambda: ACTDataModule(str(demos), ["top"], chunk_size=10, batch_size=4, num_workers=0),
        policy=policy,
        trainer=trainer,
        callbacks=lambda: [ModelCheckpoint(dirpath=str(out / "checkpoints"), save_last=True)],
        config=lambda: {"trainer": {"max_steps": 100}, "note": "a Python run"},
    )
    metrics = run_training(settings.chosen(2, channels_last=False), parts)
    saved = torch.load(out / "checkpoints" / "last.ckpt", weights_only=False)
    assert saved["global_step"] == 2 and np.isfinite(metrics["train/loss"])
    assert saved["hyper_parameters"]["train_config"] == {
        "trainer": {"max_steps": 2},
        "note": "a Python run",
        "policy": {"channels_last": False},
    }
    assert saved["hyper_parameters"]["channels_last"] is False
