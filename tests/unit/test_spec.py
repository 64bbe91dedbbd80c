"""What a trained policy expects (``PolicySpec``): one description, stored as plain values, read
back from files written before a field existed."""

from __future__ import annotations

import json

import numpy as np
import pytest

from act.model.spec import PolicySpec
from act.runtime.predictors import ArtifactError, spec_from_metadata

STATS = {
    "qpos_mean": np.zeros(2, np.float32),
    "qpos_std": np.full(2, 0.5, np.float32),
    "action_mean": np.arange(2, dtype=np.float32),
    "action_std": np.ones(2, np.float32),
}


def test_a_spec_survives_its_stored_form():
    spec = PolicySpec(
        task="transfer_cube",
        camera_names=["top", "angle"],
        image_size=np.array([48, 64]),
        render_quality="fast",
        stats=STATS,
        chunk_size=10,
        state_dim=2,
        action_dim=2,
    )
    stored = json.loads(json.dumps(spec.to_dict()))  # what checkpoints and exports hold: plain values
    assert stored["camera_names"] == ["top", "angle"] and stored["stats"]["qpos_std"] == [0.5, 0.5]
    assert PolicySpec.from_dict(stored) == spec
    assert spec.camera_names == ("top", "angle") and spec.image_size == (48, 64)


def test_files_without_the_newer_fields_take_the_defaults():
    # A checkpoint of before render quality and the sizes were stored, with None where a value was unknown.
    old = {"camera_names": ["top"], "image_size": [32, 32], "stats": None, "task": "transfer_cube"}
    spec = PolicySpec.from_dict(old)
    assert spec.render_quality is None and spec.chunk_size is None and spec.stats is None
    assert PolicySpec.from_dict({"camera_names": None, "image_size": None}) == PolicySpec()
    assert PolicySpec.from_dict(None) == PolicySpec()
    assert PolicySpec().camera_names == ("top",) and PolicySpec().image_size == (480, 640)


@pytest.mark.parametrize(
    "values, message",
    [
        ({"cameras": ["top"]}, "unknown policy spec field 'cameras'"),
        ({"camera_names": "top"}, "camera_names must be a non-empty list"),
        ({"camera_names": []}, "camera_names must be a non-empty list"),
        ({"image_size": [32, 0]}, r"image_size must be \[height, width\]"),
        ({"image_size": [32]}, r"image_size must be \[height, width\]"),
        ({"stats": {"qpos_median": [0.0]}}, "unknown statistic 'qpos_median'"),
        ({"chunk_size": 0}, "chunk_size must be a positive integer"),
        ({"task": 3}, "task must be a name or None"),
    ],
)
def test_impossible_specs_are_refused_by_name(values, message):
    with pytest.raises(ValueError, match=message):
        PolicySpec.from_dict(values)


def test_the_network_fills_in_its_sizes_and_may_not_contradict_them():
    spec = PolicySpec(chunk_size=10).for_network(10, 14, 14)
    assert (spec.chunk_size, spec.state_dim, spec.action_dim) == (10, 14, 14)
    with pytest.raises(ValueError, match="the policy spec says chunk_size=10, the network has chunk_size=8"):
        spec.for_network(8, 14, 14)


def test_resume_compares_the_fields_a_setting_chooses():
    saved = PolicySpec(task="transfer_cube", camera_names=("top",), image_size=(32, 32), stats=STATS)
    now = PolicySpec(task="transfer_cube", camera_names=("top", "angle"), image_size=(32, 32))
    assert saved.resume_pairs(now) == [
        ("task", "transfer_cube", "transfer_cube"),
        ("task.cameras", ("top",), ("top", "angle")),
        ("task.image_size", (32, 32), (32, 32)),
    ]  # statistics follow the data


def test_an_export_of_before_the_statistics_were_stored_still_loads():
    # The metadata exports wrote before the spec: flat, with the network config and format beside it.
    old = {
        "config": {"chunk_size": 10},
        "camera_names": ["top"],
        "image_size": [32, 32],
        "image_crop": None,
        "chunk_size": 10,
        "state_dim": 14,
        "action_dim": 14,
        "task": "transfer_cube",
        "render_quality": "fast",
        "format": "onnx",
        "inputs": {},
        "outputs": {},
    }
    spec = spec_from_metadata(json.dumps(old).encode(), "policy.onnx")
    assert spec == PolicySpec(
        task="transfer_cube",
        camera_names=("top",),
        image_size=(32, 32),
        render_quality="fast",
        chunk_size=10,
        state_dim=14,
        action_dim=14,
    )
    with pytest.raises(ArtifactError, match="policy.onnx carries no ACT metadata"):
        spec_from_metadata(json.dumps({"task": "transfer_cube"}), "policy.onnx")
    with pytest.raises(ArtifactError, match="policy.onnx carries unreadable ACT metadata"):
        spec_from_metadata(json.dumps({**old, "image_size": [32]}), "policy.onnx")
