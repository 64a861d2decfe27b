"""Tasks on real data and their closed forms, checked against scipy and scikit-learn."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.optimize import minimize
from sklearn.linear_model import LogisticRegression as SklearnLogisticRegression
from torch import nn
from torch.nn import functional

from dpdl.choices import START_REGISTRY
from dpdl.data.a9a import load_a9a
from dpdl.data.adult import load_adult
from dpdl.data.housing import load_california_housing
from dpdl.errors import ConfigError
from dpdl.experiments.train import DEFAULT_STEP_SIZES, TrainConfig, run_training
from dpdl.seeding import purpose_rng
from dpdl.tasks import TASKS, build_task, decor_least_squares, whisper_quadratic
from dpdl.tasks.catalog import TaskOptions, image_cnn, image_task, train_test_split


def test_a9a_bundled_copy_has_the_published_shape_and_labels() -> None:
    features, labels = load_a9a()
    assert features.shape == (32561 + 16281, 123)
    assert set(np.unique(features)) == {0.0, 1.0}
    assert (labels == -1).sum() == 24720 + 12435 and (labels == 1).sum() == 7841 + 3846
    assert features[:32561].sum() == 451592  # non-zeros of the training file (LIBSVM's a9a)


def test_quadratic_optimum_matches_a_numerical_minimiser() -> None:
    task = whisper_quadratic(20)
    numerical = minimize(
        lambda x: float(task.objective(torch.from_numpy(x)[None, :])[0]),
        np.zeros(2),
        method="BFGS",
        options={"gtol": 1e-10},
    )
    np.testing.assert_allclose(task.optimum, numerical.x, atol=1e-4)
    assert task.optimal_value <= numerical.fun + 1e-9
    optimum = torch.from_numpy(task.optimum).repeat(20, 1)
    stationarity = task.gradients(optimum, None, None).mean(dim=0)
    np.testing.assert_allclose(stationarity.numpy(), 0.0, atol=1e-9)
    # Eq. (11) before rotation: agent 1's minimiser is (-1, 0) with value 0; agent 20's is (20, 0).
    np.testing.assert_allclose(task.centers[0], [-1.0, 0.0])
    np.testing.assert_allclose(task.centers[-1], [20.0, 0.0])
    # The rotated quadratic keeps its eigenvalues (15, 1) but not its axes.
    np.testing.assert_allclose(np.linalg.eigvalsh(task.curvatures[-1]), [1.0, 15.0])
    assert abs(task.curvatures[-1][0, 1]) > 1.0


def test_quadratic_reports_the_papers_gap_each_agent_on_its_own_objective() -> None:
    """Whisper D-SGD's ``(1/n) sum_i f_i(x_i) - f*``, by hand from eq. (11)'s pieces: below the
    global-objective gap away from consensus for these models, equal to it at consensus."""
    task = whisper_quadratic(20)
    models = np.random.default_rng(0).normal(0.0, 5.0, (20, 2))
    own = [
        (models[i] - task.centers[i]) @ task.curvatures[i] @ (models[i] - task.centers[i])
        for i in range(20)
    ]
    metrics = task.evaluate(torch.from_numpy(models))
    np.testing.assert_allclose(
        metrics["paper_optimality_gap"], np.mean(own) - task.optimal_value, rtol=1e-12
    )
    assert metrics["paper_optimality_gap"] != pytest.approx(metrics["optimality_gap"])
    shared = torch.from_numpy(models[:1])  # one row: every agent's model, as at step 0
    at_one = task.evaluate(shared)
    assert at_one["paper_optimality_gap"] == pytest.approx(at_one["optimality_gap"], rel=1e-12)
    assert at_one == pytest.approx(task.evaluate(shared.repeat(20, 1)), rel=1e-12)


def test_least_squares_matches_decor_definition() -> None:
    n, d = 8, 4
    task = decor_least_squares(n, d, purpose_rng(3, "least-squares targets"))
    targets = (
        purpose_rng(3, "least-squares targets").standard_normal((n, d))
        / np.arange(1, n + 1)[:, None]
    )
    x = np.random.default_rng(0).standard_normal((1, d))
    explicit = np.mean(
        [0.5 * np.sum(((i + 1) / np.sqrt(n) * x[0] - targets[i]) ** 2) for i in range(n)]
    )
    assert float(task.objective(torch.from_numpy(x))[0]) == pytest.approx(explicit, rel=1e-12)
    grads = task.gradients(torch.from_numpy(np.repeat(x, n, axis=0)), None, None).numpy()
    for i in range(n):
        a = (i + 1) / np.sqrt(n)
        np.testing.assert_allclose(grads[i], a * (a * x[0] - targets[i]), rtol=1e-12)


@pytest.fixture
def ramp_start():
    """A starting point registered as a plugin registers one: ``ramp``, coordinate j at j + 1;
    and ``short``, one number too few."""
    START_REGISTRY.add("ramp", lambda dim: np.arange(1.0, dim + 1.0), "coordinate j at j + 1")
    START_REGISTRY.add("short", lambda dim: np.zeros(dim - 1), "one number too few")
    yield "ramp"
    START_REGISTRY.unregister("ramp")
    START_REGISTRY.unregister("short")


@pytest.mark.parametrize("name", ["least-squares", "quadratic"])
def test_the_quadratics_start_where_told_and_report_the_distance_to_the_optimum(
    name, ramp_start
) -> None:
    """``start``: every agent at the registered starting point, the problem unchanged;
    ``squared_distance`` is the mean over agents of ``||x_i - x*||^2``, and on DECOR's least
    squares, whose curvatures are multiples of the identity, ``F(x) - F* = q ||x - x*||^2`` with
    ``q`` the mean multiple."""
    zeros = build_task(name, 6, seed=2)
    ramp = build_task(name, 6, seed=2, options=TaskOptions(start=ramp_start))
    np.testing.assert_array_equal(zeros.initial_params().numpy(), np.zeros(zeros.dim))
    np.testing.assert_array_equal(ramp.initial_params().numpy(), np.arange(1.0, ramp.dim + 1.0))
    np.testing.assert_array_equal(ramp.optimum, zeros.optimum)
    params = np.random.default_rng(0).standard_normal((6, zeros.dim))
    metrics = ramp.evaluate(torch.from_numpy(params))
    assert metrics == zeros.evaluate(torch.from_numpy(params))
    distances = ((params - ramp.optimum) ** 2).sum(axis=1)
    assert metrics["squared_distance"] == pytest.approx(distances.mean(), rel=1e-12)
    assert metrics["squared_distance_average_model"] == pytest.approx(
        ((params.mean(axis=0) - ramp.optimum) ** 2).sum(), rel=1e-12
    )
    if name == "least-squares":
        q = np.mean([(i / np.sqrt(6)) ** 2 / 2 for i in range(1, 7)])
        assert metrics["optimality_gap"] == pytest.approx(q * distances.mean(), rel=1e-10)


def test_the_start_is_an_option_of_the_quadratics_only(ramp_start) -> None:
    """A registered starting point is refused for another task, naming the option; an unknown
    one names the registry's; one of the wrong size is refused before training."""
    with pytest.raises(ConfigError, match=r"start \(--start\) applies only to task quadratic"):
        TrainConfig(task="logreg-a9a", task_options=TaskOptions(start=ramp_start))
    with pytest.raises(ConfigError, match=r"start.*one of zeros"):
        TaskOptions(start="twos")
    with pytest.raises(ConfigError, match=r"starting point 'short' gave \(1,\) values, not 2"):
        build_task("quadratic", 4, seed=0, options=TaskOptions(start="short"))


