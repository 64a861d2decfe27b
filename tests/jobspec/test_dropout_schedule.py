"""The dropout schedule (drawn from the seed, or read from a file), the mixing of a round with
dropouts, and the noise design of such a round (with and without seed recovery)."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy import sparse

from dpdl.errors import ConfigError
from dpdl.graphs import erdos_renyi, metropolis_hastings, ring
from dpdl.jobspec.config import TrainConfig
from dpdl.jobspec.dropouts import DropoutSchedule, mixing_after_dropouts
from dpdl.jobspec.job import build_job
from dpdl.mechanisms.base import NoiseMechanism, SeedBook

DECOR = TrainConfig(task="least-squares", graph="ring", n=6, mechanism="decor", eps=5.0, steps=12)


# -- the schedule ------------------------------------------------------------------------------


def test_a_rate_draws_the_same_schedule_from_the_same_seed_and_another_from_another() -> None:
    first = DropoutSchedule.from_rate(0.3, 8, 50, seed=4)
    np.testing.assert_array_equal(first.alive, DropoutSchedule.from_rate(0.3, 8, 50, 4).alive)
    assert (first.alive != DropoutSchedule.from_rate(0.3, 8, 50, 5).alive).any()
    assert 0.2 < first.missed / first.alive.size < 0.4  # 400 draws at rate 0.3
    assert DropoutSchedule.from_rate(0.0, 8, 50, 4).is_empty


def test_a_job_has_a_schedule_only_with_dropouts_and_each_replicate_its_own() -> None:
    assert build_job(DECOR.resolved(), 0).dropouts is None
    assert build_job(replace(DECOR, dropout=0.0).resolved(), 0).dropouts is None
    config = replace(DECOR, dropout=0.4).resolved()
    first, again = build_job(config, 0).dropouts, build_job(config, 0).dropouts
    other = build_job(config, 1).dropouts
    assert first is not None and again is not None and other is not None
    assert first.alive.shape == (12, 6) and not first.is_empty
    np.testing.assert_array_equal(first.alive, again.alive)
    assert (first.alive != other.alive).any()


def test_a_schedule_file_round_trips_and_a_job_reads_it(tmp_path: Path) -> None:
    drawn = DropoutSchedule.from_rate(0.25, 6, 12, seed=2)
    path = tmp_path / "dropouts.csv"
    drawn.write(path)
    read = DropoutSchedule.from_file(path, 6, 12)
    np.testing.assert_array_equal(read.alive, drawn.alive)
    assert read.describe()["missed_rounds"] == drawn.missed
    job = build_job(replace(DECOR, dropout_schedule=str(path)).resolved(), 0)
    assert job.dropouts is not None
    np.testing.assert_array_equal(job.dropouts.alive, drawn.alive)


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("agent,round\n1,0\n", 1, "first line must be 'round,agent'"),
        ("", 1, "first line must be 'round,agent'"),
        ("round,agent\n1,0\nx,1\n", 3, "must be integers"),
        ("round,agent\n1,0\n2\n", 3, "expected 'round,agent'"),
        ("round,agent\n0,1\n", 2, "round 0 is not in 1..12"),
        ("round,agent\n1,1\n13,1\n", 3, "round 13 is not in 1..12"),
        ("round,agent\n1,6\n", 2, "agent 6 is not in 0..5"),
        ("round,agent\n1,-1\n", 2, "agent -1 is not in 0..5"),
        ("round,agent\n4,2\n5,2\n4,2\n", 4, "misses round 4 twice"),
    ],
)
def test_every_bad_line_of_a_schedule_file_is_one_error_naming_it(
    tmp_path: Path, text: str, line: int, words: str
) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(ConfigError, match=words) as caught:
        DropoutSchedule.from_file(path, 6, 12)
    if line > 1:
        assert f"line {line}:" in str(caught.value)
    with pytest.raises(ConfigError, match=words):  # before the job builds its task
        build_job(replace(DECOR, dropout_schedule=str(path)).resolved(), 0)


def test_a_schedule_file_that_cannot_be_read_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the dropout schedule"):
        DropoutSchedule.from_file(tmp_path / "missing.csv", 6, 12)


def test_the_design_digest_names_the_schedule_and_is_unchanged_without_one() -> None:
    plain = build_job(DECOR.resolved(), 0)
    expected = hashlib.sha256(
        np.ascontiguousarray(plain.weights).tobytes()
        + np.ascontiguousarray(plain.noise_seeds.covariance()).tobytes()
    ).digest()
    assert plain.design_digest() == expected
    first = build_job(replace(DECOR, dropout=0.3).resolved(), 0)
    other = build_job(replace(DECOR, dropout=0.3).resolved(), 1)  # same graph, other schedule
    assert len({plain.design_digest(), first.design_digest(), other.design_digest()}) == 3


# -- the mixing of a round ---------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_the_mixing_after_dropouts_stays_doubly_stochastic_and_keeps_the_missing(
    seed: int,
) -> None:
    rng = np.random.default_rng(seed)
    weights = metropolis_hastings(erdos_renyi(12, 0.4, seed=seed))
    alive = rng.random(12) >= 0.3
    alive[0], alive[1] = True, False
    mixed = mixing_after_dropouts(weights, alive)
    np.testing.assert_allclose(mixed.sum(axis=0), 1.0, atol=1e-14)
    np.testing.assert_allclose(mixed.sum(axis=1), 1.0, atol=1e-14)
    np.testing.assert_array_equal(mixed, mixed.T)
    assert (mixed >= 0).all()
    for j in np.flatnonzero(~alive):  # a missing agent keeps its model and nobody mixes it
        expected = np.zeros(12)
        expected[j] = 1.0
        np.testing.assert_array_equal(mixed[j], expected)
        np.testing.assert_array_equal(mixed[:, j], expected)
    both = np.ix_(alive, alive)
    off = ~np.eye(12, dtype=bool)[both]
    np.testing.assert_array_equal(mixed[both][off], weights[both][off])  # what arrived, as is
    dense_sparse = mixing_after_dropouts(sparse.csr_array(weights), alive)
    assert sparse.issparse(dense_sparse)
    np.testing.assert_allclose(dense_sparse.toarray(), mixed, rtol=0, atol=1e-15)
    assert mixing_after_dropouts(weights, np.ones(12, dtype=bool)) is weights


def test_a_mask_of_another_size_is_refused() -> None:
    with pytest.raises(ConfigError, match="alive mask"):
        mixing_after_dropouts(metropolis_hastings(ring(5)), np.ones(4, dtype=bool))


# -- the noise of a round ----------------------------------------------------------------------


def _secret_noise_sum(design: NoiseMechanism, alive: np.ndarray, t: int) -> np.ndarray:
    """The sum over the alive agents of the noise they draw from their shared seeds at round
    `t` (their private parts left out), as the agents draw it."""
    shared = NoiseMechanism(design.n, 0.0, design.secrets)
    book = SeedBook.for_run(3, design.n, len(design.secrets))
    return sum(shared.agent_noise(int(i), book, t, 7) for i in np.flatnonzero(alive))


def test_decor_with_recovery_cancels_the_alive_agents_pair_noise_in_every_round() -> None:
    job = build_job(replace(DECOR, n=8, graph="er", p=0.5, dropout=0.3).resolved(), 0)
    assert job.dropouts is not None and isinstance(job.mechanism, NoiseMechanism)
    uncancelled = 0
    for t in range(1, job.dropouts.steps + 1):
        alive = job.dropouts.alive_at(t)
        recovered = job.mechanism.after_dropouts(alive, True)
        assert np.abs(_secret_noise_sum(recovered, alive, t)).max() < 1e-12, t
        plain = job.mechanism.after_dropouts(alive, False)
        uncancelled += np.abs(_secret_noise_sum(plain, alive, t)).max() > 1e-3
        assert recovered.secrets_of(0) == job.mechanism.secrets_of(0)  # the same seeds
    assert uncancelled >= 5  # of 12 rounds: a pair with one end missing no longer cancels


def test_recovery_moves_the_missing_holders_share_to_the_alive_ones() -> None:
    job = build_job(DECOR.resolved(), 0)
    assert isinstance(job.mechanism, NoiseMechanism)
    alive = np.array([True, False, True, True, True, True])
    recovered = job.mechanism.after_dropouts(alive, True).noise
    plain = job.mechanism.after_dropouts(alive, False).noise
    assert recovered.private_variances[1] == 0 and plain.private_variances[1] == 0
    np.testing.assert_array_equal(recovered.covariance()[1], 0.0)
    for before, after in zip(job.mechanism.secrets, recovered.secrets, strict=True):
        assert after.holders == before.holders
        np.testing.assert_allclose(after.factor.sum(axis=0), before.factor.sum(axis=0), atol=1e-15)
    # DECOR's pairs sum to zero: with recovery every secret adds nothing to the network's sum
    np.testing.assert_allclose(np.ones(6) @ recovered.generator, 0.0, atol=1e-15)
    assert np.abs(np.ones(6) @ plain.generator).max() > 1e-3


@pytest.mark.parametrize("recovery", [False, True])
def test_a_missing_holder_still_knows_its_seeds(recovery: bool) -> None:
    """A curious agent that missed a round can still subtract the secrets it holds: its
    unknown factor of that round holds none of their columns."""
    job = build_job(DECOR.resolved(), 0)
    assert isinstance(job.mechanism, NoiseMechanism)
    alive = np.array([True, False, True, True, True, True])
    noise = job.mechanism.after_dropouts(alive, recovery).noise
    held = noise.secrets_of(1)
    assert held  # agent 1's pairs with agents 0 and 2
    honest, factor = noise.unknown_factor([1])
    assert 1 not in honest
    factor = factor.toarray() if sparse.issparse(factor) else factor
    expected = np.diag(np.where(np.arange(6) == 1, 0.0, noise.private_variances))
    for k, secret in enumerate(noise.secrets):
        if k not in held:
            rows = np.zeros((6, secret.factor.shape[1]))
            rows[list(secret.holders)] = secret.factor
            expected += rows @ rows.T
    np.testing.assert_allclose(factor @ factor.T, expected[np.ix_(honest, honest)], atol=1e-15)
    # without recovery its pairs' terms still reach agents 0 and 2, and it subtracts them; with
    # recovery those pairs' alive ends add the missing share: the pairs vanish from the round
    hidden, whole = np.trace(factor @ factor.T), np.trace(noise.covariance())
    assert hidden == pytest.approx(whole) if recovery else hidden < whole - 1e-6
