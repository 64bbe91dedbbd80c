"""scripts/ablate.py (act/apps/ablate.py, act/pipeline/ablation.py): one command per finding of the ACT paper,
run at tiny scale in this process (tests/e2e/test_scripts.py runs the script once)."""

from __future__ import annotations

import json

import pytest
from helpers import CONFIGS, tiny_overrides
from hydra import compose, initialize_config_dir
from omegaconf import open_dict

import act.apps.ablate as ablate
import act.apps.demo as demo_app
import act.pipeline.ablation as ablation
import act.pipeline.ablation_runs as ablation_runs
import act.pipeline.ablation_table as ablation_table
from act.common.errors import InputError, MissingFileError

PNG = b"\x89PNG\r\n\x1a\n"


def ablation_cfg(*overrides, run_overrides=(), **replaced):
    """configs/ablate.yaml as ``scripts/ablate.py <overrides>`` composes it, with ``overrides`` (every run's)
    set to ``run_overrides`` and whole ``ablation.<key>`` values replaced (an override would merge them)."""
    cfg = compose("ablate", overrides=list(overrides))
    with open_dict(cfg):
        cfg.overrides = list(run_overrides) or cfg.overrides
        for key, value in replaced.items():
            cfg.ablation[key] = value
    return cfg


def test_a_variant_s_runs_pool_into_one_rate_with_a_wilson_interval():
    runs = {
        "seed0": {"successes": 10, "num_episodes": 50, "success_rate": 0.2},
        "seed1": {"successes": 30, "num_episodes": 50, "success_rate": 0.6},
        "seed2": {"successes": 20, "num_episodes": 50, "success_rate": 0.4},
    }
    pooled = ablation_table.aggregate(runs)
    assert (pooled["successes"], pooled["num_episodes"]) == (60, 150) and pooled["success_rate"] == pytest.approx(0.4)
    # Wilson's 95% interval of 60/150: (p + z^2/2n -/+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n), z = 1.96
    assert pooled["success_rate_ci95"] == pytest.approx([0.3250, 0.4800], abs=1e-4)
    assert (pooled["min"], pooled["max"]) == (0.2, 0.6) and pooled["runs"] == {"seed0": 0.2, "seed1": 0.6, "seed2": 0.4}
    none = ablation_table.aggregate({"seed0": {"successes": 0, "num_episodes": 50, "success_rate": 0.0}})
    assert none["success_rate_ci95"][0] == 0.0 and none["success_rate_ci95"][1] == pytest.approx(0.0713, abs=1e-4)


def test_modes_and_failures_pool_over_the_runs_into_the_table():
    def run(successes, high, low, classes):
        anatomy = {"classes": {name: {"episodes": n} for name, n in classes.items()}}
        coverage = {"high": {"episodes": high, "successes": high}, "low": {"episodes": low, "successes": 0}}
        return {
            "successes": successes,
            "num_episodes": 10,
            "success_rate": successes / 10,
            "mode_coverage": coverage,
            "failure_anatomy": anatomy,
        }

    pooled = ablation_table.aggregate(
        {"seed0": run(6, 6, 4, {"dropped": 1, "never met": 3}), "seed1": run(2, 2, 8, {"never met": 8})}
    )
    assert pooled["mode_coverage"]["high"] == {"episodes": 8, "successes": 8, "share": 0.4}
    assert list(pooled["failures"].items()) == [("never met", 11), ("dropped", 1)]  # most first
    older = ablation_table.aggregate({"seed0": {"successes": 1, "num_episodes": 10, "success_rate": 0.1}})
    assert "failures" not in older and "mode_coverage" not in older
    table = {
        "title": "t",
        "setting": "s",
        "command": "c",
        "evaluation_only": True,
        "eval": {"seed": 200000},
        "lines": {"planted": {"kl10": pooled, "without": older}},
        "checkpoints": None,
    }
    rows = ablation_table.ablation_markdown(table).splitlines()
    assert rows[4].endswith("| range | modes (high / low) | failures, most first |") and rows[5].count("---|") == 8
    assert rows[6].endswith("| 0.40 / 0.60 | never met 11, dropped 1 |") and rows[7].endswith("| - / - | - |")


