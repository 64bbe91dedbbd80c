"""One writer per folder: ``<folder>/.lock``, held while a run or a recording writes there.

The lock is ``flock(LOCK_EX | LOCK_NB)`` on the file, kept for as long as the writer works. The
operating system drops it when the holding process ends in any way (kill -9 included), so a lock
whose process is gone is recognised without trusting a pid, which another process may have been
given since. The file also holds the writer's pid, host and start time, for the message that
refuses a second writer, and for the note when a new writer takes over from one that died. A
writer that ends cleanly removes the file: one left behind names a writer that did not.

``flock`` does not protect across hosts on some network filesystems (NFS mounted with
``local_lock=flock`` or ``local_lock=all``, some CIFS and Lustre set-ups): there, two machines
writing into one shared folder can both hold the lock.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import socket
import stat
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from act.common.errors import InputError, RunError

LOCK_NAME = ".lock"
# flock is refused where the filesystem does not offer it: the work goes on, unguarded.
UNSUPPORTED = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)
log = logging.getLogger(__name__)

# Folders this process holds, with how many nested ``folder_lock`` blocks hold each: one writer
# may lock its folder again (``record_with_bar`` around ``record``); flock would refuse that.
_held: dict[Path, int] = {}


class FolderInUseError(RunError):
    """Another live process is writing into the folder."""


def _describe_holder(holder: dict) -> str:
    """``a training run (pid 4242 on host-a since 2025-01-31 10:02:03)`` from a lock file's contents."""
    return (
        f"{holder.get('writer', 'another process')} (pid {holder.get('pid', '?')} on "
        f"{holder.get('host', '?')} since {holder.get('since', '?')})"
    )


def _read_holder(fd: int) -> dict | None:
    """The holder a lock file names, or None (empty: released cleanly, or its writer is starting up)."""
    text = os.pread(fd, 4096, 0).decode(errors="replace")
    try:
        holder = json.loads(text)
    except ValueError:
        return None
    return holder if isinstance(holder, dict) else None


def _acquire(fd: int, path: Path, fix: str, wait: bool) -> bool:
    """Lock ``fd``: True if held now, False where the filesystem has no locks. If another holds it: raise, or
    with ``wait`` say so and block until it is released."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _read_holder(fd)
        first = _describe_holder(holder) if holder else "another process"
        if not wait:
            raise FolderInUseError(f"{path.parent} is in use by {first}; wait for it to finish, or {fix}") from None
        log.warning("%s is in use by %s; waiting for it to finish", path.parent, first)
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError as err:
        if err.errno not in UNSUPPORTED:
            raise
        log.warning(
            "%s: this filesystem offers no file locks (%s); nothing stops a second writer here", path, err.strerror
        )
        return False
    return True


def _open_file(path: Path) -> int:
    """``path`` opened for reading and writing, created if need be: never through a symbolic link (a ``.lock``
    link planted in a shared output folder would have the lock overwrite the file it points to), and only a
    plain file (a pipe or a device in its place would block or be written to)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
    except OSError as err:
        if err.errno != errno.ELOOP:
            raise
        raise InputError(
            f"{path} is a symbolic link; a lock file never is: remove it (rm {path}) and start again"
        ) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InputError(f"{path} is not a plain file; a lock file always is: remove it and start again")
    return fd


def _open_locked(path: Path, fix: str, wait: bool) -> int | None:
    """A descriptor of ``path``, created if need be and locked; None where the filesystem has no locks."""
    while True:
        fd = _open_file(path)
        try:
            if not _acquire(fd, path, fix, wait):
                os.close(fd)
                return None
            # A writer that releases removes the file while still holding it: a process that opened
            # it just before then holds a lock on a file no longer there, and locks the new one.
            if os.path.samestat(os.fstat(fd), os.lstat(path)):
                return fd
        except FileNotFoundError:
            pass
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)


@contextmanager
def folder_lock(folder: str | Path, writer: str, fix: str, wait: bool = False) -> Iterator[None]:
    """Hold ``<folder>/.lock`` (creating ``folder``) for the block.

    Args:
        writer: what this process is, for a second writer's message (``a training run``).
        fix: what the refused writer should do instead (``give another out_dir``).
        wait: instead of refusing, say who holds the folder and wait until it is released (a writer that
            only needs what the holder is making, such as ``make demo``'s demonstrations).

    Raises ``FolderInUseError`` (one line, naming the holder's pid, host and start time) if a live
    process holds it. A lock left by a process that is gone is taken over, with a warning naming it.
    """
    folder = Path(folder).resolve()
    if folder in _held:
        _held[folder] += 1
        try:
            yield
        finally:
            _held[folder] -= 1
        return
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_NAME
    fd = _open_locked(path, fix, wait)
    if fd is None:
        yield
        return
    try:
        left = _read_holder(fd)
        if left:
            elsewhere = (
                ""
                if left.get("host") == socket.gethostname()
                else (
                    "; if it still runs there, stop one of the two: "
                    "this filesystem's locks may not reach across machines"
                )
            )
            log.warning("%s: %s is gone; taking the folder over%s", path, _describe_holder(left), elsewhere)
        mine = {
            "writer": writer,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": time.strftime("%Y-%m-%d %H:%M:%S"),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(mine) + "\n").encode(), 0)
        _held[folder] = 1
        try:
            yield
        finally:
            del _held[folder]
            path.unlink(missing_ok=True)  # released cleanly: nothing left behind, no one to take over from
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
