"""Small file and process helpers: atomic writes, so an interrupted run never leaves a half-written file;
a folder check before long work; workers that exit with their parent."""

from __future__ import annotations

import json
import os
import secrets
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


def _new_file(folder: Path, prefix: str, suffix: str) -> Path:
    """A new empty file ``<prefix><random><suffix>`` in ``folder``, created with mode 0666 less the umask, as
    ``open()`` creates files: the kernel applies the umask, which is never read (``os.umask`` can only read it
    by setting it, for every thread of the process at once). Never through a symbolic link; never an
    existing file."""
    while True:
        path = folder / f"{prefix}{secrets.token_hex(4)}{suffix}"
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666))
            return path
        except FileExistsError:
            continue


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _new_file(path.parent, f".{path.stem}.", f".tmp{path.suffix}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_json(path: str | Path, data) -> Path:
    """Write ``data`` as indented JSON to ``path`` atomically; return the path."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")
    return Path(path)


def unwritable_reason(folder: str | Path) -> str | None:
    """None if ``folder`` exists (or can be created) and accepts a new file, else why not (a few words)."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".write_check.", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        return "a file is in the way" if folder.exists() and not folder.is_dir() else err.strerror or str(err)
    return None


def exit_with_parent(poll_s: float = 1.0) -> None:
    """In a worker process: exit as soon as the process that started it is gone.

    A pool worker whose parent was killed (``kill -9``: no clean-up runs) would otherwise finish
    its queued work and then wait forever on its pipe. A daemon thread polls the parent's id; when
    the worker is re-parented, it exits at once (``os._exit``: nothing left to flush).
    """
    import multiprocessing

    # The parent's id as the parent gave it: if it died while this worker was starting up,
    # os.getppid() would already name the process it was re-parented to.
    started_by = multiprocessing.parent_process()
    parent = started_by.pid if started_by is not None else os.getppid()

    def watch():
        while os.getppid() == parent:
            threading.Event().wait(poll_s)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()
