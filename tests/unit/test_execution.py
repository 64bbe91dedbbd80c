"""The execution settings: one check for every entry point, and the paper's modes as their schedules."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import CONFIGS
from omegaconf import OmegaConf

from act.runtime.execution import ExecutionConfig
from act.runtime.plan import BLENDS


@pytest.mark.parametrize("blend", BLENDS)
@pytest.mark.parametrize("n", [1, 3, 6])
def test_a_synchronous_query_every_n_action_steps(blend, n):
    k = 6
    s = ExecutionConfig(temporal_ensemble_coeff=0.01, n_action_steps=n, blend=blend).scheduler(k)
    queried = []
    for tick in range(24):
        if s.wants_query():
            s.issue()
            s.deliver(np.zeros((k, 1)))
            queried.append(tick)
        assert s.next_action()[0] is not None  # without latency no tick is held
    assert queried == list(range(0, 24, n))


@pytest.mark.parametrize(
    "settings, n",
    [
        (dict(), 10),
        (dict(temporal_ensemble_coeff=0.01), 1),
        (dict(blend="crossfade"), 5),
        (dict(temporal_ensemble_coeff=0.01, blend="replace"), 10),
    ],
)
def test_defaults_are_the_papers_modes(settings, n):
    # No coefficient: chunked, the whole chunk played; a coefficient: ensembling, a query every tick.
    assert ExecutionConfig(**settings).schedule(10).n_action_steps == n


def test_the_execution_configs_are_valid():
    ensemble = ExecutionConfig.from_cfg(OmegaConf.load(CONFIGS / "execution" / "ensemble.yaml"))
    assert ensemble.chosen_blend == "ensemble" and ensemble.temporal_ensemble_coeff == 0.01
    assert ExecutionConfig.from_cfg(None) == ExecutionConfig()


@pytest.mark.parametrize(
    "settings, message",
    [
        (dict(n_action_steps=11), "n_action_steps must be in 1..chunk_size=10"),
        (dict(blend="ensemble"), "execution.blend=ensemble needs execution.temporal_ensemble_coeff"),
        (dict(temporal_ensemble_coeff=0.01, blend="mix"), "execution.blend='mix' is unknown"),
        (dict(n_action_steps=4, queue_threshold=4), "queue_threshold must be in 0..3"),
        (dict(n_action_steps=0), "execution.n_action_steps must be a positive integer or null"),
        (dict(n_action_steps=2.5), "execution.n_action_steps must be a positive integer"),
        (dict(queue_threshold=-1), "execution.queue_threshold must be an integer >= 0"),
        (dict(temporal_ensemble_coeff=-0.1), "execution.temporal_ensemble_coeff must be a number >= 0"),
        (dict(crossfade_steps=0), "execution.crossfade_steps must be a positive integer"),
        (dict(asynchronous="maybe"), "execution.asynchronous must be true or false"),
        (dict(latency_ticks=-1), "execution.latency_ticks must be an integer >= 0"),
        (dict(precision="fp8"), "execution.precision='fp8' is unknown"),
    ],
)
def test_bad_execution_settings(settings, message):
    with pytest.raises(ValueError, match=message):
        ExecutionConfig(**settings).schedule(10)


def test_an_unknown_setting_is_named():
    with pytest.raises(ValueError, match="execution.n_steps is not an execution setting"):
        ExecutionConfig.from_cfg({"n_steps": 3})
