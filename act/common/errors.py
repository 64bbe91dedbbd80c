"""The project's own error types: what a user can cause and fix (a setting, a file, a folder, a run).

Entry points print these as one line (``error: <message>``, exit 2) through ``act.apps.cli.run_main``;
anything else (a plain ``ValueError`` from a programming error) keeps its traceback. Each subclass
also derives from the built-in type callers already catch (``ValueError``, ``FileNotFoundError``,
``RuntimeError``), so ``except ValueError`` around the Python API keeps working.
"""

from __future__ import annotations


class UserError(Exception):
    """Base of every error a user can fix. ``exit_code`` and ``prefix`` say how an entry point reports it."""

    exit_code = 2
    prefix = "error"


class InputError(UserError, ValueError):
    """A setting, an argument or a file's contents that cannot work; the message names it and what was expected."""


class MissingFileError(UserError, FileNotFoundError):
    """A file or folder the user named does not exist."""


class RunError(UserError, RuntimeError):
    """Work that cannot go on: a folder in use, a disk that refused a write, a diverged loss, a stopped robot."""


class RunStopped(RunError):
    """A run that stopped on purpose and said why (a safety stop: exit 1; Ctrl-C: exit 130)."""

    prefix = "stopped"

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code
