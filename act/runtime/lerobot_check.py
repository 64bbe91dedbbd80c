"""The comparisons behind ``scripts/check_lerobot_policy.py``: LeRobot's ACT and ours on the same observations.

Both directions, each judged by LeRobot itself (``lerobot_judge.py``, in LeRobot's own Python):

- theirs in ours: LeRobot writes a policy (seeded noise in every weight and statistic), ``read_lerobot_policy``
  loads it, and our ``ACTPolicy``, run with the execution LeRobot's config records, must give LeRobot's
  ``select_action`` tick for tick;
- ours in theirs: ``write_lerobot_policy`` writes our network (seeded noise likewise), LeRobot loads it with
  ``strict=True`` and its processors, and its ``select_action`` must give ours, with no warning logged.

The observations are a few ticks of our simulator (frames and qpos of a recorded scripted demo). Each variant
(1 and 2 cameras, with and without the CVAE, whole chunks and temporal ensembling) is one check per direction,
reported to ``check(name, ok, detail)``.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from act.data.lerobot.check import judge_env, run_judge
from act.model.act import ACTConfig
from act.model.lerobot_policy import read_lerobot_policy, write_lerobot_policy
from act.model.normalized import NormalizedACT
from act.model.spec import PolicySpec

JUDGE = Path(__file__).with_name("lerobot_judge.py")  # run by LeRobot's own Python (``run_judge``)
Check = Callable[..., bool]
TOLERANCE = 1e-4  # fp32, both sides on the CPU


@dataclass(frozen=True)
class PolicyVariant:
    """One network and execution to compare."""

    name: str
    cameras: tuple[str, ...]
    use_vae: bool
    temporal_ensemble_coeff: float | None  # None: whole chunks of n_action_steps
    n_action_steps: int


VARIANTS = (
    PolicyVariant("1 camera, CVAE, chunks of 5", ("top",), True, None, 5),
    PolicyVariant("1 camera, no CVAE, ensembling m=0.01", ("top",), False, 0.01, 1),
    PolicyVariant("2 cameras, CVAE, ensembling m=0.01", ("top", "angle"), True, 0.01, 1),
    PolicyVariant("2 cameras, no CVAE, chunks of 10", ("top", "angle"), False, None, 10),
)
SIZES = {"chunk_size": 10, "dim_model": 64, "n_heads": 4, "dim_feedforward": 96, "n_encoder_layers": 2,
         "n_decoder_layers": 2, "n_vae_encoder_layers": 2, "latent_dim": 8}  # fmt: skip


def statistics(cameras, state_dim: int, action_dim: int, seed: int) -> dict:
    """Seeded, non-trivial statistics in LeRobot's layout (``{feature: {"mean", "std"}}``, images (3, 1, 1))."""
    rng = np.random.default_rng(seed)
    stats = {
        "observation.state": {"mean": rng.normal(0, 0.3, state_dim), "std": rng.uniform(0.1, 1.0, state_dim)},
        "action": {"mean": rng.normal(0, 0.3, action_dim), "std": rng.uniform(0.1, 1.0, action_dim)},
    }
    image = {"mean": rng.uniform(0.3, 0.6, (3, 1, 1)), "std": rng.uniform(0.15, 0.3, (3, 1, 1))}
    stats.update({f"observation.images.{cam}": image for cam in cameras})
    return {k: {s: np.asarray(v, dtype=np.float32).tolist() for s, v in d.items()} for k, d in stats.items()}


def our_actions(net: NormalizedACT, execution: dict, inputs: dict, cameras) -> tuple[np.ndarray, np.ndarray]:
    """(actions per tick (T, A), the first tick's chunk (k, A)) of our ``ACTPolicy`` in fp32 on ``inputs``."""
    from act.runtime.policy import ACTPolicy

    policy = ACTPolicy(net, precision="32-true", **execution)
    policy.reset()
    actions, chunk = [], None
    for t in range(len(inputs["qpos"])):
        observation = {"qpos": inputs["qpos"][t], "images": {cam: inputs[f"images_{cam}"][t] for cam in cameras}}
        if t == 0:
            chunk = policy.predict_chunk(observation)
        actions.append(policy.select_action(observation))
    return np.stack(actions), np.asarray(chunk)


