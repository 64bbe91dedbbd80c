"""The safetensors format (Hugging Face's tensor files, which LeRobot checkpoints use), read and written here.

A file is an 8-byte little-endian header length N, N bytes of JSON (``{name: {"dtype", "shape",
"data_offsets": [begin, end]}, "__metadata__": {str: str}}``), then the tensors' bytes, row-major, at those
offsets. The format is small enough to read with NumPy alone, and reading it here lets every declared size be
checked against the file's real size before anything is allocated: a downloaded file is an input like any other
(a header declaring 2^60 bytes is one ``error:`` line, never a 20 GB allocation).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Mapping

import numpy as np
import torch

from act.common.errors import InputError
from act.common.io import atomic_path

# The format's dtype codes: a kind letter and the width in bits (written out here by rule, not one by one)
DTYPES = {
    f"{kind}{np.dtype(t).itemsize * 8}": np.dtype(t)
    for kind, types in (("F", (np.float64, np.float32, np.float16)), ("I", (np.int64, np.int32, np.int16, np.int8)))
    for t in types
}
DTYPES.update({"U8": np.dtype(np.uint8), "BOOL": np.dtype(np.bool_)})
NAMES = {np.dtype(v): k for k, v in DTYPES.items()}
MAX_HEADER = 100 * 2**20  # the reference implementation's own limit on the JSON header


class SafetensorsError(InputError):
    """A file that is not a readable safetensors file; the message starts with its path."""


def read_safetensors(path: str | Path) -> dict[str, torch.Tensor]:
    """Every tensor of ``path`` (CPU, its stored dtype; bf16 is read as float32), each checked against the file
    before it is read: a known dtype, a shape whose size matches its byte range, ranges inside the file."""
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise SafetensorsError(f"{path} is not a safetensors file (shorter than its 8-byte header length)")
        length = int.from_bytes(head, "little")
        if length > min(MAX_HEADER, size - 8):
            raise SafetensorsError(f"{path} is not a readable safetensors file (a {length}-byte header declared)")
        try:
            header = json.loads(f.read(length))
        except (ValueError, RecursionError):
            raise SafetensorsError(f"{path} is not a readable safetensors file (its header is not JSON)") from None
        if not isinstance(header, dict):
            raise SafetensorsError(f"{path} is not a readable safetensors file (its header is not a mapping)")
        header.pop("__metadata__", None)
        data_size = size - 8 - length
        tensors = {}
        for name, entry in header.items():
            dtype, shape, (begin, end) = _entry(path, name, entry, data_size)
            f.seek(8 + length + begin)
            array = np.frombuffer(f.read(end - begin), dtype=dtype).reshape(shape)
            if entry["dtype"] == "BF16":  # its 16 bits are the high half of a float32's
                array = (array.astype(np.uint32) << 16).view(np.float32)
            tensors[name] = torch.from_numpy(array.copy())
    return tensors


def _entry(path: Path, name: str, entry, data_size: int):
    """(NumPy dtype, shape, (begin, end)) of one header entry, checked against the data's ``data_size`` bytes."""
    if not isinstance(entry, dict) or not {"dtype", "shape", "data_offsets"} <= set(entry):
        raise SafetensorsError(f"{path}: tensor {name!r} lacks dtype, shape or data_offsets")
    code, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if code == "BF16":
        dtype = np.dtype(np.uint16)  # bf16's bits, widened to float32 by the reader
    elif code in DTYPES:
        dtype = np.dtype(DTYPES[code])
    else:
        raise SafetensorsError(f"{path}: tensor {name!r} has dtype {code!r}, not one of {sorted(DTYPES)} or BF16")
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise SafetensorsError(f"{path}: tensor {name!r} has shape {shape!r}, not a list of sizes")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)
        or not 0 <= offsets[0] <= offsets[1] <= data_size
    ):
        raise SafetensorsError(f"{path}: tensor {name!r} lies outside the file ({offsets!r}, {data_size} bytes)")
    count = 1
    for d in shape:
        count *= d  # a Python int: a forged shape cannot overflow, and is caught just below
    if count * dtype.itemsize != offsets[1] - offsets[0]:
        raise SafetensorsError(
            f"{path}: tensor {name!r} of shape {shape} takes {count * dtype.itemsize} bytes, "
            f"its range holds {offsets[1] - offsets[0]}"
        )
    return dtype, tuple(shape), tuple(offsets)


def write_safetensors(path: str | Path, tensors: Mapping[str, torch.Tensor], metadata: Mapping[str, str] | None = None):
    """Write ``tensors`` (contiguous CPU copies are taken; names in sorted order) to ``path`` atomically."""
    arrays = {name: tensors[name].detach().cpu().contiguous().numpy() for name in sorted(tensors)}
    header: dict = {"__metadata__": dict(metadata)} if metadata else {}
    offset = 0
    for name, array in arrays.items():
        if array.dtype not in NAMES:
            raise InputError(f"tensor {name!r}: dtype {array.dtype} cannot be written to safetensors here")
        header[name] = {"dtype": NAMES[array.dtype], "shape": list(array.shape),
                        "data_offsets": [offset, offset + array.nbytes]}  # fmt: skip
        offset += array.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned, as the reference writer does
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for array in arrays.values():
            f.write(array.tobytes())
        f.flush()
        os.fsync(f.fileno())
