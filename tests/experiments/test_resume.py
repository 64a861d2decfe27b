"""A training run interrupted and resumed from its checkpoints equals the uninterrupted run bit for
bit (models, every metric record, every agent's metrics, metrics.csv and final.json), whatever
holds random state: stochastic batches, independent or correlated noise (DECOR), noise correlated
over time (MAFALDA, which keeps every seed drawn), cyclic batches, a torch model, the agents' own
seeded streams, gradient tracking's extra variables, and a mean over the last iterates."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from dpdl.errors import ConfigError, FileFormatError
from dpdl.experiments import checkpoints as checkpoint_files
from dpdl.experiments.results import write_results
from dpdl.experiments.train import RunCheckpoints, TrainConfig, run_training
from dpdl.settings import TaskOptions

CONFIGS = {
    "ldp": TrainConfig(
        task="logreg-a9a", graph="ring", n=4, mechanism="ldp", eps=5.0, steps=20, eval_every=5,
        batch_size=8, seeds=(0, 1),
    ),
    "decor": TrainConfig(
        task="logreg-a9a", graph="er", n=6, mechanism="decor", eps=5.0, steps=20, eval_every=10,
        batch_size=8, seeds=(0, 1), average_last=4,
    ),
    # a torch MLP, per-example clipping on cyclic batches, noise correlated over time
    "mafalda": TrainConfig(
        task="housing-mlp", graph="florentine", mechanism="mafalda", clip_level="example",
        steps=24, cycle=8, lr=0.1, clip=1.0, eps=3.0, delta=1e-6, eval_every=8, seeds=(3,),
        task_options=TaskOptions(partition="iid", l2=0.0),
    ),
    # every agent draws its batches and noise from its own seeds, as a deployment does
    "agent-seeds": TrainConfig(
        task="logreg-a9a", graph="ring", n=4, mechanism="decor", eps=5.0, steps=16, eval_every=4,
        batch_size=8, seeds=(0,), key_seed=3,
    ),
    "dsgt": TrainConfig(
        task="logreg-a9a", algorithm="dsgt", mechanism="dp", clip=math.inf, n=5, steps=15,
        eval_every=5, batch_size=8, seeds=(0,),
    ),
}  # fmt: skip


class Interrupted(Exception):
    """What the test's callback raises to stop a run at a step, as a crash would."""


def _stop_at(seed: int, step: int):  # noqa: ANN202
    def callback(s: int, t: int, metrics: dict[str, float]) -> None:
        if (s, t) == (seed, step):
            raise Interrupted

    return callback


def _files(result, folder: Path) -> dict[str, bytes]:  # noqa: ANN001
    paths = write_results(result, folder)
    return {name: paths[name].read_bytes() for name in ("metrics", "final", "config")}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_a_run_interrupted_and_resumed_equals_the_uninterrupted_run(tmp_path, name) -> None:
    config = CONFIGS[name]
    whole = run_training(config)
    folder = tmp_path / "checkpoints"
    last = config.seeds[-1]
    stop = 2 * config.eval_every  # an evaluation: the checkpoint before it (every 3) is older
    with pytest.raises(Interrupted):
        run_training(config, checkpoints=RunCheckpoints(folder, 3), callback=_stop_at(last, stop))
    saved = sorted(path.name for path in folder.glob("seed*.npz"))
    assert saved == [f"seed{seed}.npz" for seed in config.seeds]  # the finished seeds, and the last
    records: list[tuple[int, int]] = []
    resumed = run_training(
        config,
        checkpoints=RunCheckpoints(folder, 3, resume=True),
        callback=lambda seed, step, metrics: records.append((seed, step)),
    )
    # the finished seeds are kept, not run again; the last continues after its checkpoint
    assert {seed for seed, _ in records} == {last}
    assert min(step for _, step in records) > stop - 3
    for before, after in zip(whole.runs, resumed.runs, strict=True):
        np.testing.assert_array_equal(after.models, before.models)
        assert after.history == before.history  # every record, every float
        assert after.agent_metrics == before.agent_metrics
    assert _files(resumed, tmp_path / "resumed") == _files(whole, tmp_path / "whole")


def test_a_checkpoint_of_other_settings_is_refused_once_naming_each_difference(tmp_path) -> None:
    config = CONFIGS["ldp"]
    folder = tmp_path / "checkpoints"
    with pytest.raises(Interrupted):
        run_training(config, checkpoints=RunCheckpoints(folder, 3), callback=_stop_at(1, 10))
    other = replace(config, lr=0.05, steps=30)
    with pytest.raises(FileFormatError) as error:
        run_training(other, checkpoints=RunCheckpoints(folder, 3, resume=True))
    message = str(error.value)
    assert message.count("checkpoint of another run") == 1
    assert "lr was" in message and "steps was 20 and is 30" in message
    assert "seeds" not in message  # what did not change is not named
    with pytest.raises(FileFormatError, match="seeds was \\[0, 1\\] and is \\[0\\]"):
        run_training(replace(config, seeds=(0,)), checkpoints=RunCheckpoints(folder, 3, True))
    # the checkpoints are left as they were: the run of their own settings still resumes
    run_training(config, checkpoints=RunCheckpoints(folder, 3, resume=True))


def test_a_checkpoint_of_another_engine_version_is_refused(tmp_path, monkeypatch) -> None:
    config = CONFIGS["ldp"]
    folder = tmp_path / "checkpoints"
    with pytest.raises(Interrupted):
        run_training(config, checkpoints=RunCheckpoints(folder, 3), callback=_stop_at(0, 10))
    monkeypatch.setattr(checkpoint_files, "ENGINE_VERSION", checkpoint_files.ENGINE_VERSION + 1)
    with pytest.raises(FileFormatError, match="engine version"):
        run_training(config, checkpoints=RunCheckpoints(folder, 3, resume=True))


def test_resuming_without_checkpoints_and_starting_afresh(tmp_path) -> None:
    config = replace(CONFIGS["ldp"], seeds=(0,))
    folder = tmp_path / "checkpoints"
    with pytest.raises(ConfigError, match="nothing to resume"):
        run_training(config, checkpoints=RunCheckpoints(folder, 3, resume=True))
    with pytest.raises(Interrupted):
        run_training(config, checkpoints=RunCheckpoints(folder, 3), callback=_stop_at(0, 10))
    steps: list[int] = []
    run_training(
        config,
        checkpoints=RunCheckpoints(folder, 3),
        callback=lambda seed, step, metrics: steps.append(step),
    )
    assert steps[0] == 0  # without resume, a run starts at step 0 and replaces the checkpoints
