"""The deployable network: one module with its normalisation, read from checkpoints of either
layout without Lightning, exported to TorchScript and ONNX with eager parity."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
import torch
from helpers import IMAGE, ROOT

from act.model.checkpoint import CheckpointError, load_network
from act.runtime.export import export
from act.runtime.policy import ACTPolicy
from act.runtime.predictors import ArtifactError, EagerPredictor, load_predictor
from act.training.module import ACTLitModule


def _inputs(batch: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    return (
        rng.normal(size=(batch, 14)).astype(np.float32),
        rng.integers(0, 256, (batch, 1, 3, IMAGE, IMAGE), dtype=np.uint8),
    )


def test_network_from_checkpoint_matches_the_lightning_module(tiny_checkpoint):
    module = ACTLitModule.load_from_checkpoint(tiny_checkpoint, map_location="cpu").eval()
    net = load_network(tiny_checkpoint, channels_last=False)  # the module's layout (tiny runs: contiguous): bitwise
    assert net.camera_names == ["top"] and net.image_size == (IMAGE, IMAGE) and net.task == "transfer_cube"
    qpos, images = (torch.from_numpy(x) for x in _inputs(3))
    torch.testing.assert_close(net(qpos, images), module.net(qpos, images), rtol=0, atol=0)
    # The statistics are the dataset's, in the network: raw joint units in and out.
    torch.testing.assert_close(net.action_mean, torch.tensor(module.hparams.deployment["stats"]["action_mean"]))
    assert not torch.equal(net.qpos_std, torch.ones(14))


def test_checkpoints_of_the_layout_before_are_refused_by_name(tiny_checkpoint, tmp_path):
    # Before the network carried its statistics, the module held ``model.*`` and ``qpos_mean`` ...
    checkpoint = torch.load(tiny_checkpoint, weights_only=True)
    old = {(k[len("net.") :] if k.startswith("net.") else k): v for k, v in checkpoint["state_dict"].items()}
    assert "model.action_head.weight" in old and "qpos_mean" in old
    # ... and kept the cameras, image size, statistics and task at the top of its hyper-parameters.
    hparams = dict(checkpoint["hyper_parameters"])
    flat = {**{k: v for k, v in hparams.items() if k != "deployment"}, **hparams["deployment"]}
    assert "stats" in flat and "deployment" not in flat
    # Version 0.1.0 reads only its own layout: an earlier one is refused with the file named, never
    # loaded with default cameras or statistics.
    legacy = tmp_path / "legacy.ckpt"
    torch.save({**checkpoint, "state_dict": old, "hyper_parameters": flat}, legacy)
    for load in (load_network, ACTLitModule.load_from_checkpoint):
        with pytest.raises(CheckpointError, match=f"{legacy} is not a readable checkpoint"):
            load(legacy)
    old_weights = tmp_path / "old_weights.ckpt"
    torch.save({**checkpoint, "state_dict": old}, old_weights)
    with pytest.raises(CheckpointError, match=f"{old_weights} is not a readable checkpoint \\(weights do not fit"):
        load_network(old_weights)


def test_checkpoints_without_the_newer_spec_fields_still_load(tiny_checkpoint, tmp_path):
    # Before the policy spec, a checkpoint's deployment held no sizes (and before that, no render quality).
    checkpoint = torch.load(tiny_checkpoint, weights_only=True)
    spec = checkpoint["hyper_parameters"]["deployment"]
    assert spec["chunk_size"] == 10 and spec["render_quality"] == "fast"  # the whole spec is stored now
    older = {k: v for k, v in spec.items() if k not in ("chunk_size", "state_dim", "action_dim", "render_quality")}
    checkpoint["hyper_parameters"]["deployment"] = older
    path = tmp_path / "older.ckpt"
    torch.save(checkpoint, path)
    policy = ACTPolicy.load(path, precision="32-true")
    assert policy.spec == replace(load_network(tiny_checkpoint).spec, render_quality=None)
    assert policy.chunk_size == 10 and policy.state_dim == 14 and policy.render_quality is None


def test_unreadable_checkpoints_are_refused(tiny_checkpoint, tmp_path):
    checkpoint = torch.load(tiny_checkpoint, weights_only=True)
    checkpoint["state_dict"] = {k: v for k, v in checkpoint["state_dict"].items() if "action_head" not in k}
    broken = tmp_path / "broken.ckpt"
    torch.save(checkpoint, broken)
    with pytest.raises(CheckpointError, match="weights do not fit its settings"):
        load_network(broken)
    (tmp_path / "junk.ckpt").write_text("not a checkpoint")
    with pytest.raises(CheckpointError, match="is not a readable checkpoint"):
        load_network(tmp_path / "junk.ckpt")


@pytest.mark.parametrize("fmt, suffix", [("torchscript", ".pt"), ("onnx", ".onnx")])
def test_export_matches_eager_and_carries_its_metadata(tiny_checkpoint, tmp_path, fmt, suffix):
    path = export(load_network(tiny_checkpoint), tmp_path / f"policy{suffix}", fmt)
    eager = EagerPredictor(load_network(tiny_checkpoint), precision="32-true")
    runtime = load_predictor(path)
    for batch in (1, 3):  # exported with a dynamic batch
        qpos, images = _inputs(batch, seed=batch)
        out = runtime(qpos, images)
        assert out.shape == (batch, 10, 14) and out.dtype == np.float32
        assert np.abs(out - eager(qpos, images)).max() <= 1e-4
    assert runtime.spec == load_network(tiny_checkpoint).spec  # cameras, image size, statistics, task, sizes
    assert runtime.spec.camera_names == ("top",) and runtime.spec.image_size == (IMAGE, IMAGE)
    assert runtime.spec.chunk_size == 10 and runtime.spec.task == "transfer_cube" and runtime.format == fmt
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"policy{suffix}"]  # no temporary left behind


def test_exported_policy_runs_where_lightning_cannot_be_imported(tiny_checkpoint, tmp_path):
    onnx_path = export(load_network(tiny_checkpoint), tmp_path / "policy.onnx", "onnx")
    ts_path = export(load_network(tiny_checkpoint), tmp_path / "policy.pt", "torchscript")
    code = f"""