def noisy_network(variant: PolicyVariant, image_size, state_dim: int, action_dim: int, seed: int) -> NormalizedACT:
    """Our network for ``variant``, every weight and BatchNorm buffer moved by seeded noise, with statistics."""
    config = ACTConfig(
        state_dim=state_dim,
        action_dim=action_dim,
        chunk_size=SIZES["chunk_size"],
        hidden_dim=SIZES["dim_model"],
        ff_dim=SIZES["dim_feedforward"],
        heads=SIZES["n_heads"],
        enc_layers=SIZES["n_encoder_layers"],
        dec_layers=SIZES["n_decoder_layers"],
        vae_enc_layers=SIZES["n_vae_encoder_layers"],
        latent_dim=SIZES["latent_dim"],
        use_vae=variant.use_vae,
        num_cameras=len(variant.cameras),
    )
    raw = statistics(variant.cameras, state_dim, action_dim, seed)
    stats = {
        "qpos_mean": raw["observation.state"]["mean"],
        "qpos_std": raw["observation.state"]["std"],
        "action_mean": raw["action"]["mean"],
        "action_std": raw["action"]["std"],
    }
    spec = PolicySpec("transfer_cube", variant.cameras, tuple(image_size), "fast", stats)  # the judge's frames
    torch.manual_seed(seed)
    net = NormalizedACT(config, spec, channels_last=False)
    with torch.no_grad():
        for name, tensor in list(net.model.named_parameters()) + list(net.model.named_buffers()):
            if name.endswith("running_var"):
                tensor.uniform_(0.5, 1.5)
            elif tensor.is_floating_point() and not name.endswith(("vae_pos", "freqs")):
                tensor.add_(torch.randn_like(tensor) * 0.05)
    return net.eval()


def run_judge_async(python: str, *args: str, cwd: Path) -> subprocess.Popen:
    """``lerobot_judge.py <args>`` started in LeRobot's environment, offline, its caches inside ``cwd`` (its output
    piped: ``communicate()`` it)."""
    return subprocess.Popen([python, str(JUDGE), *args], cwd=cwd, env=judge_env(cwd), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip


def _lerobot_runs(python: str, out: Path, folder: Path):
    """LeRobot loads the policy in ``folder`` and runs it over ``out/inputs.npz`` into ``folder/lerobot.npz``."""
    return run_judge(
        python, "run", str(folder), str(out / "inputs.npz"), str(folder / "lerobot.npz"), cwd=out, judge=JUDGE
    )


def _compare(ours: tuple[np.ndarray, np.ndarray], theirs, ticks: int) -> tuple[bool, str]:
    actions, chunk = ours
    diff = max(float(np.abs(actions - theirs["actions"]).max()), float(np.abs(chunk - theirs["chunk"]).max()))
    warnings = [str(w) for w in theirs["warnings"]]
    ok = diff <= TOLERANCE and not warnings and len(theirs["actions"]) == ticks
    detail = f"max |difference| {diff:.1e} over {ticks} ticks and the first chunk"
    return ok, detail + (f"; LeRobot warned: {warnings[0]}" if warnings else "")


def check_theirs_in_ours(check: Check, python: str, out: Path, variant: PolicyVariant, inputs: dict, seed: int) -> None:
    """LeRobot writes ``variant``; ours loads it and must act as LeRobot's ``select_action`` does."""
    state_dim, action_dim = inputs["qpos"].shape[1], inputs["action_dim"]
    folder, name = out / f"theirs_{seed}", f"LeRobot's policy in ours: {variant.name}"
    settings = {
        "cameras": list(variant.cameras),
        "image_size": list(inputs[f"images_{variant.cameras[0]}"].shape[1:3]),
        "state_dim": state_dim,
        "action_dim": action_dim,
        "seed": seed,
        "stats": statistics(variant.cameras, state_dim, action_dim, seed),
        "config": {
            **SIZES,
            "use_vae": variant.use_vae,
            "temporal_ensemble_coeff": variant.temporal_ensemble_coeff,
            "n_action_steps": variant.n_action_steps,
        },
    }
    (out / f"settings_{seed}.json").write_text(json.dumps(settings))
    made = run_judge(python, "make", str(out / f"settings_{seed}.json"), str(folder), cwd=out, judge=JUDGE)
    ran = _lerobot_runs(python, out, folder) if made.returncode == 0 else made
    if ran.returncode != 0:
        check(name, False, ran.stderr.strip()[-1500:])
        return
    net, execution = read_lerobot_policy(folder)
    ok, detail = _compare(
        our_actions(net, execution, inputs, variant.cameras), np.load(folder / "lerobot.npz"), len(inputs["qpos"])
    )
    check(name, ok, detail)


def check_ours_in_theirs(check: Check, python: str, out: Path, variant: PolicyVariant, inputs: dict, seed: int) -> None:
    """Ours is written as a LeRobot folder; LeRobot loads it strictly and must act as our ``ACTPolicy`` does."""
    folder, name = out / f"ours_{seed}", f"our policy in LeRobot: {variant.name}"
    image_size = inputs[f"images_{variant.cameras[0]}"].shape[1:3]
    net = noisy_network(variant, image_size, inputs["qpos"].shape[1], inputs["action_dim"], seed)
    execution = {"temporal_ensemble_coeff": variant.temporal_ensemble_coeff, "n_action_steps": variant.n_action_steps}
    write_lerobot_policy(net, folder, variant.temporal_ensemble_coeff, variant.n_action_steps)
    ran = _lerobot_runs(python, out, folder)
    if ran.returncode != 0:
        check(name, False, ran.stderr.strip()[-1500:])
        return
    ok, detail = _compare(
        our_actions(net, execution, inputs, variant.cameras), np.load(folder / "lerobot.npz"), len(inputs["qpos"])
    )
    check(name, ok, detail)
