"""The progress bar of a run of episodes (recording, evaluation): episodes done, a running count beside.

with EpisodeBar(len(seeds), "eval transfer_cube") as bar:
    bar.show(4, success="3/4")   # eval transfer_cube:  40%|####  | 4/10 [..., success=3/4]
"""

from __future__ import annotations

from tqdm import tqdm

from act.common.errors import InputError


class EpisodeBar:
    """A tqdm bar of ``total`` episodes (unit ``ep``) labelled ``desc``; closed when its ``with`` block ends."""

    def __init__(self, total: int, desc: str):
        if total < 0:
            raise InputError(f"an episode bar needs total >= 0 episodes, got {total}")
        # smoothing=0: the rate is episodes done over time elapsed. Batched evaluation finishes a group of
        # episodes at once, and tqdm's moving average then read one group as 102 s an episode, the next as
        # hundreds a second, so a 2-minute evaluation showed 30 minutes left.
        self.bar = tqdm(total=total, desc=desc, unit="ep", smoothing=0)

    def show(self, done: int, **postfix) -> None:
        """Move the bar to ``done`` episodes; show ``postfix`` (e.g. ``success="3/4"``) beside it, if given."""
        self.bar.update(done - self.bar.n)
        if postfix:
            self.bar.set_postfix(**postfix)

    def close(self) -> None:
        self.bar.close()

    def __enter__(self) -> EpisodeBar:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