def test_logreg_task_uses_a_deterministic_split_and_partition() -> None:
    first, again = build_task("logreg-a9a", 10, seed=1), build_task("logreg-a9a", 10, seed=1)
    np.testing.assert_array_equal(first.labels, again.labels)
    np.testing.assert_array_equal(first.agent_sizes, again.agent_sizes)
    assert first.agent_sizes.sum() + len(first.test_labels) == 48842
    assert len(first.test_labels) == round(0.2 * 48842)
    other = build_task("logreg-a9a", 10, seed=2)
    assert not np.array_equal(first.agent_sizes, other.agent_sizes)


def test_noise_free_dsgd_on_a9a_matches_centralized_sklearn_within_two_percent() -> None:
    """The issue's acceptance check: D-SGD without noise vs a central fit on the same split."""
    config = TrainConfig(
        task="logreg-a9a",
        graph="er",
        n=20,
        p=0.5,
        mechanism="none",
        steps=5000,
        clip=0.1,
        eval_every=5000,
    )
    result = run_training(config)
    features, labels = load_a9a()
    train, test = train_test_split(len(labels), 0.2, purpose_rng(0, "train/test split"))
    l2 = TaskOptions().l2
    reference = SklearnLogisticRegression(
        C=1.0 / (l2 * len(train)), fit_intercept=False, tol=1e-8, max_iter=2000
    )
    reference.fit(features[train], labels[train])
    margins = labels[test] * (features[test] @ reference.coef_[0])
    reference_loss = float(np.mean(np.logaddexp(0.0, -margins)))
    assert 0.30 < reference_loss < 0.35
    assert result.final_metrics()["test_loss"] <= 1.02 * reference_loss


