"""Shared by every level of tests (unit/, integration/, e2e/): a tiny ACT config over a tiny real dataset,
tiny networks and batches, callbacks that break a run on purpose, and a fake clock for the control loop."""

from __future__ import annotations

import math
import threading
from pathlib import Path

import lightning as L
import numpy as np
import torch
from hydra import compose, initialize_config_dir

from act.apps.adapters.evaluation import eval_settings
from act.eval.evaluation import evaluation_spec, save_evaluation
from act.eval.harness import summary_line
from act.model import ACT, ACTConfig
from act.model.spec import PolicySpec
from act.runtime.robot import check_action

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"
IMAGE = 32  # 32x32 images: a 1x1 ResNet feature map, fast on a CPU


def tiny_overrides(dataset_dir, out_dir, *extra) -> list[str]:
    """Hydra overrides for a few-second training run of a 32-wide ACT on ``dataset_dir``."""
    return [
        f"data.dataset_dir={dataset_dir}",
        f"out_dir={out_dir}",
        f"task.image_size=[{IMAGE},{IMAGE}]",
        "policy=small",
        "policy.model.chunk_size=10",
        "policy.model.hidden_dim=32",
        "policy.model.ff_dim=64",
        "policy.model.heads=2",
        "policy.model.enc_layers=1",
        "policy.model.vae_enc_layers=1",
        "policy.model.latent_dim=4",
        # layer3 ends the backbone: a quarter of ResNet-18's weights, 3x faster steps, 34 MB checkpoints not 135
        "policy.model.backbone_layer=3",
        "policy.channels_last=false",  # make demo's plan times one memory format, not both (test_demo tests auto)
        "policy.optimizer.lr=3e-4",
        "policy.lr_backbone=3e-4",
        "data.batch_size=4",
        "data.num_workers=0",
        "logger=csv",
        "trainer.val_check_interval=10",
        "trainer.limit_val_batches=2",
        "trainer.log_every_n_steps=1",
        "callbacks.periodic.every_n_train_steps=1000",
        *extra,
    ]


def make_cfg(dataset_dir, out_dir, *extra):
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        return compose("train", overrides=tiny_overrides(dataset_dir, out_dir, *extra))


def eval_cfg(*overrides: str):
    """configs/eval.yaml as ``scripts/eval.py <overrides>`` composes it (one episode, no wandb by default)."""
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        return compose("eval", overrides=["logger.wandb=false", "num_episodes=1", *overrides])


def run_eval(*overrides: str) -> tuple[dict, str]:
    """What ``scripts/eval.py <overrides>`` does, in this process: the metrics it writes and the line it prints."""
    settings = eval_settings(eval_cfg(*overrides))
    metrics, _ = save_evaluation(settings, *evaluation_spec(settings, print))
    return metrics, summary_line(metrics)


# -- the paper preset (experiment=paper) at its full size, on data written rather than rendered ----
PAPER_HW = (480, 640)


def write_flat_episodes(folder: Path, num_episodes: int, steps: int, image_size=PAPER_HW) -> None:
    """ACT HDF5 transfer-cube episodes of ``steps`` steps: random-walk qpos and actions, and flat frames
    (one grey level a step, gzip: a few kB a 480x640 frame). Training costs what it costs on rendered
    demos, without minutes of rendering or gigabytes of disk."""
    from act.data.schema import write_episode

    rng = np.random.default_rng(0)
    for i in range(num_episodes):
        qpos = np.cumsum(rng.normal(scale=0.01, size=(steps, 14)), axis=0).astype(np.float32)
        levels = np.linspace(40, 200, steps).astype(np.uint8) + i
        frames = np.broadcast_to(levels[:, None, None, None], (steps, *image_size, 3)).copy()
        write_episode(
            Path(folder) / f"episode_{i}.hdf5",
            qpos=qpos,
            action=np.roll(qpos, -1, axis=0),
            images={"top": frames},
            compression="gzip",
            attrs={"task": "transfer_cube", "seed": i, "fps": 50, "render_quality": "fast"},
        )


def paper_overrides(dataset_dir, out_dir, *extra) -> list[str]:
    """experiment=paper (480x640, chunk 100, hidden 512, ff 3200) for a few steps at batch 2: random
    backbone weights (tests download nothing), CSV logging, one validation batch at the last step."""
    return [
        "experiment=paper",
        f"data.dataset_dir={dataset_dir}",
        f"out_dir={out_dir}",
        "policy.model.backbone_weights=null",  # tests download nothing: random weights, so GroupNorm
        "policy.model.backbone_norm=group_norm",
        "data.batch_size=2",
        "data.num_workers=0",
        "logger=csv",
        "trainer.max_steps=2",
        "trainer.val_check_interval=2",
        "trainer.limit_val_batches=1",
        "trainer.log_every_n_steps=1",
        *extra,
    ]


def paper_cfg(dataset_dir, out_dir, *extra):
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        return compose("train", overrides=paper_overrides(dataset_dir, out_dir, *extra))