import sys
for name in ("lightning", "pytorch_lightning", "lightning_fabric", "hydra", "omegaconf"):
    sys.modules[name] = None  # importing any of them now raises ImportError
try:
    import lightning
except ImportError:
    pass
else:
    raise SystemExit("lightning importable")
import json
import numpy as np
from act.runtime.policy import ACTPolicy
from act.runtime import export, plan, predictors, scheduler  # noqa: F401
out = {{}}
for path in ({str(onnx_path)!r}, {str(ts_path)!r}, {str(tiny_checkpoint)!r}):
    policy = ACTPolicy.load(path, temporal_ensemble_coeff=0.01, precision="32-true")
    obs = {{"qpos": np.zeros(14), "images": {{"top": np.full(({IMAGE}, {IMAGE}, 3), 100, np.uint8)}}}}
    out[path] = [policy.select_action(obs).tolist() for _ in range(3)]
print(json.dumps(out))
"""
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    actions = {k: np.array(v) for k, v in json.loads(proc.stdout.strip().splitlines()[-1]).items()}
    assert len(actions) == 3
    reference = actions[str(tiny_checkpoint)]
    for path in (onnx_path, ts_path):
        assert np.abs(actions[str(path)] - reference).max() <= 1e-4


def test_policy_runs_an_exported_artifact_like_the_checkpoint(tiny_checkpoint, tmp_path):
    path = export(load_network(tiny_checkpoint), tmp_path / "policy.onnx", "onnx")
    rng = np.random.default_rng(5)
    stream = [
        {"qpos": rng.normal(size=14), "images": {"top": rng.integers(0, 255, (IMAGE, IMAGE, 3), dtype=np.uint8)}}
        for _ in range(6)
    ]
    runs = []
    for source in (tiny_checkpoint, path):
        policy = ACTPolicy.load(source, n_action_steps=2, temporal_ensemble_coeff=0.01, precision="32-true")
        runs.append(np.array([policy.select_action(o) for o in stream]))
        assert policy.queries == 3
    np.testing.assert_allclose(runs[0], runs[1], atol=1e-4)


def test_bad_artifacts_are_refused(tmp_path):
    (tmp_path / "policy.onnx").write_bytes(b"not onnx")
    with pytest.raises(ArtifactError, match="not a readable ONNX policy"):
        load_predictor(tmp_path / "policy.onnx")
    (tmp_path / "policy.pt").write_bytes(b"not torchscript")
    with pytest.raises(ArtifactError, match="not a readable TorchScript policy"):
        load_predictor(tmp_path / "policy.pt")
    with pytest.raises(ArtifactError, match="unknown policy file type"):
        ACTPolicy.load(tmp_path / "policy.bin")


def test_onnx_policies_refuse_a_gpu_their_onnxruntime_cannot_use(tiny_checkpoint, tmp_path, monkeypatch):
    from act.runtime import predictors

    path = export(load_network(tiny_checkpoint), tmp_path / "policy.onnx", "onnx")
    monkeypatch.setattr(predictors, "onnx_has_cuda", lambda: False)  # the CPU-only wheel
    assert predictors.policy_device(path, "auto").type == "cpu"  # auto: the CPU, even on a GPU machine
    with pytest.raises(ArtifactError, match="no CUDAExecutionProvider .*onnxruntime-gpu.*device=cpu"):
        predictors.OnnxPredictor(path, device="cuda")
    with pytest.raises(ArtifactError, match="ONNX policies run on cpu or cuda"):
        predictors.OnnxPredictor(path, device="tpu")
