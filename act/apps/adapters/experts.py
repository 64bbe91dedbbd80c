"""The expert a config names (configs/expert/): its settings object, checked, for recording, rollouts, evaluation
and make demo."""

from __future__ import annotations

import hydra
from hydra.errors import InstantiationException
from omegaconf import DictConfig

from act.common.checks import check_setting
from act.common.errors import InputError
from act.envs.experts import ScriptedSettings
from act.envs.human_like import HumanLikeSettings


def expert_from_cfg(node: DictConfig) -> ScriptedSettings | HumanLikeSettings:
    """The expert settings a config node describes (configs/expert/<name>.yaml: ``_target_`` and its fields),
    checked (``InputError`` naming the setting otherwise)."""
    try:
        return hydra.utils.instantiate(node, _convert_="all")
    except InstantiationException as err:
        if isinstance(err.__cause__, InputError):
            raise err.__cause__ from None
        raise InputError(f"expert settings: {err.__cause__ or err}") from err


def expert_named(name: str, key: str = "demo.expert") -> ScriptedSettings | HumanLikeSettings:
    """The settings of configs/expert/<name>.yaml as they are, for a setting ``key`` that names the expert;
    needs Hydra initialised (an entry point, or ``initialize_config_dir``)."""
    from hydra.core.global_hydra import GlobalHydra

    check_setting(key, name, GlobalHydra.instance().config_loader().get_group_options("expert"), " (configs/expert/)")
    return expert_from_cfg(hydra.compose(config_name=f"expert/{name}").expert)
