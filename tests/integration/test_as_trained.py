"""A policy runs as it was trained and evaluated to run, wherever it runs: the checkpoint records its
execution, the export carries it, and eval.py, run_realtime.py and latency_table.py start from it.
Insertion, shipped with whole chunks, loses a third of its successes ensembled (docs/results/insertion.md, I4)."""

from __future__ import annotations

import pytest
from helpers import make_cfg

from act.runtime.execution import MODE_KEYS, RUN_KEYS, as_trained
from act.runtime.predictors import recorded_execution

ENSEMBLE = {"temporal_ensemble_coeff": 0.01, "n_action_steps": None, "asynchronous": True, "precision": "auto"}
CHUNKED = {"temporal_ensemble_coeff": None, "n_action_steps": None, "asynchronous": False, "precision": "32-true"}


def test_the_recorded_execution_replaces_the_configs_and_the_command_line_goes_on_top():
    settings, source = as_trained(ENSEMBLE, CHUNKED, ["ckpt_path"])
    assert settings["temporal_ensemble_coeff"] is None and source == "the training run's"
    assert settings["asynchronous"] is True  # where it runs is the command's (MODE_KEYS only)
    settings, source = as_trained(ENSEMBLE, CHUNKED, ["execution.n_action_steps"], MODE_KEYS + RUN_KEYS)
    assert settings["asynchronous"] is False and settings["precision"] == "32-true"  # eval.py: RUN_KEYS too
    assert source == "the training run's, n_action_steps from the command line"
    assert settings["n_action_steps"] is None  # the configured value (the command line's) stands
    assert as_trained(ENSEMBLE, CHUNKED, ["execution"]) == (ENSEMBLE, "the command line")
    assert as_trained(ENSEMBLE, None, []) == (ENSEMBLE, "the config (the policy records no execution)")


@pytest.fixture(scope="module")
def chunked_checkpoint(demos, tmp_path_factory):
    """A tiny ACT trained with ``execution=chunked``, as insertion's recipe is."""
    from act.apps.adapters.training import train

    folder = tmp_path_factory.mktemp("chunked_run")
    train(make_cfg(demos, folder, "trainer.max_steps=2", "execution=chunked"))
    return folder / "checkpoints" / "last.ckpt"


def test_an_exported_chunked_policy_runs_whole_chunks_in_run_realtime(run_script, chunked_checkpoint, tmp_path):
    assert recorded_execution(chunked_checkpoint)["temporal_ensemble_coeff"] is None
    exported = tmp_path / "policy.pt"
    proc = run_script("export", f"ckpt_path={chunked_checkpoint}", "format=torchscript", f"out={exported}")
    assert "execution as trained: replace, a query every 10 ticks" in proc.stdout
    carried = recorded_execution(exported)
    assert carried is not None and carried["temporal_ensemble_coeff"] is None
    common = [f"ckpt_path={exported}", "num_episodes=1", "episode_len=12", f"out_dir={tmp_path / 'rt'}"]
    proc = run_script("run_realtime", *common)
    assert "execution: chunked, n_action_steps=10" in proc.stdout and "from the training run's" in proc.stdout
    proc = run_script("run_realtime", *common, "execution=ensemble")
    assert "execution: temporal ensembling, m=0.01" in proc.stdout and "from the command line" in proc.stdout


def test_eval_and_the_latency_table_start_from_an_exports_execution(chunked_checkpoint, tmp_path):
    from helpers import CONFIGS, eval_cfg
    from hydra import compose, initialize_config_dir

    from act.apps.adapters.evaluation import eval_settings
    from act.apps.latency_table import cell_config, trained_base
    from act.eval.evaluation import evaluation_execution
    from act.model.checkpoint import load_network
    from act.runtime.export import export

    net = load_network(chunked_checkpoint)
    exported = export(net, tmp_path / "p.pt", "torchscript", recorded_execution(chunked_checkpoint))
    settings, source = evaluation_execution(eval_settings(eval_cfg(f"ckpt_path={exported}")), ["ckpt_path"])
    assert settings.execution["temporal_ensemble_coeff"] is None and source == "the training run's"
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        table = compose("latency_table", overrides=[f"ckpt_path={exported}"])
        base, source = trained_base(table)
        assert base["temporal_ensemble_coeff"] is None and source == "the training run's"
        assert cell_config(table, "sync_chunk", 0, tmp_path).execution.temporal_ensemble_coeff is None
        assert cell_config(table, "async_ensemble", 0, tmp_path).execution.temporal_ensemble_coeff == 0.01
    old = export(net, tmp_path / "old.pt", "torchscript")  # an export that records none
    settings, source = evaluation_execution(eval_settings(eval_cfg(f"ckpt_path={old}")), ["ckpt_path"])
    assert settings.execution["temporal_ensemble_coeff"] == 0.01 and source == "eval.yaml"