def test_the_shipped_ablations_run_the_paper_s_settings_at_the_quickstart_s_scale(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the relative outputs/ of the settings: not the repository's, which may hold runs
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        chunk = ablate.ablation_settings(ablation_cfg("ablation=chunk_size"))
        runs = ablation.plan_runs(chunk)
        ablate.check_runs(chunk, runs)  # every run's demo.py overrides compose
        k1 = compose("demo", overrides=list(runs[0].overrides))
        cvae = ablate.ablation_settings(ablation_cfg("ablation=cvae", dir=str(tmp_path)))
        ensembling = ablate.ablation_settings(ablation_cfg("ablation=temporal_ensembling"))
        candidates = ablate.ablation_settings(ablation_cfg("ablation=quickstart_candidates"))
        candidate_runs = ablation.plan_runs(candidates)
        ablate.check_runs(candidates, candidate_runs)
        b8, demos200 = (
            compose("demo", overrides=list(next(r for r in candidate_runs if r.variant == v).overrides))
            for v in ("b8", "demos200")
        )
    assert list(chunk.variants) == ["1", "10", "25", "50", "100"] and chunk.seeds == (0, 1, 2)
    assert [r.sample for r in runs[:6]] == ["seed0"] * 5 + ["seed1"] and len(runs) == 15  # seed by seed
    assert runs[0].folder == chunk.dir / "scripted" / "1" / "seed0" and str(chunk.dir) == "outputs/ablations/chunk_size"
    # k = 1 without ensembling: plain behaviour cloning, a query every tick; the quickstart's recipe otherwise.
    assert k1.policy.model.chunk_size == k1.data.chunk_size == 1 and k1.execution.temporal_ensemble_coeff is None
    assert k1.execution.n_action_steps is None and k1.task.image_size == [120, 160] and k1.trainer.max_steps == 3000
    assert (k1.demo.eval.num_episodes, k1.demo.eval.seed, k1.demo.eval.num_videos) == (50, 100000, 0)
    assert k1.data.dataset_dir == "datasets/quickstart_transfer_cube"  # recorded once, shared by every run
    assert list(k1.demo.expected) == []  # the quickstart's learning curve is no expectation for k = 1
    assert list(cvae.lines) == ["scripted", "human_like"] and list(cvae.variants) == ["with", "without"]
    assert "demo.expert=human_like" in cvae.lines["human_like"] and len(ablation.plan_runs(cvae)) == 12
    assert ensembling.evaluation_only and list(ensembling.variants) == ["off", "0", "0.01", "0.1"]
    # Issue 30's candidates: each at its own steps (batch 8 at batch 16's time), scored on the tuning seeds.
    assert [candidates.steps_of(v) for v in candidates.variants] == [6592, 8705, 6592, 6592, 11200]
    assert b8.data.batch_size == 8 and b8.trainer.max_steps == 8705 and b8.demo.eval.seed == 200000
    assert k1.data.batch_size == 16  # the shipped quickstart's batch
    assert demos200.demo.num_demos == 200 and demos200.data.dataset_dir != k1.data.dataset_dir  # never mixed
    assert len(candidate_runs) == 15
    with pytest.raises(
        MissingFileError,
        match="ablation.checkpoints.k100: outputs/ablations/chunk_size/scripted/100 does not exist; train it first",
    ):
        ablation.plan_runs(ensembling)  # nothing trained in this folder
    with pytest.raises(InputError, match=f"ablation.checkpoints.k100: {tmp_path} is neither a .ckpt file nor a folder"):
        ablation.checkpoints_of("k100", (str(tmp_path),))  # a folder without runs


@pytest.mark.parametrize(
    "overrides, replaced, message",
    [
        (["ablation.seeds=[]"], {}, "ablation.seeds must be distinct integers, at least one"),
        (["ablation.max_steps=0"], {}, "ablation.max_steps must be a positive number of training steps, got 0"),
        (["+ablation.variant_steps={k7:5}"], {}, "ablation.variant_steps.k7: no such variant; the variants are 1, 10"),
        (["+ablation.variant_steps={10:0}"], {}, "variant_steps.10 must be a positive number of training steps, got 0"),
        (["+ablation.variant_steps=5"], {}, "ablation.variant_steps must map variants to training steps"),
        (["+ablation.eval.episodes=2"], {}, "ablation.eval.episodes is not an eval.py setting (configs/eval.yaml)"),
        (["overrides=['seed=3']"], {}, "overrides: seed is set for each run by the ablation; use ablation.seeds"),
        ([], {"variants": {"k/1": ["policy.model.chunk_size=1"]}}, "ablation.variants.k/1: a name of letters, digits"),
        ([], {"variants": {}}, "ablation.variants must name at least one entry"),
        (
            [],
            {"checkpoints": {"mine": ["x.ckpt"]}},
            "needs one of ablation.datasets (train every variant) or ablation.checkpoints (evaluate them), not both",
        ),
        (
            [],
            {"variants": {"1": ["policy.model.chunk_sise=1"]}},
            "scripted/1: policy.model.chunk_sise is not a setting of demo; did you mean policy.model.chunk_size?",
        ),
    ],
)
def test_unworkable_ablations_are_refused_before_any_run(overrides, replaced, message, tmp_path):
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        cfg = ablation_cfg("ablation=chunk_size", f"dir={tmp_path}", *overrides, **replaced)
        with pytest.raises(InputError) as info:
            s = ablate.ablation_settings(cfg)
            ablate.check_runs(s, ablation.plan_runs(s))
    assert message in str(info.value) and not any(tmp_path.iterdir())


def tiny_ablation(demos, tmp_path, *extra):
    """ablation=chunk_size shrunk to seconds: k in {1, 4}, one seed, 4 steps of a 32-wide ACT on the shared
    demos, one 40-step evaluation episode per run."""
    train = [o for o in tiny_overrides(demos, "unused") if not o.startswith("out_dir=")]
    overrides = [
        *train,
        "demo.num_demos=3",
        "demo.record_workers=0",
        "execution.precision=32-true",
        "policy.lr_warmup_steps=1",
        "policy.image_crop=null",
        "trainer.val_check_interval=2",
    ]
    return ablation_cfg(
        "ablation=chunk_size",
        f"dir={tmp_path / 'ablation'}",
        "ablation.seeds=[0]",
        "ablation.max_steps=4",
        "ablation.eval.num_episodes=1",
        "+ablation.eval.workers=0",
        "+ablation.eval.episode_len=40",
        *extra,
        run_overrides=overrides,
        variants={"1": ["policy.model.chunk_size=1"], "4": ["policy.model.chunk_size=4"]},
    )


def test_a_training_ablation_runs_every_variant_then_resumes_without_retraining(demos, tmp_path, monkeypatch, capsys):
    calls = []

    def demo_in_process(seed, run_dir, demo_args, name):  # what act.pipeline.seeds.run_demo runs in a subprocess
        overrides = [f"seed={seed}", f"demo.dir={run_dir}", *demo_args]
        monkeypatch.setattr(demo_app, "explicit_overrides", lambda: overrides)
        calls.append(name)
        return demo_app.main(compose("demo", overrides=overrides))

    monkeypatch.setattr(ablation_runs, "run_demo", demo_in_process)
    out = tmp_path / "ablation"
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        table = ablate.main(tiny_ablation(demos, tmp_path))
        assert calls == ["scripted/1/seed0", "scripted/4/seed0"] and "3 kept + 0 recorded" in capsys.readouterr().out
        for k in (1, 4):  # each chunk size trained, evaluated chunked (a query every k ticks)
            metrics = json.loads((out / "scripted" / str(k) / "seed0" / "eval" / "metrics.json").read_text())
            assert metrics["chunk_size"] == k and metrics["temporal_ensemble_coeff"] is None
            assert metrics["ckpt_step"] == 4 and metrics["num_episodes"] == 1
        cell = table["lines"]["scripted"]["4"]
        assert list(table["lines"]["scripted"]) == ["1", "4"] and cell["num_episodes"] == 1
        assert cell["runs"] == {"seed0": metrics["success_rate"]} and table["max_steps"] == 4
        assert table["title"] == "Action chunking: success against chunk size (transfer_cube)"  # the runs' task
        assert json.loads((out / "ablation.json").read_text()) == table
        assert "| scripted | 4 | " in (out / "ablation.md").read_text()
        assert (out / "ablation.png").read_bytes()[:8] == PNG

        # The same command again: nothing trained or evaluated again.
        assert ablate.main(tiny_ablation(demos, tmp_path)) == table and len(calls) == 2
        assert capsys.readouterr().out.count("finished before") == 2
        # A run stopped before its summary: continued (demo.py resumes; here nothing is left to do).
        (out / "scripted" / "4" / "seed0" / "summary.json").unlink()
        ablate.main(tiny_ablation(demos, tmp_path))
        assert calls[2:] == ["scripted/4/seed0"] and "already at step 4 of 4" in capsys.readouterr().out
        # Other settings in the same folder: refused before anything runs.
        with pytest.raises(
            InputError,
            match=r"holds a run made with \['trainer.max_steps=4'\] where this one has "
            r"\['trainer.max_steps=6'\]; give another dir=",
        ):
            ablate.main(tiny_ablation(demos, tmp_path, "ablation.max_steps=6"))
    assert len(calls) == 3


def test_temporal_ensembling_evaluates_checkpoints_under_each_setting_once(tiny_checkpoint, tmp_path, capsys):
    out = tmp_path / "ensembling"

    def run():
        cfg = ablation_cfg(
            "ablation=temporal_ensembling",
            f"dir={out}",
            "ablation.eval.num_episodes=1",
            "ablation.eval.workers=0",
            "ablation.eval.batch_envs=1",
            "+ablation.eval.episode_len=40",
            run_overrides=["execution.precision=32-true"],
            checkpoints={"tiny": [str(tiny_checkpoint)]},
            variants={"off": ["execution=chunked"], "0.01": ["execution.temporal_ensemble_coeff=0.01"]},
        )
        return ablate.main(cfg)

    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        table = run()
        off, on = (json.loads((out / "tiny" / v / "ckpt0" / "metrics.json").read_text()) for v in ("off", "0.01"))
        assert off["temporal_ensemble_coeff"] is None and on["temporal_ensemble_coeff"] == 0.01
        assert off["policy"] == on["policy"] == str(tiny_checkpoint) and on["seeds"] == [100000, 100000]
        assert table["checkpoints"] == {"tiny": {"ckpt0": str(tiny_checkpoint)}} and table["max_steps"] is None
        text = (out / "ablation.md").read_text()
        assert "| checkpoints | temporal ensembling (off, or its m) |" in text and "| tiny | 0.01 |" in text
        assert f"ckpt0 = `{tiny_checkpoint}`" in text and (out / "ablation.png").read_bytes()[:8] == PNG
        capsys.readouterr()
        assert run() == table and capsys.readouterr().out.count("evaluated before") == 2


def test_checkpoints_of_a_folder_follow_runs_linked_into_it(tiny_checkpoint, tmp_path):
    """A ``make demo`` run linked into a seeds folder as seed0 counts (pathlib's ``**`` skips links on 3.11)."""
    import shutil

    for run in ("made/demo", "seeds/seed1"):
        (tmp_path / run / "checkpoints").mkdir(parents=True)
        shutil.copy(tiny_checkpoint, tmp_path / run / "checkpoints" / "last.ckpt")
    (tmp_path / "seeds" / "seed0").symlink_to(tmp_path / "made" / "demo")
    found = ablation.checkpoints_of("linked", (str(tmp_path / "seeds"),))
    assert found == [tmp_path / "seeds" / s / "checkpoints" / "last.ckpt" for s in ("seed0", "seed1")]
