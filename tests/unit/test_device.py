"""Device settings: ``auto`` is CUDA where there is one, names are checked at the boundary, and a
Lightning trainer's first device is the one its precision is chosen for (CUDA mocked: no GPU needed)."""

from __future__ import annotations

import pytest
import torch

from act.runtime.device import resolve_device, trainer_device


@pytest.fixture
def two_gpus(mock_gpus):
    mock_gpus((8, 0), (8, 0))


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def test_auto_is_the_gpu_where_there_is_one(two_gpus):
    assert resolve_device("auto") == torch.device("cuda", 0)
    assert resolve_device(None) == torch.device("cuda", 0)
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    with pytest.raises(ValueError, match=r"device=cuda:2: this machine has 2 CUDA device\(s\), cuda:0..cuda:1"):
        resolve_device("cuda:2")


def test_auto_is_the_cpu_without_one(no_gpu):
    assert resolve_device("auto") == torch.device("cpu")
    with pytest.raises(ValueError, match="device=cuda: CUDA is not available on this machine .*use device=auto"):
        resolve_device("cuda")


@pytest.mark.parametrize("name", ["tpu", "cuda:x", "gpu0", ""])
def test_unknown_device_names_are_refused_with_the_choices(name):
    with pytest.raises(ValueError, match="must be auto, cpu, cuda or cuda:<index>"):
        resolve_device(name, "eval.device")


def test_trainer_device_is_rank_zeros(two_gpus):
    assert trainer_device("gpu", 2) == torch.device("cuda", 0)  # a count: the first GPUs
    assert trainer_device("gpu", [1]) == torch.device("cuda", 1)  # a list: those GPUs
    assert trainer_device("auto", "1,") == torch.device("cuda", 1)
    assert trainer_device("gpu", "2") == torch.device("cuda", 0)  # Lightning reads "2" as a count
    assert trainer_device("cpu", 2) == torch.device("cpu")
    with pytest.raises(ValueError, match="trainer.accelerator='tpu'"):
        trainer_device("tpu")


def test_trainer_device_without_a_gpu(no_gpu):
    assert trainer_device("auto", 2) == torch.device("cpu")
    with pytest.raises(ValueError, match="CUDA is not available"):
        trainer_device("gpu", 1)
