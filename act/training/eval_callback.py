"""Closed-loop evaluation during training: a few rollouts every N steps."""

from __future__ import annotations

import logging
from dataclasses import asdict
from pathlib import Path
from typing import Mapping, Sequence

import lightning as L

from act.common.errors import InputError, RunError
from act.common.metrics import summarize
from act.envs.constants import MAX_REWARD
from act.eval.backends import make_eval_env
from act.eval.rollout import run_episode
from act.runtime.execution import ExecutionConfig
from act.runtime.policy import ACTPolicy

log = logging.getLogger(__name__)
METRICS = ("eval/success_rate", "eval/mean_return", *[f"eval/stage_rate_{k}" for k in range(1, 5)])


class EvaluationError(RunError):
    """Rank 0's rollouts during training failed; every rank stops with the same line."""


class EvalCallback(L.Callback):
    """Every ``every_n_steps`` training steps, roll the current policy out and log
    ``eval/success_rate`` (and ``eval/stage_rate_k``, ``eval/mean_return``) plus one video.

    Runs on rank 0 and broadcasts the result, so every rank logs the same value; if the rollouts
    fail, the failure is broadcast and every rank raises ``EvaluationError``. With
    ``save_best``, the checkpoint with the highest success rate so far (ties: the later one) is
    kept as ``<checkpoints>/best_eval.ckpt``: the "best" policy chosen by closed-loop success.

    Args:
        every_n_steps: steps between evaluations.
        num_episodes: rollouts per evaluation (seeds ``seed`` .. ``seed + num_episodes - 1``).
        seed: first evaluation seed; far from the demo seeds (0, 1, ...) and disjoint from the held-out
            seeds of ``eval.py`` (100000, ...), since ``best_eval.ckpt`` is chosen on these episodes.
        execution: ``ACTPolicy`` keyword arguments (``configs/execution/``: temporal ensembling or
            chunked, m, n_action_steps, precision, ...); default: ``ACTPolicy``'s own.
        video: write (and log to wandb, if used) a video of the first rollout.
        video_size: (H, W) of that video.
        render_quality: None: as the training data.
        episode_len: ticks per rollout; None: the task's own (400 in the simulator).
        save_best: keep ``best_eval.ckpt`` by ``eval/success_rate``.
        dirpath: folder for it (default: ``<default_root_dir>/checkpoints``).
    """

    def __init__(
        self,
        every_n_steps: int = 5000,
        num_episodes: int = 5,
        seed: int = 200000,
        execution: Mapping | None = None,
        video: bool = True,
        video_size: Sequence[int] = (240, 320),
        render_quality: str | None = None,
        episode_len: int | None = None,
        save_best: bool = True,
        dirpath: str | None = None,
    ):
        if every_n_steps <= 0 or num_episodes <= 0:
            raise InputError("every_n_steps and num_episodes must be positive")
        if episode_len is not None and episode_len <= 0:
            raise InputError(f"callbacks.eval.episode_len must be positive or null (the task's), got {episode_len}")
        self.episode_len = episode_len
        self.every_n_steps, self.num_episodes, self.seed = every_n_steps, num_episodes, seed
        self.execution = ExecutionConfig.from_cfg(execution)  # a wrong setting fails before training starts
        self.video, self.video_size, self.render_quality = video, tuple(video_size), render_quality
        self.save_best, self.dirpath = save_best, dirpath
        self.best_success: float | None = None
        self._env = None

    def state_dict(self) -> dict:
        return {"best_success": self.best_success}

    def load_state_dict(self, state_dict: dict) -> None:
        self.best_success = state_dict.get("best_success")

    def _rollouts(self, trainer: L.Trainer, module) -> dict:
        task = module.net.task
        if self._env is None:
            quality = self.render_quality or module.net.render_quality or "paper"
            self._env = make_eval_env(
                "native", task, module.net.camera_names, module.net.image_size, quality, self.episode_len
            )
        policy = ACTPolicy(module, device=module.device, **asdict(self.execution))
        video_dir = Path(trainer.default_root_dir) / "eval_videos"
        results = []
        for i in range(self.num_episodes):
            video = video_dir / f"step{trainer.global_step}.mp4" if self.video and i == 0 else None
            results.append(run_episode(self._env, policy, self.seed + i, video, video_size=self.video_size))
        summary = summarize([r.max_reward for r in results], max_reward=MAX_REWARD)
        summary["mean_return"] = sum(r.total_return for r in results) / len(results)
        summary["video"] = results[0].video
        return summary

    def _evaluate(self, trainer: L.Trainer, module) -> tuple[dict, Exception | None]:
        """Rank 0's rollouts as plain values to broadcast, or the error they raised (and the exception)."""
        was_training = module.training
        try:
            summary = self._rollouts(trainer, module)
        except Exception as err:  # noqa: BLE001 - raised again on every rank, after the broadcast
            return {"error": f"{type(err).__name__}: {err}"}, err
        finally:
            module.train(was_training)
        stages = [summary["stage_rates"][str(k)] for k in range(1, 5)]
        values = [summary["success_rate"], summary["mean_return"], *stages]  # in the order of METRICS
        return {"values": [float(v) for v in values], "video": summary["video"]}, None

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch, batch_idx: int):
        step = trainer.global_step
        if step == 0 or step % self.every_n_steps:
            return
        outcome, cause = {}, None
        if trainer.is_global_zero:
            outcome, cause = self._evaluate(trainer, pl_module)
        # Every rank waits here for rank 0's rollouts, for at most the process group's timeout
        # (configs/trainer/ddp.yaml). A failure is broadcast too: had rank 0 raised alone, the others
        # would wait here until that timeout, then fail with no word of why.
        outcome = trainer.strategy.broadcast(outcome, src=0)
        if "error" in outcome:
            raise EvaluationError(
                f"closed-loop evaluation at step {step} failed on rank 0 ({outcome['error']}), so "
                "training stopped on every rank; fix its cause (on a machine without a display: "
                "MUJOCO_GL=egl or osmesa) or train without callbacks=eval and evaluate the "
                "checkpoints with scripts/eval.py, then resume from the last checkpoint"
            ) from cause
        for name, value in zip(METRICS, outcome["values"]):
            pl_module.log(name, value, batch_size=1)
        success = outcome["values"][0]
        if self.save_best and (self.best_success is None or success >= self.best_success):
            self.best_success = success
            folder = Path(self.dirpath or Path(trainer.default_root_dir) / "checkpoints")
            trainer.save_checkpoint(folder / "best_eval.ckpt")  # every rank calls it; rank 0 writes
        video = outcome["video"] if trainer.is_global_zero else None
        if video is not None:
            for logger in trainer.loggers:
                if hasattr(logger, "log_video"):  # WandbLogger
                    logger.log_video("eval/video", [video], step=step, format=["mp4"])
            log.info("eval at step %d: success %.2f, video %s", step, success, video)