def test_the_all_zero_logistic_model_predicts_the_negative_label() -> None:
    """A score of exactly 0 predicts -1 (scikit-learn's rule), so the zero start's accuracy is the
    share of -1 labels (about 0.76 on a9a), not 0."""
    task = build_task("logreg-a9a", 4, seed=0)
    metrics = task.evaluate(torch.zeros(4, task.dim, dtype=torch.float64))
    share = float((task.test_labels < 0).double().mean())
    assert 0.7 < share < 0.8
    assert metrics["test_accuracy"] == metrics["test_accuracy_average_model"] == share
    unit = torch.zeros(1, task.dim, dtype=torch.float64)
    unit[0, 0] = 1.0  # a model with nonzero scores keeps the sign rule
    scores = task.test_features @ unit[0]
    expected = float(((scores > 0) == (task.test_labels > 0)).double().mean())
    assert task.evaluate(unit)["test_accuracy"] == expected


def test_a_decor_summary_states_its_noise_scales_not_a_sigma_of_zero() -> None:
    config = TrainConfig(task="logreg-a9a", graph="ring", n=6, mechanism="decor", steps=5)
    summary = run_training(config).summary()
    noise = summary["noise"]
    assert set(noise) == {"sigma_pair2", "sigma_cor2"} and noise["sigma_pair2"] > 0
    assert "sigma" not in summary


@pytest.mark.full_data
def test_housing_has_the_published_rows_and_means() -> None:
    features, values = load_california_housing()
    assert features.shape == (20640, 8) and values.mean() == pytest.approx(
        206855.8, abs=0.1
    )  # the data set's documented mean
    assert features[:, 7].mean() == pytest.approx(
        3.870671, abs=1e-6
    )  # median income, as scikit-learn documents it


def test_housing_task_standardises_on_the_training_split() -> None:
    _features, values = load_california_housing()
    task = build_task("housing-mlp", 10, seed=3, options=TaskOptions(partition="iid"))
    assert task.agent_sizes.sum() == round(0.8 * len(values)) and task.dim == 8 * 64 + 64 + 64 + 1
    inputs, targets = task.inputs.numpy(), task.targets.numpy()
    np.testing.assert_allclose(inputs.mean(axis=0), 0.0, atol=1e-5)
    np.testing.assert_allclose(inputs.std(axis=0), 1.0, atol=1e-4)
    assert targets.mean() == pytest.approx(0.0, abs=1e-5) and targets.std() == pytest.approx(
        1.0, abs=1e-4
    )
    metrics = task.evaluate(
        torch.zeros((10, task.dim), dtype=torch.float64)
    )  # predicting the training mean, 0 once standardised
    test_targets = task.test_targets.numpy()
    assert (
        metrics["test_loss"] == pytest.approx(float(np.mean(test_targets**2)), rel=1e-5)
        and "test_accuracy" not in metrics
    )
    assert metrics["test_loss"] == pytest.approx(
        1.0, abs=0.15
    )  # the test split's variance, in training units


