"""A seeded fuzz of the loaders a user feeds files from elsewhere (issue 65): valid HDF5 episodes, LeRobot v3
folders, checkpoints and export metadata, damaged at random (truncated, bytes flipped, shapes, dtypes, NaN, huge
numbers, bad JSON), each loaded. Every load must work or raise the project's one-line error (an ``InputError``):
never another exception, a hang or an allocation past the memory cap.

The mutations run in a child process (this file run as a script) under ``hostile_data.MEMORY_CAP``: a load that
allocates what a file merely declares fails there with MemoryError, reported as a failure, instead of taking the
machine down. Each load has ``HANG_S`` seconds. The same seed gives the same mutations.
"""

from __future__ import annotations

import copy
import json
import random
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

import pytest

SEED = 65
PER_KIND = {"hdf5": 80, "lerobot": 80, "checkpoint": 30, "metadata": 100}  # the default run: 290 loads
HANG_S = 20  # one load; the slowest valid one (a checkpoint) takes well under a second


def run_fuzz(seed: int, scale: int, timeout: float) -> dict:
    from hostile_data import run_capped

    argv = ["fuzz", str(seed), str(scale)]
    code = f"import runpy, sys\nsys.argv = {argv!r}\nrunpy.run_path({__file__!r}, run_name='__main__')"
    proc = run_capped(code, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def check_report(report: dict, scale: int) -> None:
    assert report["failures"] == [], "\n".join(report["failures"][:20])
    for kind, per_kind in PER_KIND.items():
        outcomes = report["outcomes"][kind]
        assert sum(outcomes.values()) == per_kind * scale
        # Mutations that load and mutations that are refused: a fuzz whose every input is refused at the
        # first check (or none) exercises nothing beyond it.
        assert outcomes["loaded"] > 0 and outcomes["refused"] > 0, (kind, outcomes)


def test_fuzzed_files_load_or_fail_with_one_line():
    check_report(run_fuzz(SEED, 1, timeout=300), 1)


@pytest.mark.slow
def test_ten_times_as_many_fuzzed_files_on_other_seeds():
    for seed in (1, 2):
        check_report(run_fuzz(seed, 10, timeout=1800), 10)


# -- the child: mutations and loads ---------------------------------------------------------------------------
HOSTILE = [0, -1, 1, 7, 13, 2**31, 2**43, 2**63, 10**18, 1.5, 1e308, -1e308, "x", "", None, True, [], {}, [1, 2]]
HOSTILE += [[10**9] * 3, {"a": [None]}, "../../../etc/passwd", "{chunk_index.real}", "{}"]


def hostile(rng: random.Random):
    return copy.deepcopy(rng.choice(HOSTILE))


class Hang(BaseException):
    """A load that took longer than ``HANG_S``."""


def _alarm(signum, frame):
    raise Hang


def damage_bytes(path: Path, rng: random.Random) -> str:
    data = bytearray(path.read_bytes())
    if rng.random() < 0.5:
        cut = rng.randrange(len(data))
        path.write_bytes(bytes(data[:cut]))
        return f"truncated at {cut}"
    for _ in range(rng.choice([1, 4, 32])):
        data[rng.randrange(len(data))] = rng.randrange(256)
    path.write_bytes(bytes(data))
    return "bytes flipped"


# HDF5 episodes ------------------------------------------------------------------------------------------------
HDF5_KEYS = ("observations/qpos", "action", "observations/qvel", "reward", "observations/images/top")
SHAPES = [(), (6,), (6, 14), (6, 7), (5, 14), (0, 14), (6, 0), (2**43, 14), (10**6, 1024), (6, 14, 2), (6, 8, 8, 3)]
SHAPES += [(6, 10**5, 10**5, 3), (2**40, 8, 8, 3), (6, 8, 8, 4), (6, 50), (6, 3 * 4097**2)]
DTYPES = ["f4", "f8", "i4", "u1", "S3", "?", "c8", [("a", "f4"), ("b", "i2")]]


def set_attr(attrs, name: str, value) -> None:
    """``attrs[name] = value``, or an array of two floats where HDF5 has no type for ``value`` (None, {})."""
    import numpy as np

    try:
        attrs[name] = value
    except (TypeError, ValueError):
        attrs[name] = np.array([1.5, 2.5])


def mutate_hdf5(path: Path, rng: random.Random) -> str:
    import h5py
    import numpy as np

    what = rng.choice(["bytes", "dataset", "dataset", "dataset", "values", "attrs", "structure"])
    if what == "bytes":
        return damage_bytes(path, rng)
    with h5py.File(path, "a") as root:
        key = rng.choice(HDF5_KEYS)
        if what == "dataset":
            shape, dtype = rng.choice(SHAPES), np.dtype(rng.choice(DTYPES))
            chunked = bool(shape) and rng.random() < 0.7 and 0 not in shape
            del root[key]
            size = int(np.prod(shape, dtype=np.float64))
            if size <= 10**5 and rng.random() < 0.5:
                root.create_dataset(key, data=np.zeros(shape, dtype))
            else:
                root.create_dataset(key, shape=shape, dtype=dtype, chunks=(1, *shape[1:]) if chunked else None)
            if rng.random() < 0.3:
                set_attr(root[key].attrs, "compress", hostile(rng) if rng.random() < 0.5 else True)
            return f"{key} -> declared {shape} {dtype}"
        if what == "values" and key != "observations/images/top":
            values = root[key][()]
            values.flat[rng.randrange(values.size)] = rng.choice([np.nan, np.inf, -np.inf, 1e38])
            root[key][...] = values
            return f"{key}: a NaN, inf or huge value"
        if what == "attrs":
            name, value = rng.choice(["compress", "fps", "sim", "task", "expert_settings"]), hostile(rng)
            set_attr(root.attrs, name, value)
            return f"attribute {name} = {value!r}"
        choice = rng.choice(["delete", "group", "link", "soft"])
        del root[key]
        if choice == "group":
            root.create_group(key)
        elif choice == "link":
            root[key] = h5py.ExternalLink("/elsewhere.hdf5", "/x")
        elif choice == "soft":
            root[key] = h5py.SoftLink("/nowhere")
        return f"{key}: {choice}"


def load_hdf5(path: Path) -> None:
    from act.data.schema import read_episode_info, read_low_dim

    read_episode_info(path, deep=True)
    read_low_dim(path)


# LeRobot folders ----------------------------------------------------------------------------------------------
INFO_KEYS = ["total_episodes", "total_frames", "chunks_size", "fps", "data_path", "video_path", "codebase_version"]
INFO_KEYS += ["features", "robot_type"]
FEATURE_FIELDS = ["shape", "dtype", "names"]


def mutate_info(folder: Path, rng: random.Random) -> str:
    path = folder / "meta/info.json"
    if rng.random() < 0.2:
        text = rng.choice([path.read_text()[: rng.randrange(200)], "[1, 2]", "[" * 50_000, "nul", '{"fps": 50'])
        path.write_text(text)
        return f"info.json text {text[:20]!r}"
    info = json.loads(path.read_text())
    if rng.random() < 0.5:
        key, value = rng.choice(INFO_KEYS), hostile(rng)
        info[key] = value
    else:
        feature = rng.choice(sorted(info["features"]))
        key, value = f"features.{feature}.{rng.choice(FEATURE_FIELDS)}", hostile(rng)
        if rng.random() < 0.5:
            value = [rng.choice([1, 3, 7, 14, 10**9, -2, 0, 2**40]) for _ in range(rng.choice([0, 1, 2, 3, 4]))]
        info["features"][feature][key.rsplit(".", 1)[1]] = value
    path.write_text(json.dumps(info))
    return f"info.json {key} = {value!r}"


def mutate_parquet(path: Path, rng: random.Random) -> str:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    if rng.random() < 0.25:
        return f"{path.name}: " + damage_bytes(path, rng)
    table = pq.read_table(path)
    name = rng.choice(table.column_names)
    if rng.random() < 0.15:
        pq.write_table(table.drop_columns([name]), path)
        return f"{path.name}: column {name} dropped"
    values = table.column(name).to_pylist()
    row = rng.randrange(len(values))
    if isinstance(values[row], list):
        choice = rng.choice(["shorter", "longer", "nan", "inf", "null", "empty"])
        if choice in ("nan", "inf"):
            values[row][rng.randrange(len(values[row]))] = float(choice)
        elif choice == "null":
            values[row] = None
        else:
            values[row] = {"shorter": values[row][:7], "longer": values[row] + [0.0], "empty": []}[choice]
        try:
            column = pa.array(values, type=pa.list_(pa.float32()))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):  # not a row of numbers (tasks, stats/...)
            values[row], choice = None, "null"
            column = pa.array(values, type=table.column(name).type)
    else:
        value = rng.choice([None, -1, 2**62, 10**9, 3.5, float("nan"), "x", 0])
        values[row] = value
        try:
            column = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            column = pa.array([str(v) for v in values])
        name_row = f"{name}[{row}] = {value!r}"
        pq.write_table(table.set_column(table.schema.get_field_index(name), name, column), path)
        return f"{path.name}: {name_row}"
    pq.write_table(table.set_column(table.schema.get_field_index(name), name, column), path)
    return f"{path.name}: {name}[{row}] {choice} ({np.size(values[row] or [])} numbers)"


