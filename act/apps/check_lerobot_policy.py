"""LeRobot as the judge of ACT policies, both ways (needs LeRobot 0.6.1 in its own environment).

    LEROBOT_PYTHON=/work/lerobot-venv/bin/python python scripts/check_lerobot_policy.py \
        --out outputs/check_lerobot_policy

For each variant of ``act.runtime.lerobot_check.VARIANTS``: a policy LeRobot wrote, run by our ``ACTPolicy``, and ours
written with ``export.py format=lerobot``'s writer, run by LeRobot's ``select_action``, each against the other's
actions; one PASS/FAIL line per check, ``<out>/check_lerobot_policy.json``; exit 1 if any check fails. With ``--score
<LeRobot policy folder>`` it instead scores that policy with LeRobot's own evaluation loop in our simulator, on
eval.py's seeds. The command line becomes ``PolicyCheckSettings``; the work is ``act.runtime.lerobot_run``'s.
"""

from __future__ import annotations

import argparse

from act.data.lerobot.check import lerobot_python
from act.runtime.lerobot_run import PolicyCheckSettings, check_lerobot_policies, score_with_lerobot


def main(argv: list[str] | None = None) -> int:
    """Every check, one PASS/FAIL line each; the exit code (1: a check failed). With ``--score``: LeRobot's score."""
    parser = argparse.ArgumentParser(
        prog="scripts/check_lerobot_policy.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", default="outputs/check_lerobot_policy", help="work folder (recreated)")
    parser.add_argument("--ticks", type=int, default=30, help="control ticks compared per variant")
    parser.add_argument("--score", default=None, help="a LeRobot policy folder to score with LeRobot's evaluation")
    parser.add_argument("--task", default="transfer_cube", choices=["transfer_cube", "insertion"])
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--seed", type=int, default=100000, help="first episode's seed (held-out: 100000..)")
    parser.add_argument("--workers", type=int, default=1, help="processes the episodes are split over")
    parser.add_argument("--render-quality", default="fast", choices=["fast", "paper"])
    parser.add_argument("--episode-len", type=int, default=400)
    parser.add_argument("--lerobot-python", default=None, help="LeRobot's Python (default: $LEROBOT_PYTHON)")
    args = vars(parser.parse_args(argv))
    args["lerobot_python"] = lerobot_python(args["lerobot_python"], "lerobot==0.6.1")
    settings = PolicyCheckSettings(**args)
    if settings.score:
        score_with_lerobot(settings, echo=print)
        return 0
    return 1 if any(not r["ok"] for r in check_lerobot_policies(settings, echo=print)) else 0
