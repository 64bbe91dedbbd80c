"""The data layer's error about a dataset folder as a whole, below everything that reads one (episode files,
LeRobot folders, the index), so that each can raise it without importing another."""

from __future__ import annotations

from act.common.errors import InputError


class DatasetError(InputError):
    """A dataset folder that cannot be used as a whole (missing, empty, inconsistent)."""
