"""The whole pipeline in one command: record scripted demos, train ACT, evaluate it, plot, summarise.

    python scripts/demo.py                                            # `make demo`: the CPU quickstart
    python scripts/demo.py trainer.max_steps=2000 demo.dir=outputs/demo_short
    python scripts/demo.py experiment=paper task=insertion trainer=gpu  # the paper's setting, on a GPU

Settings: configs/demo.yaml and the experiment's ``demo:`` block (configs/experiment/); the
evaluation is configs/eval.yaml with the run's ``execution`` and ``demo.eval`` applied. Rerunning
after an interruption keeps the valid demos, resumes training exactly from its last checkpoint,
and repeats neither a finished training nor an evaluation already done for that checkpoint.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import hydra
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf, open_dict

from act.budget import estimate_evaluation, estimate_training, minutes
from act.callbacks import CheckpointSaveError, DivergenceError
from act.data.episodes import DatasetError
from act.data.record import RecordSettings, describe, record_with_bar
from act.eval.harness import build_spec, evaluate_and_save, summary_line
from act.plot import plot_run
from act.precision import device_type_of, resolve_precision
from act.train import ConfigError, train
from common.checks import check_setting
from common.io import write_json
from common.lock import FolderInUseError
from envs import make_env
from envs.constants import EPISODE_LEN

DEMO_KEYS = ("dir", "num_demos", "demo_seed", "record_workers", "checkpoint", "eval")


def check_demo_settings(cfg: DictConfig) -> DictConfig:
    """The ``demo:`` block, complete and consistent (eval seeds disjoint from every demo seed)."""
    demo = cfg.get("demo")
    if demo is None:
        raise ConfigError("this config has no `demo:` block; use an experiment that defines one "
                          "(experiment=cpu_quickstart or paper)")
    missing = [k for k in DEMO_KEYS if k not in demo]
    if missing:
        raise ConfigError(f"demo.{missing[0]} is missing (the demo block needs: {', '.join(DEMO_KEYS)})")
    if int(demo.num_demos) <= 0:
        raise ConfigError(f"demo.num_demos must be positive, got {demo.num_demos}")
    check_setting("demo.checkpoint", demo.checkpoint, ("last", "best"))
    return demo


def evaluation_config(cfg: DictConfig, demo: DictConfig, out_dir: Path) -> DictConfig:
    """configs/eval.yaml with the run's ``execution`` and ``demo.eval`` applied, checked: every key
    is an eval.py setting, and the evaluation seeds are disjoint from every demo seed. The
    checkpoint (``ckpt_path``) is filled in after training."""
    eval_cfg = hydra.compose(config_name="eval")
    unknown = sorted(set(demo.eval) - set(eval_cfg))
    if unknown:
        raise ConfigError(f"demo.eval.{unknown[0]} is not an eval.py setting (configs/eval.yaml); remove it")
    eval_cfg = OmegaConf.merge(eval_cfg, {"execution": cfg.execution}, demo.eval,
                               {"out_dir": str(out_dir),
                                "logger": {"wandb": "wandb" in (cfg.get("logger") or {})}})
    if int(eval_cfg.num_episodes) <= 0:
        raise ConfigError(f"demo.eval.num_episodes must be positive, got {eval_cfg.num_episodes}")
    # The recorder tries at most 2 * num_demos + 20 seeds from demo_seed on.
    demo_lo, demo_hi = int(demo.demo_seed), int(demo.demo_seed) + 2 * int(demo.num_demos) + 20
    eval_lo, eval_hi = int(eval_cfg.seed), int(eval_cfg.seed) + int(eval_cfg.num_episodes)
    if eval_lo < demo_hi and demo_lo < eval_hi:
        raise ConfigError(f"evaluation seeds {eval_lo}-{eval_hi - 1} may overlap the demo seeds {demo_lo}-"
                          f"{demo_hi - 1}; move demo.eval.seed (e.g. to 100000)")
    return eval_cfg


def checkpoint_step(path: Path) -> int:
    """The global step a Lightning checkpoint was saved at (0 if there is no file)."""
    if not path.is_file():
        return 0
    try:
        return int(torch.load(path, map_location="cpu", weights_only=True, mmap=True)["global_step"])
    except Exception as err:  # noqa: BLE001 - any unreadable checkpoint gets the same advice
        raise ConfigError(f"cannot read {path} ({err}); delete it to train from the start") from err


def print_plan(cfg: DictConfig, demo: DictConfig, eval_cfg: DictConfig, steps_left: int) -> dict:
    """Time a few training steps, queries and sim steps here; print what training and evaluation
    will take on this machine, before they run. CPU runs only (GPU timings need their own warm-up)."""
    if device_type_of(cfg.trainer.get("accelerator")) != "cpu":
        return {}
    module = instantiate(cfg.policy, deployment={"camera_names": list(cfg.task.cameras),
                                                 "image_size": list(cfg.task.image_size)}, _convert_="all")
    train_precision = resolve_precision(str(cfg.trainer.precision), "cpu").precision
    estimates = []
    if steps_left:
        estimates.append(estimate_training(module, int(cfg.data.batch_size), steps_left, train_precision))
    execution = eval_cfg.execution
    chunked = execution.temporal_ensemble_coeff is None
    query_every = int(execution.n_action_steps or (cfg.policy.model.chunk_size if chunked else 1))
    episode_len = int(eval_cfg.episode_len or EPISODE_LEN)
    env = make_env(cfg.task.name, "joint", cameras=list(cfg.task.cameras), image_size=tuple(cfg.task.image_size),
                   render_quality=cfg.task.render_quality, episode_len=episode_len)
    estimates.append(estimate_evaluation(module, resolve_precision(str(execution.precision), "cpu").precision, env,
                                         int(eval_cfg.num_episodes), episode_len, query_every,
                                         int(eval_cfg.batch_envs), int(eval_cfg.workers)))
    total = sum(e.seconds for e in estimates)
    print("      plan, timed on this machine just now:")
    for e in estimates:
        print(f"        {e.stage:5s} ~{minutes(e.seconds)}  ({e.detail})")
    line = f"        expected to finish in ~{minutes(total)}"
    if os.environ.get("DEMO_START"):
        since_make = time.time() - float(os.environ["DEMO_START"]) + total
        line += f" ({minutes(since_make)} since `make demo` started)"
        budget = demo.get("budget_min")
        if budget and since_make > 60 * float(budget):
            line += (f"\n        note: over this quickstart's {budget}-minute budget on this CPU; the README's "
                     "'The CPU quickstart' gives the settings and times per CPU class")
    print(line, flush=True)
    return {e.stage: e.seconds for e in estimates}


def run(cfg: DictConfig) -> dict:
    demo = check_demo_settings(cfg)
    root = Path(demo.dir)
    eval_dir = root / "eval"
    eval_cfg = evaluation_config(cfg, demo, eval_dir)  # checked before anything runs
    times: dict[str, float] = {}
    max_steps = int(cfg.trainer.max_steps)

    # 1. Demonstrations: keeps the valid episodes already there, records the rest.
    print(f"[1/4] demonstrations: {demo.num_demos} scripted {cfg.task.name} episodes -> {cfg.data.dataset_dir}")
    start = time.perf_counter()
    settings = RecordSettings(task=cfg.task.name, num_episodes=int(demo.num_demos), out_dir=Path(cfg.data.dataset_dir),
                              cameras=tuple(cfg.task.cameras), image_size=tuple(cfg.task.image_size),
                              render_quality=cfg.task.render_quality, workers=int(demo.record_workers),
                              seed=int(demo.demo_seed))
    recorded = record_with_bar(settings)
    times["record"] = time.perf_counter() - start
    print(f"      {recorded.kept} kept + {recorded.recorded} recorded in {minutes(times['record'])}")

    # 2. Training: resumes from the latest checkpoint; a finished run is not repeated.
    ckpt_dir = Path(cfg.out_dir) / "checkpoints"
    last = ckpt_dir / "last.ckpt"
    resume_from, done = max(((p, checkpoint_step(p)) for p in (last, ckpt_dir / "interrupted.ckpt")),
                            key=lambda item: item[1])
    plan = print_plan(cfg, demo, eval_cfg, max(0, max_steps - done))
    start = time.perf_counter()
    train_metrics: dict = {}
    if done >= max_steps:
        print(f"[2/4] training: already at step {done} of {max_steps} in {cfg.out_dir}; not repeated")
    else:
        resume = f", resuming from step {done}" if done else ""
        print(f"[2/4] training: {max_steps} steps{resume} -> {cfg.out_dir}")
        with open_dict(cfg):
            cfg.ckpt_path = str(resume_from) if done else cfg.ckpt_path
        train_metrics = train(cfg)
    times["train"] = time.perf_counter() - start
    step = checkpoint_step(last)
    ckpt, ckpt_step = last, step
    if demo.checkpoint == "best":
        best = sorted(ckpt_dir.glob("best-*.ckpt"), key=lambda p: p.stat().st_mtime)
        if not best:
            raise ConfigError(f"demo.checkpoint=best but {ckpt_dir} has no best-*.ckpt (validation never ran)")
        ckpt = best[-1]
        ckpt_step = checkpoint_step(ckpt)
    print(f"      step {step} in {minutes(times['train'])}; evaluating {ckpt}")

    # 3. Closed-loop evaluation on seeds disjoint from the demos.
    eval_cfg.ckpt_path = str(ckpt)
    spec, described = build_spec(eval_cfg)
    described.update(ckpt_step=ckpt_step)
    metrics_path = eval_dir / "metrics.json"
    previous = json.loads(metrics_path.read_text()) if metrics_path.is_file() else {}
    start = time.perf_counter()
    if previous and all(previous.get(k) == v for k, v in described.items()) \
            and previous.get("num_episodes") == len(spec.seeds):
        print(f"[3/4] evaluation: already done for this checkpoint ({metrics_path}); not repeated")
        metrics = previous
    else:
        print(f"[3/4] evaluation: {len(spec.seeds)} episodes, seeds {spec.seeds[0]}-{spec.seeds[-1]}, "
              f"{described['execution']} -> {eval_dir}")
        metrics, _ = evaluate_and_save(eval_cfg, spec, described)
    times["eval"] = time.perf_counter() - start

    # 4. Plot and summary.
    print("[4/4] plot and summary")
    csv_logs = sorted((Path(cfg.out_dir) / "csv").glob("**/metrics.csv"))
    plot = None
    if csv_logs:
        plot = plot_run(csv_logs[-1], metrics, root / "curves.png",
                        title=f"ACT {cfg.task.name}: {step} steps, {demo.num_demos} demos, "
                              f"{cfg.task.image_size[0]}x{cfg.task.image_size[1]}")
    total_since_make = None
    if os.environ.get("DEMO_START"):
        total_since_make = time.time() - float(os.environ["DEMO_START"])
    summary = {"task": cfg.task.name, "success_rate": metrics["success_rate"],
               "success_rate_ci95": metrics["success_rate_ci95"], "successes": metrics["successes"],
               "num_episodes": metrics["num_episodes"], "stage_rates": metrics["stage_rates"],
               "wall_time_s": times, "wall_time_since_make_s": total_since_make, "planned_s": plan,
               "train_steps": step, "train_metrics": train_metrics, "checkpoint": str(ckpt),
               "metrics": str(metrics_path), "videos": metrics.get("videos", []),
               "plot": str(plot) if plot else None, "recording": describe(settings, recorded)}
    write_json(root / "summary.json", summary)

    print("\n" + "=" * 100)
    print(summary_line(metrics))
    print(f"wall time: record {minutes(times['record'])} | train {minutes(times['train'])} | "
          f"eval {minutes(times['eval'])}" + (f" | total since `make demo` {minutes(total_since_make)}"
                                              if total_since_make is not None else ""))
    print(f"checkpoint: {ckpt}\nmetrics:    {metrics_path}\ntrain log:  {csv_logs[-1] if csv_logs else '-'}")
    print(f"plot:       {plot}\nvideos:     {', '.join(metrics.get('videos', [])) or '-'}")
    print(f"summary:    {root / 'summary.json'}")
    print("=" * 100)
    return summary


@hydra.main(config_path="../configs", config_name="demo", version_base="1.3")
def main(cfg: DictConfig) -> None:
    try:
        run(cfg)
    except (ConfigError, DatasetError, ValueError, FileNotFoundError, CheckpointSaveError, DivergenceError,
            FolderInUseError) as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted: rerun the same command to continue (demos and checkpoints are kept)", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
