"""The vectorized D-SGD engine against a per-agent reference, its samplers and determinism."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest
import torch
from scipy.special import expit

from dpdl.accounting import AgentLevel, ExampleLevel, calibrate
from dpdl.errors import ConfigError, PrivacyParameterError
from dpdl.graphs import erdos_renyi, metropolis_hastings, ring
from dpdl.jobspec.sampling import CyclicSampler
from dpdl.mechanisms import LocalDP, NoNoise
from dpdl.mechanisms.registry import build_mechanism
from dpdl.mechanisms.time_correlated import LocalCorrelatedNoise
from dpdl.seeding import purpose_rng
from dpdl.simulation import (
    DSGDConfig,
    PoissonSampler,
    StepSize,
    UniformSampler,
    clip_rows,
    run_dsgd,
)
from dpdl.tasks import LogisticRegression, whisper_quadratic


def _small_logistic(
    n: int = 4, m: int = 30, d: int = 5, seed: int = 0, l2: float = 1e-2
) -> LogisticRegression:
    rng = np.random.default_rng(seed)
    features = rng.standard_normal((n * m, d))
    labels = np.where(rng.random(n * m) < 0.5, -1.0, 1.0)
    parts = np.array_split(rng.permutation(n * m), n)
    return LogisticRegression("toy", features, labels, parts, features[:20], labels[:20], l2)


def test_clip_rows_bounds_norms_and_keeps_directions() -> None:
    rng = np.random.default_rng(0)
    values = rng.standard_normal((50, 7)) * rng.exponential(size=(50, 1))
    clipped = clip_rows(torch.from_numpy(values), 0.5).numpy()
    norms = np.linalg.norm(values, axis=1)
    assert (np.linalg.norm(clipped, axis=1) <= 0.5 + 1e-12).all()
    small = norms <= 0.5
    np.testing.assert_array_equal(clipped[small], values[small])
    cosine = (clipped * values).sum(axis=1) / (np.linalg.norm(clipped, axis=1) * norms)
    np.testing.assert_allclose(cosine, 1.0)
    assert torch.isfinite(clip_rows(torch.zeros((2, 3), dtype=torch.float64), 0.1)).all()


def test_engine_matches_a_per_agent_reference_implementation() -> None:
    """Three steps of the engine equal Algorithm 1 written agent by agent with explicit loops."""
    task = _small_logistic()
    n, d = task.n_agents, task.dim
    weights = metropolis_hastings(ring(n))
    mechanism = LocalDP(n, sigma=0.3)
    config = DSGDConfig(
        steps=3, step_size=StepSize(0.5, "inv-sqrt"), clip=0.2, batch_size=8, eval_every=1
    )
    result = run_dsgd(task, weights, mechanism, config, seed=11)

    sampler = UniformSampler(task.agent_sizes, 8)
    batch_rng, noise_rng = purpose_rng(11, "batches"), purpose_rng(11, "noise")
    features, labels = task.features.numpy(), task.labels.numpy()
    x = np.zeros((n, d))
    for t in range(1, 4):
        batch = sampler.sample(batch_rng)
        noise = 0.3 * noise_rng.standard_normal((n, d))
        half = np.empty_like(x)
        for i in range(n):
            grad = np.zeros(d)
            for row in batch.indices[i]:
                a, y = features[row], labels[row]
                grad += -y * expit(-y * a @ x[i]) * a / 8
            grad *= min(1.0, 0.2 / np.linalg.norm(grad))
            grad += task.l2 * x[i]
            half[i] = x[i] - 0.5 / np.sqrt(t) * (grad + noise[i])
        x = np.array([sum(weights[i, j] * half[j] for j in range(n)) for i in range(n)])
    np.testing.assert_allclose(result.params, x, rtol=1e-12, atol=1e-14)
    assert [record["step"] for record in result.history] == [0, 1, 2, 3]


def test_example_level_clipping_matches_explicit_per_example_gradients() -> None:
    task = _small_logistic(seed=3)
    rng = np.random.default_rng(5)
    params = rng.standard_normal((task.n_agents, task.dim)) * 3
    batch = PoissonSampler(task.agent_sizes, 10).sample(np.random.default_rng(1))
    got = task.gradients(torch.from_numpy(params), batch.to(task.device), example_clip=0.05)
    features, labels = task.features.numpy(), task.labels.numpy()
    for i in range(task.n_agents):
        expected = np.zeros(task.dim)
        for row, weight in zip(batch.indices[i], batch.weights[i], strict=True):
            a, y = features[row], labels[row]
            g = -y * expit(-y * a @ params[i]) * a
            expected += weight * g * min(1.0, 0.05 / np.linalg.norm(g))
        np.testing.assert_allclose(got[i].numpy(), expected, rtol=1e-12, atol=1e-15)


def test_logistic_gradient_matches_finite_differences() -> None:
    task = _small_logistic(n=2, m=6, d=3)
    rng = np.random.default_rng(2)
    params = rng.standard_normal((2, 3))
    batch = UniformSampler(task.agent_sizes, 4).sample(rng)
    gradient = task.gradients(torch.from_numpy(params), batch.to(task.device), None).numpy()
    features, labels = task.features.numpy(), task.labels.numpy()

    def loss(i: int, x: np.ndarray) -> float:
        rows = batch.indices[i]
        return float(np.mean(np.logaddexp(0.0, -labels[rows] * (features[rows] @ x))))

    for i in range(2):
        numeric = [
            (loss(i, params[i] + h) - loss(i, params[i] - h)) / 2e-6 for h in np.eye(3) * 1e-6
        ]
        np.testing.assert_allclose(gradient[i], numeric, rtol=1e-6, atol=1e-9)


def test_runs_are_bitwise_repeatable_and_seeds_differ() -> None:
    task = _small_logistic()
    weights = metropolis_hastings(ring(task.n_agents))
    config = DSGDConfig(steps=20, step_size=StepSize(0.1), clip=0.1, batch_size=4, eval_every=10)
    mechanism = LocalDP(task.n_agents, 1.0)
    first = run_dsgd(task, weights, mechanism, config, seed=7).params
    again = run_dsgd(task, weights, mechanism, config, seed=7).params
    other = run_dsgd(task, weights, mechanism, config, seed=8).params
    np.testing.assert_array_equal(first, again)
    assert not np.allclose(first, other)


def test_the_first_record_holds_every_agents_metrics_at_the_initial_point() -> None:
    """Step 0 is evaluated on one row (all agents start at the same point): its metrics are
    those of all n rows, consensus distance 0 included."""
    task = _small_logistic()
    config = DSGDConfig(steps=2, step_size=StepSize(0.1), clip=0.1, batch_size=4, eval_every=2)
    result = run_dsgd(
        task, metropolis_hastings(ring(task.n_agents)), NoNoise(task.n_agents), config
    )
    expected = task.evaluate(task.initial_params().repeat(task.n_agents, 1))
    assert result.history[0] == pytest.approx({"step": 0.0, **expected}, rel=1e-12, abs=1e-15)
    assert result.history[0]["consensus_distance"] == 0.0


@pytest.mark.parametrize("every", [4, 25])
def test_the_tail_average_is_the_mean_of_the_last_iterates_metrics(every: int) -> None:
    """``average_last = k``: the last record's ``<metric>_tail`` is the mean of the metrics of
    the last k iterates, as a run evaluated at every step records them (the same noise draws), and
    the run's other records and final models are those of a run without it."""
    task = _small_logistic()
    weights = metropolis_hastings(ring(task.n_agents))
    mechanism = LocalDP(task.n_agents, 0.5)

    def run(eval_every: int, average_last: int = 0):
        config = DSGDConfig(
            steps=30,
            step_size=StepSize(0.1),
            clip=0.1,
            batch_size=4,
            eval_every=eval_every,
            average_last=average_last,
        )
        return run_dsgd(task, weights, mechanism, config, seed=3)

    every_step, plain, tailed = run(1), run(every), run(every, average_last=7)
    last = every_step.history[-7:]
    assert [record["step"] for record in last] == list(range(24, 31))
    final = tailed.history[-1]
    for metric in ("test_loss", "test_accuracy", "consensus_distance"):
        assert final[f"{metric}_tail"] == pytest.approx(
            np.mean([record[metric] for record in last]), rel=1e-12
        )
    assert [{k: v for k, v in r.items() if not k.endswith("_tail")} for r in tailed.history] == (
        plain.history
    )
    assert not any(key.endswith("_tail") for key in plain.history[-1])
    np.testing.assert_array_equal(tailed.params, plain.params)


