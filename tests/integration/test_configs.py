"""The composed Hydra configs every entry point reads."""

from __future__ import annotations

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from helpers import CONFIGS


def test_every_evaluation_shares_one_execution_config():
    """eval.py, the eval callback, make demo, the latency table and the real-time loop all read
    configs/execution/: the coefficient and the other settings are written once."""
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        plain = [OmegaConf.to_container(node, resolve=True) for node in (
            compose("eval").execution, compose("train", overrides=["callbacks=eval"]).callbacks.eval.execution,
            compose("demo", overrides=["experiment=paper"]).execution, compose("latency_table").execution)]
        realtime = OmegaConf.to_container(compose("run_realtime").execution)
        chunked = OmegaConf.to_container(compose("eval", overrides=["execution=chunked"]).execution)
    ensemble = plain[0]
    assert ensemble["temporal_ensemble_coeff"] == 0.01 and ensemble["n_action_steps"] is None
    assert plain[1] == ensemble and plain[3] == ensemble and plain[2] == {**ensemble, "precision": "32-true"}
    assert realtime == {**ensemble, "asynchronous": True}
    assert chunked == {**ensemble, "temporal_ensemble_coeff": None}
