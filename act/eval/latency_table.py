"""Success against simulated query latency for several execution modes: docs/results.md's table.

act/pipeline/latency_sweep.py (``scripts/latency_table.py``) evaluates every (mode, latency) cell in simulated
time (a query issued at tick t delivers at t + ceil(latency / 20 ms)) on the same held-out seeds; here,
each cell's row and the Markdown table: success with its interval, the share of zero-latency success kept,
held ticks, jerk and the jump at chunk switches.
"""

from __future__ import annotations


def row(name: str, latency_ms: float, metrics: dict, zero: dict | None) -> dict:
    """The table's row of mode ``name`` at ``latency_ms`` from its cell's metrics; ``zero``: the mode's
    metrics at zero latency (None where that cell is not in the table)."""
    kept = metrics["success_rate"] / zero["success_rate"] if zero and zero["success_rate"] > 0 else None
    return {
        "mode": name,
        "latency_ms": latency_ms,
        "execution": metrics.get("execution"),
        "success_rate": metrics["success_rate"],
        "ci95": metrics["success_rate_ci95"],
        "kept_of_zero_latency": kept,
        "held_share": metrics["ticks_without_fresh_action"]["share"],
        "jerk": metrics["mean_action_jerk"],
        "switch_jump": metrics["chunk_switch_jump"]["mean"],
        "queries": metrics["latency_ms_per_query"]["queries"],
    }


def latency_markdown(
    rows: list[dict], modes: list[str], latencies_ms: list[float], seeds: range, ckpt_path: str
) -> str:
    """table.md: success per mode (a row) and latency (a column), then each cell's held ticks, jerk, switch
    jump and queries; ``seeds``: the episodes', ``ckpt_path``: the policy evaluated."""
    lines = [
        f"Success over {len(seeds)} episodes (seeds {seeds[0]}-{seeds[-1]}), "
        f"{ckpt_path}; in brackets the share of the mode's zero-latency success kept.",
        "",
        "| mode | " + " | ".join(f"{v:g} ms" for v in latencies_ms) + " |",
        "|---|" + "---|" * len(latencies_ms),
    ]
    for name in modes:
        cells = []
        for latency in latencies_ms:
            r = next((r for r in rows if r["mode"] == name and r["latency_ms"] == latency), None)
            if r is None:
                cells.append("-")
                continue
            kept = f" ({r['kept_of_zero_latency']:.0%})" if r["kept_of_zero_latency"] is not None else ""
            cells.append(f"{r['success_rate']:.2f}{kept}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "| mode | latency ms | held ticks | jerk | switch jump | queries |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['mode']} | {r['latency_ms']:g} | {r['held_share']:.1%} | {r['jerk'] or 0:.4f} | "
            f"{r['switch_jump'] or 0:.4f} | {r['queries']} |"
        )
    return "\n".join(lines) + "\n"
