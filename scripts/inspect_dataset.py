"""Inspect a dataset folder: ACT episode files or a LeRobot v3.0 folder (found by its meta/info.json).

    python scripts/inspect_dataset.py summary datasets/transfer_cube
    python scripts/inspect_dataset.py validate datasets/transfer_cube
    python scripts/inspect_dataset.py export datasets/transfer_cube --episode 3 --out outputs/inspect
"""

from __future__ import annotations

import argparse
import sys

from act.data.episodes import DatasetError
from act.data.inspect import export_episode, format_summary, summary, validate
from act.data.schema import EpisodeFormatError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("summary", help="table of episodes, lengths, cameras, success, sizes, action ranges")
    sub.add_parser("validate", help="check every file against the schema; exit 1 on any problem")
    export = sub.add_parser("export", help="one episode to mp4 plus a PNG of its 14 joint trajectories")
    for p in sub.choices.values():
        p.add_argument("folder", help="dataset folder: episode_*.hdf5 files or a LeRobot v3.0 folder")
    export.add_argument("--episode", type=int, default=0, help="episode number (HDF5: the file's; LeRobot: its index)")
    export.add_argument("--out", default="outputs/inspect", help="folder for the mp4 and the PNG")
    args = parser.parse_args(argv)
    try:
        if args.command == "summary":
            print(format_summary(*summary(args.folder)))
        elif args.command == "validate":
            problems = validate(args.folder)
            for problem in problems:
                print(f"FAIL {problem}")
            print(f"{args.folder}: {'OK' if not problems else f'{len(problems)} problem(s)'}")
            return 1 if problems else 0
        else:
            video, plot = export_episode(args.folder, args.episode, args.out)
            print(f"video: {video}\nplot: {plot}")
    except (DatasetError, EpisodeFormatError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
