"""What training does differently on a GPU, checked on a CPU: checkpoints and random states that
belong to one device, the memory layout chosen per device, clipping under a gradient scaler, and
no wait for the GPU at every step (values that live on the device are read only now and then)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
import torch.serialization
from tqdm import tqdm

from act.data.dataset import StepSampler
from act.training.checkpoint_io import SafeCheckpointIO
from act.training.divergence import DivergenceError, StopOnDivergence
from act.training.module import ACTLitModule, channels_last_pays
from act.training.progress import ProgressBar

TINY_MODEL = {"chunk_size": 4, "hidden_dim": 32, "ff_dim": 32, "heads": 2}
CUDA0 = torch.device("cuda", 0)


def tiny_module(**kwargs) -> ACTLitModule:
    return ACTLitModule(TINY_MODEL, deployment={"image_size": (32, 32)}, **kwargs)


# -- checkpoints and random states of one device ---------------------------------------------------
def test_a_checkpoint_saved_on_cuda_0_loads_onto_the_cpu(tmp_path, monkeypatch):
    # Saved as rank 0 of a GPU run writes it: every tensor tagged cuda:0. Loaded on a CUDA-less
    # machine with that location kept, torch would refuse; under DDP every rank would fill GPU 0.
    with monkeypatch.context() as m:
        registry = [
            (0, lambda storage: "cuda:0" if storage.device.type == "cpu" else None, lambda obj, loc: None),
            *torch.serialization._package_registry,
        ]
        m.setattr(torch.serialization, "_package_registry", registry)
        torch.save({"state_dict": {"w": torch.ones(3)}}, tmp_path / "gpu.ckpt")
    with pytest.raises(RuntimeError, match="CUDA"):
        torch.load(tmp_path / "gpu.ckpt", weights_only=True)  # the saved location, as map_location=None keeps it
    loaded = SafeCheckpointIO().load_checkpoint(tmp_path / "gpu.ckpt")
    assert loaded["state_dict"]["w"].device == torch.device("cpu")


@pytest.fixture
def one_gpu(monkeypatch):
    """torch.cuda as on a machine with one GPU: generator states are ``tensor([index])``, and setting
    one of a device that does not exist raises as CUDA's would. Returns the (state, index) set."""
    restored = []

    def index_of(device) -> int:
        return device if isinstance(device, int) else torch.device(device).index or 0

    def set_rng_state(state, device="cuda"):
        if index_of(device) >= 1:
            raise IndexError("list index out of range")  # torch.cuda.default_generators[index]
        restored.append((int(state[0]), index_of(device)))

    def get_rng_state(device="cuda"):
        return torch.tensor([index_of(device)], dtype=torch.uint8)

    for module in (torch.cuda, torch.cuda.random):
        monkeypatch.setattr(module, "set_rng_state", set_rng_state)
        monkeypatch.setattr(module, "get_rng_state", get_rng_state)
        monkeypatch.setattr(module, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    return restored


def test_resuming_an_eight_gpu_run_on_one_gpu_restores_its_own_generator(one_gpu, monkeypatch):
    module = tiny_module()
    monkeypatch.setattr(module, "_device", CUDA0)  # as Lightning leaves it on the GPU
    checkpoint = {}
    module.on_save_checkpoint(checkpoint)
    assert torch.equal(checkpoint["rng_state"]["cuda"], torch.tensor([0], dtype=torch.uint8))  # this GPU's only
    # A checkpoint of 8 GPUs' states (as saved before), resumed where one GPU exists.
    checkpoint["rng_state"]["cuda"] = [torch.tensor([10 + i], dtype=torch.uint8) for i in range(8)]
    module.on_load_checkpoint(checkpoint)
    module.on_train_batch_start(None, 0)
    assert one_gpu == [(10, 0)]  # cuda:0 gets cuda:0's state, and nothing else is touched
    module.on_load_checkpoint({"rng_state": {**checkpoint["rng_state"], "cuda": torch.tensor([7], dtype=torch.uint8)}})
    module.on_train_batch_start(None, 0)
    assert one_gpu[-1] == (7, 0)


# -- the memory layout, per device ----------------------------------------------------------------
@pytest.mark.parametrize(
    "device, capability, precision, expected",
    [
        ("cpu", None, "bf16-mixed", True),
        ("cuda", (9, 0), "bf16-mixed", True),  # H100: tensor cores
        ("cuda", (8, 0), "32-true", True),  # A100: fp32 convolutions on TF32 tensor cores
        ("cuda", (7, 5), "16-mixed", True),  # T4 / RTX 2080 Ti: fp16 tensor cores
        ("cuda", (7, 5), "32-true", False),  # ... but no TF32: NCHW, cuDNN's own layout
        ("cuda", (6, 0), "16-mixed", False),  # P100: no tensor cores
    ],
)
def test_channels_last_where_the_convolutions_run_on_tensor_cores(monkeypatch, device, capability, precision, expected):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    assert channels_last_pays(torch.device(device), precision) is expected
    module = tiny_module(ema_decay=0.9)
    module.trainer = SimpleNamespace(strategy=SimpleNamespace(root_device=torch.device(device)), precision=precision)
    module.setup("fit")
    for net in (module.net, module.policy_net):
        weight = net.model.backbone.conv1.weight
        assert weight.is_contiguous(memory_format=torch.channels_last) is expected
        assert weight.is_contiguous() is not expected
    assert tiny_module(channels_last=False).net.model.backbone.conv1.weight.is_contiguous()
    with pytest.raises(ValueError, match="channels_last must be true, false or auto"):
        tiny_module(channels_last="yes")


# -- clipping under a gradient scaler (16-mixed) ----------------------------------------------------
def test_module_clipping_under_16_mixed_clips_the_true_gradients_of_a_fused_optimizer():
    # A fused optimiser unscales inside its step, so Lightning leaves its gradients scaled (x1024
    # here): clipped as they are, the step would move the weights 1024x less than the clip allows.
    module = tiny_module(clip_grad_norm=0.5)
    params = list(module.parameters())
    before = [p.detach().clone() for p in params]
    optimizer = torch.optim.SGD(params, lr=1.0, fused=True)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    scaler.scale(torch.ones(()))  # the scaler's state, as the scaled loss's backward leaves it
    for p in params:
        p.grad = torch.full_like(p, 10.0 * 1024.0)
    module.trainer = SimpleNamespace(precision_plugin=SimpleNamespace(scaler=scaler))
    module.on_before_optimizer_step(optimizer)
    scaler.step(optimizer)
    moved = torch.linalg.vector_norm(torch.cat([(b - p.detach()).flatten() for b, p in zip(before, params)]))
    assert moved.item() == pytest.approx(0.5, rel=0.01)  # lr 1 x the clipped norm (not 0.5 / 1024)


# -- no wait for the GPU at every step ---------------------------------------------------------------
def divergence_trainer(log_every_n_steps: int, params) -> SimpleNamespace:
    optimizer = torch.optim.SGD(params, lr=0.1)
    return SimpleNamespace(
        global_step=0,
        log_every_n_steps=log_every_n_steps,
        optimizers=[optimizer],
        precision_plugin=SimpleNamespace(scaler=None),
    )


def take_step(
    stop: StopOnDivergence, trainer, loss: torch.Tensor, grad_value: float, params, device: str | None = None
) -> SimpleNamespace:
    """What Lightning calls around one optimiser step: backward, then the hook before the update, for a
    module on ``device`` (default: the parameters'). Returns the module, which holds the step's norm."""
    module = SimpleNamespace(device=torch.device(device) if device else params[0].device)
    stop.on_before_backward(trainer, module, loss)
    for p in params:
        p.grad = torch.full_like(p, grad_value)
    stop.on_before_optimizer_step(trainer, module, trainer.optimizers[0])
    trainer.global_step += 1
    return module


def test_divergence_is_read_from_the_device_only_at_logging_steps():
    # A meta tensor has no value: any read of one on the host raises, as each read from a GPU
    # would make the CPU wait for it. Nine steps between logging steps read nothing.
    params = [torch.nn.Parameter(torch.zeros(3, device="meta"))]
    stop, trainer = StopOnDivergence(), divergence_trainer(10, params)
    for _ in range(9):
        take_step(stop, trainer, torch.ones((), device="meta"), 1.0, params)
    with pytest.raises((RuntimeError, NotImplementedError), match="meta"):
        take_step(stop, trainer, torch.ones((), device="meta"), 1.0, params)  # step 10: read


def test_a_late_read_still_names_the_step_that_diverged_and_stops_before_a_checkpoint():
    params = [torch.nn.Parameter(torch.zeros(3))]
    stop, trainer = StopOnDivergence(), divergence_trainer(10, params)
    for loss, grad in [(2.0, 1.0), (1.5, 1.0), (1.25, math.inf), (1.0, 1.0)]:  # step 3: an infinite gradient
        take_step(stop, trainer, torch.tensor(loss), grad, params, device="cuda")  # a GPU's values: read late
    with pytest.raises(
        DivergenceError,
        match=r"^training diverged at step 3: the gradient norm is inf \(the loss "
        r"1\.25\); last finite loss 1\.5 at step 2\. .* \(now 0\.1: ",
    ):
        stop.on_save_checkpoint(trainer, None, {})  # before a checkpoint is written, not at step 10
    every = StopOnDivergence(check_every_n_steps=1)
    take_step(every, trainer, torch.tensor(2.0), 1.0, params)
    with pytest.raises(DivergenceError, match="at step 6: the loss is nan; last finite loss 2 at step 5"):
        take_step(every, trainer, torch.tensor(math.nan), 1.0, params)
    with pytest.raises(ValueError, match="check_every_n_steps"):
        StopOnDivergence(check_every_n_steps=0)


def test_on_a_cpu_divergence_is_read_every_step_and_its_norm_is_kept_for_clipping():
    # Reading a CPU value costs nothing: the step that diverges never reaches the weights.
    params = [torch.nn.Parameter(torch.zeros(3))]
    stop, trainer = StopOnDivergence(), divergence_trainer(10, params)
    module = take_step(stop, trainer, torch.tensor(2.0), 1.0, params)
    assert float(module.step_grad_norm) == pytest.approx(3**0.5)  # the module clips with it, no second pass
    with pytest.raises(DivergenceError, match="at step 2: the gradient norm is inf"):
        take_step(stop, trainer, torch.tensor(1.0), math.inf, params)


@pytest.mark.parametrize("device, rate", [("cpu", 1), ("cuda", 10)])
def test_the_progress_bar_reads_the_gpu_every_ten_steps(device, rate):
    bar = ProgressBar(refresh_rate=1, cuda_refresh_rate=10)
    trainer = SimpleNamespace(strategy=SimpleNamespace(root_device=torch.device(device)), is_global_zero=True)
    bar.setup(trainer, None, "fit")
    assert bar.refresh_rate == rate


@pytest.mark.parametrize(
    "sampler, batches, batch_idx, step, total",
    [
        ("steps", 2700, 1800, 1800, 4500),  # step-based: the loader holds the 2700 steps left of 4500
        ("steps", 2, 0, 2, 2),
        ("epochs", 100, 30, 1030, 100),  # epoch-based: 70 batches left in the epoch, far from max_steps
        ("epochs", 100, 30, 4480, 50),  # epoch-based: max_steps comes first
    ],
)
def test_a_run_resumed_mid_epoch_gets_the_bar_total_its_loader_implies(sampler, batches, batch_idx, step, total):
    bar = ProgressBar()
    loader = SimpleNamespace(sampler=StepSampler(1, 4500) if sampler == "steps" else None)
    trainer = SimpleNamespace(
        num_training_batches=batches, train_dataloader=loader, max_steps=4500, global_step=step, current_epoch=0
    )
    bar._trainer, bar._resumed_mid_epoch = trainer, True
    bar._train_progress_bar = tqdm_bar = tqdm(total=None, disable=True)
    bar.on_train_batch_start(trainer, None, None, batch_idx)
    assert (tqdm_bar.total, tqdm_bar.n) == (total, batch_idx)
