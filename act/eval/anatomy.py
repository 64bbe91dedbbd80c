"""How failed episodes failed: each sorted by the last reward stage it reached and by what was true at its last
tick (the env's snapshot: contacts, object and gripper positions), then counted (issue 51's failure anatomy).

Insertion (reward 1 both grasped, 2 both lifted, 3 peg touches socket, 4 inserted):

    never grasped      stage 0: still approaching when time ran out (or fumbling)
    never lifted       stage 1: both touched, not both off the table
    dropped            stage 2 or more reached, then the peg or the socket lay on the table at the end
    never met          stage 2, both still held in the air at the end: carried, the peg never touched the socket
    met, not inserted  stage 3, both in the air at the end: the peg touched the socket but missed the pin

Transfer cube (1 right touches, 2 lifted, 3 left touches, 4 transferred): never touched, never lifted, dropped,
never handed over (lifted, the left gripper never touched it), handed over, not held. The classes with both
objects in the air at the end are timeouts while carrying; ``never grasped`` / ``never touched`` are timeouts
while approaching. Torch-free, like the rest of the evaluation's bookkeeping.
"""

from __future__ import annotations

import numpy as np

from act.envs.constants import BASE_TASKS, MAX_REWARD


def _on_table(task: str, flags: dict) -> bool:
    if BASE_TASKS[task] == "insertion":
        return bool(flags.get("peg_on_table") or flags.get("socket_on_table"))
    return bool(flags.get("cube_on_table"))


def failure_class(task: str, max_reward: int, final: dict | None) -> str:
    """The class of a failed episode (``max_reward`` < 4) of ``task`` from its last snapshot (see the module)."""
    flags = (final or {}).get("flags", {})
    if max_reward >= 2 and _on_table(task, flags):
        return "dropped"
    names = {
        "insertion": ("never grasped", "never lifted", "never met", "met, not inserted"),
        "transfer_cube": ("never touched", "never lifted", "never handed over", "handed over, not held"),
    }[BASE_TASKS[task]]
    return names[min(max_reward, len(names) - 1)]


def _gap(a, b) -> float:
    return float(np.linalg.norm(np.asarray(a, dtype=float) - np.asarray(b, dtype=float)))


def failure_anatomy(task: str, episodes: list[dict]) -> dict:
    """Counts of each failure class over ``episodes`` (``EpisodeResult`` records as dicts: ``seed``, ``max_reward``,
    ``stage_ticks``, ``final``), and per class: its seeds, the mean distance between the two grippers and between
    the objects (peg to socket) at the last tick, and the mean tick of the last stage reached."""
    failed = [e for e in episodes if e["max_reward"] < MAX_REWARD]
    classes: dict[str, dict] = {}
    for episode in failed:
        final = episode.get("final") or {}
        name = failure_class(task, episode["max_reward"], final)
        entry = classes.setdefault(name, {"episodes": 0, "seeds": [], "_grippers": [], "_objects": [], "_ticks": []})
        entry["episodes"] += 1
        entry["seeds"].append(episode["seed"])
        if final.get("grippers"):
            entry["_grippers"].append(_gap(final["grippers"]["left"], final["grippers"]["right"]))
        objects = list((final.get("objects") or {}).values())
        if len(objects) == 2:
            entry["_objects"].append(_gap(*objects))
        ticks = {int(k): v for k, v in (episode.get("stage_ticks") or {}).items()}
        if ticks:
            entry["_ticks"].append(ticks[max(ticks)])
    for entry in classes.values():
        for key, out in (("_grippers", "gripper_gap_m"), ("_objects", "objects_gap_m"), ("_ticks", "last_stage_tick")):
            values = entry.pop(key)
            entry[out] = round(float(np.mean(values)), 4) if values else None
    return {"episodes": len(episodes), "failures": len(failed), "classes": classes}