def demo_overrides(tmp_path, *extra):
    """The quickstart pipeline shrunk to seconds: 2 demos, a 32-wide ACT, 2 short evaluation episodes."""
    out = tmp_path / "demo"
    train_overrides = [o for o in tiny_overrides(tmp_path / "data", out / "train") if not o.startswith("out_dir=")]
    return [
        *train_overrides,
        f"demo.dir={out}",
        "demo.num_demos=2",
        "demo.record_workers=0",
        "+demo.eval.num_episodes=2",
        "demo.eval.workers=0",
        "+demo.eval.episode_len=40",
        "demo.eval.num_videos=1",
        "execution.precision=32-true",
        "trainer.val_check_interval=2",
        "policy.lr_warmup_steps=1",
        "policy.image_crop=null",
        *extra,
    ]


# -- tiny ACT networks and batches (tests/unit/): hidden 32, 2 heads -------------------------------
IMAGE_HW = (64, 96)  # the network tests' images: a 2x3 layer4 feature map
TINY = dict(
    state_dim=4,
    action_dim=3,
    chunk_size=5,
    hidden_dim=32,
    ff_dim=64,
    heads=2,
    enc_layers=2,
    dec_layers=2,
    vae_enc_layers=2,
    latent_dim=4,
)


def tiny_config(**overrides) -> ACTConfig:
    return ACTConfig(**{**TINY, **overrides})


def make_model(seed: int = 0, **overrides) -> ACT:
    torch.manual_seed(seed)
    return ACT(tiny_config(**overrides))


def make_batch(cfg: ACTConfig, batch: int = 2, hw: tuple[int, int] = IMAGE_HW, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    qpos = torch.randn(batch, cfg.state_dim, generator=g)
    images = torch.randn(batch, cfg.num_cameras, 3, *hw, generator=g)
    actions = torch.randn(batch, cfg.chunk_size, cfg.action_dim, generator=g)
    is_pad = torch.zeros(batch, cfg.chunk_size, dtype=torch.bool)
    is_pad[0, -2:] = True
    return qpos, images, actions, is_pad


class InterruptAt(L.Callback):
    """Raises KeyboardInterrupt at the end of training step ``step``, as Ctrl-C would."""

    def __init__(self, step: int):
        self.step = step

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step == self.step:
            raise KeyboardInterrupt


def assert_same_weights(ckpt_a: Path, ckpt_b: Path) -> tuple[dict, dict]:
    """Asserts two Lightning checkpoints hold the same weights (to float tolerance); returns both."""
    a, b = (torch.load(p, weights_only=True) for p in (ckpt_a, ckpt_b))
    for key, value in a["state_dict"].items():
        torch.testing.assert_close(b["state_dict"][key], value, rtol=1e-5, atol=1e-6, msg=key)
    return a, b


# -- the control loop in fake time: deterministic timing, no wall-clock limits ------------------
class FakeClock:
    EPOCH = 1.7e9  # ``wall()``: seconds since the epoch, as robots stamp observations

    def __init__(self):
        self.t = 0.0

    def now(self) -> float:
        return self.t

    def wall(self) -> float:
        return self.EPOCH + self.t

    def sleep_until(self, deadline: float) -> None:
        self.t = max(self.t, deadline)


class Done:
    """A future that completes when the fake clock reaches ``at`` (with ``value``, or raising it
    when it is an exception, as a query that failed in the background would)."""

    def __init__(self, clock, at, value):
        self.clock, self.at, self.value = clock, at, value

    def done(self) -> bool:
        return self.clock.now() >= self.at

    def result(self):
        self.clock.t = max(self.clock.t, self.at)
        if isinstance(self.value, Exception):
            raise self.value
        return self.value


class TimedInference:
    """The policy's real chunk, taking ``latency_s`` of fake-clock time. The query runs on a thread; one that has
    not returned after ``hang_s`` real seconds counts as hung: its future never completes, and ``run`` (a
    synchronous query) times out as ``Inference.run`` does."""

    def __init__(self, policy, clock, latency_s, hang_s: float = 30.0):
        self.policy, self.clock, self.latency_s, self.hang_s = policy, clock, latency_s, hang_s

    def _query(self, observation):
        """The chunk, the exception it raised, or ``None`` for a query still running after ``hang_s``."""
        box = {}

        def work():
            try:
                box["value"] = self.policy.predict_chunk(observation)
            except Exception as err:  # noqa: BLE001 - delivered by the future, like a background thread's
                box["value"] = err

        thread = threading.Thread(target=work, daemon=True)
        thread.start()
        thread.join(self.hang_s)
        return box.get("value")

    def run(self, observation, timeout_s=None):
        from act.runtime.realtime import QueryTimeout

        value = self._query(observation)
        latency = math.inf if value is None else self.latency_s
        if timeout_s is not None and latency > timeout_s:  # as ``Inference.run``: the wait is bounded
            self.clock.t += timeout_s
            raise QueryTimeout(f"the query took longer than {1000 * timeout_s:.0f} ms")
        if isinstance(value, Exception):
            raise value
        self.clock.t += self.latency_s
        return value, 1000 * self.latency_s

    def start(self, observation):
        value = self._query(observation)
        if value is None:
            return Done(self.clock, math.inf, None)
        if not isinstance(value, Exception):
            value = value, 1000 * self.latency_s
        return Done(self.clock, self.clock.now() + self.latency_s, value)


class NaNQposAt(L.Callback):
    """Puts a NaN into the training batch's qpos at step ``step``, as a corrupt episode would; keeps the
    checkpoint folder's listing at that moment (name -> (size, mtime)) in ``NaNQposAt.files_then``."""

    files_then: dict[str, tuple[int, int]] = {}

    def __init__(self, step: int, folder: str):
        self.step, self.folder = step, Path(folder)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.global_step == self.step:
            NaNQposAt.files_then = {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in self.folder.iterdir()}
            batch["qpos"][0, 0] = float("nan")


class InfGradientAt(L.Callback):
    """Makes one gradient entry infinite at step ``step``, after backward (the loss stays finite)."""

    def __init__(self, step: int):
        self.step = step

    def on_after_backward(self, trainer, pl_module):
        if trainer.global_step == self.step:
            grad = next(p.grad for p in pl_module.parameters() if p.grad is not None)
            grad[(0,) * grad.dim()] = float("inf")


class NaNValidation(L.Callback):
    """Every validation batch's qpos NaN: val/l1 is NaN while training stays finite."""

    def on_validation_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0):
        batch["qpos"][:, 0] = float("nan")