def test_the_tail_is_at_most_the_run() -> None:
    with pytest.raises(ConfigError, match="average_last must be between 0 and the number of steps"):
        DSGDConfig(steps=5, step_size=StepSize(0.1), average_last=6)
    with pytest.raises(ConfigError, match="average_last"):
        DSGDConfig(steps=5, step_size=StepSize(0.1), average_last=-1)


def test_noise_free_dsgd_converges_to_the_closed_form_optimum() -> None:
    task = whisper_quadratic(10)
    weights = metropolis_hastings(erdos_renyi(10, 0.6, seed=3))
    config = DSGDConfig(steps=40_000, step_size=StepSize(2e-4), eval_every=40_000)
    result = run_dsgd(task, weights, NoNoise(10), config)
    # A constant step leaves an O(eta) heterogeneity bias; at eta = 2e-4 the average is within 0.05.
    np.testing.assert_allclose(result.params.mean(axis=0), task.optimum, atol=0.05)
    assert result.final_metrics["optimality_gap"] < 0.05
    assert result.history[0]["optimality_gap"] > 100 * result.final_metrics["optimality_gap"]


def test_doubly_stochastic_mixing_preserves_the_average_of_the_noisy_update() -> None:
    task = _small_logistic()
    n = task.n_agents
    weights = metropolis_hastings(ring(n))
    config = DSGDConfig(steps=1, step_size=StepSize(0.1), clip=0.1, batch_size=4)
    plain = run_dsgd(task, np.eye(n), LocalDP(n, 0.5), config, seed=3).params
    mixed = run_dsgd(task, weights, LocalDP(n, 0.5), config, seed=3).params
    np.testing.assert_allclose(mixed.mean(axis=0), plain.mean(axis=0), atol=1e-14)