def test_unknown_task_and_bad_split_are_rejected() -> None:
    with pytest.raises(ConfigError):
        build_task("mnist-resnet", 4)
    with pytest.raises(ConfigError):
        train_test_split(100, 1.5, np.random.default_rng(0))


@pytest.mark.full_data
def test_adult_has_the_uci_rows_and_standardised_one_hot_features() -> None:
    train_features, train_labels = load_adult("train")
    test_features, test_labels = load_adult("test")
    assert train_features.shape == (32561, 108) and test_features.shape == (16281, 108)
    assert (
        train_labels.sum() == 7841 and test_labels.sum() == 3846
    )  # >50K, as UCI's adult.names counts them
    np.testing.assert_allclose(train_features[:, :6].mean(axis=0), 0.0, atol=1e-5)
    np.testing.assert_allclose(train_features[:, 6:].sum(axis=1), 8.0)  # one category per attribute


def test_every_task_has_a_default_step_size() -> None:
    assert set(TASKS) == set(DEFAULT_STEP_SIZES)


def test_an_image_task_of_your_own_network_shares_the_split_and_takes_raw_pixels() -> None:
    """:func:`image_task` with a network of your own: the split, agents' examples and test images
    of ``mnist-cnn`` (the same seed and options), its pixels standardised or, on request, left in
    [0, 1], and the network built under the seed (the same initial weights twice)."""
    options = TaskOptions(partition="iid", examples_per_agent=20, test_examples=50)

    def network() -> torch.nn.Module:
        return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(28 * 28, 10))

    raw = image_task("mnist-linear-raw", 3, 0, options, network, standardised=False)
    again = image_task("mnist-linear-raw", 3, 0, options, network, standardised=False)
    cnn = build_task("mnist-cnn", 3, 0, options)
    assert (raw.offsets == cnn.offsets).all() and bool((raw.targets == cnn.targets).all())
    assert bool((raw.test_targets == cnn.test_targets).all())
    assert float(raw.inputs.min()) == 0.0 and float(raw.inputs.max()) == 1.0
    assert abs(float(cnn.inputs.std()) - 1.0) < 0.05 and float(raw.inputs.std()) < 0.5
    assert raw.dim == 28 * 28 * 10 + 10
    assert torch.equal(raw.initial_params(), again.initial_params())
    fashion = image_task("fashion-linear", 3, 0, options, network)
    assert abs(float(fashion.inputs.std()) - 1.0) < 0.05  # standardised by default


def test_chunked_evaluation_equals_one_pass() -> None:
    task = build_task("mnist-lenet", 3, 0, TaskOptions(partition="iid"))
    task.strategy = "vmap"  # the strategy whose passes eval_chunk bounds
    params = task.initial_params() + 0.05 * torch.from_numpy(
        np.random.default_rng(0).standard_normal((3, task.dim))
    )
    task.test_inputs, task.test_targets = task.test_inputs[:500], task.test_targets[:500]
    task.eval_chunk = 3 * 120  # five passes of 120 examples, the last one short
    chunked = task.evaluate(params)
    task.eval_chunk = None
    whole = task.evaluate(params)
    assert chunked["test_accuracy"] == whole["test_accuracy"]
    np.testing.assert_allclose(chunked["test_loss"], whole["test_loss"], rtol=1e-6)