def checkpoint_is_finite(path: Path) -> bool:
    """Whether every floating-point tensor in a checkpoint's state_dict is finite."""
    state = torch.load(path, weights_only=True)["state_dict"]
    return all(bool(torch.isfinite(v).all()) for v in state.values() if v.is_floating_point())


# -- a fake arm and a scripted network for the control loop (test_safety.py, test_faults.py) --------------
START = np.array([0.0, -0.96, 1.16, 0.0, -0.3, 0.0, 0.5] * 2)  # both arms in ALOHA's start pose, grippers half open
SIZE = (8, 8)  # camera frames of the fake arm


class ScriptedNetwork:
    """A predictor stand-in (``ACTPolicy`` runs it like an ONNX export): query i returns
    ``program[i]`` (the last one repeats), a function of the observed qpos giving the chunk (k, 14),
    or raises it when it is an exception."""

    format, precision = "scripted", "32-true"

    def __init__(self, program, chunk_size: int = 5):
        self.program, self.calls = list(program), 0
        self.spec = PolicySpec(
            camera_names=("top",), image_size=SIZE, chunk_size=chunk_size, state_dim=14, action_dim=14
        )

    def __call__(self, qpos, images):
        step = self.program[min(self.calls, len(self.program) - 1)]
        self.calls += 1
        if isinstance(step, Exception):
            raise step
        k = self.spec.chunk_size
        return np.asarray(step(qpos[0].astype(np.float64), k), dtype=np.float32)[None]  # (1, k, 14)


def good(q, k):  # a slow, safe motion: the left waist turns 0.01 rad per step
    return q + np.outer(np.arange(1, k + 1), np.eye(14)[0]) * 0.01


class FakeArm:
    """A robot stand-in: its qpos moves halfway to each command (plus sensor noise), each tick
    brings a new camera frame; it keeps every command it receives and counts ``stop()`` calls.

    Args:
        freeze_at: from this commanded tick on, the camera gives the same frame (a frozen camera).
        interrupt_at: observing after this many commands raises KeyboardInterrupt (Ctrl-C).
        stamp_age_s: observations carry a ``timestamp`` this old (on ``clock.wall()``).
    """

    camera_names = ["top"]
    done = False

    def __init__(self, clock=None, freeze_at=None, interrupt_at=None, stamp_age_s=None):
        self.clock, self.freeze_at, self.interrupt_at, self.stamp_age_s = clock, freeze_at, interrupt_at, stamp_age_s

    def reset(self, seed=None):
        self.rng = np.random.default_rng(seed)
        self.qpos, self.commands, self.stops = START.copy(), [], 0
        self.frame = self.rng.integers(0, 256, (*SIZE, 3), dtype=np.uint8)
        return self.observe()

    def observe(self):
        if self.interrupt_at is not None and len(self.commands) >= self.interrupt_at:
            raise KeyboardInterrupt
        if self.freeze_at is None or len(self.commands) < self.freeze_at:
            self.frame = self.rng.integers(0, 256, (*SIZE, 3), dtype=np.uint8)
        observation = {
            "qpos": self.qpos + self.rng.normal(0, 1e-5, 14),
            "qvel": np.ones(14),
            "images": {"top": self.frame},
        }
        if self.stamp_age_s is not None:
            observation["timestamp"] = self.clock.wall() - self.stamp_age_s
        return observation

    def command(self, action, tick):
        action = check_action(action)
        self.commands.append((tick, action.copy()))
        self.qpos = 0.5 * self.qpos + 0.5 * action

    def stop(self):
        self.stops += 1

    @property
    def sent(self) -> np.ndarray:
        return np.array([c for _, c in self.commands])  # (T, 14)
