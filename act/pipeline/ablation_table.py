"""An ablation's results (``scripts/ablate.py``): each variant's runs pooled into one success rate with
its 95% interval, written as ``ablation.json`` and as the Markdown table of ``ablation.md``."""

from __future__ import annotations

from act.common.metrics import wilson_interval
from act.pipeline.ablation import AblationSettings, Run


def command(name: str, given: list[str]) -> str:
    """The command line that made the table from the overrides ``given`` on it, naming the ablation even
    where it was the default."""
    chosen = [] if any(o.startswith("ablation=") for o in given) else [f"ablation={name}"]
    return " ".join(["python scripts/ablate.py", *chosen, *given])


def aggregate(results: dict[str, dict]) -> dict:
    """A variant's runs ({sample: metrics with successes, num_episodes, success_rate}) pooled: the success
    over all their episodes with its 95% Wilson interval, and each run's rate and their range. The
    interval is that of the episodes alone; the range shows how much the training seed moves it."""
    successes = sum(int(m["successes"]) for m in results.values())
    episodes = sum(int(m["num_episodes"]) for m in results.values())
    rates = {sample: float(m["success_rate"]) for sample, m in results.items()}
    pooled = {
        "success_rate": successes / episodes,
        "success_rate_ci95": list(wilson_interval(successes, episodes)),
        "successes": successes,
        "num_episodes": episodes,
        "min": min(rates.values()),
        "max": max(rates.values()),
        "runs": rates,
    }
    coverage = pooled_coverage(results)
    if coverage:
        pooled["mode_coverage"] = coverage
    failures = pooled_failures(results)
    if failures:
        pooled["failures"] = failures
    return pooled


def pooled_failures(results: dict[str, dict]) -> dict | None:
    """How the failed episodes of every run failed (``act.eval.anatomy``): {class: episodes}, most first; None
    where a run has no failure anatomy (metrics written before it was measured)."""
    if not all("failure_anatomy" in m for m in results.values()):
        return None
    totals: dict[str, int] = {}
    for m in results.values():
        for name, entry in m["failure_anatomy"]["classes"].items():
            totals[name] = totals.get(name, 0) + int(entry["episodes"])
    return dict(sorted(totals.items(), key=lambda kv: -kv[1]))


def pooled_coverage(results: dict[str, dict]) -> dict | None:
    """The planted modes' coverage (``act.eval.modes``) over every run's episodes: {mode: {episodes, share,
    successes}}; None where a run has none (metrics written before it was measured)."""
    if not all("mode_coverage" in m for m in results.values()):
        return None
    totals: dict[str, dict] = {}
    for m in results.values():
        for mode, entry in m["mode_coverage"].items():
            total = totals.setdefault(mode, {"episodes": 0, "successes": 0})
            total["episodes"] += entry["episodes"]
            total["successes"] += entry["successes"]
    episodes = sum(t["episodes"] for t in totals.values())
    return {mode: {**t, "share": t["episodes"] / episodes if episodes else 0.0} for mode, t in totals.items()}


def tabulate(s: AblationSettings, runs: list[Run], results: dict[Run, dict], given: list[str]) -> dict:
    """What ``ablation.json`` holds: each line's and variant's pooled success, its runs and the settings
    (``given``: the overrides on the command line, for the command that made it)."""
    by_cell: dict[tuple[str, str], dict[str, dict]] = {}
    for run in runs:
        by_cell.setdefault((run.line, run.variant), {})[run.sample] = results[run]
    tasks = ", ".join(sorted({str(results[run].get("task")) for run in runs}))  # from the runs themselves
    return {
        "ablation": s.name,
        "title": f"{s.title} ({tasks})",
        "setting": s.setting,
        "variants": list(s.variants),
        "command": command(s.name, given),
        "evaluation_only": s.evaluation_only,
        "seeds": list(s.seeds),
        "max_steps": s.max_steps,
        "variant_steps": s.variant_steps,
        "eval": s.eval,
        "lines": {
            line: {
                variant: {**aggregate(by_cell[line, variant]), "folder": str(s.dir / line / variant)}
                for variant in s.variants
            }
            for line in s.lines
        },
        "checkpoints": {line: {r.sample: str(r.checkpoint) for r in runs if r.line == line} for line in s.lines}
        if s.evaluation_only
        else None,
    }


def ablation_markdown(table: dict) -> str:
    """The table of ``ablation.md``: a row per line and variant, pooled success with its interval, each run."""
    samples = list(dict.fromkeys(k for cells in table["lines"].values() for c in cells.values() for k in c["runs"]))
    first = "checkpoints" if table["evaluation_only"] else "dataset"
    budget = "" if table["evaluation_only"] else f"; {table['max_steps']} training steps a run"
    if table.get("variant_steps"):
        budget += " (" + ", ".join(f"{v}: {n}" for v, n in table["variant_steps"].items()) + ")"
    evaluation = ", ".join(f"{k}={v}" for k, v in table["eval"].items())
    modes = list(
        dict.fromkeys(
            m for cells in table["lines"].values() for c in cells.values() for m in c.get("mode_coverage", {})
        )
    )
    mode_head = f" modes ({' / '.join(modes)}) |" if modes else ""
    failures = any("failures" in c for cells in table["lines"].values() for c in cells.values())
    mode_head += " failures, most first |" if failures else ""
    rows = [
        f"## {table['title']}",
        "",
        f"`{table['command']}`{budget}; evaluation: {evaluation}. Success pooled "
        "over each variant's runs, with its 95% Wilson interval; then each run's, and their range"
        + ("; then the share of rollouts that took each planted mode" if modes else "")
        + ("; then how the failed episodes failed (act/eval/anatomy.py)." if failures else "."),
        "",
        f"| {first} | {table['setting']} | success (95% CI) | {' | '.join(samples)} | range |{mode_head}",
        "|" + "---|" * (len(samples) + 4 + (1 if modes else 0) + (1 if failures else 0)),
    ]
    for line, cells in table["lines"].items():
        for variant, c in cells.items():
            low, high = c["success_rate_ci95"]
            runs = " | ".join(f"{c['runs'][k]:.2f}" if k in c["runs"] else "-" for k in samples)
            coverage = c.get("mode_coverage") or {}
            shares = " / ".join(f"{coverage[m]['share']:.2f}" if m in coverage else "-" for m in modes)
            rows.append(
                f"| {line} | {variant} | {c['successes']}/{c['num_episodes']} = {c['success_rate']:.2f} "
                f"({low:.2f}-{high:.2f}) | {runs} | {c['min']:.2f}-{c['max']:.2f} |"
                + (f" {shares} |" if modes else "")
                + (f" {failed(c.get('failures'))} |" if failures else "")
            )
    for line, paths in (table["checkpoints"] or {}).items():
        rows += ["", f"{line}: " + ", ".join(f"{k} = `{p}`" for k, p in paths.items())]
    return "\n".join(rows) + "\n"


def failed(failures: dict | None) -> str:
    """A cell of failure classes (``never grasped 12, dropped 3``): ``-`` where unmeasured, ``none`` if none failed."""
    if failures is None:
        return "-"
    return ", ".join(f"{name} {n}" for name, n in failures.items()) or "none"
