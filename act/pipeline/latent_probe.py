"""What a trained ACT does with its CVAE latent z (issue 44), as ``scripts/latent_probe.py`` runs it: the
measurements of ``act.eval.latent`` on a checkpoint, kept on disk and tabled.

The offline part (latent use, L1 under z = 0, the posterior mean and N(0, I) draws) goes to ``offline.json`` and
``latent.png``; each closed-loop mode to ``<mode>.json``; both are kept, so a rerun into the same ``out_dir`` goes on
where it stopped. ``probe.md`` holds the tables.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from tqdm import tqdm

from act.common.checks import check_setting, is_integer
from act.common.errors import InputError, MissingFileError
from act.common.io import atomic_path, write_json
from act.data.episodes import EpisodeIndex
from act.eval.latent import ACTIVE_VAR, LATENT_MODES, closed_loop, offline_probe
from act.model.checkpoint import load_network
from act.pipeline.plot import plot_latent
from act.runtime.execution import ExecutionConfig

Echo = Callable[[str], None]


@dataclass(frozen=True)
class LatentProbeSettings:
    """The keys of configs/latent_probe.yaml, each checked here (one line naming it and the fix). ``ckpt_path``: a
    training checkpoint (an export has no CVAE encoder); ``dataset_dir``: demonstrations it did not train on;
    ``execution``: the closed loop's execution settings (``ACTPolicy``'s keyword arguments once checked)."""

    ckpt_path: Path
    dataset_dir: str | Path | None
    out_dir: Path
    stride: int = 10
    draws: int = 8
    batch_size: int = 32
    num_episodes: int = 30
    seed: int = 100000
    modes: tuple[str, ...] = LATENT_MODES
    execution: Mapping = field(default_factory=dict)
    episode_len: int | None = None
    device: str = "cpu"

    def __post_init__(self):
        if Path(self.ckpt_path).suffix != ".ckpt":
            raise InputError(
                f"ckpt_path must be a training checkpoint (.ckpt): an export has no CVAE encoder, got {self.ckpt_path}"
            )
        if self.dataset_dir is None:
            raise InputError(
                "give dataset_dir=<demonstrations the checkpoint did not train on> (scripts/record_demos.py)"
            )
        if not Path(self.dataset_dir).is_dir():
            raise MissingFileError(
                f"dataset_dir {self.dataset_dir} does not exist: record it with scripts/record_demos.py"
            )
        for name, low in (("stride", 1), ("draws", 1), ("batch_size", 1), ("num_episodes", 0), ("seed", 0)):
            if not is_integer(getattr(self, name)) or getattr(self, name) < low:
                raise InputError(f"{name} must be an integer >= {low}, got {getattr(self, name)!r}")
        for mode in self.modes:
            check_setting("modes", mode, LATENT_MODES)
        object.__setattr__(self, "execution", asdict(ExecutionConfig(**self.execution)))  # checks them
        object.__setattr__(self, "modes", tuple(self.modes))
        object.__setattr__(self, "out_dir", Path(self.out_dir))


def run_latent_probe(settings: LatentProbeSettings, echo: Echo) -> dict:
    """The offline probe and each closed-loop mode (read back where already written); writes ``probe.md``, echoes
    the tables and returns {"offline": ..., "closed_loop": {mode: ...}}."""
    s, out = settings, settings.out_dir
    index = EpisodeIndex(s.dataset_dir)
    net = load_network(s.ckpt_path)
    offline = _cached(out / "offline.json", lambda: _offline_part(s, net, index, echo), echo)
    plot_latent(offline, out / "latent.png", f"{s.ckpt_path}")
    offline_text = offline_markdown(offline)
    echo(offline_text)
    loops = {}
    for mode in s.modes if s.num_episodes else []:
        loops[mode] = _cached(out / f"{mode}.json", lambda mode=mode: _loop_part(s, net, mode), echo)
        echo(f"closed loop, z {mode}: success {loops[mode]['success_rate']:.2f}")
    loop_text = closed_loop_markdown(loops, str(s.ckpt_path))
    with atomic_path(out / "probe.md") as tmp:
        tmp.write_text(offline_text + "\n" + loop_text)
    echo(loop_text)
    return {"offline": offline, "closed_loop": loops}


def _cached(path: Path, compute: Callable[[], dict], echo: Echo) -> dict:
    """The JSON at ``path``, or ``compute()`` written there first."""
    if path.is_file():
        echo(f"read back {path}")
        return json.loads(path.read_text())
    result = compute()
    write_json(path, result)
    return result


def _offline_part(s: LatentProbeSettings, net, index: EpisodeIndex, echo: Echo) -> dict:
    episodes = list(range(len(index)))
    echo(f"offline: {len(episodes)} held-out episodes, every {s.stride}th step, {s.draws} prior draws")
    probe = offline_probe(net, index, episodes, s.stride, s.draws, s.batch_size)
    return {**probe.to_dict(), "dataset_dir": str(s.dataset_dir), "episodes": len(episodes)}


def _loop_part(s: LatentProbeSettings, net, mode: str) -> dict:
    seeds = range(s.seed, s.seed + s.num_episodes)
    with tqdm(total=len(seeds), desc=f"closed loop, z {mode}", unit="ep") as bar:

        def tick(result) -> None:
            bar.update(1)
            bar.set_postfix(success=int(result.success), stall=result.longest_stall)

        summary = closed_loop(net, mode, seeds, s.execution, device=s.device, episode_len=s.episode_len, progress=tick)
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