def mutate_lerobot(folder: Path, rng: random.Random) -> str:
    what = rng.choice(["info", "info", "episodes", "data", "data", "stats", "tasks"])
    if what == "info":
        return mutate_info(folder, rng)
    if what == "stats":
        path = folder / "meta/stats.json"
        path.write_text(rng.choice(['{"observation.state": {"min": "x"}}', "[", "[]", '{"action": []}']))
        return "stats.json damaged"
    if what == "tasks":
        return "tasks.parquet: " + damage_bytes(folder / "meta/tasks.parquet", rng)
    pattern = "meta/episodes/*/*.parquet" if what == "episodes" else "data/*/*.parquet"
    return mutate_parquet(next(folder.glob(pattern)), rng)


def load_lerobot(folder: Path) -> None:
    from act.data.episodes import EpisodeIndex

    index = EpisodeIndex(folder, format="lerobot")
    for episode in range(len(index)):
        index.low_dim(episode)
    index.stored_ranges()


# Checkpoints --------------------------------------------------------------------------------------------------
MODEL_KEYS = ["chunk_size", "hidden_dim", "ff_dim", "heads", "enc_layers", "dec_layers", "vae_enc_layers"]
MODEL_KEYS += ["latent_dim", "state_dim", "action_dim", "backbone_layer", "dropout", "use_vae", "unknown"]
SPEC_KEYS = ["camera_names", "image_size", "chunk_size", "state_dim", "action_dim", "stats", "task"]