def test_ldp_noise_has_the_calibrated_covariance() -> None:
    graph = ring(5)
    calibration = calibrate(5.0, 1e-5, 100, AgentLevel(0.1))
    mechanism = build_mechanism("ldp", graph, metropolis_hastings(graph), calibration)
    samples = mechanism.sample(
        np.random.default_rng(0), 40_000
    )  # 40k draws of the (5,) noise vector
    empirical = samples @ samples.T / samples.shape[1]
    # Entries of a Wishart estimate have std about sigma^2 sqrt(2/m) on the diagonal: 6 std margin.
    tolerance = 6 * mechanism.sigma**2 * np.sqrt(2 / samples.shape[1])
    assert np.abs(empirical - mechanism.covariance()).max() < tolerance


def test_poisson_sampler_includes_each_example_at_its_rate() -> None:
    sizes = np.array([50, 200, 100])
    sampler = PoissonSampler(sizes, 10)
    rng = np.random.default_rng(0)
    counts = np.zeros(sizes.sum())
    batch_sizes = []
    rounds = 4000
    for _ in range(rounds):
        batch = sampler.sample(rng)
        valid = batch.weights > 0
        counts += np.bincount(batch.indices[valid], minlength=sizes.sum())
        batch_sizes.append(valid.sum(axis=1))
        np.testing.assert_allclose(batch.weights[valid], 1 / 10)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        owners = np.searchsorted(starts, batch.indices, side="right") - 1
        assert (owners[valid] == np.arange(3)[:, None].repeat(valid.shape[1], axis=1)[valid]).all()
    rates = np.repeat(10 / sizes, sizes)
    # Binomial(rounds, q) counts: 5-sigma band, all examples.
    assert (np.abs(counts - rounds * rates) < 5 * np.sqrt(rounds * rates * (1 - rates)) + 1).all()
    assert np.mean(batch_sizes, axis=0) == pytest.approx([10, 10, 10], rel=0.02)
    assert sampler.max_rate == pytest.approx(0.2)


