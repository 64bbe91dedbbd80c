"""LeRobot's side of ``scripts/check_lerobot_policy.py``: runs under LeRobot's own Python, never ours, by path.

    $LEROBOT_PYTHON act/runtime/lerobot_judge.py make <settings.json> <folder>   # a LeRobot ACT policy, saved
    $LEROBOT_PYTHON act/runtime/lerobot_judge.py run <folder> <inputs.npz> <out.npz>  # LeRobot runs a policy folder
    $LEROBOT_PYTHON act/runtime/lerobot_judge.py evaluate <folder> <task> <episodes> <first seed> <render quality> \
        <episode length> <out.json>   # LeRobot's evaluation loop in our simulator

``make`` builds ``ACTPolicy`` from the settings (features, sizes, execution, statistics), fills every weight and
frozen-BatchNorm buffer with seeded noise (a fresh network has identity BatchNorm and zero biases, which would hide
a mis-mapped statistic or bias), and saves it with its pre/post-processors as a LeRobot training run does.

``run`` loads a folder as a LeRobot user would: ``ACTPolicy.from_pretrained(folder, strict=True)`` (a missing or
unexpected weight is an error, not a warning) and ``make_pre_post_processors(config, pretrained_path=folder)``,
then feeds the observations of ``inputs.npz`` (``qpos`` (T, D), ``images_<camera>`` (T, H, W, 3) uint8) one tick
at a time as ``lerobot-eval`` does (images to [0, 1] CHW float, preprocessor, ``select_action``, postprocessor),
and saves every action, the first tick's whole chunk, and any warning LeRobot logged.

``evaluate`` scores a policy folder with LeRobot's own evaluation loop (``lerobot.scripts.lerobot_eval.eval_policy``:
its rollout, processors, ``select_action`` and success flag) in our simulator, for episodes seeded ``first seed``,
``first seed + 1``, ... as ``lerobot-eval --seed=<first seed>`` seeds them: the same environment and seeds as
``eval.py``, so the two harnesses differ only in themselves. Not gym-aloha: gym-aloha 0.1.5 renders its
observations at 480x640 whatever size it is given (``tasks/sim.py`` renders at a fixed size; its
``observation_width`` changes only the declared space, which then breaks LeRobot's vector env), and LeRobot
0.6.1's ``AlohaEnv`` does not pass the size on at all. This command imports our ``act.envs`` (MuJoCo and NumPy,
no torch) by path; ``make`` and ``run`` import nothing of ours.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import numpy as np

ROOT = str(Path(__file__).resolve().parents[2])  # the repository, for act.envs in ``evaluate``


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(f"{record.name}: {record.getMessage()}")


def make(settings_path: str, folder: str) -> None:
    import torch
    from lerobot.configs.types import FeatureType, PolicyFeature
    from lerobot.policies.act.configuration_act import ACTConfig
    from lerobot.policies.act.modeling_act import ACTPolicy
    from lerobot.policies.factory import make_pre_post_processors

    s = json.loads(open(settings_path).read())
    h, w = s["image_size"]
    inputs = {"observation.state": PolicyFeature(FeatureType.STATE, (s["state_dim"],))}
    for cam in s["cameras"]:
        inputs[f"observation.images.{cam}"] = PolicyFeature(FeatureType.VISUAL, (3, h, w))
    config = ACTConfig(
        input_features=inputs,
        output_features={"action": PolicyFeature(FeatureType.ACTION, (s["action_dim"],))},
        pretrained_backbone_weights=None,
        device="cpu",
        **s["config"],
    )
    torch.manual_seed(s["seed"])
    policy = ACTPolicy(config)
    with torch.no_grad():
        for name, tensor in list(policy.named_parameters()) + list(policy.named_buffers()):
            if "running_var" in name:
                tensor.uniform_(0.5, 1.5)
            elif name.endswith("vae_encoder_pos_enc"):
                continue  # the fixed sinusoid
            elif tensor.is_floating_point():
                tensor.add_(torch.randn_like(tensor) * 0.05)
    stats = {
        key: {"mean": torch.tensor(v["mean"], dtype=torch.float32), "std": torch.tensor(v["std"], dtype=torch.float32)}
        for key, v in s["stats"].items()
    }
    pre, post = make_pre_post_processors(config, dataset_stats=stats)
    policy.save_pretrained(folder)
    pre.save_pretrained(folder)
    post.save_pretrained(folder)
    print(f"lerobot wrote an ACT policy to {folder}: {sum(p.numel() for p in policy.parameters())} weights")


def run(folder: str, inputs_path: str, out: str) -> None:
    import torch
    from lerobot.policies.act.modeling_act import ACTPolicy
    from lerobot.policies.factory import make_pre_post_processors

    collect = _Collect()
    logging.getLogger().addHandler(collect)
    policy = ACTPolicy.from_pretrained(folder, strict=True)
    policy.eval()
    pre, post = make_pre_post_processors(policy.config, pretrained_path=folder)
    data = np.load(inputs_path)
    cameras = [k[len("observation.images.") :] for k in policy.config.image_features]
    actions, chunk = [], None
    policy.reset()
    with torch.no_grad():
        for t in range(len(data["qpos"])):
            batch = {"observation.state": torch.from_numpy(data["qpos"][t]).float()[None]}
            for cam in cameras:
                frame = torch.from_numpy(data[f"images_{cam}"][t]).permute(2, 0, 1).float() / 255.0
                batch[f"observation.images.{cam}"] = frame[None]
            batch = pre(batch)
            if t == 0:
                chunk = post(policy.predict_action_chunk(batch))[0].numpy()
            actions.append(post(policy.select_action(batch))[0].numpy())
    np.savez(out, actions=np.stack(actions), chunk=chunk, warnings=np.array(collect.lines, dtype=str))
    print(f"lerobot ran {folder} over {len(actions)} ticks ({len(collect.lines)} warnings)")


def _native_env(task: str, cameras: list[str], image_size, render_quality: str, episode_len: int):
    """Our simulator (``act.envs``: MuJoCo and NumPy, no torch) as the gymnasium environment LeRobot's evaluation
    expects of gym-aloha: ``agent_pos`` and ``pixels`` observations, ``is_success`` once reward 4 is reached
    (the episode then ends, as gym-aloha's does), cut at ``episode_len`` steps."""
    import gymnasium as gym

    sys.path.insert(0, ROOT)
    from act.envs import make_env

    height, width = image_size

    class Native(gym.Env):
        metadata = {"render_modes": ["rgb_array"], "render_fps": 50}

        def __init__(self):
            self.env = make_env(task, "joint", cameras=cameras, image_size=(height, width),
                                render_quality=render_quality, episode_len=episode_len)  # fmt: skip
            pixels = {c: gym.spaces.Box(0, 255, (height, width, 3), np.uint8) for c in cameras}
            self.observation_space = gym.spaces.Dict(
                {"pixels": gym.spaces.Dict(pixels), "agent_pos": gym.spaces.Box(-np.inf, np.inf, (14,), np.float64)}
            )
            self.action_space = gym.spaces.Box(-np.inf, np.inf, (14,), np.float32)
            self.render_mode, self._max_episode_steps, self.task_description = "rgb_array", episode_len, ""

        def _observation(self, step):
            images = step.observation["images"]
            return {"pixels": {c: images[c] for c in cameras}, "agent_pos": np.asarray(step.observation["qpos"])}

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            return self._observation(self.env.reset(seed=seed)), {"is_success": False}

        def step(self, action):
            step = self.env.step(np.asarray(action, dtype=np.float64))
            success = bool((step.reward or 0) >= self.env.task.max_reward)
            return (
                self._observation(step),
                float(step.reward or 0),
                success,
                step.last() and not success,
                {"is_success": success},
            )

        def render(self):
            return self.env.render("top")

    return gym.vector.SyncVectorEnv([Native])


def lerobot_evaluate(
    folder: str, task: str, episodes: str, first_seed: str, render_quality: str, length: str, out: str
) -> None:
    import torch
    from lerobot.envs.configs import AlohaEnv
    from lerobot.envs.factory import make_env_pre_post_processors
    from lerobot.policies.act.modeling_act import ACTPolicy
    from lerobot.policies.factory import make_pre_post_processors
    from lerobot.scripts.lerobot_eval import eval_policy

    policy = ACTPolicy.from_pretrained(folder, strict=True)
    policy.eval()
    cameras = [k[len("observation.images.") :] for k in policy.config.image_features]
    _, height, width = policy.config.image_features[f"observation.images.{cameras[0]}"].shape
    env = _native_env(task, cameras, (height, width), render_quality, int(length))
    pre, post = make_pre_post_processors(policy.config, pretrained_path=folder)
    env_pre, env_post = make_env_pre_post_processors(env_cfg=AlohaEnv(), policy_cfg=policy.config)
    with torch.no_grad():
        info = eval_policy(
            env, policy, env_pre, env_post, pre, post, n_episodes=int(episodes), start_seed=int(first_seed)
        )
    env.close()
    per_episode = [{"seed": e["seed"], "success": bool(e["success"]), "max_reward": float(e["max_reward"])}
                   for e in info["per_episode"]]  # fmt: skip
    with open(out, "w") as f:
        json.dump({"task": task, "image_size": [height, width], "episodes": per_episode}, f)
    wins = sum(e["success"] for e in per_episode)
    print(f"lerobot evaluated {folder} on {task}: {wins}/{len(per_episode)} ({width}x{height} frames)")


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    {"make": make, "run": run, "evaluate": lerobot_evaluate}[command](*args)
