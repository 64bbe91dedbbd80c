"""A one-page PNG of a run: training curves from the CSV log, closed-loop success from metrics.json."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from act.common.errors import MissingFileError
from act.common.io import atomic_path


def read_csv_metrics(path: str | Path, keys: list[str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{key: (steps, values)} from Lightning's CSVLogger metrics.csv (rows without the key skipped)."""
    path = Path(path)
    if not path.is_file():
        raise MissingFileError(f"training log {path} does not exist")
    series: dict[str, tuple[list, list]] = {k: ([], []) for k in keys}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            for key in keys:
                if row.get(key) and row.get("step"):
                    series[key][0].append(int(float(row["step"])))
                    series[key][1].append(float(row[key]))
    return {k: (np.asarray(s), np.asarray(v)) for k, (s, v) in series.items()}


def smooth(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing moving average (shorter windows at the start)."""
    if len(values) == 0 or window <= 1:
        return values
    cumsum = np.cumsum(np.insert(values, 0, 0.0))
    idx = np.arange(1, len(values) + 1)
    lo = np.maximum(0, idx - window)
    return (cumsum[idx] - cumsum[lo]) / (idx - lo)


def plot_run(csv_path: str | Path, metrics: dict | None, out_png: str | Path, title: str = "") -> Path:
    """Loss curves (train L1 smoothed, val L1, KL) and, if given, success and stage rates with 95% CIs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = read_csv_metrics(csv_path, ["train/l1", "val/l1", "train/kl", "val/kl"])
    panels = 2 if metrics else 1
    fig, axes = plt.subplots(1, panels, figsize=(6.5 * panels, 4.2), squeeze=False)
    ax = axes[0, 0]
    steps, l1 = curves["train/l1"]
    if len(l1):
        ax.plot(steps, l1, color="tab:blue", alpha=0.2, lw=0.8)
        ax.plot(steps, smooth(l1, 25), color="tab:blue", label="train L1 (smoothed)")
    steps, l1 = curves["val/l1"]
    if len(l1):
        ax.plot(steps, l1, "o-", color="tab:orange", label="val L1 (z = 0)")
    ax.set_yscale("log")
    ax.set_xlabel("training step")
    ax.set_ylabel("L1 (normalised actions)")
    ax.grid(True, which="both", alpha=0.3)
    steps, kl = curves["train/kl"]
    if len(kl):
        twin = ax.twinx()
        twin.plot(steps, smooth(kl, 25), color="tab:gray", lw=0.8, label="train KL")
        twin.set_ylabel("train KL (grey)", color="tab:gray")
    ax.legend(loc="upper right")
    ax.set_title("training")
    if metrics:
        ax = axes[0, 1]
        names = ["success"] + [f"stage >= {k}" for k in metrics["stage_rates"]]
        rates = [metrics["success_rate"]] + list(metrics["stage_rates"].values())
        low, high = metrics["success_rate_ci95"]
        bars = ax.bar(names, rates, color=["tab:green"] + ["tab:gray"] * len(metrics["stage_rates"]))
        # max(0, ...): metrics written before the interval's exact end points (act/common/metrics.py) held 50/50's
        # upper bound at 0.9999999999999999, and matplotlib refuses a negative error bar
        yerr = [[max(0.0, rates[0] - low)], [max(0.0, high - rates[0])]]
        ax.errorbar([0], [rates[0]], yerr=yerr, color="black", capsize=6)
        tops = [high] + rates[1:]  # the success label sits above its interval
        for bar, rate, top in zip(bars, rates, tops):
            ax.text(bar.get_x() + bar.get_width() / 2, top + 0.02, f"{rate:.2f}", ha="center")
        ax.set_ylim(0, 1.1)
        ax.set_title(
            f"closed loop: {metrics['successes']}/{metrics['num_episodes']} episodes (95% CI {low:.2f}-{high:.2f})"
        )
        ax.tick_params(axis="x", labelrotation=20)
    if title:
        fig.suptitle(title)
    return _save(fig, out_png)


def plot_curves(
    curve_files, out_png: str | Path, title: str | None = None, minutes_per_step: float | None = None
) -> Path:
    """Success on the tuning seeds (95% interval as error bars) against minutes of training, one
    line per recipe, from ``act.apps.curve``'s ``curve.json`` files (a curve pooled over several runs
    also shows each run's rate as a dot). ``minutes_per_step``: plot
    steps x this instead of the recorded minutes (recipes of one step cost, timed alone, compared
    from runs made on a machine shared with other work)."""
    import json

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    for path in curve_files:
        curve = json.loads(Path(path).read_text())
        points = sorted(curve["points"], key=lambda p: p["minute"])
        x = [p["step"] * minutes_per_step if minutes_per_step else p["minute"] for p in points]
        y = [p["success_rate"] for p in points]
        low = [p["success_rate"] - p["ci95"][0] for p in points]
        high = [p["ci95"][1] - p["success_rate"] for p in points]
        drawn = ax.errorbar(x, y, yerr=[low, high], marker="o", capsize=3, label=curve.get("label") or curve["name"])
        for at, p in zip(x, points):  # a curve pooled over runs (curve.runs): each run's rate as a dot
            rates = list(p.get("runs", {}).values())
            ax.plot([at] * len(rates), rates, ".", color=drawn[0].get_color(), alpha=0.4)
    ax.set_xlabel("training wall time on this machine (min)")
    ax.set_ylabel("success, tuning seeds (95% CI)")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)  # curves rise to the right: the lower right holds their late points
    if title:
        ax.set_title(title)
    return _save(fig, out_png)


