"""What a command line overrides, read back from Hydra: the overrides given, the key each sets, and those that change
a recipe (so that make demo quotes no learning curve measured on another recipe)."""

from __future__ import annotations

import hydra
from omegaconf import DictConfig, ListConfig, OmegaConf


def explicit_overrides() -> list[str]:
    """The overrides given on the command line (none outside a Hydra application)."""
    from hydra.core.hydra_config import HydraConfig

    return list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []


# Overrides that change what is learned, so the shipped recipe's curve no longer says what to expect: a
# `make demo ARGS="data.batch_size=16"` was told "about 0.60 at 6261 steps" (batch 8's curve) and scored
# 0.90 (docs/results.md, batch 16 on a Zen 4). policy.channels_last changes the memory layout only; an
# experiment= brings its own demo block, curve included.
RECIPE_KEYS = ("task", "policy", "data.batch_size", "data.dataset_dir", "demo.num_demos", "demo.expert")
LAYOUT_ONLY = ("policy.channels_last",)


def override_key(override: str) -> str:
    """The config key a Hydra override sets, adds (``+``) or deletes (``~``)."""
    return override.split("=")[0].lstrip("+~")


def recipe_changes(overrides: list[str]) -> list[str]:
    """The command-line overrides among ``overrides`` that change the recipe (``RECIPE_KEYS``)."""

    def under(key: str, prefixes: tuple[str, ...]) -> bool:
        return any(key == p or key.startswith(p + ".") for p in prefixes)

    return [o for o in overrides if under(override_key(o), RECIPE_KEYS) and not under(override_key(o), LAYOUT_ONLY)]


_ABSENT = object()


def changes_in_effect(changes: list[str], run: DictConfig, without: DictConfig) -> list[str]:
    """Those of ``changes`` (``recipe_changes``) whose key holds a different value in ``run``, the
    composed config, than in ``without``, the same config composed without them: `make demo
    ARGS="data.batch_size=16"` where the experiment trains batch 16 already changes nothing."""

    def value(cfg: DictConfig, key: str):
        found = OmegaConf.select(cfg, key, default=_ABSENT, throw_on_resolution_failure=False)
        return OmegaConf.to_container(found) if isinstance(found, DictConfig | ListConfig) else found

    return [o for o in changes if value(run, override_key(o)) != value(without, override_key(o))]


def recipe_changes_of_this_run(cfg: DictConfig) -> list[str]:
    """The command-line overrides that change this run's recipe from the experiment's, which its
    learning curve (``demo.expected``) was measured on: an override that sets a recipe key to the value
    the experiment gives it already is no change."""
    given = explicit_overrides()
    changes = recipe_changes(given)
    if not changes:
        return []
    rest = [o for o in given if o not in changes]
    return changes_in_effect(changes, cfg, hydra.compose(config_name="demo", overrides=rest))  # scripts/demo.py's


def plain(node):
    """A config node as plain Python (lists, dicts; interpolations resolved), other values as they are: what a
    settings dataclass takes, so that its error lines show what was typed."""
    return OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node