def mutate_checkpoint(path: Path, base: dict, base_bytes: bytes, rng: random.Random) -> str:
    import torch

    what = rng.choice(["bytes", "model", "model", "spec", "weights", "weights", "whole"])
    if what == "bytes":
        path.write_bytes(base_bytes)
        return damage_bytes(path, rng)
    checkpoint = {key: dict(value) for key, value in base.items()}
    hparams, state = checkpoint["hyper_parameters"], checkpoint["state_dict"]
    hparams["model"], hparams["deployment"] = dict(hparams["model"]), copy.deepcopy(hparams["deployment"])
    if what == "model":
        key = rng.choice(MODEL_KEYS)
        value = rng.choice([hostile(rng), 10**9, 2**20, 3, 6, 64, 40])
        hparams["model"][key] = value
        change = f"model.{key} = {value!r}"
    elif what == "spec":
        key, value = rng.choice(SPEC_KEYS), hostile(rng)
        if key == "stats" and rng.random() < 0.6:
            value = dict(hparams["deployment"]["stats"])
            stat = rng.choice(sorted(value))
            value[stat] = rng.choice([[1.0] * 7, [float("nan")] * 14, ["x"] * 14, [-1.0] * 14, 5])
        hparams["deployment"][key] = value
        change = f"deployment.{key} = {str(value)[:60]}"
    elif what == "weights":
        name = rng.choice(sorted(state))
        choice = rng.choice(["drop", "reshape", "nan", "int", "extra"])
        if choice == "drop":
            del state[name]
        elif choice == "reshape":
            state[name] = torch.zeros(rng.choice([(3,), (2, 2), (1, 1, 1, 1), ()]))
        elif choice == "nan":
            state[name] = torch.full_like(state[name], float("nan")) if state[name].is_floating_point() else state[name]
        elif choice == "int":
            state[name] = 7
        else:
            state["net.model.extra.weight"] = torch.zeros(2)
        change = f"weight {name}: {choice}"
    else:
        key = rng.choice(["hyper_parameters", "state_dict"])
        checkpoint[key] = rng.choice([[], None, 5, {"model": 1}])
        change = f"{key} = {checkpoint[key]!r}"
    torch.save(checkpoint, path)
    return change


