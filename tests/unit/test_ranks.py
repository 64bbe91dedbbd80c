"""What the ranks of a DDP run must agree on, checked with fake strategies in one process: when to
save a checkpoint, a failed evaluation, who evaluates after training, who validates which samples,
and whether every process can keep its own copy of the frames."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from helpers import CONFIGS, demo_overrides, tiny_overrides
from hydra import compose, initialize_config_dir
from lightning.pytorch.utilities import rank_zero_only

import act.apps.curve as curve_app
import act.apps.demo as demo_app
import act.pipeline.curve as curve_pipeline
import act.pipeline.demo as demo_pipeline
from act.common.errors import InputError
from act.data.datamodule import ACTDataModule, auto_workers
from act.training import run
from act.training.eval_callback import EvalCallback, EvaluationError
from act.training.marks import WallClockCheckpoints, mark_name


def fake_trainer(rank: int, broadcast, step: int = 0) -> SimpleNamespace:
    """A trainer of rank ``rank`` whose strategy broadcasts with ``broadcast``; it records its saves."""
    saved: list = []
    return SimpleNamespace(
        global_step=step,
        is_global_zero=rank == 0,
        strategy=SimpleNamespace(broadcast=broadcast),
        save_checkpoint=saved.append,
        saved=saved,
        default_root_dir=".",
        loggers=[],
    )


def test_rank_zero_s_clock_decides_when_every_rank_saves_a_mark(tmp_path):
    # Rank 1's clock runs 2 s ahead of rank 0's. Deciding by its own clock, rank 1 would save the
    # 1-minute mark a step before rank 0 and wait at the checkpoint's barrier for ever.
    own_clock, rank0_elapsed, sent = iter([0.0, 61.0, 62.0, 63.0]), iter([59.0, 60.0]), []

    def broadcast(value, src=0):
        sent.append(value)
        return next(rank0_elapsed)

    marks = WallClockCheckpoints([1], str(tmp_path))
    marks.clock = lambda: next(own_clock)
    trainer = fake_trainer(1, broadcast)
    marks.on_train_batch_start(trainer, None, None, 0)
    for step in (1, 2, 3):
        trainer.global_step = step
        marks.on_train_batch_end(trainer, None, None, None, 0)
    assert trainer.saved == [tmp_path / mark_name(1)] and marks.saved[0]["step"] == 2
    assert marks.saved[0]["elapsed_s"] == 60.0  # rank 0's
    assert sent == [61.0, 62.0]  # once the last mark is saved, nothing more to agree on


def no_evaluation(*args, **kwargs):
    raise AssertionError("a rank other than 0 evaluated")


def test_a_failed_evaluation_on_rank_zero_stops_every_rank_after_the_broadcast(monkeypatch):
    # Rank 0's rollouts raise (no EGL on a headless node). Had it raised before the broadcast, rank 1
    # would have waited there until the process group timed out.
    sent, errors = [], {}
    module = SimpleNamespace(training=True, train=lambda mode=True: None, log=lambda *a, **k: None)

    def rollouts_fail(trainer, module):
        raise RuntimeError("no EGL display")

    for rank in (0, 1):
        callback = EvalCallback(every_n_steps=2, num_episodes=1, video=False, save_best=False)
        monkeypatch.setattr(callback, "_rollouts", rollouts_fail if rank == 0 else no_evaluation)

        def broadcast(obj, src=0):
            if not sent:
                sent.append(obj)  # rank 0's
            return sent[0]

        with pytest.raises(EvaluationError) as err:
            callback.on_train_batch_end(fake_trainer(rank, broadcast, step=2), module, None, None, 0)
        errors[rank] = str(err.value)
    assert sent == [{"error": "RuntimeError: no EGL display"}]
    assert errors[0] == errors[1]
    assert errors[0].startswith(
        "closed-loop evaluation at step 2 failed on rank 0 (RuntimeError: no EGL display), "
        "so training stopped on every rank"
    )


def test_after_ddp_training_only_rank_zero_evaluates_the_demo(monkeypatch, tmp_path):
    monkeypatch.setattr(rank_zero_only, "rank", 1)
    monkeypatch.setattr(
        demo_pipeline,
        "record_with_bar",
        lambda settings, wait=False: SimpleNamespace(kept=2, recorded=0, expert_success_rate=None),
    )
    monkeypatch.setattr(demo_pipeline, "run_training", lambda settings, parts, callbacks=(): {})  # every rank returns
    monkeypatch.setattr(demo_pipeline, "save_evaluation", no_evaluation)
    monkeypatch.setattr(demo_app, "explicit_overrides", lambda: ["trainer.max_steps=4"])
    overrides = demo_overrides(tmp_path, "trainer.max_steps=4", "trainer.accelerator=gpu")  # no CPU timing
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        assert demo_app.main(compose("demo", overrides=overrides)) == {}
    assert not (tmp_path / "demo" / "summary.json").exists()


def test_after_ddp_training_only_rank_zero_scores_the_learning_curve(monkeypatch, tmp_path):
    monkeypatch.setattr(rank_zero_only, "rank", 1)
    monkeypatch.setattr(curve_pipeline, "run_training", lambda settings, parts, callbacks=(): {})
    monkeypatch.setattr(curve_pipeline, "save_evaluation", no_evaluation)
    (tmp_path / "data").mkdir()
    overrides = [
        *tiny_overrides(tmp_path / "data", tmp_path / "run"),
        "policy.lr_warmup_steps=1",
        "curve.name=tiny",
        f"curve.dir={tmp_path / 'curves'}",
        "curve.max_steps=2",
        "curve.overrides=[]",
    ]
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):  # the curve composes its evaluation
        assert curve_app.main(compose("learning_curve", overrides=overrides)) == {}
    assert not (tmp_path / "curves" / "tiny" / "curve.json").exists()


def ranked(rank: int, world: int, processes: int | None = None) -> SimpleNamespace:
    return SimpleNamespace(
        global_rank=rank, world_size=world, num_devices=processes or world, is_global_zero=rank == 0, max_steps=-1
    )


def test_each_rank_validates_its_own_share_of_the_validation_samples(demos):
    dm = ACTDataModule(str(demos), chunk_size=10, batch_size=1, num_workers=0, samples_per_episode=4)
    dm.setup("fit")
    shares = []
    for rank in (0, 1):
        dm.trainer = ranked(rank, 2)
        shares.append(set(dm.val_dataloader().sampler))
    assert shares[0] | shares[1] == set(range(len(dm.val_set))) == {0, 1, 2, 3}
    assert not shares[0] & shares[1]
    dm.trainer = ranked(0, 1)
    assert list(dm.val_dataloader().sampler) == [0, 1, 2, 3]


def test_an_image_cache_that_every_process_cannot_keep_is_refused(demos, monkeypatch):
    dm = ACTDataModule(str(demos), chunk_size=10, num_workers=0, cache_images=True)
    dm.setup("fit")
    nbytes = sum(frames.nbytes for split in (dm.train_set, dm.val_set) for frames in split._images.values())
    monkeypatch.setattr(run, "available_memory", lambda: 2 * nbytes)  # room for 2 more copies; 3 more needed
    with pytest.raises(
        run.ConfigError,
        match=r"data.cache_images=true keeps every frame in each of the 4 training "
        r"processes on this machine, .* set data.cache_images=false",
    ):
        run.check_image_cache(dm, ranked(0, 4))
    run.check_image_cache(dm, ranked(0, 3))  # 2 more copies fit
    run.check_image_cache(dm, ranked(0, 4, processes=1))  # one process a machine
    dm.cache_images = False
    run.check_image_cache(dm, ranked(0, 4))


def test_auto_workers_share_the_cores_among_the_gpus(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    assert [auto_workers(n) for n in (1, 2, 4, 8, 16, 32)] == [8, 7, 3, 1, 1, 1]
    dm = ACTDataModule("unused", num_workers="auto")
    dm.trainer = ranked(0, 2)
    assert dm.workers() == 7
    for bad in ("many", -1, 1.5, True):
        with pytest.raises(ValueError, match="num_workers must be a whole number >= 0 or auto"):
            ACTDataModule("unused", num_workers=bad)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"every_n_steps": 0}, "every_n_steps and num_episodes must be positive"),
        ({"episode_len": 0}, r"callbacks.eval.episode_len must be positive or null \(the task's\), got 0"),
    ],
)
def test_the_eval_callback_refuses_settings_it_cannot_run(kwargs, message):
    with pytest.raises(InputError, match=message):
        EvalCallback(**kwargs)
