"""The D-SGD engine under dropouts: a missing agent keeps its model, the streams stay aligned
with a run without dropouts, a run is its seed's, and a resumed run replays the same rounds."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from scipy import sparse

from dpdl.errors import ConfigError
from dpdl.experiments.train import run_training
from dpdl.jobspec.config import TrainConfig
from dpdl.jobspec.dropouts import DropoutSchedule
from dpdl.jobspec.job import Job, build_job
from dpdl.keys import simulated_seed_book
from dpdl.mechanisms import NoNoise
from dpdl.simulation import Checkpoints, EngineState, run_dsgd

CONFIG = TrainConfig(
    task="logreg-a9a",
    graph="ring",
    n=5,
    mechanism="decor",
    eps=5.0,
    steps=8,
    eval_every=4,
    batch_size=16,
)


@pytest.fixture(scope="module")
def job() -> Job:
    return build_job(CONFIG.resolved(), 0)


def _run(job: Job, steps: int, schedule: DropoutSchedule | None, **options: object) -> np.ndarray:
    dsgd = replace(job.dsgd, steps=steps, eval_every=steps)
    return run_dsgd(
        job.task, job.weights, job.mechanism, dsgd, seed=0, dropouts=schedule, **options
    ).params


def _missing(n: int, steps: int, misses: dict[int, list[int]]) -> DropoutSchedule:
    """The schedule in which agent i misses the rounds `misses[i]`."""
    alive = np.ones((steps, n), dtype=bool)
    for agent, rounds in misses.items():
        alive[np.array(rounds) - 1, agent] = False
    return DropoutSchedule(alive, "test")


@pytest.mark.parametrize("seeds", [False, True])
@pytest.mark.parametrize("recovery", [False, True])
def test_a_missing_agent_keeps_its_model_and_the_others_streams_stay_aligned(
    job: Job, seeds: bool, recovery: bool
) -> None:
    """Agent 2 misses round 6: its model after round 6 is its model after round 5, bit for bit,
    its neighbours' differ from a run without dropouts, and the first 5 rounds are that run's."""
    book = None
    if seeds:
        book = simulated_seed_book(job.noise_seeds, 3)
    options = {"agent_seeds": book, "recovery": recovery}
    schedule = _missing(5, 8, {2: [6]})
    before = _run(job, 5, None, agent_seeds=book)
    after = _run(job, 6, schedule, **options)
    np.testing.assert_array_equal(after[2], before[2])
    assert (after[[1, 3]] != _run(job, 6, None, agent_seeds=book)[[1, 3]]).any(axis=1).all()
    np.testing.assert_array_equal(_run(job, 5, schedule, **options), before)


def test_a_missing_agent_sends_nothing_so_the_others_mix_what_arrived(job: Job) -> None:
    """Without noise, agents 0 and 4 (not neighbours of agent 2) are untouched by its missing
    round 1, and agents 1 and 3 mix their own model in its place."""
    quiet = replace(job, mechanism=NoNoise(5))
    missing = _run(quiet, 1, _missing(5, 1, {2: [1]}))
    full = _run(quiet, 1, None)
    np.testing.assert_array_equal(missing[[0, 4]], full[[0, 4]])
    assert (missing[[1, 3]] != full[[1, 3]]).any(axis=1).all()
    np.testing.assert_array_equal(missing[2], job.task.initial_params().numpy())
    # without mixing, every other agent's 8 rounds are its own: the same batches, round by round
    alone = replace(quiet, weights=np.eye(5))
    skipped = _run(alone, 8, _missing(5, 8, {2: [3, 4]}))
    np.testing.assert_array_equal(np.delete(skipped, 2, 0), np.delete(_run(alone, 8, None), 2, 0))


def test_rate_zero_is_no_dropouts_bit_for_bit(job: Job) -> None:
    none = _run(job, 8, None)
    np.testing.assert_array_equal(_run(job, 8, DropoutSchedule.from_rate(0.0, 5, 8, 0)), none)
    everyone = DropoutSchedule.none(5, 8)
    np.testing.assert_array_equal(_run(job, 8, everyone, recovery=True), none)
    plain = run_training(CONFIG).runs[0]
    again = run_training(replace(CONFIG, dropout=0.0)).runs[0]
    np.testing.assert_array_equal(plain.models, again.models)
    assert again.dropouts is None and plain.history == again.history


def test_a_run_with_dropouts_is_its_seeds() -> None:
    config = replace(CONFIG, dropout=0.3, seeds=(0, 1))
    first, again = run_training(config).runs, run_training(config).runs
    for run, rerun in zip(first, again, strict=True):
        np.testing.assert_array_equal(run.models, rerun.models)
        assert run.dropouts is not None and rerun.dropouts is not None
        np.testing.assert_array_equal(run.dropouts.alive, rerun.dropouts.alive)
    assert first[0].dropouts is not None and first[1].dropouts is not None
    assert (first[0].dropouts.alive != first[1].dropouts.alive).any()
    plain = run_training(replace(CONFIG, seeds=(0,))).runs[0]
    assert np.abs(first[0].models - plain.models).max() > 1e-6


@pytest.mark.parametrize("recovery", [False, True])
def test_recovery_changes_the_noise_only_in_rounds_with_dropouts(job: Job, recovery: bool) -> None:
    """A run whose only dropout is at its last round is a run without dropouts until then. In
    that round, agent 2 missing, recovery changes the noise of its neighbours 1 and 3 only (the
    alive end of a pair adds the missing end's share), as the agents draw it from their seeds."""
    schedule = _missing(5, 8, {2: [8]})
    np.testing.assert_array_equal(_run(job, 7, schedule, recovery=recovery), _run(job, 7, None))
    alone, book = replace(job, weights=np.eye(5)), simulated_seed_book(job.noise_seeds, 3)
    plain = _run(alone, 8, schedule, recovery=False, agent_seeds=book)  # no mixing: each agent's
    recovered = _run(alone, 8, schedule, recovery=True, agent_seeds=book)  # own noise shows
    assert (plain[[1, 3]] != recovered[[1, 3]]).any(axis=1).all()
    np.testing.assert_array_equal(plain[[0, 2, 4]], recovered[[0, 2, 4]])


@pytest.mark.parametrize("seeds", [False, True])
def test_a_resumed_run_with_dropouts_replays_the_same_rounds(job: Job, seeds: bool) -> None:
    book = simulated_seed_book(job.noise_seeds, 3) if seeds else None
    schedule = DropoutSchedule.from_rate(0.4, 5, 8, seed=5)
    saved: list[EngineState] = []
    options = {"agent_seeds": book, "recovery": True}
    whole = _run(job, 8, schedule, checkpoints=Checkpoints(saved.append, every=3), **options)
    middle = next(state for state in saved if state.step == 3)
    resumed = _run(
        job, 8, schedule, checkpoints=Checkpoints(lambda s: None, 0, 0, middle), **options
    )
    np.testing.assert_array_equal(resumed, whole)


def test_the_engine_refuses_a_schedule_that_does_not_fit(job: Job) -> None:
    with pytest.raises(ConfigError, match="dropout schedule is of 4 agents over 8 rounds"):
        _run(job, 8, DropoutSchedule.none(4, 8))
    with pytest.raises(ConfigError, match="over 6 rounds"):
        _run(job, 8, DropoutSchedule.none(5, 6))
    with pytest.raises(ConfigError, match="recovery acts on dropouts"):
        _run(job, 8, None, recovery=True)


def test_a_sparse_mixing_matrix_runs_the_rounds_of_a_dense_one(job: Job) -> None:
    schedule = DropoutSchedule.from_rate(0.4, 5, 8, seed=5)
    dense = _run(job, 8, schedule, recovery=True)
    sparse_job = replace(job, weights=sparse.csr_array(job.weights))
    np.testing.assert_allclose(_run(sparse_job, 8, schedule, recovery=True), dense, atol=1e-13)