@pytest.mark.parametrize("example_clip", [None, 0.1])
def test_logistic_regression_in_blocks_of_agents_equals_one_block(
    monkeypatch, example_clip
) -> None:
    """Thousands of agents are computed in blocks (bounded memory); a block is a set of whole
    agents, so each agent's gradient and metrics are the same as in one pass."""
    from dpdl.tasks import logistic
    from dpdl.tasks.base import Batch

    task = build_task("logreg-a9a", 12, seed=1)
    rng = np.random.default_rng(0)
    params = torch.from_numpy(rng.normal(scale=0.1, size=(12, task.dim)))
    sizes = task.agent_sizes
    indices = task.offsets[:-1, None] + rng.integers(0, sizes.min(), size=(12, 16))
    batch = Batch(indices, np.full((12, 16), 1 / 16)).to(task.device)
    whole_gradients, whole_metrics = (
        task.gradients(params, batch, example_clip),
        task.evaluate(params),
    )
    monkeypatch.setattr(logistic, "BLOCK_ENTRIES", 16 * task.dim * 5)  # blocks of 5 agents
    assert len(logistic._blocks(12, 16 * task.dim)) == 3
    np.testing.assert_allclose(
        task.gradients(params, batch, example_clip), whole_gradients, rtol=1e-12, atol=1e-15
    )
    for key, value in task.evaluate(params).items():
        assert value == pytest.approx(whole_metrics[key], rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("example_clip", [None, 0.1])
@pytest.mark.parametrize("density", [1.0, 0.15])
def test_logistic_batches_larger_than_the_data_weigh_each_row_once(example_clip, density) -> None:
    """Many agents with few rows each: every agent's batch gradient, summed by row with the row's
    weight (drawn twice, counted twice), equals the sum over the drawn examples; over the nonzero
    features alone where they are sparse."""
    from dpdl.simulation import PoissonSampler, UniformSampler
    from dpdl.tasks.logistic import SPARSE_FEATURES, LogisticRegression

    rng = np.random.default_rng(4)
    n, m, d = 6, 8, 7
    features = rng.standard_normal((n * m, d)) * (rng.random((n * m, d)) < density)
    labels = np.where(rng.random(n * m) < 0.5, -1.0, 1.0)
    parts = np.array_split(rng.permutation(n * m), n)
    task = LogisticRegression("toy", features, labels, parts, features[:8], labels[:8], l2=0.0)
    assert (task.nonzero_rows is not None) == (density < SPARSE_FEATURES)
    params = torch.from_numpy(rng.standard_normal((n, d)))
    sampler = (UniformSampler if example_clip is None else PoissonSampler)(task.agent_sizes, 2)
    small = sampler.sample(rng).to(task.device)  # fewer entries than the 48 rows: per entry
    assert small.indices.numel() < len(task.labels)
    large = UniformSampler(task.agent_sizes, 16).sample(rng).to(task.device)  # 96 > 48: per row
    for batch in (small, large):
        per_entry = torch.stack(
            [task.gradients(params[i : i + 1], _agent(batch, i), example_clip)[0] for i in range(n)]
        )
        np.testing.assert_allclose(
            task.gradients(params, batch, example_clip).numpy(),
            per_entry.numpy(),
            rtol=1e-12,
            atol=1e-15,
        )


def _agent(batch, i: int):
    from dpdl.tasks.base import Batch

    return Batch(batch.indices[i : i + 1], batch.weights[i : i + 1])


def test_the_image_network_pools_before_its_relu_to_the_same_function() -> None:
    """image_cnn runs max-pooling before ReLU: the same outputs and the same gradients, bit for
    bit, as ReLU before pooling (MAFALDA-SGD's order), from the same parameters."""
    torch.manual_seed(1)
    swapped = image_cnn()
    original = nn.Sequential(*[swapped[i] for i in (0, 2, 1, 3, 4, 6, 5, 7, 8, 9)])
    assert isinstance(original[1], nn.ReLU) and isinstance(swapped[1], nn.MaxPool2d)
    x = torch.randn(16, 1, 28, 28)
    y = torch.randint(0, 10, (16,))
    outputs = []
    for network in (swapped, original):
        network.zero_grad()
        out = network(x)
        functional.cross_entropy(out, y).backward()
        outputs.append((out.detach().clone(), [p.grad.clone() for p in network.parameters()]))
    assert torch.equal(outputs[0][0], outputs[1][0])
    assert all(torch.equal(a, b) for a, b in zip(outputs[0][1], outputs[1][1], strict=True))