def load_checkpoint(path: Path) -> None:
    from act.model.checkpoint import load_network

    load_network(path)


# Export metadata ----------------------------------------------------------------------------------------------
def mutate_metadata(base: str, rng: random.Random) -> str | bytes:
    """The metadata text, damaged; bytes where it is not UTF-8 (as a TorchScript extra file may hold)."""
    if rng.random() < 0.2:
        return rng.choice(
            [
                base[: rng.randrange(len(base))],
                "[" * 50_000,
                "[]",
                "null",
                "",
                '"x"',
                base + "}",
                b"\xff" + base.encode(),
            ]
        )
    meta = json.loads(base)
    for _ in range(rng.choice([1, 1, 2])):
        key = rng.choice(sorted(meta))
        meta[key] = hostile(rng)
        if key == "stats" and rng.random() < 0.5:
            meta[key] = {"qpos_mean": rng.choice([["x"], [[1.0]], 3, [1e308] * 14, [None]])}
    return json.dumps(meta)


def load_metadata(text: str | bytes) -> None:
    from act.runtime.predictors import spec_from_metadata

    spec_from_metadata(text, "policy.pt")


# The run ------------------------------------------------------------------------------------------------------
def main(seed: int, scale: int) -> None:
    import logging

    from hostile_data import checkpoint_dict, export_metadata_text, write_hdf5_episode, write_lerobot_folder

    from act.common.errors import InputError

    logging.disable(logging.WARNING)  # the loaders' warnings (arm order, ...) are not what is looked at here
    rng = random.Random(seed)
    work = Path(tempfile.mkdtemp(prefix="fuzz_loaders_"))
    signal.signal(signal.SIGALRM, _alarm)
    try:
        bases = {"hdf5": write_hdf5_episode(work / "base.hdf5"), "lerobot": write_lerobot_folder(work / "base_v3")}
        base_checkpoint = checkpoint_dict()
        torch_path = work / "base.ckpt"
        import torch

        torch.save(base_checkpoint, torch_path)
        base_bytes, base_metadata = torch_path.read_bytes(), export_metadata_text()
        outcomes = {kind: {"loaded": 0, "refused": 0} for kind in PER_KIND}
        failures = []
        started = time.perf_counter()
        for kind, per_kind in PER_KIND.items():
            for n in range(per_kind * scale):
                if kind == "hdf5":
                    target = work / f"episode_{n}.hdf5"
                    shutil.copy(bases["hdf5"], target)
                    change, load = mutate_hdf5(target, rng), lambda: load_hdf5(target)
                elif kind == "lerobot":
                    target = Path(shutil.copytree(bases["lerobot"], work / f"v3_{n}"))
                    change, load = mutate_lerobot(target, rng), lambda: load_lerobot(target)
                elif kind == "checkpoint":
                    target = work / f"fuzzed_{n}.ckpt"
                    change, load = (
                        mutate_checkpoint(target, base_checkpoint, base_bytes, rng),
                        lambda: load_checkpoint(target),
                    )
                else:
                    text = mutate_metadata(base_metadata, rng)
                    change, load = f"metadata {text[:60]!r}", lambda: load_metadata(text)
                signal.alarm(HANG_S)
                try:
                    load()
                    outcomes[kind]["loaded"] += 1
                except InputError as err:
                    outcomes[kind]["refused"] += 1
                    if "\n" in str(err):
                        failures.append(f"{kind} #{n} ({change}): an error of several lines: {str(err)[:300]!r}")
                except Hang:
                    failures.append(f"{kind} #{n} ({change}): no answer in {HANG_S} s")
                except Exception as err:  # noqa: BLE001 - every other exception is what the fuzz looks for
                    failures.append(f"{kind} #{n} ({change}): {type(err).__name__}: {str(err)[:300]}")
                finally:
                    signal.alarm(0)
                if kind != "metadata":
                    shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)
        elapsed = round(time.perf_counter() - started, 1)
        print(json.dumps({"outcomes": outcomes, "failures": failures, "seconds": elapsed}))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
