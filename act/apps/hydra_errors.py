"""Hydra's complaints about a command line, as the one ``error:`` line every entry point prints.

Hydra reports a mistyped override (``trainer.max_stepz=4``), an option a group lacks
(``experiment=smok``) or an override that does not parse in several lines of its own, ending in
"Set the environment variable HYDRA_FULL_ERROR=1", with exit status 1. ``hydra_error_line`` turns each into
one line naming the key and the nearest valid name, composing the entry point's own config to know the valid
names. ``+key=...`` additions that nothing reads are refused by ``act.apps.adapters.overrides.unread_additions``.
See ``act.apps.cli.hydra_main``.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Iterable

from omegaconf import DictConfig, OmegaConf

GRAMMAR = "https://hydra.cc/docs/advanced/override_grammar/basic/"


def nearest(name: str, valid: Iterable[str]) -> str | None:
    """The valid name closest to a mistyped ``name`` (difflib's ratio of at least 0.6), or None."""
    matches = difflib.get_close_matches(name, list(valid), n=1, cutoff=0.6)
    return matches[0] if matches else None


def compose_config(config_dir: Path, config_name: str, overrides: list[str]) -> DictConfig | None:
    """``config_name`` composed with ``overrides`` (Hydra's own section included); None if that fails too."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()  # the failed run's
    try:
        with initialize_config_dir(config_dir=str(config_dir), version_base="1.3"):
            return compose(config_name, overrides=overrides, return_hydra_config=True)
    except Exception:  # noqa: BLE001 - the names are a courtesy: without them the line still says what failed
        return None


def _keys(cfg: DictConfig | None, path: str) -> list[str]:
    """The keys of the node at ``path`` ('' for the top) of ``cfg``; none where there is no such node."""
    if cfg is None:
        return []
    node = OmegaConf.select(cfg, path, default=None) if path else cfg
    return [str(k) for k in node.keys()] if isinstance(node, DictConfig) else []


def unknown_key(key: str, cfg: DictConfig | None, entry: str) -> str:
    """``trainer.max_stepz is not a setting of train; did you mean trainer.max_steps?``, or the valid keys."""
    parent, _, name = key.rpartition(".")
    valid = _keys(cfg, parent)
    where = f"{parent}." if parent else ""
    match = nearest(name, valid)
    if match:
        return f"{key} is not a setting of {entry}; did you mean {where}{match}?"
    shown = ", ".join(sorted(k for k in valid if k != "hydra"))
    return f"{key} is not a setting of {entry}" + (f"; {parent or entry} has: {shown}" if shown else "")


# Blocks that hold another entry point's settings, only those the config sets: ``demo.eval`` is eval.py's
# (docs/quickstart.md); a setting it leaves out is added with ``+``.
OPEN_BLOCKS = {"demo.eval": "eval"}


def unset_in_open_block(key: str, given: str | None, config_dir: Path) -> str | None:
    """``demo.eval.num_episodes`` (a real eval.py setting the block does not set) as a line that says to add it
    with ``+``; None for any other key. Before it, the line offered the nearest key the block sets
    (``did you mean demo.eval.num_videos?``)."""
    parent, _, name = key.rpartition(".")
    if parent not in OPEN_BLOCKS or not (config_dir / f"{OPEN_BLOCKS[parent]}.yaml").is_file():
        return None
    if name not in _keys(OmegaConf.load(config_dir / f"{OPEN_BLOCKS[parent]}.yaml"), ""):
        return None
    example = f"+{given}" if given and "=" in given else f"+{key}=..."
    return f"{key}: {parent} sets only some of {OPEN_BLOCKS[parent]}.py's settings, not this one; add it with {example}"


def unknown_option(missing: str, options: list[str]) -> str:
    """``experiment=smok is not a config in configs/experiment/; did you mean experiment=smoke? (valid: ...)``."""
    group, _, option = missing.rpartition("/")
    match = nearest(option, options)
    hint = f"; did you mean {group}={match}?" if match else ""
    return f"{group}={option} is not a config in configs/{group}/{hint} (valid: {', '.join(options)})"


def one_line(text: str) -> str:
    """Hydra's message joined into one line, without the config search path it lists."""
    text = text.split("Config search path:")[0]
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


def hydra_error_line(err: Exception, config_dir: Path, config_name: str, overrides: list[str]) -> str | None:
    """One line for an error Hydra raised while composing ``config_name`` from ``overrides``; None for
    anything else (it is not about the command line)."""
    from hydra.errors import ConfigCompositionException, MissingConfigException, OverrideParseException
    from omegaconf.errors import OmegaConfBaseException

    if isinstance(err, OverrideParseException):
        return f"cannot read the override {err.override!r}: {one_line(err.message).split(' See ')[0]}; see {GRAMMAR}"
    if (
        isinstance(err, MissingConfigException)
        and err.missing_cfg_file
        and "/" in err.missing_cfg_file
        and err.options is not None
    ):
        return unknown_option(err.missing_cfg_file, list(err.options))
    missing = getattr(err.__cause__, "full_key", None) or _overridden(str(err))
    if isinstance(err, ConfigCompositionException) and missing:
        others = [o for o in overrides if not o.lstrip("+~").split("=")[0].startswith(missing)]  # all but its own
        given = next((o.lstrip("~") for o in overrides if o.lstrip("~").split("=")[0] == missing), None)
        addition = unset_in_open_block(str(missing), given, config_dir)
        if addition:
            return addition
        cfg = compose_config(config_dir, config_name, others) or compose_config(config_dir, config_name, [])
        return unknown_key(str(missing), cfg, config_name)
    if isinstance(err, ValueError) and str(err).startswith("Config group override must be a string"):
        return group_given_a_value(config_dir, overrides)
    if isinstance(err, (ConfigCompositionException, OmegaConfBaseException)):
        return one_line(str(err))
    return None


def group_given_a_value(config_dir: Path, overrides: list[str]) -> str | None:
    """``expert=true``, where ``expert`` is a config group: the group's configs are the valid values."""
    for override in overrides:
        key, _, value = override.lstrip("+~").partition("=")
        group = config_dir / key
        if group.is_dir():
            options = sorted(f.stem for f in group.glob("*.yaml"))
            if value not in options:
                return unknown_option(f"{key}/{value}", options)
    return None


def _overridden(message: str) -> str | None:
    """The key of Hydra's "Could not override 'task'. No match in the defaults list.", or None."""
    match = re.match(r"Could not override '([^']+)'", message)
    return match.group(1) if match else None
