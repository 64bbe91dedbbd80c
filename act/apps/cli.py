"""The one wrapper every entry point runs its work through: one output per message, one error line.

    @hydra_main("eval")                      # configs/eval.yaml
    def main(cfg):
        return run_main(evaluate.main, cfg)

A mistake on the command line is the user's too: an override Hydra cannot apply (a mistyped key, an
option a group lacks, a line that does not parse) and a ``+`` addition nothing reads print one
``error:`` line and exit 2, like a bad setting (``act.apps.hydra_errors``). ``HYDRA_FULL_ERROR=1``
gives Hydra's full report instead.
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
import sys
from pathlib import Path
from typing import Any, Callable

from act.common.errors import InputError, UserError

# Loggers that attach their own console handler: Hydra's root handler already prints their records.
OWN_HANDLERS = ("lightning.pytorch", "lightning.fabric", "lightning", "pytorch_lightning")
ADVERTISEMENTS = ("Tip: For seamless cloud",)  # Lightning's pointers to its paid services


def _not_advertisement(record: logging.LogRecord) -> bool:
    return not any(text in str(record.msg) for text in ADVERTISEMENTS)


def quiet_logging() -> None:
    """Print each library message once (through the root logger Hydra or ``basicConfig`` set up) and drop
    vendor advertisements (Lightning's "Tip: ... litlogger"). Idempotent."""
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(level=logging.INFO, format="[%(asctime)s][%(name)s][%(levelname)s] - %(message)s")
    for handler in root.handlers:
        if _not_advertisement not in handler.filters:
            handler.addFilter(_not_advertisement)
    for name in OWN_HANDLERS:
        logger = logging.getLogger(name)
        for handler in list(logger.handlers):
            if type(handler) is logging.StreamHandler:  # a console handler, not a log file
                logger.removeHandler(handler)
        logger.propagate = True


FULL_ERROR = "HYDRA_FULL_ERROR"  # Hydra raises its errors instead of printing them when this is "1"
# Inside a ``hydra_main`` entry point: "app" while it runs; "user" (the user's HYDRA_FULL_ERROR) while
# Hydra composes the config, until the job starts.
_entry: dict = {}


def hydra_main(config_name: str) -> Callable[[Callable[[Any], Any]], Callable[[], Any]]:
    """``@hydra.main(config_path="../configs", config_name=..., version_base="1.3")`` whose errors in composing
    the config print one ``error:`` line with exit 2. Hydra is made to raise them (``HYDRA_FULL_ERROR=1``,
    set only until the job starts: ``run_main`` gives the user's setting back)."""

    def decorate(task: Callable[[Any], Any]) -> Callable[[], Any]:
        import hydra

        app = hydra.main(config_path="../configs", config_name=config_name, version_base="1.3")(task)
        config_dir = Path(inspect.getfile(task)).resolve().parent.parent / "configs"

        @functools.wraps(task)
        def main() -> Any:
            _entry["app"] = True
            if os.environ.get(FULL_ERROR) == "1":
                return app()  # the user asked for Hydra's own report
            _entry["user"] = os.environ.get(FULL_ERROR)
            os.environ[FULL_ERROR] = "1"
            try:
                return app()
            except Exception as err:
                if "user" not in _entry:  # raised by the job, which Hydra reports as it always did
                    raise
                from act.apps.hydra_errors import hydra_error_line

                line = hydra_error_line(
                    err, config_dir, config_name, [a for a in sys.argv[1:] if not a.startswith("-")]
                )
                if line is None:
                    raise
                print(f"error: {line}", file=sys.stderr)
                sys.exit(2)
            finally:
                _job_started()

        return main

    return decorate


def _job_started(cfg: Any = None) -> None:
    """Give the user's ``HYDRA_FULL_ERROR`` back (the job's own errors are reported as Hydra always
    does); in a ``hydra_main`` job, refuse a ``+`` addition nothing reads (``InputError``)."""
    if "user" in _entry:
        user = _entry.pop("user")
        if user is None:
            os.environ.pop(FULL_ERROR, None)
        else:
            os.environ[FULL_ERROR] = user
    if cfg is not None and _entry.get("app"):
        from act.apps.adapters.overrides import unread_additions

        why = unread_additions(cfg)
        if why:
            raise InputError(why)


def run_main(fn: Callable[..., Any], *args: Any, interrupted: str = "interrupted") -> Any:
    """``fn(*args)``; a ``UserError`` becomes ``<prefix>: <message>`` on stderr and its exit code (2 for a
    setting, file or run the user can fix), Ctrl-C the one line ``interrupted`` and exit 130. Other
    exceptions pass through with their traceback: they are bugs. In a Hydra job (``hydra_main``), a
    ``+`` override that adds a key nothing reads is refused first."""
    quiet_logging()
    try:
        _job_started(args[0] if args else None)
        return fn(*args)
    except UserError as err:
        print(f"{err.prefix}: {err}", file=sys.stderr)
        sys.exit(err.exit_code)
    except KeyboardInterrupt:
        print(interrupted, file=sys.stderr)
        sys.exit(130)
