"""What a command line overrides, read back from Hydra: the overrides given, the key each sets, and those that change
a recipe (so that make demo quotes no learning curve measured on another recipe), and ``+key=...`` additions that
nothing would read (``run_realtime.py +task=insertion`` ran transfer cube: the policy's task comes from its
checkpoint)."""

from __future__ import annotations

import hydra
from omegaconf import DictConfig, ListConfig, OmegaConf

from act.apps.hydra_errors import nearest


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


def unread_additions(cfg: DictConfig) -> str | None:
    """For a Hydra job: why a ``+``/``++`` override that adds a top-level key no config of this entry point
    has cannot work (nothing reads it), or None. Composes the config without the additions to tell."""
    from hydra import compose
    from hydra.core.hydra_config import HydraConfig
    from hydra.core.override_parser.overrides_parser import OverridesParser

    job = HydraConfig.get().job
    parsed = OverridesParser.create().parse_overrides(list(HydraConfig.get().overrides.task))
    additions = [o for o in parsed if (o.is_add() or o.is_force_add()) and not o.key_or_group.startswith("hydra")]
    if not additions:
        return None
    try:
        base = compose(job.config_name, overrides=[o.input_line for o in parsed if o not in additions])
    except Exception:  # noqa: BLE001 - cannot tell without it; Hydra composed the whole line, so let it run
        return None
    new = [str(key) for key in cfg if key not in base]
    if not new:
        return None
    culprit = next((o for o in additions if o.key_or_group.split(".")[0] in new), additions[0])
    added = new[0] if len(new) == 1 else "keys " + ", ".join(new)
    match = nearest(new[0], [str(k) for k in base])
    fix = f"did you mean {match}?" if match else f"its settings: {', '.join(sorted(str(k) for k in base))}"
    return f"{culprit.input_line} adds {added}, which {job.name} does not read; {fix}"