def plot_ablation(table: dict, out_png: str | Path) -> Path:
    """Success against the ablated setting, in the form of the ACT paper's Fig. 8: one line per dataset
    (or set of checkpoints), each variant's pooled success with its 95% interval as error bars and each
    run's success as a dot, from ``act.apps.ablate``'s table."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    variants = table["variants"]
    x = np.arange(len(variants), dtype=float)
    coverage = any("mode_coverage" in c for cells in table["lines"].values() for c in cells.values())
    width = max(5.5, 1.1 * len(variants) + 2.5)
    if coverage:  # a second panel: which planted mode the rollouts took
        fig, (ax, modes_ax) = plt.subplots(1, 2, figsize=(2 * width, 4.2))
        plot_mode_coverage(modes_ax, table)
    else:
        fig, ax = plt.subplots(figsize=(width, 4.2))
    for i, (line, cells) in enumerate(table["lines"].items()):
        shifted = x + 0.08 * (i - (len(table["lines"]) - 1) / 2)  # lines side by side: their bars apart
        rates = np.array([cells[v]["success_rate"] for v in variants])
        low, high = (np.array([cells[v]["success_rate_ci95"][j] for v in variants]) for j in (0, 1))
        drawn = ax.errorbar(shifted, rates, yerr=[rates - low, high - rates], marker="o", capsize=4, label=line)
        for at, v in zip(shifted, variants):  # each run a dot beside its line's bar
            runs = list(cells[v]["runs"].values())
            ax.plot([at + 0.04] * len(runs), runs, ".", color=drawn[0].get_color(), alpha=0.4)
    ax.set_xticks(x, variants)
    ax.set_xlim(-0.5, len(variants) - 0.5)
    ax.set_xlabel(table["setting"])
    ax.set_ylabel("success (pooled, 95% CI; dots: runs)")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    ax.set_title(table["title"], fontsize=10)
    return _save(fig, out_png)


def plot_mode_coverage(ax, table: dict) -> None:
    """Stacked bars per line and variant: the share of rollouts that took each planted mode, and neither."""
    bars = [(line, v, cells[v].get("mode_coverage") or {}) for line, cells in table["lines"].items() for v in cells]
    modes = list(dict.fromkeys(m for *_, coverage in bars for m in coverage))
    x = np.arange(len(bars), dtype=float)
    bottom = np.zeros(len(bars))
    for mode in modes:
        shares = np.array([coverage.get(mode, {}).get("share", 0.0) for *_, coverage in bars])
        ax.bar(x, shares, bottom=bottom, label=mode, color="lightgray" if mode == "neither" else None)
        bottom += shares
    ax.set_xticks(x, [f"{line}, {v}" for line, v, _ in bars], fontsize=7, rotation=35, ha="right")
    ax.set_ylabel("share of rollouts taking each mode")
    ax.set_ylim(0, 1.02)
    ax.legend(loc="upper right", fontsize=8, framealpha=0.9)
    ax.set_title("mode coverage", fontsize=10)


def _save(fig, out_png: str | Path) -> Path:
    """Lay out ``fig``, write it atomically as a PNG and free it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    with atomic_path(out_png) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    return Path(out_png)


def plot_latent(offline: dict, out_png: str | Path, title: str = "") -> Path:
    """What a network does with its CVAE latent, from ``act.eval.latent.offline_probe``'s record: the KL of
    each latent dimension (bars, largest first) with its Var[mu] (dots), and the decoder's L1 under each z."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2), gridspec_kw={"width_ratios": [2, 1]})
    if offline.get("use_vae"):
        kl, var = np.asarray(offline["kl_per_dim"]), np.asarray(offline["mu_var_per_dim"])
        order = np.argsort(-kl)
        x = np.arange(len(kl))
        left.bar(x, kl[order], color="tab:blue", label="KL(q || N(0, I)) per dimension")
        left.set_xticks(x, [f"z{i}" for i in order], rotation=90, fontsize=7)
        left.set_ylabel("KL (nats)")
        twin = left.twinx()
        twin.plot(x, var[order], "o", color="tab:orange", label="Var[mu] across samples")
        twin.axhline(0.01, color="tab:orange", lw=0.8, ls="--")
        twin.set_ylabel("Var[mu]")
        twin.set_yscale("log")
        left.set_title(f"latent use: {offline['active_dims']} of {offline['latent_dim']} dims with Var[mu] > 0.01")
        handles = left.get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
        left.legend(handles, [h.get_label() for h in handles], fontsize=8, loc="upper right")
    else:
        left.text(0.5, 0.5, "no CVAE: z is always 0", ha="center", va="center", transform=left.transAxes)
        left.set_axis_off()
    names = {"zero": "z = 0\n(deployed)", "posterior_mean": "posterior\nmean", "prior_sample": "z ~ N(0, I)"}
    modes = list(offline["l1"])
    right.bar(range(len(modes)), [offline["l1"][m] for m in modes], color="tab:green")
    right.set_xticks(range(len(modes)), [names.get(m, m) for m in modes])
    right.set_ylabel("L1 on held-out demos (normalised)")
    right.set_title(f"{offline['samples']} held-out samples")
    right.grid(axis="y", alpha=0.3)
    if title:
        fig.suptitle(title)
    return _save(fig, out_png)