def test_uniform_sampler_stays_within_each_agents_rows() -> None:
    sizes = np.array([3, 7, 1])
    batch = UniformSampler(sizes, 64).sample(np.random.default_rng(0))
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    assert (batch.indices >= starts[:, None]).all() and (
        batch.indices < (starts + sizes)[:, None]
    ).all()
    assert set(np.unique(batch.indices[1])) == set(range(3, 10))


def test_cyclic_sampler_uses_every_example_once_per_cycle_in_a_fixed_order() -> None:
    sizes = np.array([20, 23, 19])
    sampler = CyclicSampler(sizes, 4)
    rng = np.random.default_rng(0)
    batches = [sampler.sample(rng) for _ in range(12)]
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    for cycle in range(3):
        seen = np.concatenate(
            [b.indices[b.weights > 0] for b in batches[4 * cycle : 4 * cycle + 4]]
        )
        assert sorted(seen) == list(range(sizes.sum()))  # each example exactly once per cycle
        for b in range(4):  # the same batches in the same order every cycle
            np.testing.assert_array_equal(batches[4 * cycle + b].indices, batches[b].indices)
    for batch in batches:
        valid = batch.weights > 0
        np.testing.assert_allclose(batch.weights.sum(axis=1), 1.0)  # batch means
        owners = np.searchsorted(starts, batch.indices, side="right") - 1
        assert (owners[valid] == np.nonzero(valid)[0]).all()
    assert sampler.smallest_batch == 4
    with pytest.raises(ConfigError, match="at least 30 examples"):
        CyclicSampler(sizes, 30)


