"""The one wrapper every entry point runs its work through: one output per message, one error line.

    @hydra.main(config_path="../configs", config_name="eval", version_base="1.3")
    def main(cfg):
        return run_main(evaluate_from_config, cfg)
"""

from __future__ import annotations

import logging
import sys
from typing import Any, Callable

from common.errors import UserError

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


def run_main(fn: Callable[..., Any], *args: Any, interrupted: str = "interrupted") -> Any:
    """``fn(*args)``; a ``UserError`` becomes ``<prefix>: <message>`` on stderr and its exit code (2 for a
    setting, file or run the user can fix), Ctrl-C the one line ``interrupted`` and exit 130. Other
    exceptions pass through with their traceback: they are bugs."""
    quiet_logging()
    try:
        return fn(*args)
    except UserError as err:
        print(f"{err.prefix}: {err}", file=sys.stderr)
        sys.exit(err.exit_code)
    except KeyboardInterrupt:
        print(interrupted, file=sys.stderr)
        sys.exit(130)
