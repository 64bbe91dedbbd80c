"""``scripts/latent_probe.py``: what a trained ACT does with its CVAE latent z (issue 44, act/eval/latent.py).

    python scripts/latent_probe.py ckpt_path=outputs/demo/train/checkpoints/last.ckpt dataset_dir=datasets/probe

Settings from configs/latent_probe.yaml, checked before anything runs. The offline part (latent use, L1 under
z = 0, the posterior mean and N(0, I) draws) goes to ``offline.json`` and ``latent.png``; each closed-loop mode
to ``<mode>.json``; both are kept, so a rerun into the same ``out_dir`` goes on where it stopped. ``probe.md``
holds the tables.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from act.apps.adapters.evaluation import checkpoint_path
from act.common.checks import check_setting, is_integer
from act.common.errors import InputError, MissingFileError
from act.common.io import atomic_path, write_json
from act.data.episodes import EpisodeIndex
from act.eval.latent import ACTIVE_VAR, LATENT_MODES, closed_loop, offline_probe
from act.model.checkpoint import load_network
from act.pipeline.plot import plot_latent
from act.runtime.execution import ExecutionConfig


def main(cfg: DictConfig) -> dict:
    """The offline probe and each closed-loop mode of ``cfg`` (read back where already written); writes
    ``probe.md`` and returns {"offline": ..., "closed_loop": {mode: ...}}."""
    path, index, execution = check(cfg)
    out = Path(cfg.out_dir)
    net = load_network(path)
    offline = cached(out / "offline.json", lambda: offline_part(cfg, net, index))
    plot_latent(offline, out / "latent.png", f"{path}")
    offline_text = offline_markdown(offline)
    print(offline_text)
    loops = {}
    for mode in cfg.modes if cfg.num_episodes else []:
        loops[mode] = cached(out / f"{mode}.json", lambda mode=mode: loop_part(cfg, net, mode, execution))
        print(f"closed loop, z {mode}: success {loops[mode]['success_rate']:.2f}")
    loop_text = closed_loop_markdown(loops, str(path))
    with atomic_path(out / "probe.md") as tmp:
        tmp.write_text(offline_text + "\n" + loop_text)
    print(loop_text)
    return {"offline": offline, "closed_loop": loops}


def check(cfg: DictConfig) -> tuple[Path, EpisodeIndex, dict]:
    """The checkpoint's path, the held-out demonstrations' index and the execution settings, every setting
    checked first (one line naming it and the fix)."""
    path = checkpoint_path(cfg.ckpt_path)
    if path.suffix != ".ckpt":
        raise InputError(f"ckpt_path must be a training checkpoint (.ckpt): an export has no CVAE encoder, got {path}")
    if cfg.dataset_dir is None:
        raise InputError("give dataset_dir=<demonstrations the checkpoint did not train on> (scripts/record_demos.py)")
    if not Path(cfg.dataset_dir).is_dir():
        raise MissingFileError(f"dataset_dir {cfg.dataset_dir} does not exist: record it with scripts/record_demos.py")
    for name, low in (("stride", 1), ("draws", 1), ("batch_size", 1), ("num_episodes", 0), ("seed", 0)):
        if not is_integer(cfg[name]) or cfg[name] < low:
            raise InputError(f"{name} must be an integer >= {low}, got {cfg[name]!r}")
    for mode in cfg.modes:
        check_setting("modes", mode, LATENT_MODES)
    settings = ExecutionConfig(**OmegaConf.to_container(cfg.execution, resolve=True))  # checks them
    return path, EpisodeIndex(cfg.dataset_dir), asdict(settings)


def cached(path: Path, compute) -> dict:
    """The JSON at ``path``, or ``compute()`` written there first."""
    if path.is_file():
        print(f"read back {path}")
        return json.loads(path.read_text())
    result = compute()
    write_json(path, result)
    return result


def offline_part(cfg: DictConfig, net, index: EpisodeIndex) -> dict:
    episodes = list(range(len(index)))
    print(f"offline: {len(episodes)} held-out episodes, every {cfg.stride}th step, {cfg.draws} prior draws")
    probe = offline_probe(net, index, episodes, cfg.stride, cfg.draws, cfg.batch_size)
    return {**probe.to_dict(), "dataset_dir": str(cfg.dataset_dir), "episodes": len(episodes)}


def loop_part(cfg: DictConfig, net, mode: str, execution: dict) -> dict:
    seeds = range(int(cfg.seed), int(cfg.seed) + int(cfg.num_episodes))
    with tqdm(total=len(seeds), desc=f"closed loop, z {mode}", unit="ep") as bar:

        def tick(result) -> None:
            bar.update(1)
            bar.set_postfix(success=int(result.success), stall=result.longest_stall)

        summary = closed_loop(
            net, mode, seeds, execution, device=cfg.device, episode_len=cfg.episode_len, progress=tick
        )
    return {**summary, "seeds": [seeds.start, seeds.stop - 1]}


def offline_markdown(offline: dict) -> str:
    """The offline probe as Markdown: L1 per z, then latent use."""
    l1 = offline["l1"]
    names = {"zero": "z = 0 (as deployed)", "posterior_mean": "z = posterior mean", "prior_sample": "z ~ N(0, I)"}
    lines = [
        f"Offline, {offline['samples']} samples of {offline['episodes']} held-out episodes ({offline['dataset_dir']})",
        "",
        "| z | L1 (normalised actions) |",
        "|---|---|",
        *(f"| {names[m]} | {v:.4f} |" for m, v in l1.items()),
        "",
    ]
    if offline["use_vae"]:
        kl = offline["kl_per_dim"]
        top = sorted(range(len(kl)), key=lambda i: -kl[i])[:5]
        lines += [
            f"Latent use: KL {offline['kl_total']:.3f} nats summed over {offline['latent_dim']} dimensions; "
            f"{offline['active_dims']} with Var[mu] > {ACTIVE_VAR}; largest KL per dimension: "
            + ", ".join(f"z{i} {kl[i]:.3f}" for i in top),
            "",
        ]
    else:
        lines += ["No CVAE: z is always 0.", ""]
    return "\n".join(lines)


def closed_loop_markdown(loops: dict, ckpt: str) -> str:
    """The closed-loop modes as a Markdown table: success with its interval, stages, longest stalls."""
    if not loops:
        return ""
    lines = [
        f"Closed loop ({ckpt})",
        "",
        "| z | success (95% CI) | stages >=1/2/3 | longest stall, median (max) ticks |",
        "|---|---|---|---|",
    ]
    for mode, s in loops.items():
        lo, hi = s["success_rate_ci95"]
        stages = " / ".join(f"{s['stage_rates'][k]:.2f}" for k in ("1", "2", "3") if k in s["stage_rates"])
        lines.append(
            f"| {mode} | {s['successes']}/{s['num_episodes']} = {s['success_rate']:.2f} ({lo:.2f}-{hi:.2f}) | "
            f"{stages} | {s['longest_stall_median']:.0f} ({max(s['longest_stall'])}) |"
        )
    return "\n".join(lines) + "\n"
