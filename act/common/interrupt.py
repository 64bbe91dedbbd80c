"""Ctrl-C where the work can stop: the signal is noted at once and raised at the next stop point.

Python raises ``KeyboardInterrupt`` wherever the main thread is when SIGINT arrives, finalizers
included: a weakref callback of h5py's object registry, tqdm's ``__del__``. There it is printed as
``Exception ignored in: ... KeyboardInterrupt`` and dropped, and the work goes on as if nothing had
been pressed (a conversion to ACT HDF5 finished with exit 0 after 7 of 30 interrupts, issue 33).
Inside ``stop_points()`` SIGINT only sets a flag; ``stop_point()``, called between units of work
(an episode, a frame), raises it there. A second Ctrl-C raises at once, wherever it lands.

    with stop_points():
        for episode in episodes:
            stop_point()
            convert(episode)
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator

_pressed = threading.Event()  # SIGINT arrived inside ``stop_points()``, not yet raised
_active = False  # within ``stop_points()``: the flag is ours to raise


def stop_point() -> None:
    """Raise ``KeyboardInterrupt`` if Ctrl-C was pressed inside ``stop_points()``; else nothing (cheap)."""
    if _pressed.is_set():
        _pressed.clear()
        raise KeyboardInterrupt


def _note(previous):
    def handler(signum, frame):
        if _pressed.is_set():  # pressed again before a stop point: the user insists
            signal.signal(signal.SIGINT, previous)
            raise KeyboardInterrupt
        _pressed.set()

    return handler


@contextmanager
def stop_points() -> Iterator[None]:
    """For the block, SIGINT waits for the next ``stop_point()``; one still pending when the block ends
    is raised then. Outside the main thread, or where SIGINT is ignored (a background job), nothing changes."""
    global _active
    previous = signal.getsignal(signal.SIGINT)
    if _active or threading.current_thread() is not threading.main_thread() or previous in (signal.SIG_IGN, None):
        yield
        return
    _pressed.clear()
    signal.signal(signal.SIGINT, _note(previous))
    _active = True
    try:
        yield
        stop_point()
    finally:
        _active = False
        signal.signal(signal.SIGINT, previous)
        _pressed.clear()