def test_a_fixed_divisor_divides_each_batch_sum_by_its_agents_smallest_batch() -> None:
    """Under add / remove (MAFALDA-SGD's code): each example of agent a weighs ``1 / (m_a // b)``
    in every batch, whatever the batch's own size, so adding or removing one clipped example moves
    the weighted sum by at most ``C / (m_a // b)``; the batches themselves are those of the batch
    means, drawn from the same generator."""
    sizes = np.array([20, 23, 19])
    fixed, mean = CyclicSampler(sizes, 4, fixed_divisor=True), CyclicSampler(sizes, 4)
    for _ in range(4):
        a, b = fixed.sample(np.random.default_rng(5)), mean.sample(np.random.default_rng(5))
        np.testing.assert_array_equal(a.indices, b.indices)
        valid = a.weights > 0
        np.testing.assert_array_equal(valid, b.weights > 0)
        divisors = np.broadcast_to((sizes // 4)[:, None], a.weights.shape)
        np.testing.assert_array_equal(a.weights[valid], 1.0 / divisors[valid])
        assert (a.weights.sum(axis=1) >= 1.0).all()  # batches of m_a // b examples or one more
    with pytest.raises(ConfigError, match="cyclic batches only"):
        DSGDConfig(10, StepSize(0.1), sampling="poisson", fixed_divisor=True)


def test_time_correlated_noise_has_the_covariance_of_its_encoder() -> None:
    """``C^-1 Z`` over time: the empirical covariance of one coordinate's T values is
    ``sigma^2 C^-1 C^-T``, agents are independent, and the stream stops at T steps with a clear
    error."""
    rng = np.random.default_rng(1)
    encoder = np.tril(rng.random((5, 5))) + np.eye(5)
    noise = LocalCorrelatedNoise(3, encoder, 0.7)
    draws = np.stack(
        list(itertools.islice(noise.noise_stream(np.random.default_rng(2), 40_000), 5))
    )  # (T, n, dim)
    inverse = np.linalg.inv(encoder)
    expected = 0.49 * inverse @ inverse.T
    for agent in range(3):
        np.testing.assert_allclose(
            np.cov(draws[:, agent, :]), expected, atol=0.02 * np.abs(expected).max()
        )
    assert abs(np.corrcoef(draws[2, 0], draws[2, 1])[0, 1]) < 0.02
    stream = noise.noise_stream(rng, 2)
    for _ in range(5):
        next(stream)
    with pytest.raises(ConfigError, match="factorized for 5 steps"):
        next(stream)
    with pytest.raises(ConfigError, match="lower triangular"):
        LocalCorrelatedNoise(3, encoder.T, 1.0)


def test_per_agent_encoders_give_each_agent_its_own_covariance() -> None:
    """MAFALDA-L-SGD's stack of encoders: agent u's T values have covariance
    ``sigma^2 C_u^-1 C_u^-T``; a stack whose length is not the number of agents is refused."""
    rng = np.random.default_rng(3)
    encoders = np.stack([np.tril(rng.random((4, 4))) + np.eye(4) for _ in range(3)])
    noise = LocalCorrelatedNoise(3, encoders, 0.5)
    draws = np.stack(
        list(itertools.islice(noise.noise_stream(np.random.default_rng(4), 40_000), 4))
    )
    for agent, encoder in enumerate(encoders):
        inverse = np.linalg.inv(encoder)
        expected = 0.25 * inverse @ inverse.T
        np.testing.assert_allclose(
            np.cov(draws[:, agent, :]), expected, atol=0.02 * np.abs(expected).max()
        )
    with pytest.raises(ConfigError, match=r"one per agent \(4 x T x T\)"):
        LocalCorrelatedNoise(4, encoders, 0.5)


def test_the_step_decay_runs_at_eta_up_to_its_step_then_at_a_fraction_of_it() -> None:
    """``step``: eta for t <= decay_after, then decay_factor x eta; a run with it is the constant
    run up to that step (its records there equal, bit for bit) and moves apart after it."""
    step = StepSize(0.5, "step", 3, 0.2)
    assert [step(t) for t in range(1, 6)] == [0.5, 0.5, 0.5, 0.1, 0.1]
    task, weights = _small_logistic(), metropolis_hastings(ring(4))

    def run(step_size: StepSize) -> list[dict]:
        config = DSGDConfig(steps=6, step_size=step_size, clip=0.1, batch_size=4, eval_every=1)
        return run_dsgd(task, weights, NoNoise(task.n_agents), config, seed=0).history

    decayed, constant = run(StepSize(0.5, "step", 3, 0.2)), run(StepSize(0.5))
    assert decayed[:4] == constant[:4] and decayed[4]["test_loss"] != constant[4]["test_loss"]
    for bad in (
        {"schedule": "step"},
        {"schedule": "constant", "decay_after": 3},
        {"schedule": "step", "decay_after": 0},
        {"schedule": "step", "decay_after": 2.5},
        {"schedule": "step", "decay_after": 3, "decay_factor": 0.0},
        {"schedule": "step", "decay_after": 3, "decay_factor": float("inf")},
    ):
        with pytest.raises(ConfigError):
            StepSize(0.5, **bad)


def test_engine_rejects_inconsistent_inputs() -> None:
    task = _small_logistic()
    config = DSGDConfig(steps=1, step_size=StepSize(0.1))
    with pytest.raises(ConfigError):
        run_dsgd(task, np.eye(3), NoNoise(task.n_agents), config)
    with pytest.raises(ConfigError):
        run_dsgd(task, np.eye(task.n_agents), NoNoise(3), config)
    with pytest.raises(ConfigError):
        run_dsgd(
            whisper_quadratic(4),
            np.eye(4),
            NoNoise(4),
            DSGDConfig(1, StepSize(0.1), clip=1.0, clip_level="example"),
        )
    for bad in (
        {"steps": 0},
        {"clip": 0.0},
        {"clip_level": "layer"},
        {"sampling": "shuffle"},
        {"eval_every": 0},
        {"sampling": "cyclic"},
        {"cycle": 4},
    ):
        with pytest.raises(ConfigError):
            DSGDConfig(**{"steps": 1, "step_size": StepSize(0.1), **bad})
    for eta in (0.0, -1.0, float("nan")):
        with pytest.raises(ConfigError):
            StepSize(eta)
    with pytest.raises(ConfigError):
        PoissonSampler(np.array([5, 100]), 10)


def test_devices_are_named_or_refused_with_one_clear_error() -> None:
    from dpdl.jobspec.device import resolve_device

    assert resolve_device("cpu") == torch.device("cpu")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    with pytest.raises(ConfigError, match="unknown device 'gpu0'"):
        resolve_device("gpu0")
    with pytest.raises(ConfigError, match="not supported"):
        resolve_device("meta")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="torch sees none"):
            resolve_device("cuda")
    with pytest.raises(ConfigError, match="GPU"):
        resolve_device(f"cuda:{torch.cuda.device_count() + 3}")


def test_the_engine_computes_in_float64_on_its_device_and_returns_host_arrays() -> None:
    """Parameters, gradients and mixing stay tensors on the task's device during the run; the
    result is a host array, and the task reports where it computed."""
    task = _small_logistic()
    seen: list[torch.Tensor] = []
    gradients = task.gradients

    def spy(params, batch, clip):
        seen.append(params)
        return gradients(params, batch, clip)

    task.gradients = spy
    config = DSGDConfig(steps=3, step_size=StepSize(0.1), clip=0.1, batch_size=4, eval_every=3)
    result = run_dsgd(task, metropolis_hastings(ring(task.n_agents)), LocalDP(4, 0.1), config)
    assert len(seen) == 3
    assert all(p.dtype == torch.float64 and p.device == task.device for p in seen)
    assert isinstance(result.params, np.ndarray) and result.params.dtype == np.float64


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_a_gpu_run_gives_the_cpu_run_up_to_rounding() -> None:
    weights = metropolis_hastings(ring(4))
    config = DSGDConfig(steps=30, step_size=StepSize(0.1), clip=0.1, batch_size=4, eval_every=10)
    mechanism = LocalDP(4, 0.5)
    cpu = run_dsgd(_small_logistic(), weights, mechanism, config, seed=3, device="cpu")
    gpu = run_dsgd(_small_logistic(), weights, mechanism, config, seed=3, device="cuda")
    np.testing.assert_allclose(gpu.params, cpu.params, rtol=1e-10, atol=1e-12)
    for a, b in zip(cpu.history, gpu.history, strict=True):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-12)


