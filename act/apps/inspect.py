"""Look at a dataset (ACT HDF5 files or a LeRobot v3 folder): summary table, validation, and one episode as
mp4 + joint plot (``scripts/inspect_dataset.py``; the work is act/data/inspect.py).

    python scripts/inspect_dataset.py summary datasets/transfer_cube
    python scripts/inspect_dataset.py validate datasets/transfer_cube
    python scripts/inspect_dataset.py export datasets/transfer_cube --episode 3 --out outputs/inspect
"""

from __future__ import annotations

import argparse

from act.data.inspect import export_episode, format_summary, summary, validate


def main(argv: list[str] | None = None) -> int:
    """``summary|validate|export <folder>``; the exit code (validate: 1 on any problem)."""
    args = _arguments(argv)
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
    return 0


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="scripts/inspect_dataset.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("summary", help="table of episodes, lengths, cameras, success, sizes, action ranges")
    sub.add_parser("validate", help="check every file against the schema; exit 1 on any problem")
    export = sub.add_parser("export", help="one episode to mp4 plus a PNG of its 14 joint trajectories")
    for p in sub.choices.values():
        p.add_argument("folder", help="dataset folder: episode_*.hdf5 files or a LeRobot v3.0 folder")
    export.add_argument("--episode", type=int, default=0, help="episode number (HDF5: the file's; LeRobot: its index)")
    export.add_argument("--out", default="outputs/inspect", help="folder for the mp4 and the PNG")
    return parser.parse_args(argv)