def _example_level_ldp(task: LogisticRegression, rate: float, batch: int = 6) -> LocalDP:
    calibration = calibrate(1.0, 1e-5, 50, ExampleLevel(1.0, batch, rate))
    return build_mechanism("ldp", ring(task.n_agents), np.eye(task.n_agents), calibration)


@pytest.mark.parametrize(
    ("sampling", "cycle", "why"),
    [("uniform", None, "uniform batches"), ("cyclic", 5, "cyclic batches")],
)
def test_a_poisson_calibration_never_runs_on_other_batches(
    sampling: str, cycle: int | None, why: str
) -> None:
    """A design calibrated for Poisson sampling at rate q (eps = 1) would claim eps = 1 for
    batches the accountant never amplified: the engine refuses them and names both schemes."""
    task = _small_logistic()  # 30 examples an agent: expected batch 6 is rate 0.2
    mechanism = _example_level_ldp(task, 0.2)
    config = DSGDConfig(
        50, StepSize(0.1), clip=1.0, clip_level="example", batch_size=6, sampling=sampling,
        cycle=cycle,
    )  # fmt: skip
    with pytest.raises(PrivacyParameterError, match=f"{why}, but it was calibrated for Poisson"):
        run_dsgd(task, np.eye(4), mechanism, config)
    poisson = replace(config, sampling="poisson", cycle=None)
    assert run_dsgd(task, np.eye(4), mechanism, poisson).params.shape == (4, task.dim)


def test_a_poisson_calibration_never_runs_at_a_higher_rate() -> None:
    """The rate is the expected batch over the smallest agent's examples: one calibrated for
    rate 0.1 (agents of 60 examples) is refused on agents of 30 (rate 0.2), and one calibrated
    for rate 0.25 runs there (a lower rate spends less)."""
    task = _small_logistic()
    config = DSGDConfig(
        50, StepSize(0.1), clip=1.0, clip_level="example", batch_size=6, sampling="poisson"
    )
    with pytest.raises(PrivacyParameterError, match=r"Poisson rate 0.2 .* calibrated for rate 0.1"):
        run_dsgd(task, np.eye(4), _example_level_ldp(task, 0.1), config)
    assert np.isfinite(
        run_dsgd(task, np.eye(4), _example_level_ldp(task, 0.25), config).params
    ).all()
